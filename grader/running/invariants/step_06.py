"""Step 6's run invariant: each rank trains on images of its own, the whole data once per epoch."""

from __future__ import annotations

from collections import Counter

from grader.report import CANT_TELL, FAILED, PASSED, Result
from grader.running.evidence import Evidence
from grader.running.invariants.shared import (
    Setting,
    finding,
    not_reached,
    not_shown,
    parsed,
    ranks_with,
)

STEP = 6
TITLE = "the data once per epoch"  # the title of its findings

SPLIT_HINT = (
    "Shard the training dataset before shuffling it: "
    "train_dataset.shard(hvd.size(), hvd.rank()) gives each worker its own part."
)
STEPS_HINT = (
    "Divide the steps once: steps_per_epoch = steps_per_epoch // hvd.size() (each worker "
    "trains 1/N of them, on its own 1/N of the data), and keep --epochs as it is."
)
VALIDATION_HINT = (
    "Shard the validation dataset as well (validation_dataset.shard(hvd.size(), "
    "hvd.rank())) and divide validation_steps by hvd.size(), so that together "
    "the workers validate on each test image once."
)


def epoch_keys(record, kind: str) -> list | None:
    """The keys (probe.image_keys) of the images a rank trained ("train") or validated ("val")
    on in the first epoch, in order; None when its records don't show a whole first epoch."""
    if kind == "train" and record.data.get("array_keys") is not None:
        return record.data["array_keys"]  # a NumPy x: every row, every epoch
    batches = record.data.get(f"{kind}_keys") or []
    steps = (record.data.get("steps" if kind == "train" else "val_steps") or {}).get("0")
    if not steps or len(batches) < steps:
        return None
    return [key for batch in batches[:steps] for key in batch]


def keys_name_images(keys: dict, total: int) -> bool:
    """Whether the keys tell images apart: the script's transforms kept the keyed data's levels
    distinct (a per-image standardization, a clip or a rounding would merge them)."""
    together = sum(len(seen) for seen in keys.values())
    distinct = len(set().union(*keys.values()))
    if not together or 2 * distinct < min(total, together):
        return False
    for seen in keys.values():
        counts = Counter(seen)
        if seen and max(counts.values()) > -(-len(seen) // len(counts)) + 1:
            return False  # one key far more often than the others: merged levels
    return True


SHARED, OVER, SHORT = "shared", "over", "short"  # how an epoch's split can be wrong


def split_problem(keys: dict, total: int, batch: int, doing: str, whole: bool) -> tuple:
    """(kind, words) of what is wrong with how the ranks' first epoch went over `total` images,
    ("", "") if nothing: SHARED, two ranks on the same images; OVER, a rank going over its
    images more than once (or, where keys don't name images, the ranks together over the data);
    SHORT (only when `whole`: the epoch must cover the data), less than the data set.
    `doing`: "trained" or "validated"."""
    per_rank = ", ".join(f"rank {rank} {len(seen)}" for rank, seen in sorted(keys.items()))
    together = sum(len(seen) for seen in keys.values())
    data = "training set" if doing == "trained" else "test set"
    seen = (
        f"in epoch 1 the ranks together {doing} on {together} images ({per_rank}), and "
        f"the check's {data} has {total}"
    )
    if keys_name_images(keys, total):
        ranks = sorted(keys)
        for first in ranks:
            for second in ranks[ranks.index(first) + 1 :]:
                shared = set(keys[first]) & set(keys[second])
                if shared:
                    return SHARED, (
                        f"{seen}: rank {first} and rank {second} both {doing} "
                        f"on {len(shared)} of the same images"
                    )
        for rank, images in sorted(keys.items()):
            if len(images) - len(set(images)) > batch:
                return OVER, (
                    f"{seen}: rank {rank} went over its {len(set(images))} images "
                    f"{len(images) / len(set(images)):.3g} times"
                )
        distinct = len(set().union(*keys.values()))
        if whole and distinct < total - len(keys) * batch:
            return SHORT, f"{seen}: the epoch covers only {distinct / total:.0%} of the data"
        return "", ""
    # Keys that don't name images: the counts alone.
    if together > total + len(keys) * batch:
        return OVER, f"{seen}: {together / total:.3g} times over the data in one epoch"
    if whole and together < total - len(keys) * batch:
        return SHORT, f"{seen}: an epoch covers only {together / total:.0%} of the data"
    return "", ""


def check(evidence: Evidence, setting: Setting) -> Result:
    fits = ranks_with(evidence, 1, lambda r: r.fit)
    if len(fits) < evidence.np:
        return not_shown(STEP, not_reached(evidence, fits, "reached model.fit"))
    asked = int(parsed(evidence, "epochs", setting))
    epochs = {rank: fit.get("epochs") for rank, fit in fits.items()}
    if any(value != asked for value in epochs.values()):
        rank = next(rank for rank, value in epochs.items() if value != asked)
        return finding(
            STEP,
            FAILED,
            f"rank {rank} trained until epoch {epochs[rank]}, though "
            f"--epochs asked for {asked}: an epoch of N workers already goes over "
            "the whole data set",
            STEPS_HINT,
        )
    records = evidence.ranks(1)
    train = {rank: epoch_keys(record, "train") for rank, record in records.items()}
    if any(keys is None for keys in train.values()):
        if not any(
            fit.get("dataset") or records[rank].data.get("array_keys") is not None
            for rank, fit in fits.items()
        ):
            return finding(
                STEP,
                CANT_TELL,
                "can't tell: model.fit got neither a tf.data.Dataset "
                "nor arrays, whose images this check can name",
            )
        return not_shown(STEP, "can't tell: not every rank finished its first epoch")
    if not all(train.values()):
        return finding(
            STEP, CANT_TELL, "can't tell: the training batches were not images this check can name"
        )
    images = int(parsed(evidence, "train_images", setting))
    batch = int(parsed(evidence, "batch_size", setting))
    kind, problem = split_problem(train, images, batch, "trained", whole=True)
    if problem:
        return finding(STEP, FAILED, problem, SPLIT_HINT if kind == SHARED else STEPS_HINT)
    validated = {rank: epoch_keys(record, "val") for rank, record in records.items()}
    shown = "every rank trained on images of its own, the data once per epoch"
    if all(validated.values()):
        _, problem = split_problem(
            validated,
            int(parsed(evidence, "test_images", setting)),
            int(parsed(evidence, "val_batch_size", setting)),
            "validated",
            whole=False,
        )
        if problem:
            return finding(STEP, FAILED, problem, VALIDATION_HINT)
        shown += ", and validated on test images of its own"
    else:
        shown += " (validation: not seen)"
    counts = ", ".join(f"rank {rank} {len(keys)}" for rank, keys in sorted(train.items()))
    return finding(STEP, PASSED, f"{shown}: in epoch 1 {counts} of the {images} images")

"""What must hold on the ranks once step N is done, judged from what they reported.

One function per step, listed in INVARIANTS. Each returns a finding, a grader.report.Result
of that step: PASSED (the invariant holds), FAILED, or CANT_TELL when the run did not show it
(a rank that never got that far, a script that does things this check can't see). A finding
states only what the records show.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from grader.live.evidence import Evidence, event_file_writers, line_and_code, split_by_callback
from grader.live.expected import Recipe, corrected_momentum, same
from grader.report import CANT_TELL, FAILED, PASSED, Result

SAME_METRIC = 1e-5  # relative; averaged metrics are the same float on every rank
SAME_RATE = 1e-3  # relative; learning rates are float32
# relative; the reduced gradient against the mean of the ranks' own (float32 sums, or fp16
# compression at worst)
SAME_GRADIENT = 1e-2


# What each step's invariant is, in a few words: the title of its finding.
TITLES = {
    1: "Horovod on every worker",
    2: "one GPU per worker",
    3: "one rank prints",
    4: "averaged updates",
    5: "the same weights",
    6: "the data once per epoch",
    7: "averaged metrics",
    8: "the resume epoch",
    9: "one writer",
    10: "the scaled learning rate",
    11: "the warmup and schedule",
    12: "NovoGrad",
}
NOT_INITIALIZED = "Horovod has not been initialized"  # Horovod 0.28.1's error before hvd.init()


def finding(step: int, status: str, message: str, hint: str = "") -> Result:
    """Step `step`'s invariant: PASSED (it holds), FAILED or CANT_TELL, and what was seen."""
    return Result(status, TITLES[step], message, step=step, hint=hint)


def not_shown(step: int, message: str) -> Result:
    """CANT_TELL because the script kept the run from showing step `step` (it stopped, hung or
    exited before, or never did what the step is about): `withheld`, so it earns no credit."""
    return Result(CANT_TELL, TITLES[step], message, step=step, withheld=True)


@dataclass
class Setting:
    """How the check ran the script, for the invariants that compare against it.

    The first run trains `first_epochs` epochs from scratch; the second, with the same
    --log-dir on rank 0, is asked for `final_epochs` and must go on from the first run's last
    checkpoint. Every other rank gets a --log-dir of its own in each run (empty, as if rank 0's
    disk were on another machine): whatever it writes there, it wrote as a second writer.
    `asked` holds the options passed (base_lr, warmup_epochs, lr_drops, train_images,
    batch_size), used where the script did not parse them.
    """

    np: int
    log_dir: str
    first_epochs: int
    final_epochs: int
    asked: dict
    # The base rate the lesson's SGD script (step 11) takes from the asked preset, which step
    # 12 halves for NovoGrad; None: not known, not checked.
    sgd_preset_lr: float | None = None

    def private_log_dir(self, rank: int, run: int) -> str:
        return self.log_dir if rank == 0 else f"{self.log_dir}-rank{rank}-run{run}"


def parsed(evidence: Evidence, name: str, setting: Setting, rank: int = 0, run: int = 1):
    """The value of option `name` as the script parsed it in launch `run`, else what the
    check asked (the first launch's options; the second runs on the script's defaults)."""
    record = evidence.ranks(run).get(rank)
    values = ((record.data.get("args") or {}).get("values") or {}) if record else {}
    value = values.get(name)
    return (setting.asked.get(name) if run == 1 else None) if value is None else value


def recipe(
    evidence: Evidence, setting: Setting, scaled_lr: float | None = None, run: int = 1
) -> Recipe | None:
    """The rates the lesson's recipe gives for the options launch `run` parsed (None without
    a --base-lr); `scaled_lr`, when given, in place of base_lr x N. A script without
    --warmup-epochs (before step 11) is held to the warmup the check asked for."""
    drops = parsed(evidence, "lr_drops", setting, run=run)
    base_lr = parsed(evidence, "base_lr", setting, run=run)
    if scaled_lr is not None:
        base_lr = scaled_lr / setting.np
    if not isinstance(base_lr, (int, float)):
        return None
    if drops is None:
        drops = []
    return Recipe(
        base_lr=float(base_lr),
        workers=setting.np,
        warmup_epochs=float(parsed(evidence, "warmup_epochs", setting, run=run) or 0),
        lr_drops=tuple(int(d) for d in (drops if isinstance(drops, list) else [drops])),
    )


def _ranks_with(evidence: Evidence, run: int, what) -> dict:
    return {
        rank: value
        for rank, record in sorted(evidence.ranks(run).items())
        if (value := what(record)) is not None
    }


def _ranks_text(ranks: list) -> str:
    """ "rank 1", "ranks 0 and 1", "ranks 1, 2 and 3"."""
    names = [str(rank) for rank in ranks]
    if len(names) == 1:
        return f"rank {names[0]}"
    return f"ranks {', '.join(names[:-1])} and {names[-1]}"


def _not_reached(evidence: Evidence, have: dict, what: str, run: int = 1) -> str:
    """ "rank 1 never ...": which ranks did not report `what`."""
    absent = [rank for rank in range(evidence.np) if rank not in have]
    second = " in the second run" if run == 2 else ""
    return f"can't tell: {_ranks_text(absent)} never {what}{second}"


def _relative(a, b) -> float:
    import numpy as np

    scale = max(float(np.max(np.abs(a))) if a.size else 0.0, 1e-30)
    return float(np.max(np.abs(a - b))) / scale if a.size else 0.0


def rounding_excess(before: dict, updates: dict) -> tuple:
    """(rank, how many times float32 rounding the rank's update differs from rank 0's).

    The averaged gradient, and so the update, is the same on every rank; only adding it to
    weights that differ (before the broadcast) rounds differently: by half a float32 step of
    the weights at most. 1 or less: the same update.
    """
    import numpy as np

    eps = float(np.finfo(np.float32).eps)
    worst_rank, worst = 0, 0.0
    for rank, update in updates.items():
        if not rank:
            continue
        after = [before[0] + updates[0], before[rank] + update]
        size = np.max(np.abs([before[0], before[rank], *after]), axis=0)
        allowed = 2 * eps * size + 1e-30
        excess = float(np.max(np.abs(update - updates[0]) / allowed))
        if excess > worst:
            worst_rank, worst = rank, excess
    return worst_rank, worst


def _errors(evidence: Evidence) -> list:
    """[(run, rank, error)] of every rank that stopped with an error."""
    return [
        (run, rank, record.error)
        for run in sorted(evidence.runs)
        for rank, record in sorted(evidence.ranks(run).items())
        if record.error
    ]


def horovod_initialized(evidence: Evidence, setting: Setting) -> Result:
    hint = (
        "Call hvd.init() once, near the top, before anything else of Horovod (hvd.rank(), "
        "hvd.size(), a callback, DistributedOptimizer)."
    )
    for run, rank, error in _errors(evidence):
        if NOT_INITIALIZED in (error.get("message") or ""):
            return finding(
                1,
                FAILED,
                f"rank {rank} used Horovod before hvd.init()"
                f"{line_and_code(error)}: {error['message']}",
                hint,
            )
    states = _ranks_with(evidence, 1, lambda r: r.data.get("horovod"))
    if len(states) < evidence.np:
        return not_shown(1, _not_reached(evidence, states, "reached model.fit"))
    alone = [rank for rank, state in states.items() if not state.get("initialized")]
    if alone:
        return finding(
            1,
            FAILED,
            f"at model.fit Horovod was not initialized on "
            f"{_ranks_text(alone)}: each worker trained alone, on its own",
            hint,
        )
    sizes = {state.get("size") for state in states.values()}
    ranks = sorted(state.get("rank") for state in states.values())
    if sizes != {setting.np} or ranks != list(range(setting.np)):
        return finding(
            1,
            FAILED,
            f"the {setting.np} workers did not form one job: they saw "
            f"sizes {sorted(sizes)} and ranks {ranks}",
            hint,
        )
    return finding(
        1,
        PASSED,
        f"every worker initialized Horovod before training: ranks "
        f"{ranks[0]}..{ranks[-1]} of {setting.np}",
    )


def one_gpu_each(evidence: Evidence, setting: Setting) -> Result:
    gpus = _ranks_with(evidence, 1, lambda r: r.data.get("gpus"))
    states = _ranks_with(evidence, 1, lambda r: r.data.get("horovod"))
    if len(gpus) < evidence.np:
        if len(_ranks_with(evidence, 1, lambda r: r.fit)) == evidence.np:
            return finding(
                2,
                CANT_TELL,
                "can't tell: this machine has GPUs of its own, and the "
                "check only simulates them where there are none",
            )
        return not_shown(2, _not_reached(evidence, gpus, "reached model.fit"))
    count = next(iter(gpus.values()))["count"]
    seen = "; ".join(f"rank {rank} {_gpu_list(state['visible'])}" for rank, state in gpus.items())
    hint = (
        "List the GPUs with tf.config.list_physical_devices('GPU') and make one visible per "
        "worker: tf.config.set_visible_devices(gpus[hvd.local_rank()], 'GPU')."
    )
    wrong = []
    for rank, state in gpus.items():
        local = (states.get(rank) or {}).get("local_rank", rank)
        if state["visible"] != [local]:
            wrong.append(rank)
    if not wrong:
        return finding(
            2,
            PASSED,
            f"with {count} GPUs simulated per host, each worker made only "
            f"the GPU of its local rank visible ({seen})",
        )
    rank = wrong[0]
    visible = gpus[rank]["visible"]
    if not gpus[rank]["set"]:
        why = f"rank {rank} never chose a GPU, so it would use all {len(visible)}"
    elif not visible:
        why = f"rank {rank} made no GPU visible: it would train on the CPU"
    elif len(visible) > 1:
        why = f"rank {rank} kept {len(visible)} GPUs visible"
    else:
        why = f"rank {rank} chose GPU {visible[0]}, not the GPU of its local rank"
    return finding(2, FAILED, f"with {count} GPUs simulated on this host: {why} ({seen})", hint)


def _gpu_list(visible: list) -> str:
    if not visible:
        return "no GPU"
    return ("GPU " if len(visible) == 1 else "GPUs ") + ", ".join(map(str, visible))


def one_rank_prints(evidence: Evidence, setting: Setting) -> Result:
    printed = {
        rank: record.data.get("printed") or {}
        for run in sorted(evidence.runs)
        for rank, record in evidence.ranks(run).items()
        if (record.data.get("printed") or {}).get("chars")
    }
    others = [rank for rank in sorted(printed) if rank]
    hint = (
        "Print on rank 0 only: verbose = 1 if hvd.rank() == 0 else 0, passed to model.fit "
        "and to every callback that prints; other prints under `if hvd.rank() == 0:`."
    )
    if others:
        first = " ".join(printed[others[0]].get("first", "").split())[:80]
        return finding(
            3,
            FAILED,
            f"rank {others[0]} printed too ({printed[others[0]]['chars']} "
            f"characters, beginning `{first}`): every worker shows the same progress",
            hint,
        )
    fits = _ranks_with(evidence, 1, lambda r: r.fit)
    if 0 not in fits or not evidence.ranks(1)[0].finished:
        return not_shown(
            3,
            "can't tell: rank 0 did not finish the first run, and the "
            "others printed nothing before that",
        )
    if 0 not in printed:
        return finding(
            3,
            FAILED,
            "no rank printed anything: rank 0 should show the training's progress and results",
            hint,
        )
    return finding(
        3,
        PASSED,
        f"only rank 0 printed ({printed[0]['chars']} characters); the other ranks printed nothing",
    )


def identical_updates(evidence: Evidence, setting: Setting) -> Result:
    updates = _ranks_with(evidence, 1, lambda r: r.first_update)
    before = _ranks_with(evidence, 1, lambda r: r.weights_before_first_step)
    if len(updates) < evidence.np or len(before) < evidence.np:
        return not_shown(4, _not_reached(evidence, updates, "finished a training step"))
    first = updates[0]
    if not first.size or not first.any():
        return finding(
            4, CANT_TELL, "can't tell: the first training step did not change rank 0's weights"
        )
    if any(update.shape != first.shape for update in updates.values()):
        return finding(4, FAILED, "the ranks train models of different sizes")
    rank, excess = rounding_excess(before, updates)
    if excess <= 1:
        return averaged_not_summed(evidence)
    unequal_rates = _first_rates_differ(evidence)
    if unequal_rates:
        return finding(
            4,
            CANT_TELL,
            f"can't tell: in the first training step rank 0 and rank {rank} changed their "
            f"weights differently, but they already trained it at different learning rates "
            f"({unequal_rates}): that differs first (the learning rate's steps), and it alone "
            "makes the updates differ",
        )
    plain = [
        rank
        for rank, record in sorted(evidence.ranks(1).items())
        if record.fit and not record.fit.get("distributed_optimizer")
    ]
    why = (
        f" ({_ranks_text(plain)}: a plain {evidence.ranks(1)[plain[0]].fit.get('optimizer')}"
        ", not wrapped)"
        if plain
        else ""
    )
    return finding(
        4,
        FAILED,
        f"in the first training step rank 0 and rank {rank} changed their weights differently "
        f"(by up to {_relative(first, updates[rank]):.0%} of the change): each rank applied the "
        f"gradient of its own batch{why}",
        "Wrap the optimizer: opt = hvd.DistributedOptimizer(opt), and compile the model with it; "
        "it averages the gradients of all workers before every update.",
    )


def _first_rates_differ(evidence: Evidence) -> str:
    """'rank 0: A, rank N: B' when the ranks' first training step of launch 1 ran at different
    learning rates (beyond float32 rounding), else ""."""
    first = {}
    for rank, record in sorted(evidence.ranks(1).items()):
        rates = record.learning_rates()
        if rates and rates[min(rates)] and rates[min(rates)][0] is not None:
            first[rank] = rates[min(rates)][0]
    if 0 not in first:
        return ""
    for rank, rate in first.items():
        if abs(rate - first[0]) > SAME_RATE * max(abs(first[0]), abs(rate)):
            return f"rank 0: {first[0]:.4g}, rank {rank}: {rate:.4g}"
    return ""


def averaged_not_summed(evidence: Evidence) -> Result:
    """Every rank made the same update: was it the average of their gradients (or the sum)?"""
    same_update = "in the first training step every rank changed its weights by the same amount"
    local = _ranks_with(evidence, 1, lambda r: r.local_gradient)
    reduced = _ranks_with(evidence, 1, lambda r: r.reduced_gradient)
    if len(local) < evidence.np or 0 not in reduced:
        return finding(4, PASSED, f"{same_update} (up to float32 rounding)")
    if len({vector.shape for vector in local.values()}) > 1:
        return finding(
            4,
            CANT_TELL,
            f"can't tell: {same_update}, but the ranks' gradients have different sizes",
        )
    total = sum(local.values())
    mean = total / evidence.np
    if _relative(mean, reduced[0]) <= SAME_GRADIENT:
        return finding(
            4, PASSED, f"{same_update}: the average of the {evidence.np} ranks' gradients"
        )
    if _relative(total, reduced[0]) <= SAME_GRADIENT:
        return finding(
            4,
            FAILED,
            f"{same_update}, but by the sum of the {evidence.np} ranks' gradients, not their "
            f"average: every update is {evidence.np} times too large",
            "Average the gradients: hvd.DistributedOptimizer(opt) with its default op "
            "(hvd.Average), not op=hvd.Sum.",
        )
    return finding(
        4,
        CANT_TELL,
        f"can't tell: {same_update}, but by neither the average nor "
        "the sum of the ranks' gradients of that step (gradients accumulated over "
        "several steps?)",
    )


def on_some_ranks(evidence: Evidence, callback: str, step: int) -> Result | None:
    """FAILED when only some ranks pass Horovod's `callback` (which calls a collective) to
    model.fit: the others never join it, so the run can't go on; else None."""
    fits = _ranks_with(evidence, 1, lambda r: r.fit)
    having, others = split_by_callback(fits, callback)
    if not having or not others or len(fits) < evidence.np:
        return None
    return finding(
        step,
        FAILED,
        f"{_ranks_text(having)} passed hvd.callbacks.{callback} to "
        f"model.fit and {_ranks_text(others)} did not: it waits for every rank, so "
        "the ranks that have it wait forever",
        f"Pass hvd.callbacks.{callback} to "
        "model.fit on every rank: only the writers belong under `if hvd.rank() == "
        "0:`.",
    )


def same_weights(evidence: Evidence, setting: Setting) -> Result:
    partly = on_some_ranks(evidence, "BroadcastGlobalVariablesCallback", 5)
    if partly is not None:
        return partly
    weights = _ranks_with(evidence, 1, lambda r: r.weights_after_first_step)
    if len(weights) < evidence.np:
        return not_shown(5, _not_reached(evidence, weights, "finished a training step"))
    first = weights[0]
    different = [
        rank
        for rank, values in weights.items()
        if values.shape != first.shape or _relative(first, values) > 0
    ]
    if not different:
        return _same_weights_resumed(evidence) or finding(
            5,
            PASSED,
            "after the first training step every rank has the same weights"
            + (
                ", in the resumed launch too"
                if len(_ranks_with(evidence, 2, lambda r: r.weights_after_first_step))
                == evidence.np
                else ""
            ),
        )
    return finding(
        5,
        FAILED,
        f"after the first training step the weights of rank {different[0]} differ from rank "
        f"0's (by up to {_relative(first, weights[different[0]]):.0%}): every rank started from "
        "its own random weights",
        "Add hvd.callbacks.BroadcastGlobalVariablesCallback(0) to the callbacks of model.fit, on "
        "every rank: it copies rank 0's weights to all after the first step.",
    )


def _same_weights_resumed(evidence: Evidence) -> Result | None:
    """FAILED when the ranks' weights differ after the resumed launch's first step (rank 0's
    loaded optimizer state never sent: a hand broadcast of the weights before model.fit keeps
    the first launch equal, not the resume); None otherwise or when it did not get that far."""
    weights = _ranks_with(evidence, 2, lambda r: r.weights_after_first_step)
    if len(weights) < evidence.np:
        return None
    first = weights[0]
    different = [
        rank
        for rank, values in weights.items()
        if values.shape != first.shape or _relative(first, values) > 0
    ]
    if not different:
        return None
    return finding(
        5,
        FAILED,
        f"after the first training step of the resumed launch the weights of rank "
        f"{different[0]} differ from rank 0's (by up to "
        f"{_relative(first, weights[different[0]]):.0%}): rank 0 went on from its checkpoint, "
        "the others from what they had",
        "Add hvd.callbacks.BroadcastGlobalVariablesCallback(0) to the callbacks of model.fit, on "
        "every rank: after the first step it copies rank 0's weights and optimizer state to all, "
        "in every launch.",
    )


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


def different_batches(evidence: Evidence, setting: Setting) -> Result:
    fits = _ranks_with(evidence, 1, lambda r: r.fit)
    if len(fits) < evidence.np:
        return not_shown(6, _not_reached(evidence, fits, "reached model.fit"))
    asked = int(parsed(evidence, "epochs", setting))
    epochs = {rank: fit.get("epochs") for rank, fit in fits.items()}
    if any(value != asked for value in epochs.values()):
        rank = next(rank for rank, value in epochs.items() if value != asked)
        return finding(
            6,
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
                6,
                CANT_TELL,
                "can't tell: model.fit got neither a tf.data.Dataset "
                "nor arrays, whose images this check can name",
            )
        return not_shown(6, "can't tell: not every rank finished its first epoch")
    if not all(train.values()):
        return finding(
            6, CANT_TELL, "can't tell: the training batches were not images this check can name"
        )
    images = int(parsed(evidence, "train_images", setting))
    batch = int(parsed(evidence, "batch_size", setting))
    kind, problem = split_problem(train, images, batch, "trained", whole=True)
    if problem:
        return finding(6, FAILED, problem, SPLIT_HINT if kind == SHARED else STEPS_HINT)
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
            return finding(6, FAILED, problem, VALIDATION_HINT)
        shown += ", and validated on test images of its own"
    else:
        shown += " (validation: not seen)"
    counts = ", ".join(f"rank {rank} {len(keys)}" for rank, keys in sorted(train.items()))
    return finding(6, PASSED, f"{shown}: in epoch 1 {counts} of the {images} images")


def averaged_metrics(evidence: Evidence, setting: Setting) -> Result:
    partly = on_some_ranks(evidence, "MetricAverageCallback", 7)
    if partly is not None:
        return partly
    logs = _ranks_with(evidence, 1, lambda r: r.epoch_logs().get(0))
    if len(logs) < evidence.np:
        return not_shown(7, _not_reached(evidence, logs, "finished an epoch"))
    names = [name for name in logs[0] if all(name in other for other in logs.values())]
    if not names:
        return finding(7, CANT_TELL, "can't tell: the epoch's logs have no metrics")
    for name in names:
        values = [logs[rank][name] for rank in sorted(logs)]
        scale = max(abs(v) for v in values) or 1.0
        if (max(values) - min(values)) / scale > SAME_METRIC:
            shown = ", ".join(f"rank {rank} {logs[rank][name]:.4f}" for rank in sorted(logs))
            return finding(
                7,
                FAILED,
                f"at the end of epoch 1 the ranks report different {name}: {shown}: each shows "
                "its own, not the average over all workers",
                "Add hvd.callbacks.MetricAverageCallback() to the callbacks, before those that "
                "read the metrics.",
            )
    shown = ", ".join(f"{name} {logs[0][name]:.4f}" for name in names)
    summed = _summed_metric(evidence, logs, names)
    if summed:
        return finding(
            7,
            FAILED,
            summed,
            "Average the metrics, not sum them: "
            "hvd.callbacks.MetricAverageCallback() does (or hvd.allreduce's default "
            "op, hvd.Average).",
        )
    averaged = _averaged(evidence, logs, names)
    value = "the average" if averaged else "the value every rank ended the epoch with"
    for rank, record in sorted(evidence.ranks(1).items()):
        for seen in record.data.get("seen_logs") or []:
            if not seen.get("reads", True):
                continue  # the script's own callbacks: what they saw on entry is no record
            differ = [
                name
                for name in names
                if name in seen["logs"] and not _same_metric(seen["logs"][name], logs[rank][name])
            ]
            if differ:
                name = differ[0]
                return finding(
                    7,
                    FAILED,
                    f"every rank ended epoch 1 with the same metrics, but on rank {rank} "
                    f"{seen['callback']} recorded {name} {seen['logs'][name]:.4f}, its own, not "
                    f"{value} {logs[rank][name]:.4f}: it ran before the metrics were averaged",
                    "Put hvd.callbacks.MetricAverageCallback() before the callbacks that read "
                    "the metrics, right after the broadcast callback.",
                )
    how = " (the average of the ranks' own)" if averaged else ""
    return finding(
        7,
        PASSED,
        f"every rank ended epoch 1 with the same metrics ({shown}){how}, "
        "and the callbacks that record them saw them so",
    )


def _own_metrics(evidence: Evidence, names: list) -> dict | None:
    """{rank: {metric: its own value}} at epoch 1's end, before any callback averaged them;
    None when a rank's records lack them."""
    own = {rank: record.data.get("own_logs") or {} for rank, record in evidence.ranks(1).items()}
    if len(own) < evidence.np or any(
        not all(name in values for name in names) for values in own.values()
    ):
        return None
    return own


def _averaged(evidence: Evidence, logs: dict, names: list) -> bool:
    """Whether every metric the ranks ended epoch 1 with is the mean of the ranks' own."""
    own = _own_metrics(evidence, names)
    return own is not None and all(
        _same_metric(logs[0][name], sum(values[name] for values in own.values()) / len(own))
        for name in names
    )


def _summed_metric(evidence: Evidence, logs: dict, names: list) -> str:
    """What shows that the ranks summed a metric instead of averaging it, in words, or ""."""
    own = _own_metrics(evidence, names)
    if own is None:
        return ""
    for name in names:
        values = [own[rank][name] for rank in sorted(own)]
        total = sum(values)
        if _same_metric(logs[0][name], total) and not _same_metric(total, total / len(values)):
            each = ", ".join(f"rank {rank} {own[rank][name]:.4f}" for rank in sorted(own))
            return (
                f"every rank ended epoch 1 with {name} {logs[0][name]:.4f}, the sum of the "
                f"ranks' own ({each}), not their average {total / len(values):.4f}"
            )
    return ""


def _same_metric(a: float, b: float) -> bool:
    return abs(a - b) <= SAME_METRIC * max(abs(a), abs(b), 1e-30)


def agreed_resume_epoch(evidence: Evidence, setting: Setting) -> Result:
    scene = (
        f"a second run, asked for {setting.final_epochs} epochs, went on from the first "
        f"run's checkpoints, which only rank 0 could see (the others had an empty --log-dir, "
        "as on another machine)"
    )
    hint = (
        "Let rank 0 look for the checkpoint and broadcast its epoch to every rank: "
        'resume_from_epoch = hvd.broadcast(resume_from_epoch, root_rank=0, name="resume_from_epoch").'
    )
    second = evidence.ranks(2)
    if not second:
        return not_shown(8, "can't tell: there was no second run to resume")
    reached = _ranks_with(evidence, 2, lambda r: r.fit)
    starts = {rank: fit.get("initial_epoch") or 0 for rank, fit in reached.items()}
    if len(set(starts.values())) > 1:
        shown = ", ".join(
            f"rank {rank} {_resumed(epoch)}" for rank, epoch in sorted(starts.items())
        )
        return finding(8, FAILED, f"{scene}; the ranks disagree on where to go on: {shown}", hint)
    crashed = [(rank, record.error) for rank, record in sorted(second.items()) if record.error]
    if crashed:  # whose fault it is, the line tells (grader/judge.py blames a step by it)
        rank, error = crashed[0]
        return not_shown(
            8,
            f"can't tell: the second run, which was to go on from the "
            f"first one's checkpoint, stopped: rank {rank} with an error"
            f"{line_and_code(error)}: {error['type']}: {error.get('message', '')}",
        )
    if len(reached) < evidence.np:
        return not_shown(8, _not_reached(evidence, reached, "reached model.fit", 2))
    epoch = next(iter(starts.values()))
    first = evidence.ranks(1).get(0)
    wrote = (first.data.get("saved") or []) if first else []
    if not wrote:
        return not_shown(8, f"can't tell: {scene}, but the first run wrote no checkpoint")
    newest = _newest_epoch(wrote, setting.first_epochs)
    if epoch != newest:
        said = "started from scratch" if epoch == 0 else f"went on after epoch {epoch}"
        return finding(
            8,
            FAILED,
            f"{scene}; every rank {said}, but the newest checkpoint, "
            f"{_names(wrote)[-1]}, is of epoch {newest}",
            hint,
        )
    unfinished = [
        rank
        for rank, record in sorted(second.items())
        if not record.learning_rates().get(epoch) or not record.data.get("finished")
    ]
    if unfinished:
        return not_shown(
            8,
            f"can't tell: {scene}; every rank {_resumed(epoch)}, but "
            f"rank {unfinished[0]} {second[unfinished[0]].where()} in the second "
            "run, which never ended",
        )
    finals = {rank: fit.get("epochs") for rank, fit in reached.items()}
    if set(finals.values()) != {setting.final_epochs}:
        rank = next(r for r, value in finals.items() if value != setting.final_epochs)
        return finding(
            8,
            FAILED,
            f"{scene}; rank {rank} resumed after epoch {epoch} but trained "
            f"until epoch {finals[rank]}, not the {setting.final_epochs} asked for",
            "Pass initial_epoch=resume_from_epoch and epochs=args.epochs to "
            "model.fit: epochs is the last epoch, not how many more.",
        )
    return finding(
        8,
        PASSED,
        f"{scene}; every rank {_resumed(epoch)} and trained until epoch {setting.final_epochs}",
    )


def _newest_epoch(paths, default: int) -> int:
    """The highest epoch number in the checkpoints' names (checkpoint-2.h5: 2), else `default`."""
    numbers = [
        int(found[-1]) for name in _names(paths) if (found := re.findall(r"(?<![A-Za-z])\d+", name))
    ]
    return max(numbers) if numbers else default


def _resumed(epoch: int) -> str:
    """What model.fit(initial_epoch=epoch) does, in words."""
    return f"resumed after epoch {epoch}" if epoch else "started from scratch"


def _names(paths) -> list:
    return sorted({str(path).replace("\\", "/").rsplit("/", 1)[-1] for path in paths})


def _files_under(folder: str) -> list:
    root = Path(folder)
    if not root.is_dir():
        return []
    return sorted(path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file())


def _written_elsewhere(paths: list) -> str:
    """What a rank opened for writing outside its --log-dir (its CSV log, its own files)."""
    names = _names(paths)
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f"{len(names)} file{'s' if len(names) > 1 else ''} outside its --log-dir ({shown})"


def one_writer(evidence: Evidence, setting: Setting) -> Result:
    records = evidence.ranks(1)
    if len(records) < evidence.np:
        return not_shown(9, _not_reached(evidence, records, "started"))
    pids = {record.data["pid"]: rank for rank, record in records.items()}
    logs = event_file_writers([setting.log_dir], pids)
    saved, private, elsewhere = {}, {}, {}
    for run in sorted(evidence.runs):
        for rank, record in sorted(evidence.ranks(run).items()):
            saved.setdefault(rank, []).extend(record.data.get("saved") or [])
            if rank:
                own = setting.private_log_dir(rank, run)
                private.setdefault(rank, []).extend(_files_under(own))
                elsewhere.setdefault(rank, []).extend(
                    path
                    for path in record.data.get("wrote") or []
                    if not path.startswith(own.rstrip("/") + "/") and path not in saved[rank]
                )
    writers = {}
    for rank in sorted(set(saved) | set(private) | set(elsewhere)):
        wrote = writers.setdefault(rank, [])
        if saved.get(rank):
            wrote.append("checkpoints (" + ", ".join(_names(saved[rank])) + ")")
        if private.get(rank):
            wrote.append(
                f"{len(private[rank])} files into its own --log-dir ({_names(private[rank])[0]}...)"
            )
        if elsewhere.get(rank):
            wrote.append(_written_elsewhere(elsewhere[rank]))
    if logs.get(0):
        writers.setdefault(0, []).append("TensorBoard logs")
    others = [rank for rank, wrote in writers.items() if rank and wrote]
    if others:
        rank = others[0]
        return finding(
            9,
            FAILED,
            f"rank {rank} wrote {' and '.join(writers[rank])} too: on one disk "
            "the workers' files would clash",
            "Add ModelCheckpoint and TensorBoard to the callbacks only under "
            "`if hvd.rank() == 0:`: one writer, no clashes.",
        )
    if not writers.get(0):
        return not_shown(9, "can't tell: no rank wrote checkpoints or TensorBoard logs")
    if not saved.get(0):  # TensorBoard's logs alone: that checkpoints stay on rank 0 is unseen
        return not_shown(
            9,
            f"can't tell: rank 0 wrote {' and '.join(writers[0])} but no "
            "checkpoint, so the run did not show that only rank 0 writes them",
        )
    return finding(9, PASSED, f"only rank 0 wrote {' and '.join(writers[0])}")


def _rates(evidence: Evidence, rank: int, finished: bool = False) -> list:
    """[(run, epoch, [rates])] of one rank, in order; `finished`: only the epochs it finished."""
    found = []
    for run in sorted(evidence.runs):
        record = evidence.ranks(run).get(rank)
        if record:
            done = record.epoch_logs()
            for epoch, rates in sorted(record.learning_rates().items()):
                if rates and None not in rates and (epoch in done or not finished):
                    found.append((run, epoch, rates))
    return found


def _steps_per_epoch(evidence: Evidence, run: int = 1) -> int | None:
    """How many training steps an epoch of rank 0 has in launch `run`: what model.fit was
    told, else what its first epoch, finished, had."""
    record = evidence.ranks(run).get(0)
    if record is None:
        return None
    told = (record.fit or {}).get("steps_per_epoch")
    if isinstance(told, int) and told > 0:
        return told
    done = sorted(record.epoch_logs())
    return (record.data.get("steps") or {}).get(str(done[0])) if done else None


def _own_scaled_rate(evidence: Evidence, run: int = 1) -> float | None:
    """The rate the script told Horovod's warmup callback (initial_lr), on rank 0, if any."""
    record = evidence.ranks(run).get(0)
    told = (record.data.get("lr_callbacks") or {}) if record else {}
    return told.get("LearningRateWarmupCallback")


def _rate_list(rates: list) -> str:
    shown = [f"{rate:.4g}" for rate in rates]
    return shown[0] if len(set(shown)) == 1 else " → ".join(shown)


def _schedule(epochs: list) -> str:
    return "; ".join(f"epoch {epoch + 1}: {_rate_list(rates)}" for _, epoch, rates in epochs)


def scaled_learning_rate(evidence: Evidence, setting: Setting) -> Result:
    epochs = _rates(evidence, 0, finished=True)
    if not epochs:
        return not_shown(10, "can't tell: rank 0 finished no epoch")
    wanted = recipe(evidence, setting)
    if wanted is None:
        return finding(10, CANT_TELL, "can't tell: the script has no --base-lr to scale")
    full = [
        epoch
        for _, epoch, _ in epochs
        if epoch >= wanted.warmup_epochs and not any(epoch >= d for d in wanted.lr_drops)
    ]
    if not full:
        return not_shown(
            10,
            "can't tell: rank 0 finished no epoch that trains at the "
            "full rate (after the warmup, before a drop)",
        )
    base_lr = wanted.base_lr
    scaled = base_lr * setting.np
    highest = max(max(rates) for _, _, rates in epochs)
    schedule = _schedule(epochs)
    if abs(highest - scaled) <= SAME_RATE * scaled:
        return finding(
            10,
            PASSED,
            f"the learning rate reached {scaled:.4g} = --base-lr "
            f"{base_lr:g} × {setting.np} workers ({schedule})",
        )
    hint = "Multiply it by the number of workers: scaled_lr = args.base_lr * hvd.size()."
    if abs(highest - base_lr) <= SAME_RATE * base_lr:
        return finding(
            10,
            FAILED,
            f"the learning rate stays at --base-lr {base_lr:g} "
            f"({schedule}), though every step averages {setting.np} workers' "
            "batches",
            hint,
        )
    return finding(
        10,
        FAILED,
        f"the learning rate peaked at {highest:.4g}, not {scaled:.4g} = "
        f"--base-lr {base_lr:g} × {setting.np} workers ({schedule})",
        hint,
    )


def warmup_and_schedule(evidence: Evidence, setting: Setting) -> Result:
    epochs = {rank: _rates(evidence, rank) for rank in evidence.ranks(1)}
    if not epochs.get(0):
        return not_shown(11, "can't tell: rank 0 reported no learning rate")
    schedule = _schedule(epochs[0])
    ours = {(run, epoch): rates for run, epoch, rates in epochs[0]}
    for rank, seen in sorted(epochs.items()):
        differ = [
            (run, epoch, rates)
            for run, epoch, rates in seen
            if rank and (run, epoch) in ours and ours[run, epoch] != rates
        ]
        if differ:
            run, epoch, rates = differ[0]
            return finding(
                11,
                FAILED,
                f"rank {rank} used other learning rates than rank 0 in "
                f"epoch {epoch + 1}: {_rate_list(rates)}, and rank 0 "
                f"{_rate_list(ours[run, epoch])}",
                "Give every rank the same callbacks for the learning rate.",
            )
    # The schedule's shape against the script's own scaled rate (step 10 judges that rate),
    # each launch against the options it parsed.
    scaled = {
        run: _own_scaled_rate(evidence, run) or _own_scaled_rate(evidence)
        for run in sorted(evidence.runs)
    }
    recipes = {run: recipe(evidence, setting, scaled[run], run) for run in scaled}
    wanted = recipes.get(1)
    if wanted is None:
        return finding(11, CANT_TELL, "can't tell: the script has no --base-lr to follow")
    told = _recipe_words(wanted)
    hint = (
        "hvd.callbacks.LearningRateWarmupCallback(initial_lr=scaled_lr, warmup_epochs="
        "args.warmup_epochs), then hvd.callbacks.LearningRateScheduleCallback(initial_lr="
        "scaled_lr, start_epoch=args.warmup_epochs, multiplier=step_decay): the function "
        "itself, not step_decay(...) or a number."
    )
    for run, epoch, rates in epochs[0]:
        steps, launch = _steps_per_epoch(evidence, run), recipes.get(run)
        if launch is None:
            continue  # a launch whose options this check can't read
        if steps is None and epoch not in evidence.ranks(run)[0].epoch_logs():
            continue  # an unfinished epoch of unknown length: its warmup can't be placed
        expected = launch.rates(epoch, steps or len(rates))
        for batch, (got, want) in enumerate(zip(rates, expected)):
            if not same(got, want, SAME_RATE):
                where = f"epoch {epoch + 1}" + (" (after resuming)" if run == 2 else "")
                why = _schedule_mistake(epoch, rates, expected, launch)
                words = told if launch == wanted else _recipe_words(launch) + " (its defaults)"
                return finding(
                    11,
                    FAILED,
                    f"in {where}, step {batch + 1}, the learning rate was "
                    f"{got:.4g} where {words} gives {want:.4g}{why} (rank 0: "
                    f"{schedule})",
                    hint,
                )
    seen = {(run, epoch) for run, epoch, _ in _rates(evidence, 0, finished=True)}
    wanted_epochs = [(1, epoch) for epoch in range(setting.first_epochs)]
    if evidence.ranks(2):
        wanted_epochs.append((2, setting.final_epochs - 1))
    missing = [epoch for run, epoch in wanted_epochs if (run, epoch) not in seen]
    if missing:
        return not_shown(
            11,
            f"can't tell: the rates so far followed {told}, but rank 0 "
            f"never trained epoch {missing[0] + 1} ({schedule})",
        )
    resumed = any(run == 2 for run, _, _ in epochs[0])
    after = ", and after resuming" if resumed else " (the resumed run showed no rates)"
    return finding(
        11,
        PASSED,
        f"every step's learning rate followed {told}{after}; on every "
        f"rank alike{_momentum_note(evidence, setting)} ({schedule})",
    )


def _recipe_words(wanted: Recipe) -> str:
    drops = [str(d + 1) for d in wanted.lr_drops]
    return (
        f"the recipe (a warmup over {_count(wanted.warmup_epochs, 'epoch')} from "
        f"{wanted.base_lr:g} towards {wanted.scaled_lr:.4g}"
        + (f", then ×0.1 from epoch {' and '.join(drops)}" if drops else "")
        + ")"
    )


def _count(number: float, word: str) -> str:
    return f"{number:g} {word}" + ("" if number == 1 else "s")


def _schedule_mistake(epoch: int, rates: list, expected: list, wanted: Recipe) -> str:
    """What the difference looks like, when it is one learners make."""
    if epoch < wanted.warmup_epochs and epoch == 0:
        if rates[0] >= 0.75 * wanted.scaled_lr:
            return ": no warmup"
        if len(rates) > 1 and rates[-1] < expected[-1] and rates[-1] > rates[0]:
            return (
                ": the warmup rises too slowly (told more steps per epoch than each worker trains?)"
            )
    return ""


def _momentum_note(evidence: Evidence, setting: Setting) -> str:
    """ ", with Horovod's momentum correction" or "" (no momentum to correct, or none made)."""
    record = evidence.ranks(1).get(0)
    momenta = (record.data.get("momentum") or {}) if record else {}
    base = parsed(evidence, "momentum", setting)
    if not momenta or not base:
        return ""
    previous, corrected = None, True
    for epoch, rates in sorted(record.learning_rates().items()):
        for rate, value in zip(rates, momenta.get(str(epoch), [])):
            if previous is not None and rate != previous:
                corrected &= same(value, corrected_momentum(float(base), rate, previous))
            previous = rate
    return ", with Horovod's momentum correction" if corrected else ""


NOVOGRAD_HINT = (
    "opt = tfa.optimizers.NovoGrad(learning_rate=scaled_lr, ...), then wrap it in "
    "hvd.DistributedOptimizer as before."
)


def novograd(evidence: Evidence, setting: Setting) -> Result:
    fits = _ranks_with(evidence, 1, lambda r: r.fit)
    if len(fits) < evidence.np:
        return not_shown(12, _not_reached(evidence, fits, "reached model.fit"))
    others = {
        rank: fit.get("optimizer")
        for rank, fit in fits.items()
        if "novograd" not in str(fit.get("optimizer")).lower()
    }
    if others:
        rank, name = next(iter(others.items()))
        return finding(12, FAILED, f"rank {rank} trains with {name}, not NovoGrad", NOVOGRAD_HINT)
    bare = [rank for rank, fit in fits.items() if not fit.get("distributed_optimizer")]
    wrapped = {
        name for record in evidence.ranks(1).values() for name in record.data.get("wrapped") or []
    }
    if bare and wrapped and not any("novograd" in name.lower() for name in wrapped):
        return finding(
            12,
            FAILED,
            f"{_ranks_text(bare)} train with a bare NovoGrad, made after "
            f"hvd.DistributedOptimizer wrapped {' and '.join(sorted(wrapped))}: no "
            "step averages the workers' gradients",
            NOVOGRAD_HINT,
        )
    if bare:  # never wrapped at all: step 4's mistake, which its own finding names
        return finding(
            12,
            PASSED,
            "every rank trains with NovoGrad (not wrapped in "
            "hvd.DistributedOptimizer: step 4's part)",
        )
    base_lr, sgd_lr = parsed(evidence, "base_lr", setting), setting.sgd_preset_lr
    if sgd_lr is not None and isinstance(base_lr, (int, float)) and same(base_lr, sgd_lr):
        return finding(
            12,
            FAILED,
            f"every rank trains with NovoGrad, but --preset "
            f"{setting.asked.get('preset')} still gives SGD's --base-lr {base_lr:g}: "
            "NovoGrad's normalized steps are bigger than SGD's at one rate",
            "Halve base_lr in the preset for NovoGrad, as the lesson's step 12 does.",
        )
    return finding(
        12, PASSED, "every rank trains with NovoGrad, wrapped in hvd.DistributedOptimizer"
    )


# The invariant of each step, checked once the step is done.
INVARIANTS = {
    1: horovod_initialized,
    2: one_gpu_each,
    3: one_rank_prints,
    4: identical_updates,
    5: same_weights,
    6: different_batches,
    7: averaged_metrics,
    8: agreed_resume_epoch,
    9: one_writer,
    10: scaled_learning_rate,
    11: warmup_and_schedule,
    12: novograd,
}
FIRST_STEP = min(INVARIANTS)
NOVOGRAD_STEP = next(step for step, check in INVARIANTS.items() if check is novograd)


def findings(evidence: Evidence, setting: Setting, step: int) -> list:
    """The findings of steps FIRST_STEP..step."""
    found = []
    for number in range(FIRST_STEP, step + 1):
        try:
            found.append(INVARIANTS[number](evidence, setting))
        except Exception as error:  # a bug here must read as one, never as the learner's
            found.append(
                finding(
                    number,
                    CANT_TELL,
                    f"can't tell: the check failed ({type(error).__name__}: {error})",
                )
            )
    return found

"""The committed sample, data/sample: a class-balanced draw from the prepared official data.

    python -m authoring.sample [--src DIR] [--dest DIR] [--train 3000] [--test 1000] [--seed N]

For authors only (the sample is committed; learners never draw it). Reproducible: the same
official data and seed give the same arrays (the .npz files differ only in zip timestamps).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from workbook.fashion_data import official
from workbook.fashion_data.cli import report_errors
from workbook.fashion_data.messages import DataError, log, shown
from workbook.fashion_data.preparation import preparation_lock
from workbook.fashion_data.prepared import (
    CLASS_NAMES,
    DEFAULT_DIR,
    SAMPLE_DIR,
    describe,
    is_official_manifest,
    load,
    prepare_command,
    read_manifest,
    remove_stale_temp_dirs,
    verify,
    write_prepared,
)

SAMPLE_SEED = 20190101


def balanced_sample(
    images: np.ndarray, labels: np.ndarray, per_class: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """per_class images of each class, drawn with rng, classes shuffled together."""
    picked = []
    for label in range(len(CLASS_NAMES)):
        candidates = np.flatnonzero(labels == label)
        if len(candidates) < per_class:
            raise DataError(f"class {label} has only {len(candidates)} images, {per_class} needed")
        picked.append(np.sort(rng.choice(candidates, per_class, replace=False)))
    index = rng.permutation(np.concatenate(picked))
    return images[index], labels[index]


def make_sample(
    src: Path = DEFAULT_DIR,
    dest: Path = SAMPLE_DIR,
    n_train: int = 3000,
    n_test: int = 1000,
    seed: int = SAMPLE_SEED,
    verbose: bool = True,
) -> Path:
    """Write a class-balanced sample of the official data prepared in src to dest; returns dest."""
    src, dest = Path(src).absolute(), Path(dest).absolute()
    problems = verify(src)
    if problems:
        raise DataError("\n".join(problems))
    parent = read_manifest(src)
    if not is_official_manifest(parent):
        raise DataError(
            f"{shown(src)} holds {describe(parent)}, not the official files. "
            f"Fix: {prepare_command(src)}"
        )
    (x_train, y_train), (x_test, y_test) = load(src)
    rng = np.random.default_rng(seed)
    per_class = {"train": n_train // len(CLASS_NAMES), "test": n_test // len(CLASS_NAMES)}
    splits = {
        "train": balanced_sample(x_train, y_train, per_class["train"], rng),
        "test": balanced_sample(x_test, y_test, per_class["test"], rng),
    }
    about = {
        "source": f"sample of the official Fashion-MNIST, from {parent['source']}",
        "source_detail": parent["source_detail"],
        "split": {
            "method": "python -m authoring.sample: per class, a seeded numpy default_rng "
            "choice from the official training set, then from the official test set",
            "seed": seed,
            "per_class_train": per_class["train"],
            "per_class_test": per_class["test"],
            "drawn_from": parent["counts"],
            "official_idx_sha256": parent.get("official_idx_sha256", official.IDX_SHA256),
        },
    }
    with preparation_lock():
        remove_stale_temp_dirs(dest.parent)
        write_prepared(splits, dest, about)
    log(
        verbose,
        f"Wrote a sample of {n_train:,} training and {n_test:,} test images "
        f"({per_class['train']} + {per_class['test']} per class) to {shown(dest)}",
    )
    return dest


def multiple_of_classes(text: str) -> int:
    """An argparse type: a positive multiple of 10, so every class gets the same share."""
    value = int(text)
    if value <= 0 or value % len(CLASS_NAMES):
        raise argparse.ArgumentTypeError(f"{text} is not a positive multiple of {len(CLASS_NAMES)}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m authoring.sample",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--src", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--dest", type=Path, default=SAMPLE_DIR)
    parser.add_argument("--train", type=multiple_of_classes, default=3000, help="training images")
    parser.add_argument("--test", type=multiple_of_classes, default=1000, help="test images")
    parser.add_argument("--seed", type=int, default=SAMPLE_SEED)
    args = parser.parse_args(argv)
    return report_errors(
        lambda: make_sample(args.src, args.dest, args.train, args.test, args.seed) and 0
    )


if __name__ == "__main__":
    sys.exit(main())

"""The script options of each benchmark, full size or tiny (seconds; what the tests run)."""

from __future__ import annotations

from workbook.paths import REPO

SAMPLE = str(REPO / "data" / "sample")

# Tiny: a small WideResNet on part of the committed sample, a few steps: checks the plumbing.
TINY_MODEL = ["--data-dir", SAMPLE, "--train-images", "1024", "--depth", "10", "--width", "1"]


def throughput_args(tiny: bool) -> list:
    """Two short epochs (the first builds the graph and is not counted); little validation."""
    if tiny:
        return [*TINY_MODEL, "--test-images", "64", "--epochs", "2", "--steps-per-epoch", "8"]
    # The CPU preset's WRN-16-1 on the full prepared data; 300 steps of its 64 images per epoch
    # (the second epoch, measured, takes 15-30 s: shorter windows made the spread larger than the
    # effect).
    return ["--preset", "cpu", "--test-images", "320", "--epochs", "2", "--steps-per-epoch", "300"]


def accuracy_args(tiny: bool) -> list:
    """Training to the end: the CPU preset (5 epochs of all 60,000 images), or a tiny run."""
    if tiny:
        return [*TINY_MODEL, "--test-images", "128", "--epochs", "2", "--steps-per-epoch", "8"]
    return ["--preset", "cpu"]


# Seconds one benchmarked run may take before it is stopped and the benchmark fails with its log
# (a full accuracy run takes about 13 minutes on 2 cores; a tiny one seconds).
FULL_RUN_TIMEOUT_S = 3600
TINY_RUN_TIMEOUT_S = 600


def run_timeout(tiny: bool) -> float:
    return TINY_RUN_TIMEOUT_S if tiny else FULL_RUN_TIMEOUT_S

"""How long a run will take, from this machine's own measured speed, never from a constant.

    so_far(run_dir)                     notebook 00's peek at the running baseline
    short_runs(logs_dir, images)        notebook 19's two short runs, from notebook 13's pace

A run's pace is read from its own folder (workbook.comparison.read_run: the epochs it has
finished, its start-up) and the number of epochs from its log's Keras progress ("Epoch 2/5").
"""

from __future__ import annotations

import re
from pathlib import Path

from workbook import comparison
from workbook.runner.command import RAW_LOG_NAME

EPOCH_LINE = re.compile(r"Epoch (\d+)/(\d+)")


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 100 else f"{seconds / 60:.1f} min"


def planned_epochs(run_dir: Path) -> int | None:
    """The epochs the run was started for, from its log's last "Epoch i/n" (None: none yet)."""
    log = Path(run_dir) / RAW_LOG_NAME
    found = EPOCH_LINE.findall(log.read_text(errors="replace")) if log.is_file() else []
    return int(found[-1][1]) if found else None


def so_far(run_dir: str | Path, label: str = "Your baseline") -> str:
    """Where a run is and when it will end, at its own pace so far: its later epochs' mean (its
    first epoch's time while it has only one; the first also builds the graph, so that one is
    on the long side), plus its own start-up and, for the end, the evaluation's time as the
    finished run will show it (unknown until then, so left out and said)."""
    try:
        run = comparison.read_run(run_dir)
    except comparison.NotTimed:
        return (f"{label}: no epoch has finished yet, so no estimate from this machine yet; "
                "run this cell again in a minute or two.")
    epochs = planned_epochs(run_dir) or run.epochs_trained
    done = run.epochs_trained
    since_launch = comparison.run_seconds(run)
    if run.finished and run.after_training is not None and since_launch is not None:
        return (f"{label} has finished: {_minutes(since_launch)} from its launch to its end, "
                f"{_minutes(run.training)} of it training ({done} epochs).")
    first, later = comparison.epoch_split(run)
    pace = later if later is not None else first
    left = pace * (epochs - done)
    start = run.start_up or 0.0
    text = (f"{label}: epoch {done} of {epochs} done, {_minutes(start + run.training)} after its "
            f"launch; at its own pace ({pace:.0f} s per epoch"
            + (", its first epoch's, which also built the graph" if later is None else "")
            + f") the training ends in about {_minutes(left)}, about "
            f"{_minutes(start + run.training + left)} after the launch, then the test set's "
            "evaluation.")
    return text


def short_runs(logs_dir: Path, images_one: int, images_two: int, batch: int) -> str:
    """Notebook 19's two short runs, from notebook 13's runs on this machine: their steps at
    notebook 13's images/s (64 images a step; at `batch` a step is slower per image, so this is
    the short side) plus each run's start-up there."""
    pair = comparison.newest_pair(Path(logs_dir))
    if pair is None:
        return ("No runs of notebook 13 yet, so no estimate from this machine: the two runs "
                "train for seconds to minutes, each after its start-up.")
    reference, workers = pair
    if not reference.images_per_second or not workers.images_per_second:
        return ""
    one = (reference.start_up or 0) + images_one / reference.images_per_second
    two = (workers.start_up or 0) + images_two / workers.images_per_second
    return (f"Estimate from notebook 13's runs on this machine: about {_minutes(one)} for the "
            f"1-worker run and {_minutes(two)} for the 2 workers (their steps at notebook 13's "
            f"images/s, {reference.images_per_second:,.0f} and "
            f"{workers.images_per_second:,.0f}, plus its start-up; {batch} images a step "
            "instead of 64 make them slower per image, so expect somewhat more).")

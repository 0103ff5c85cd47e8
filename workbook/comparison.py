"""Comparison: training runs timed the same way, from the same events, and said in words.

Every run is timed from what it left in its log folder, whoever started it and in which kernel:

- started, ended: the runner's record of the run (run.json), when the launcher started and
  when its last process was gone;
- the end of each epoch: the wall time of the epoch's TensorBoard scalars, which the script
  writes at the end of every epoch (after validation and the checkpoint);
- the start of the first epoch: its end minus the epoch_seconds the script measured for it.

From these, three times that never overlap:

    start-up        started -> the first epoch's start (launch, imports, data, model, hvd.init)
    training        the first epoch's start -> the last epoch's end (steps, validation,
                    checkpoints; the first step also builds the graph)
    after training  the last epoch's end -> ended (evaluation on the test set, report, exit)

speed_up() is the one ratio: the table, the plot's last points, the verdict and the TensorBoard
chart written by write_tensorboard_timing() all come from the same RunTimes, so they agree.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from workbook.facts import parse_result
from workbook.runner.command import RAW_LOG_NAME, RUN_RECORD_NAME, plural

# Speed ratios this close to 1 are "about the same": two runs of one script differ that much.
SAME_SPEED = 0.03
TIMING_FOLDER = "timing"  # the TensorBoard run write_tensorboard_timing() adds to a run's folder
TIMING_TAG = "training_minutes"


class NotTimed(ValueError):
    """A run folder without what timing needs (no finished epoch, no record of its start)."""


@dataclass
class RunTimes:
    """One run, timed. Times in seconds; epoch_ends since the start of the first epoch."""

    label: str
    hardware: str  # workers, threads or cores each, GPUs: what the run had
    workers: int
    cores_per_worker: int | None  # its pinned share; None: not pinned (the baseline)
    epochs: list[int]  # Keras's epoch numbers (0-based), in order
    epoch_ends: list[float]
    accuracy: list[float | None]  # validation accuracy after each epoch
    start_up: float | None  # None when the start was not recorded
    training: float
    after_training: float | None  # None while the run goes on, or when its end is unknown
    images_per_second: float | None  # all workers together, epochs after the first
    test_accuracy: float | None = None
    busy_others: list[str] = field(default_factory=list)  # other processes that used the CPU
    finished: bool = True
    run_dir: Path | None = None
    epoch_wall_times: list[float] = field(default_factory=list)  # time.time() of each end

    @property
    def epochs_trained(self) -> int:
        return len(self.epochs)

    @property
    def seconds_per_epoch(self) -> float:
        return self.training / max(1, self.epochs_trained)


# ---------------------------------------------------------------------------------------------
# The time accounting
# ---------------------------------------------------------------------------------------------


def account(
    started: float | None,
    ended: float | None,
    epoch_end_walls: list[float],
    first_epoch_seconds: float,
) -> tuple[float | None, float, float | None, list[float]]:
    """(start-up, training, after training, each epoch's end since training started).

    started, ended and epoch_end_walls are time.time() values; first_epoch_seconds is how long
    the script measured its first epoch."""
    if not epoch_end_walls:
        raise NotTimed("no epoch has finished")
    training_start = epoch_end_walls[0] - first_epoch_seconds
    ends = [wall - training_start for wall in epoch_end_walls]
    start_up = training_start - started if started is not None else None
    after = ended - epoch_end_walls[-1] if ended is not None else None
    return start_up, ends[-1], after, ends


def speed_up(reference: RunTimes, run: RunTimes) -> float:
    """How many times faster `run` trained than `reference`: the ratio of their training times
    (per epoch, so runs of different lengths still compare; the same when they match)."""
    return reference.seconds_per_epoch / run.seconds_per_epoch


def scaling_efficiency(reference: RunTimes, run: RunTimes) -> float | None:
    """speed_up over the ratio of workers, when every worker of both had the same share of the
    machine (1.0: N workers train N times as fast); None when the shares differ."""
    if reference.cores_per_worker is None or reference.cores_per_worker != run.cores_per_worker:
        return None
    return speed_up(reference, run) / (run.workers / reference.workers)


# ---------------------------------------------------------------------------------------------
# Reading a run's folder
# ---------------------------------------------------------------------------------------------


def epoch_scalars(run_dir: Path, split: str, tag: str) -> list[tuple[float, int, float]]:
    """[(wall time, epoch, value)] of one scalar Keras's TensorBoard callback logged, in the
    order written (split: train or validation)."""
    import logging

    from tensorboard.backend.event_processing.event_accumulator import TENSORS, EventAccumulator
    from tensorboard.util.tensor_util import make_ndarray

    logging.getLogger("tensorboard").setLevel(logging.ERROR)  # no notes about the graph
    path = Path(run_dir) / split
    if not path.is_dir():
        return []
    events = EventAccumulator(str(path), size_guidance={TENSORS: 0})
    events.Reload()
    if tag not in events.Tags().get("tensors", []):
        return []
    return [(e.wall_time, e.step, float(make_ndarray(e.tensor_proto))) for e in events.Tensors(tag)]


def read_record(run_dir: Path) -> dict:
    """The runner's run.json; for a run of an older runner, what its log's header says."""
    path = Path(run_dir) / RUN_RECORD_NAME
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    log = Path(run_dir) / RAW_LOG_NAME
    if not log.is_file():
        return {}
    head = log.read_text(errors="replace").splitlines()[:3]
    record = {"command": head[0][2:] if head else ""}
    if len(head) > 1:
        record["layout"] = head[1][2:]
    for line in head:
        if line.startswith("# started "):
            started = datetime.strptime(line[len("# started ") :], "%Y-%m-%d %H:%M:%S")
            record["started"] = started.timestamp()
    return record


def last_result(run_dir: Path) -> dict:
    """The metrics of the last `RESULT {...}` line of the run's log ({} if none)."""
    log = Path(run_dir) / RAW_LOG_NAME
    if not log.is_file():
        return {}
    try:
        return parse_result(log.read_text(errors="replace"))
    except ValueError:
        return {}


def hardware_of(record: dict) -> str:
    """What a run had, from its record, in a few words: workers, cores or threads each, GPUs."""
    gpus = record.get("gpus") or 0
    gpu_text = f"one GPU each, of {gpus}" if gpus else "no GPU"
    cores, threads = record.get("cores"), record.get("threads_per_worker")
    workers = record.get("workers")
    if record.get("launcher") == "python" and not threads:
        return f"1 process without Horovod, all {cores or 'the'} cores; {gpu_text}"
    if record.get("pinned") and workers == 1:
        return f"1 worker pinned to {plural(threads, 'core')} of {cores}; {gpu_text}"
    if record.get("pinned"):
        return f"{workers} workers pinned to {plural(threads, 'core')} each, of {cores}; {gpu_text}"
    return f"{record.get('layout') or 'unknown layout'}; {gpu_text}"


def read_run(run_dir: str | Path, label: str | None = None) -> RunTimes:
    """A run timed from its folder (see the module's docstring); NotTimed if it cannot be."""
    run_dir = Path(run_dir)
    record = read_record(run_dir)
    started, ended = record.get("started"), record.get("ended")
    seconds = epoch_scalars(run_dir, "train", "epoch_epoch_seconds")
    if started is not None:  # a folder reused by a later launch: only this launch's epochs
        seconds = [s for s in seconds if s[0] >= started]
    if not seconds:
        raise NotTimed(f"{run_dir.name}: no finished epoch in its TensorBoard logs yet")
    start_up, training, after, ends = account(
        started, ended, [wall for wall, _, _ in seconds], seconds[0][2]
    )
    epochs = [epoch for _, epoch, _ in seconds]
    accuracy = dict((e, v) for w, e, v in epoch_scalars(run_dir, "validation", "epoch_accuracy")
                    if started is None or w >= started)
    speeds = [v for w, _, v in epoch_scalars(run_dir, "train", "epoch_images_per_second")
              if started is None or w >= started]
    steady = speeds[1:] or speeds  # the first epoch also builds the graph
    return RunTimes(
        label=label or run_dir.name,
        hardware=hardware_of(record),
        workers=record.get("workers") or 1,
        cores_per_worker=record.get("threads_per_worker") if record.get("pinned") else None,
        epochs=epochs,
        epoch_ends=ends,
        accuracy=[accuracy.get(epoch) for epoch in epochs],
        start_up=start_up,
        training=training,
        after_training=after,
        images_per_second=sum(steady) / len(steady) if steady else None,
        test_accuracy=last_result(run_dir).get("test_accuracy"),
        busy_others=list(record.get("busy_others") or []),
        finished=bool(record.get("ok", ended is not None)),
        run_dir=run_dir,
        epoch_wall_times=[wall for wall, _, _ in seconds],
    )


def newest_finished(logs_dir: Path, pattern: str) -> Path | None:
    """The newest run folder matching `pattern` (a glob) whose log has a RESULT line."""
    for folder in sorted(Path(logs_dir).glob(pattern), reverse=True):
        if folder.is_dir() and last_result(folder):
            return folder
    return None


# ---------------------------------------------------------------------------------------------
# What is shown: a table, a plot, TensorBoard, and words
# ---------------------------------------------------------------------------------------------


def table(runs: list[RunTimes], reference: RunTimes):
    """A pandas DataFrame, one row per run, with its speed against `reference`."""
    import pandas as pd

    def rounded(value, digits=1):
        return None if value is None else round(value, digits)

    rows = {
        run.label: {
            "hardware": run.hardware,
            "epochs": run.epochs_trained,
            "start-up (s)": rounded(run.start_up),
            "training (s)": rounded(run.training),
            "after training (s)": rounded(run.after_training),
            "images/s": rounded(run.images_per_second, 0),
            "validation accuracy": rounded(run.accuracy[-1], 4),
            "test accuracy": run.test_accuracy,
            f"speed vs {reference.label}": round(speed_up(reference, run), 2),
        }
        for run in runs
    }
    return pd.DataFrame.from_dict(rows, orient="index")


def plot(runs: list[RunTimes], ax=None):
    """Validation accuracy after each epoch against the training time so far (minutes)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    for run in runs:
        minutes = [end / 60 for end in run.epoch_ends]
        total = run.training / 60
        digits = 1 if total >= 1 else 2
        ax.plot(minutes, run.accuracy, "o-", label=f"{run.label}: {total:.{digits}f} min")
    ax.set_xlabel("training time (minutes, from the first epoch's start)")
    ax.set_ylabel("validation accuracy")
    ax.grid(alpha=0.3)
    ax.legend()
    return ax


def write_tensorboard_timing(run: RunTimes) -> Path:
    """Writes the run's training time after each epoch, in minutes, as TensorBoard's scalar
    `training_minutes` of the run `<run>/timing`: the same numbers as the table and the plot.
    Rewritten on every call."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    folder = Path(run.run_dir) / TIMING_FOLDER
    shutil.rmtree(folder, ignore_errors=True)
    writer = EventFileWriter(str(folder))
    for epoch, wall, end in zip(run.epochs, run.epoch_wall_times, run.epoch_ends):
        value = Summary.Value(tag=TIMING_TAG, simple_value=end / 60)
        writer.add_event(Event(wall_time=wall, step=epoch, summary=Summary(value=[value])))
    writer.close()
    return folder


def _seconds(value: float) -> str:
    """Seconds, as in the table; long ones also in minutes."""
    return f"{value:.1f} s" if abs(value) < 120 else f"{value:.1f} s ({value / 60:.1f} min)"


def verdict(reference: RunTimes, run: RunTimes) -> str:
    """What the comparison says, in words and with its numbers; a slow-down said plainly, with
    its reason as far as the measurements show it."""
    ratio = speed_up(reference, run)
    per_epoch = reference.epochs_trained != run.epochs_trained
    what = "per epoch" if per_epoch else f"for {plural(run.epochs_trained, 'epoch')}"
    mine = run.seconds_per_epoch if per_epoch else run.training
    theirs = reference.seconds_per_epoch if per_epoch else reference.training
    lines = [
        f"{run.label} ({run.hardware}): {_seconds(mine)} of training {what}.",
        f"{reference.label} ({reference.hardware}): {_seconds(theirs)}.",
    ]
    if ratio >= 1 + SAME_SPEED:
        lines.append(f"A speed-up: {run.label} trained {ratio:.2f}x as fast.")
        efficiency = scaling_efficiency(reference, run)
        if efficiency is not None and run.workers > reference.workers:
            lines.append(
                f"Scaling efficiency {efficiency:.2f}: {run.workers} workers with the same share "
                f"each would be {run.workers / reference.workers:.0f}x at best."
            )
    elif ratio > 1 - SAME_SPEED:
        lines.append(f"About the same speed: {ratio:.2f}x (differences under {SAME_SPEED:.0%} "
                     "are noise between two runs).")
    else:
        lines.append(
            f"A slow-down: {run.label} took {1 / ratio:.2f}x as long as {reference.label} "
            f"({_seconds(mine - theirs)} more), so its speed is {ratio:.2f}x."
        )
    if ratio < 1 + SAME_SPEED:
        lines.extend(_reasons(reference, run))
    for each in (reference, run):
        if each.busy_others:
            lines.append(
                f"Not a fair measure: during {each.label}, other processes used the CPU: "
                + "; ".join(each.busy_others)
                + ". Run it again when nothing else runs."
            )
    if not run.finished or not reference.finished:
        unfinished = [each.label for each in (reference, run) if not each.finished]
        lines.append(f"Not finished: {', '.join(unfinished)}; its times cover its finished epochs.")
    return "\n".join(lines)


def _reasons(reference: RunTimes, run: RunTimes) -> list[str]:
    """Why a run is no faster than its reference, as far as the numbers say."""
    reasons = []
    first, later = epoch_split(run)
    first_ref, later_ref = epoch_split(reference)
    if later is not None and later_ref is not None:
        pace = later_ref / later
        text = (
            f"Epoch by epoch: the first took {_seconds(first)} on {run.label}, "
            f"{_seconds(first_ref)} on {reference.label}; each later one {_seconds(later)} "
            f"against {_seconds(later_ref)} ({pace:.2f}x as fast)."
        )
        if pace >= 1 + SAME_SPEED and first > first_ref:
            text += (
                " The first epoch also builds the graph, and on several workers Horovod's "
                "first broadcast and negotiation: in a run this short, that decides."
            )
        reasons.append(text)
    if reference.images_per_second and run.images_per_second:
        per_worker = run.images_per_second / run.workers
        reference_per_worker = reference.images_per_second / reference.workers
        text = (
            f"During the training steps, {run.label} trained {run.images_per_second:.0f} "
            f"images/s in all, {per_worker:.0f} per worker; {reference.label} "
            f"{reference.images_per_second:.0f}"
        )
        text += f", {reference_per_worker:.0f} per worker." if reference.workers > 1 else "."
        if per_worker < reference_per_worker:
            text += (
                f" Each worker went at {per_worker / reference_per_worker:.0%} of the pace of "
                f"{reference.label}."
            )
        if run.images_per_second >= (1 + SAME_SPEED) * reference.images_per_second:
            text += (
                " So the steps were faster; the time went to the rest of the epochs "
                "(validation, checkpoints, the first epoch's set-up)."
            )
        reasons.append(text)
    if reference.cores_per_worker is None and run.cores_per_worker is not None:
        reasons.append(
            f"{reference.label} had all the cores in one process; {run.label} split them "
            f"among {run.workers} workers, {plural(run.cores_per_worker, 'core')} each: the same "
            "cores in total, and every step also waits for its allreduce. Data parallelism "
            "adds compute only with more devices: GPUs, or more machines."
        )
    elif scaling_efficiency(reference, run) is not None and run.workers > reference.workers:
        reasons.append(
            f"With a worker's share each, {run.workers} workers could approach "
            f"{run.workers / reference.workers:.0f}x; the rest goes to the allreduce of every "
            "step, to waiting for the slower worker, and to what the workers share besides "
            "their cores (memory bandwidth, caches). Notebook 19 measures where."
        )
    return reasons


def epoch_split(run: RunTimes) -> tuple[float, float | None]:
    """(the first epoch's seconds, the mean of the later ones' or None if there are none)."""
    durations = [b - a for a, b in zip([0.0, *run.epoch_ends], run.epoch_ends)]
    later = durations[1:]
    return durations[0], (sum(later) / len(later) if later else None)

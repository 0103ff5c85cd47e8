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

The training time splits further (workbook.speed.TimeParts): the first epoch's extra, the
training steps, and the time between the steps (validation, checkpoints, TensorBoard), from the
seconds of each epoch and of its steps that the script logs (epoch_seconds, step_seconds).

speed_up() is the one ratio of training times: the table, the verdict and the TensorBoard chart
written by write_tensorboard_timing() all come from the same RunTimes, so they agree. images/s,
the time to an accuracy and the scaling efficiency are workbook.speed's, as everywhere.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from workbook import speed
from workbook.facts import parse_result
from workbook.runner.command import RAW_LOG_NAME, RUN_RECORD_NAME
from workbook.runner.layout import plural
from workbook.runner.contention import SAMPLE_INTERVAL_S
from workbook.speed import SAME_SPEED, TimeParts, worst_case_slowdown

TARGET = 0.90  # the accuracy whose time the table, the plot and the verdict give
# Seconds by which two runs' time after training must differ for the verdict to name it.
AFTER_TRAINING_NOTED_S = 10.0
# Seconds of model.fit's end (fit_end_wait) from which the estimates name it.
FIT_END_NOTED_S = 2.0
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
    images_per_second: float | None  # workbook.speed's: steps only, epochs after the first
    test_accuracy: float | None = None
    busy_others: list[str] = field(default_factory=list)  # other processes that used the CPU
    finished: bool = True
    run_dir: Path | None = None
    epoch_wall_times: list[float] = field(default_factory=list)  # time.time() of each end
    parts: TimeParts | None = None  # the run's time in parts (None: not measured)
    # Core-seconds that other processes used during the training; None: not recorded.
    others_core_seconds: float | None = None
    cores: int | None = None  # the machine's usable cores, as the runner saw them

    @property
    def launch_ends(self) -> list[float] | None:
        """Each epoch's end in seconds since the launch (None when the start is unknown)."""
        if self.start_up is None:
            return None
        return [self.start_up + end for end in self.epoch_ends]

    def time_to(self, target: float = TARGET) -> float | None:
        """workbook.speed's time to `target`: from the launch to the end of the first epoch that
        reached it (None: not reached, or the start is unknown)."""
        ends = self.launch_ends
        return None if ends is None else speed.time_to_accuracy(
            list(zip(ends, self.accuracy)), target)

    @property
    def images_label(self) -> str:
        return speed.images_per_second_label(self.epochs_trained, self.epochs[0] + 1)

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


def training_for(run: RunTimes, epochs: int) -> float:
    """The run's training time over `epochs` epochs: its own when it trained as many; else its
    first epoch plus its later epochs' mean for the others (a run stopped early, projected)."""
    if epochs == run.epochs_trained:
        return run.training
    first, later = epoch_split(run)
    return first + (later if later is not None else first) * (epochs - 1)


def speed_up(reference: RunTimes, run: RunTimes) -> float:
    """How many times faster `run` trained than `reference`: the ratio of their training times,
    over the same number of epochs (the longer run's; the shorter one projected by
    training_for, so that a run stopped early still compares)."""
    epochs = max(reference.epochs_trained, run.epochs_trained)
    return training_for(reference, epochs) / training_for(run, epochs)


def scaling_efficiency(reference: RunTimes, run: RunTimes) -> float | None:
    """workbook.speed's scaling efficiency: images/s over the ratio of workers, when every
    worker of both had the same share of the machine; None when the shares differ."""
    if reference.cores_per_worker is None or reference.cores_per_worker != run.cores_per_worker:
        return None
    if not reference.images_per_second or not run.images_per_second:
        return None
    return speed.scaling_efficiency(run.images_per_second, run.workers / reference.workers,
                                    reference.images_per_second)


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
    """The runner's run.json ({} if the folder has none: not a run of the runner)."""
    path = Path(run_dir) / RUN_RECORD_NAME
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


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
    steps = [v for w, _, v in epoch_scalars(run_dir, "train", "epoch_step_seconds")
             if started is None or w >= started]
    walls = [wall for wall, _, _ in seconds]
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
        images_per_second=speed.images_per_second(speeds),
        test_accuracy=last_result(run_dir).get("test_accuracy"),
        busy_others=list(record.get("busy_others") or []),
        finished=bool(record.get("ok", ended is not None)),
        run_dir=run_dir,
        epoch_wall_times=walls,
        parts=speed.time_parts(start_up, after, [s for _, _, s in seconds], steps),
        others_core_seconds=others_during(record, walls[0] - seconds[0][2], walls[-1]),
        cores=(record.get("contention") or {}).get("cores") or record.get("cores"),
    )


def others_during(record: dict, begin: float, end: float) -> float | None:
    """Core-seconds other processes used between two wall times, from the runner's samples
    (each covers the seconds before it); None when the run has no samples."""
    samples = (record.get("contention") or {}).get("samples")
    if not samples:
        return None
    # A sample taken just after `end` still covers mostly time before it.
    return sum(used for wall, used in samples if begin < wall <= end + SAMPLE_INTERVAL_S / 2)


def newest_finished(logs_dir: Path, pattern: str) -> Path | None:
    """The newest run folder matching `pattern` (a glob) whose log has a RESULT line."""
    for folder in sorted(Path(logs_dir).glob(pattern), reverse=True):
        if folder.is_dir() and last_result(folder):
            return folder
    return None


def newest_pair(logs_dir: Path, stem: str = "fashion_mnist") -> tuple[RunTimes, RunTimes] | None:
    """Notebook 13's newest finished pair of runs of `stem`: (1 worker with one worker's share,
    N workers with that share each), as notebook 19 sets them beside its own; None if none."""
    found = {}
    for folder in Path(logs_dir).glob(f"{stem}-np*"):
        record = read_record(folder)
        if not record.get("ok") or not record.get("pinned"):
            continue
        one = record.get("workers") == 1
        if record.get("started", 0) > found.get(one, (0, None))[0]:
            found[one] = (record["started"], folder)
    if True not in found or False not in found:
        return None
    try:
        return (read_run(found[True][1], "notebook 13's reference"),
                read_run(found[False][1], "notebook 13's workers"))
    except NotTimed:
        return None


# ---------------------------------------------------------------------------------------------
# What is shown: a table, a plot, TensorBoard, and words
# ---------------------------------------------------------------------------------------------


def table(runs: list[RunTimes], reference: RunTimes, target: float = TARGET):
    """A pandas DataFrame, one row per run, with its speed against `reference`."""
    import pandas as pd

    def rounded(value, digits=1):
        """None stays None; 0 digits give a whole number (676, not 676.0)."""
        if value is None:
            return None
        return round(value) if digits == 0 else round(value, digits)

    epochs = max(run.epochs_trained for run in runs)
    rows = {}
    for run in runs:
        reached = run.time_to(target)
        rows[run.label] = {
            "hardware": run.hardware,
            "epochs": run.epochs_trained,
            "start-up (s)": rounded(run.start_up),
            "training (s)": rounded(run.training),
            # A run stopped early (the reference) counts as its first epoch plus its later
            # epochs' pace for the rest: the figure the speed column divides.
            f"training over {epochs} epochs (s; shorter runs projected)": rounded(
                training_for(run, epochs)),
            "after training (s)": rounded(run.after_training),
            speed.IMAGES_PER_SECOND_COLUMN: rounded(run.images_per_second, 0),
            f"to {target:.0%}, from the launch (s)": rounded(reached),
            "validation accuracy": rounded(run.accuracy[-1], 4),
            "test accuracy": run.test_accuracy,
            f"training speed vs {reference.label}": round(speed_up(reference, run), 2),
        }
    return _dashed(pd.DataFrame.from_dict(rows, orient="index"))


def plot(runs: list[RunTimes], ax=None, target: float = TARGET):
    """Validation accuracy after each epoch against the minutes since the launch (start-up
    included: workbook.speed's time to an accuracy), with the target as a line."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    for run in runs:
        ends = run.launch_ends or run.epoch_ends
        reached = run.time_to(target)
        label = (f"{run.label}: {target:.0%} at {reached / 60:.1f} min" if reached is not None
                 else f"{run.label}: not {target:.0%} in {plural(run.epochs_trained, 'epoch')}")
        ax.plot([end / 60 for end in ends], run.accuracy, "o-", label=label)
    ax.axhline(target, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("minutes since the launch (start-up included)")
    ax.set_ylabel("validation accuracy")
    ax.grid(alpha=0.3)
    # Below the axes, where it hides no point (inside, a walk's legend hid an epoch's dip).
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18))
    return ax


PART_COLORS = ("#8c959f", "#bf8700", "#1f6feb", "#cf222e", "#8250df")


def plot_parts(runs: list[RunTimes], ax=None):
    """A bar per run: its time from the launch to its end, in workbook.speed's parts (seconds).
    Runs without the script's step_seconds show their known parts only."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.8 + 0.7 * len(runs)))
    labels = [run.label for run in runs]
    left = [0.0] * len(runs)
    for index, name in enumerate(TimeParts.NAMES.values()):
        values = [dict(run.parts.items()).get(name) if run.parts else None for run in runs]
        widths = [value or 0.0 for value in values]
        bars = ax.barh(labels, widths, left=left, color=PART_COLORS[index], label=name)
        for bar, value in zip(bars, values):
            if value and value >= 12:
                ax.text(bar.get_x() + bar.get_width() / 2, bar.get_y() + bar.get_height() / 2,
                        f"{value:.0f}", ha="center", va="center", color="white", fontsize=8)
        left = [a + b for a, b in zip(left, widths)]
    ax.invert_yaxis()
    ax.set_xlabel("seconds from the launch to the end of the run")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35 if len(runs) < 3 else -0.25),
              ncol=5, fontsize=8, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return ax


def parts_table(runs: list[RunTimes]):
    """The bars' numbers, a row per run: the epochs it trained, then seconds (per epoch where
    it says so)."""
    import pandas as pd

    rows = {}
    for run in runs:
        parts = dict(run.parts.items()) if run.parts else {}
        n = run.epochs_trained
        # The measured epochs: the verdict projects a shorter run (the 2-epoch reference) to
        # the longest run's epochs, this table does not.
        row = {"epochs": n}
        row.update({name: (None if value is None else round(value, 1))
                    for name, value in parts.items()})
        if run.parts and run.parts.steps is not None:
            row["steps per epoch"] = round(run.parts.steps / n, 1)
            row["between the steps per epoch"] = round(run.parts.between_steps / n, 1)
        rows[run.label] = row
    return _dashed(pd.DataFrame.from_dict(rows, orient="index"))


def _dashed(frame):
    """The table with "-" for a figure a run lacks (the reference's time to 90%, the parts of a
    run without step times), where pandas would show NaN."""
    frame = frame.astype(object)
    return frame.where(frame.notna(), "-")


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


def kind(ratio: float) -> str:
    """The verdict a speed ratio gives: speed-up, about the same, or slow-down."""
    if ratio >= 1 + SAME_SPEED:
        return "speed-up"
    return "slow-down" if ratio <= 1 - SAME_SPEED else "about the same"


def verdict(reference: RunTimes, run: RunTimes, target: float = TARGET) -> str:
    """What the comparison says, in words and with its numbers: the ratio, the part of the time
    that made the difference, the time to `target`, and other processes' CPU when it could have
    changed the verdict."""
    ratio = speed_up(reference, run)
    epochs = max(reference.epochs_trained, run.epochs_trained)
    mine, theirs = training_for(run, epochs), training_for(reference, epochs)
    lines = []
    for each, seconds in ((run, mine), (reference, theirs)):
        text = f"{each.label} ({each.hardware}): {_seconds(seconds)} of training"
        if each is run:
            text += f" for {plural(epochs, 'epoch')}"
        if each.epochs_trained != epochs:
            text += (f" (it trained {plural(each.epochs_trained, 'epoch')}: its first, then its "
                     "later epochs' pace for the rest)")
        lines.append(text + ".")
    if kind(ratio) == "speed-up":
        lines.append(f"A speed-up: {run.label} trained {ratio:.2f}x as fast.")
        efficiency = scaling_efficiency(reference, run)
        if efficiency is not None and run.workers > reference.workers:
            lines.append(
                f"Scaling efficiency {efficiency:.2f} (images/s of the steps, "
                f"{run.images_per_second:.0f} against {run.workers / reference.workers:.0f} x "
                f"{reference.images_per_second:.0f}): {run.workers} workers with the same share "
                f"each would be {run.workers / reference.workers:.0f}x at best."
            )
    elif kind(ratio) == "about the same":
        lines.append(f"About the same speed: {ratio:.2f}x (differences under {SAME_SPEED:.0%} "
                     "are noise between two runs).")
    else:
        lines.append(
            f"A slow-down: {run.label} took {1 / ratio:.2f}x as long as {reference.label} "
            f"({_seconds(mine - theirs)} more), so its speed is {ratio:.2f}x."
        )
    lines.extend(_where(reference, run, epochs))
    lines.extend(_to_target(reference, run, target))
    lines.extend(_after(reference, run, target))
    if kind(ratio) != "speed-up":
        lines.extend(_why_not_faster(reference, run))
    for each in (reference, run):
        lines.extend(_fairness(each, ratio, is_run=each is run))
    if not run.finished or not reference.finished:
        unfinished = [each.label for each in (reference, run) if not each.finished]
        lines.append(f"Not finished: {', '.join(unfinished)}; its times cover its finished epochs.")
    return "\n".join(lines)


def split_training(run: RunTimes, epochs: int) -> dict | None:
    """The run's training over `epochs` epochs in parts: steps, between the steps, the first
    epoch's extra (seconds; a run of other length scaled per epoch). None: not measured."""
    parts = run.parts
    if parts is None or parts.steps is None:
        return None
    scale = epochs / run.epochs_trained
    return {"steps": parts.steps * scale, "between": parts.between_steps * scale,
            "extra": parts.first_epoch_extra}


def _where(reference: RunTimes, run: RunTimes, epochs: int) -> list[str]:
    """Which part of the training time made the difference: the steps, or the rest."""
    mine, theirs = split_training(run, epochs), split_training(reference, epochs)
    if mine is None or theirs is None:
        return _by_epoch(reference, run)
    steps = mine["steps"] - theirs["steps"]
    outside = (mine["between"] + mine["extra"]) - (theirs["between"] + theirs["extra"])
    text = (
        f"Where the time went, over {plural(epochs, 'epoch')}: the training steps took "
        f"{_seconds(mine['steps'])} on {run.label} against {_seconds(theirs['steps'])} "
        f"({run.images_per_second:.0f} against {reference.images_per_second:.0f} images/s); "
        f"between the steps (validation, checkpoints, TensorBoard) {_seconds(mine['between'])} "
        f"against {_seconds(theirs['between'])}; the first epoch's extra (graph, first "
        f"broadcast) {_seconds(mine['extra'])} against {_seconds(theirs['extra'])}."
    )
    total = steps + outside
    if abs(total) < 0.5:
        return [text]
    # The part that moved the total most in its own direction.
    in_steps = steps * total > 0 and (abs(steps) >= abs(outside) or outside * total <= 0)
    part, there, rest = (("the training steps", steps, outside) if in_steps
                         else ("the time outside the steps", outside, steps))
    text += (f" What made the difference: {part}, {_seconds(abs(there))} "
             f"{'less' if there < 0 else 'more'} on {run.label} (the other part: "
             f"{_seconds(abs(rest))} {'less' if rest < 0 else 'more'}).")
    return [text]


def _to_target(reference: RunTimes, run: RunTimes, target: float) -> list[str]:
    mine, theirs = run.time_to(target), reference.time_to(target)
    if mine is None and theirs is None:
        return []
    text = f"To {target:.0%} validation accuracy, from the launch (start-up included): "
    if mine is not None and theirs is not None:
        ratio = theirs / mine
        text += (f"{run.label} {_seconds(mine)}, {reference.label} {_seconds(theirs)}: "
                 + (f"{ratio:.2f}x sooner." if ratio >= 1 else f"{1 / ratio:.2f}x later."))
    else:
        reached, missed = (run, reference) if mine is not None else (reference, run)
        text += (f"{reached.label} {_seconds(reached.time_to(target))}; {missed.label} did not "
                 f"reach it in its {plural(missed.epochs_trained, 'epoch')}.")
    return [text]


def _after(reference: RunTimes, run: RunTimes, target: float) -> list[str]:
    """The time after training, when it differs by enough to show in the bars: the verdict's
    training times and times to an accuracy leave it out, the learner's wait does not."""
    mine, theirs = run.after_training, reference.after_training
    if mine is None or theirs is None or abs(mine - theirs) < AFTER_TRAINING_NOTED_S:
        return []
    return [
        f"After training (the end of model.fit, the test-set evaluation, the per-class report, "
        f"the exit): {run.label} {_seconds(mine)}, {reference.label} {_seconds(theirs)}, "
        f"{_seconds(abs(mine - theirs))} {'more' if mine > theirs else 'less'}. It is not part "
        f"of the training time or the time to {target:.0%} above, but it is part of your wait: "
        "the bars below show it."
    ]


def _others_took(run: RunTimes) -> tuple[float, str] | None:
    """(the most other processes' CPU time can have slowed the run's training, what they took
    in words); None under a core-second or when not measured."""
    used, seconds = run.others_core_seconds, run.training  # sampled over the training
    if used is None or used < 1 or not seconds:
        return None
    cores = run.cores or 1
    return worst_case_slowdown(used, seconds), (
        f"other processes took {used / (cores * seconds):.0%} of the CPU during the training "
        f"of {run.label} ({plural(round(used), 'core-second')} in {seconds:.0f} s on "
        f"{plural(cores, 'core')})")


def _fairness(each: RunTimes, ratio: float, is_run: bool) -> list[str]:
    """A flag when other processes took enough CPU during the run's training to change the
    verdict (each core-second can cost synchronized workers a second: speed's worst case);
    a note when they took some, but too little."""
    if each.others_core_seconds is None:  # no CPU samples (a short run): the runner's findings
        if not each.busy_others:
            return []
        return [f"Not a fair measure: during {each.label}, other processes used the CPU: "
                + "; ".join(each.busy_others) + ". Run it again when nothing else runs."]
    taken = _others_took(each)
    if taken is None:
        return []
    worst, what = taken
    before = kind(ratio)
    adjusted = (ratio / (1 - worst) if is_run else ratio * (1 - worst)) if worst < 1 else None
    after = kind(adjusted) if adjusted is not None else None
    # Only a clear verdict (a speed-up or a slow-down) that the other processes could have
    # made is not a fair measure. "About the same" already says the runs are too close to
    # call; a few percent could tip it either way, and that is said, not flagged.
    if after is None or (before != "about the same" and after != before):
        names = [b for b in each.busy_others if b.startswith("`")]
        return [f"Not a fair measure: {what}; without them it could have been up to "
                f"{worst:.0%} faster, enough to change this verdict"
                + (f" ({'; '.join(names)})" if names else "")
                + ". Run it again when nothing else runs."]
    if after != before:
        return [f"{what[0].upper()}{what[1:]}: it could have been up to {worst:.0%} faster, "
                f"which would tip this close call to a {after} of at most "
                f"{max(adjusted, 1 / adjusted):.2f}x."]
    return [f"{what[0].upper()}{what[1:]}: it could have been up to {worst:.0%} faster, which "
            "would not change this verdict."]


# A figure with no verdict (notebook 19's efficiency) is called not a fair measure only when
# other processes could have slowed its run by this much; less is said as what it could cost.
UNFAIR_SLOWDOWN = 0.10


def contention_note(run: RunTimes) -> str | None:
    """What other processes' CPU time during `run` means for its images/s, in one line (None:
    under a core-second, or not measured)."""
    taken = _others_took(run)
    if taken is None:
        return None
    worst, what = taken
    if worst >= UNFAIR_SLOWDOWN:
        return (f"Not a fair measure: {what}; without them its images/s could have been up to "
                f"{worst:.0%} higher. Run it again when nothing else runs.")
    return f"{what[0].upper()}{what[1:]}: its images/s could have been up to {worst:.0%} higher."


def _by_epoch(reference: RunTimes, run: RunTimes) -> list[str]:
    """For runs whose script logs no step_seconds: the first epoch against the later ones."""
    first, later = epoch_split(run)
    first_ref, later_ref = epoch_split(reference)
    if later is None or later_ref is None:
        return []
    return [
        f"Epoch by epoch: the first took {_seconds(first)} on {run.label}, "
        f"{_seconds(first_ref)} on {reference.label}; each later one {_seconds(later)} "
        f"against {_seconds(later_ref)} ({later_ref / later:.2f}x as fast)."
    ]


def _why_not_faster(reference: RunTimes, run: RunTimes) -> list[str]:
    """Why a run is no faster than its reference, as far as the numbers say."""
    reasons = []
    steps_slower = (reference.images_per_second and run.images_per_second
                    and run.images_per_second < (1 - SAME_SPEED) * reference.images_per_second)
    if scaling_efficiency(reference, run) is not None and run.workers > reference.workers:
        per_worker = run.images_per_second / run.workers
        reference_per_worker = reference.images_per_second / reference.workers
        if per_worker < reference_per_worker:
            reasons.append(f"Each worker went at {per_worker / reference_per_worker:.0%} of the "
                           f"pace of {reference.label} during the steps.")
    if reference.cores_per_worker is None and run.cores_per_worker is not None:
        text = (
            f"{reference.label} had all the cores in one process; {run.label} split them "
            f"among {run.workers} workers, {plural(run.cores_per_worker, 'core')} each: the same "
            "cores in total. Data parallelism adds compute only with more devices: GPUs, or "
            "more machines."
        )
        if steps_slower:
            text += " Every step also waits for its allreduce (notebook 19 measures it)."
        reasons.append(text)
    elif scaling_efficiency(reference, run) is not None and run.workers > reference.workers:
        reasons.append(
            f"With a worker's share each, {run.workers} workers could approach "
            f"{run.workers / reference.workers:.0f}x; the rest goes to the allreduce of every "
            "step, to waiting for the slower worker, to what the workers share besides their "
            "cores (memory bandwidth, caches), and to the time outside the steps. Notebook 19 "
            "measures the steps' part."
        )
    return reasons


def epoch_split(run: RunTimes) -> tuple[float, float | None]:
    """(the first epoch's seconds, the mean of the later ones' or None if there are none)."""
    durations = [b - a for a, b in zip([0.0, *run.epoch_ends], run.epoch_ends)]
    later = durations[1:]
    return durations[0], (sum(later) / len(later) if later else None)


# ---------------------------------------------------------------------------------------------
# A run's whole time and model.fit's end (the estimates are in workbook.estimates)
# ---------------------------------------------------------------------------------------------


def run_seconds(run: RunTimes) -> float | None:
    """From the launch to the end of the run (None when the start or end is unknown)."""
    if run.start_up is None or run.after_training is None:
        return None
    return run.start_up + run.training + run.after_training


def fit_end_wait(run: RunTimes) -> float | None:
    """Seconds model.fit took beyond its epochs (None: not known): the script's own time in
    model.fit (its RESULT line's train_seconds) less the training time of its TensorBoard
    scalars. Nearly all of it is after the last epoch: model.fit then deletes the training
    data's iterator, which waits for tf.data's autotuner thread to wake up, at growing
    intervals of up to a minute, so it varies from run to run (issue 31, measured per rank:
    6.0-57.5 s after on_train_end with the training data autotuned, 0.04-0.05 s without; the
    workbook's script has turned the autotuner off since, a learner's older copy may not)."""
    if run.run_dir is None:
        return None
    seconds = last_result(run.run_dir).get("train_seconds")
    if seconds is None or run.epochs_trained != len(run.epoch_ends):
        return None
    return max(0.0, float(seconds) - run.training)

"""Run tables: the run_distributed notebook's runs as tables, plots and a TensorBoard chart, all
from the same RunTimes (workbook.run_times), so that every figure agrees with the verdict's.

    table(runs, reference)          a row per run: its times, images/s, accuracy, speed-up
    plot(runs)                      validation accuracy against the minutes since the launch
    plot_parts(runs)                a bar per run, its time in workbook.speed's parts
    parts_table(runs)               the bars' numbers
    write_tensorboard_timing(run)   the training minutes after each epoch, for TensorBoard
"""

from __future__ import annotations

import shutil
from pathlib import Path

from workbook import speed
from workbook.prose import plural
from workbook.run_times import TARGET, RunTimes, speed_up, training_for
from workbook.speed import TimeParts

TIMING_FOLDER = "timing"  # the TensorBoard run write_tensorboard_timing() adds to a run's folder
TIMING_TAG = "training_minutes"


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
                training_for(run, epochs)
            ),
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
        label = (
            f"{run.label}: {target:.0%} at {reached / 60:.1f} min"
            if reached is not None
            else f"{run.label}: not {target:.0%} in {plural(run.epochs_trained, 'epoch')}"
        )
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
                ax.text(
                    bar.get_x() + bar.get_width() / 2,
                    bar.get_y() + bar.get_height() / 2,
                    f"{value:.0f}",
                    ha="center",
                    va="center",
                    color="white",
                    fontsize=8,
                )
        left = [a + b for a, b in zip(left, widths)]
    ax.invert_yaxis()
    ax.set_xlabel("seconds from the launch to the end of the run")
    ax.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, -0.35 if len(runs) < 3 else -0.25),
        ncol=5,
        fontsize=8,
        frameon=False,
    )
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
        row.update(
            {name: (None if value is None else round(value, 1)) for name, value in parts.items()}
        )
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

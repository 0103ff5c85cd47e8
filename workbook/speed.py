"""Speed: the one vocabulary of how fast a training run went, and where its time went.

Every figure of speed the workbook shows (the runner's summary, the run notebook and the
timeline's, the benchmarks and the README they write) is one of these, computed here, and
labelled with the label given here:

images/s
    the images that the training steps of an epoch trained (all workers together), over the
    time of those steps alone (validation, checkpoints and TensorBoard writes left out), averaged
    over the epochs after the first: the first also builds TensorFlow's graph and, on several
    workers, makes Horovod's first broadcast. A run of one epoch has only that one.
time to an accuracy
    seconds from the launch (start-up included) to the end of the first epoch whose validation
    accuracy reached the target: what the learner waits for.
scaling efficiency
    the images/s of N workers over N times the images/s of one worker with the same share of
    the machine (1.0: N workers train N times as fast).
share of the machine's ceiling
    the images/s of N Horovod workers over those of N separate processes without Horovod on the
    same cores, at the same time: what is left for Horovod once the machine's own limits
    (caches, memory bandwidth, clock) are taken out.

And a run's time, from the launch to its end, in parts that never overlap (TimeParts):
start-up, the first epoch's extra (graph, first broadcast), the training steps, the time
between the steps (validation, checkpoints, TensorBoard), and after training (evaluation, exit).
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import mean

# Speed ratios this close to 1 are "about the same": two runs of one script differ that much.
SAME_SPEED = 0.03

IMAGES_PER_SECOND = "images/s"
# A column of runs of different lengths: each counts the epochs after its first.
IMAGES_PER_SECOND_COLUMN = "images/s (steps, epochs after the first)"
TIME_TO_ACCURACY = "time to {target:.0%} (from the launch)"
# What the two ratios divide, for their labels: `scaling efficiency (...)`.
SCALING_EFFICIENCY = "images/s of N workers over N x one worker's, the same share each"
CEILING_SHARE = "images/s of N Horovod workers over N separate processes' on the same cores"


def steady(per_epoch: list) -> list:
    """The epochs that count for images/s: all after the first; the first if it is alone."""
    return list(per_epoch[1:] or per_epoch)


def images_per_second(per_epoch: list[float]) -> float | None:
    """images/s (see the module's docstring) from the script's images/s of each epoch."""
    counted = steady(per_epoch)
    return mean(counted) if counted else None


def epochs_counted(epochs: int, first: int = 1) -> str:
    """Which epochs images/s counts, for its label: `epochs 2-5`, `epoch 2`, `epoch 1`."""
    last = first + epochs - 1
    if epochs <= 1:
        return f"epoch {first}"
    return f"epoch {last}" if epochs == 2 else f"epochs {first + 1}-{last}"


def images_per_second_label(epochs: int, first: int = 1) -> str:
    """`images/s (steps, epochs 2-5)`: the label wherever images/s is shown."""
    return f"{IMAGES_PER_SECOND} (steps, {epochs_counted(epochs, first)})"


def time_to_accuracy(curve: list[tuple[float, float]], target: float) -> float | None:
    """Seconds since the launch at the end of the first epoch whose validation accuracy reached
    `target`; curve: [(seconds since the launch, accuracy)] in epoch order. None: never."""
    return next(
        (seconds for seconds, accuracy in curve if accuracy is not None and accuracy >= target),
        None,
    )


def scaling_efficiency(rate: float, workers: int, one_worker_rate: float) -> float:
    """images/s of `workers` workers over `workers` x one worker's (with the same share)."""
    return rate / (workers * one_worker_rate)


def ceiling_share(horovod_rate: float, separate_rate: float) -> float:
    """images/s of N Horovod workers over N separate processes' on the same cores."""
    return horovod_rate / separate_rate


@dataclass
class TimeParts:
    """A run's time from the launch to its end, in parts that never overlap (seconds).

    start_up: launch -> the first epoch's start (workers, imports, hvd.init, data, model)
    first_epoch_extra: the first epoch's steps beyond a later epoch's (graph building, the first
        broadcast, filling the shuffle buffer)
    steps: the training steps, at the pace of the later epochs
    between_steps: the rest of the epochs (validation, checkpoints, TensorBoard writes, metric
        averaging)
    after_training: the last epoch's end -> the run's end (test-set evaluation, report, exit)
    None: not known (no record of the start or end; a script that does not log its steps' time).
    """

    start_up: float | None
    first_epoch_extra: float | None
    steps: float | None
    between_steps: float | None
    after_training: float | None

    NAMES = {
        "start_up": "start-up",
        "first_epoch_extra": "first epoch's extra",
        "steps": "training steps",
        "between_steps": "between the steps",
        "after_training": "after training",
    }

    def items(self) -> list[tuple[str, float | None]]:
        return [(label, getattr(self, name)) for name, label in self.NAMES.items()]


def time_parts(
    start_up: float | None,
    after_training: float | None,
    epoch_seconds: list[float],
    step_seconds: list[float],
) -> TimeParts:
    """A run's TimeParts from its start-up and after-training times and, per epoch, the
    script's epoch_seconds (the whole epoch) and step_seconds (its training steps)."""
    if not step_seconds or len(step_seconds) != len(epoch_seconds):
        return TimeParts(start_up, None, None, None, after_training)
    pace = mean(steady(step_seconds))  # a later epoch's steps
    extra = max(0.0, step_seconds[0] - pace) if len(step_seconds) > 1 else 0.0
    between = sum(e - s for e, s in zip(epoch_seconds, step_seconds))
    return TimeParts(start_up, extra, sum(step_seconds) - extra, between, after_training)


def worst_case_slowdown(others_core_seconds: float, seconds: float) -> float:
    """The most that other processes' CPU time can have lengthened a run of `seconds`, as a
    fraction of it. Workers that synchronize every step all wait when one loses its core, so
    each core-second another process took can cost the run up to one second."""
    return min(1.0, others_core_seconds / seconds) if seconds > 0 else 0.0

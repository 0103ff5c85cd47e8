"""Run times: a training run timed from what it left in its log folder, whoever started it and
in which kernel (the run_distributed and where_does_the_time_go notebooks, workbook.estimates).

- started, ended: the runner's record of the run (workbook.runner.record.RunRecord, run.json),
  when the launcher started and when its last process was gone;
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

speed_up() is the one ratio of training times: the table and the TensorBoard chart
(workbook.run_tables) and the verdict (workbook.verdict_text) all come from the same RunTimes,
so they agree. images/s, the time to an accuracy and the scaling efficiency are
workbook.speed's, as everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from workbook import speed
from workbook.facts import notebook_label, parse_result
from workbook.prose import plural
from workbook.runner.command import RAW_LOG_NAME
from workbook.runner.contention import SAMPLE_INTERVAL_S
from workbook.runner.record import RunRecord
from workbook.speed import TimeParts
from workbook.tensorboard_events import epoch_scalars

TARGET = 0.90  # the accuracy whose time the table, the plot and the verdict give
# Seconds of model.fit's end (fit_end_wait) from which the estimates name it.
FIT_END_NOTED_S = 2.0


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
    # ...during the first epoch, and after training (its extra and its end have causes of their
    # own, named only when others were measured to have taken too little to explain them).
    others_first_epoch: float | None = None
    others_after_training: float | None = None
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
        return (
            None if ends is None else speed.time_to_accuracy(list(zip(ends, self.accuracy)), target)
        )

    @property
    def images_label(self) -> str:
        return speed.images_per_second_label(self.epochs_trained, self.epochs[0] + 1)

    @property
    def epochs_trained(self) -> int:
        return len(self.epochs)


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
    return speed.scaling_efficiency(
        run.images_per_second, run.workers / reference.workers, reference.images_per_second
    )


# ---------------------------------------------------------------------------------------------
# Reading a run's folder
# ---------------------------------------------------------------------------------------------


def last_result(run_dir: Path) -> dict:
    """The metrics of the last `RESULT {...}` line of the run's log ({} if none)."""
    log = Path(run_dir) / RAW_LOG_NAME
    if not log.is_file():
        return {}
    try:
        return parse_result(log.read_text(errors="replace"))
    except ValueError:
        return {}


def hardware_of(record: RunRecord) -> str:
    """What a run had, from its record, in a few words: workers, cores or threads each, GPUs."""
    gpus = record.gpus or 0
    gpu_text = f"one GPU each, of {gpus}" if gpus else "no GPU"
    cores, threads, workers = record.cores, record.threads_per_worker, record.workers
    if record.launcher == "python" and not threads:
        return f"1 process without Horovod, all {cores or 'the'} cores; {gpu_text}"
    if record.pinned and workers == 1:
        return f"1 worker pinned to {plural(threads, 'core')} of {cores}; {gpu_text}"
    if record.pinned:
        return f"{workers} workers pinned to {plural(threads, 'core')} each, of {cores}; {gpu_text}"
    return f"{record.layout or 'unknown layout'}; {gpu_text}"


def read_run(run_dir: str | Path, label: str | None = None) -> RunTimes:
    """A run timed from its folder (see the module's docstring); NotTimed if it cannot be."""
    run_dir = Path(run_dir)
    record = RunRecord.read(run_dir)
    started, ended = record.started, record.ended
    seconds = epoch_scalars(run_dir, "train", "epoch_epoch_seconds")
    if started is not None:  # a folder reused by a later launch: only this launch's epochs
        seconds = [s for s in seconds if s[0] >= started]
    if not seconds:
        raise NotTimed(f"{run_dir.name}: no finished epoch in its TensorBoard logs yet")
    start_up, training, after, ends = account(
        started, ended, [wall for wall, _, _ in seconds], seconds[0][2]
    )
    epochs = [epoch for _, epoch, _ in seconds]
    accuracy = dict(
        (e, v)
        for w, e, v in epoch_scalars(run_dir, "validation", "epoch_accuracy")
        if started is None or w >= started
    )
    speeds = [
        v
        for w, _, v in epoch_scalars(run_dir, "train", "epoch_images_per_second")
        if started is None or w >= started
    ]
    steps = [
        v
        for w, _, v in epoch_scalars(run_dir, "train", "epoch_step_seconds")
        if started is None or w >= started
    ]
    walls = [wall for wall, _, _ in seconds]
    return RunTimes(
        label=label or run_dir.name,
        hardware=hardware_of(record),
        workers=record.workers or 1,
        cores_per_worker=record.threads_per_worker if record.pinned else None,
        epochs=epochs,
        epoch_ends=ends,
        accuracy=[accuracy.get(epoch) for epoch in epochs],
        start_up=start_up,
        training=training,
        after_training=after,
        images_per_second=speed.images_per_second(speeds),
        test_accuracy=last_result(run_dir).get("test_accuracy"),
        busy_others=list(record.busy_others),
        finished=record.finished,
        run_dir=run_dir,
        epoch_wall_times=walls,
        parts=speed.time_parts(start_up, after, [s for _, _, s in seconds], steps),
        others_core_seconds=others_during(record, walls[0] - seconds[0][2], walls[-1]),
        others_first_epoch=others_during(record, walls[0] - seconds[0][2], walls[0]),
        others_after_training=(
            others_during(record, walls[-1], ended) if ended is not None else None
        ),
        cores=(record.contention and record.contention.cores) or record.cores,
    )


def others_during(record: RunRecord, begin: float, end: float) -> float | None:
    """Core-seconds other processes used between two wall times, from the runner's samples
    (each covers the seconds before it); None when the run has no samples."""
    samples = record.contention.samples if record.contention else None
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
    """The run_distributed notebook's newest finished pair of runs of `stem`: (1 worker with one
    worker's share, N workers with that share each), as the where_does_the_time_go notebook sets
    them beside its own; None if none."""
    found = {}
    for folder in Path(logs_dir).glob(f"{stem}-np*"):
        record = RunRecord.read(folder)
        if not record.ok or not record.pinned:
            continue
        one = record.workers == 1
        if (record.started or 0) > found.get(one, (0, None))[0]:
            found[one] = (record.started, folder)
    if True not in found or False not in found:
        return None
    try:
        run_distributed = notebook_label("run_distributed")
        return (
            read_run(found[True][1], f"{run_distributed}'s reference"),
            read_run(found[False][1], f"{run_distributed}'s workers"),
        )
    except NotTimed:
        return None


# ---------------------------------------------------------------------------------------------
# The training in parts, a run's whole time and model.fit's end
# ---------------------------------------------------------------------------------------------


def split_training(run: RunTimes, epochs: int) -> dict | None:
    """The run's training over `epochs` epochs in parts: steps, between the steps, the first
    epoch's extra (seconds; a run of other length scaled per epoch). None: not measured."""
    parts = run.parts
    if parts is None or parts.steps is None:
        return None
    scale = epochs / run.epochs_trained
    return {
        "steps": parts.steps * scale,
        "between": parts.between_steps * scale,
        "extra": parts.first_epoch_extra,
    }


def epoch_split(run: RunTimes) -> tuple[float, float | None]:
    """(the first epoch's seconds, the mean of the later ones' or None if there are none)."""
    durations = [b - a for a, b in zip([0.0, *run.epoch_ends], run.epoch_ends)]
    later = durations[1:]
    return durations[0], (sum(later) / len(later) if later else None)


def run_seconds(run: RunTimes) -> float | None:
    """From the launch to the end of the run (None when the start or end is unknown)."""
    if run.start_up is None or run.after_training is None:
        return None
    return run.start_up + run.training + run.after_training


# Other processes' CPU that can explain a part of a run (speed.worst_case_slowdown of the part):
# from this share on, the part is said to be theirs, not its usual cause's.
LOAD_EXPLAINS = 0.10


def load_in(others: float | None, seconds: float | None) -> str | None:
    """None when other processes were measured to take too little CPU during a part of a run of
    `seconds` to explain it; else what is known, in words: `other programs took 62% of the CPU
    meanwhile (87 core-seconds)`, or `not measured`. A part's usual cause (the graph, the
    autotuner) is named only on None."""
    if others is None or seconds is None:
        return "not measured"
    if speed.worst_case_slowdown(others, seconds) < LOAD_EXPLAINS:
        return None
    return (
        f"other programs took {plural(round(others), 'core-second')} of CPU in its {seconds:.0f} s"
    )


def first_epoch_load(run: RunTimes) -> str | None:
    """load_in() for the run's first epoch."""
    first = run.epoch_ends[0] if run.epoch_ends else None
    return load_in(run.others_first_epoch, first)


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

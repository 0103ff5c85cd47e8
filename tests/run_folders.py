"""Run folders and timed runs with known times, for the tests of workbook.run_times, run_tables,
verdict_text, glance and estimates.

a_run() writes a folder as the runner and the script leave it: Keras's epoch scalars (tensor
scalars under train/ and validation/, at chosen wall times), the runner's record (a RunRecord,
run.json) and a log with a RESULT line. times() builds a RunTimes directly.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from workbook import speed
from workbook.run_times import RunTimes
from workbook.runner.record import RunRecord

STARTED = 1_800_000_000.0  # a time.time() value


def write_scalars(folder: Path, tag: str, points: list[tuple[float, int, float]]) -> None:
    """Keras's epoch scalars: tensor summaries of the scalars plugin, at the given wall times."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util.tensor_util import make_tensor_proto

    writer = EventFileWriter(str(folder))
    metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
    for wall, step, value in points:
        summary = Summary(
            value=[Summary.Value(tag=tag, tensor=make_tensor_proto(value), metadata=metadata)]
        )
        writer.add_event(Event(wall_time=wall, step=step, summary=summary))
    writer.close()


def a_run(
    folder: Path,
    epoch_seconds: list[float],
    start_up: float = 20.0,
    after: float = 15.0,
    record: dict | None = None,
    speed: list[float] | None = None,
    step_seconds: list[float] | None = None,
) -> Path:
    """A run folder as the runner and the script leave it, with known times; `record`: the
    RunRecord's fields that differ from a pinned 1-worker run's."""
    folder.mkdir(parents=True)
    ends, wall = [], STARTED + start_up
    for seconds in epoch_seconds:
        wall += seconds
        ends.append(wall)
    write_scalars(
        folder / "train",
        "epoch_epoch_seconds",
        [(end, epoch, s) for epoch, (end, s) in enumerate(zip(ends, epoch_seconds))],
    )
    speeds = speed or [100.0] * len(ends)
    write_scalars(
        folder / "train",
        "epoch_images_per_second",
        [(end, epoch, v) for epoch, (end, v) in enumerate(zip(ends, speeds))],
    )
    if step_seconds:
        write_scalars(
            folder / "train",
            "epoch_step_seconds",
            [(end, epoch, v) for epoch, (end, v) in enumerate(zip(ends, step_seconds))],
        )
    write_scalars(
        folder / "validation",
        "epoch_accuracy",
        [(end, epoch, 0.5 + 0.1 * epoch) for epoch, end in enumerate(ends)],
    )
    pinned_one = RunRecord(
        started=STARTED,
        ended=ends[-1] + after,
        launcher="horovodrun",
        workers=1,
        threads_per_worker=1,
        cores=2,
        gpus=0,
        pinned=True,
        ok=True,
        layout="1 worker x 1 thread pinned to 1 of 2 CPU cores",
        busy_others=[],
    )
    replace(pinned_one, **(record or {})).write(folder)
    (folder / "horovodrun.log").write_text('# x\n# y\n[0]<stdout>:RESULT {"test_accuracy": 0.8}\n')
    return folder


def rewrite_record(folder: Path, **changes) -> None:
    """The folder's run.json with some fields changed (a relaunch, a run still going)."""
    replace(RunRecord.read(folder), **changes).write(folder)


def times(
    label="run",
    epochs=(100.0, 100.0),
    workers=1,
    share=1,
    speed=300.0,
    busy=(),
    steps=None,
    others=None,
    accuracy=None,
):
    """A timed run; steps: each epoch's step_seconds (then its parts are known)."""
    ends = [sum(epochs[: i + 1]) for i in range(len(epochs))]
    parts = None if steps is None else speed_module.time_parts(20.0, 10.0, list(epochs), steps)
    return RunTimes(
        label=label,
        hardware=f"{workers} workers",
        workers=workers,
        cores_per_worker=share,
        epochs=list(range(len(epochs))),
        epoch_ends=ends,
        accuracy=list(accuracy or [0.8] * len(epochs)),
        start_up=20.0,
        training=ends[-1],
        after_training=10.0,
        images_per_second=speed,
        busy_others=list(busy),
        parts=parts,
        others_core_seconds=others,
        cores=2,
    )


speed_module = speed  # times() has a parameter named speed

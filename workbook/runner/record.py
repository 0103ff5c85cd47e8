"""Record: run.json next to a run's log, the run's facts for whoever compares runs later, in any
kernel. Written when the run starts, completed when it ends.

This module is run.json's one description: the runner writes a RunRecord, and every reader
(workbook.run_times, the tests) reads one with RunRecord.read and uses its attributes, never
the file's keys.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from workbook.runner.command import RUN_RECORD_NAME, RunPlan
from workbook.runner.contention import BusyProcess, ContentionMonitor
from workbook.runner.display import RunResult


@dataclass(frozen=True)
class ContentionRecord:
    """What run.json keeps of the other processes' CPU use during the run."""

    sampled_seconds: float = 0.0
    others_core_seconds: float = 0.0
    cores: int | None = None  # the machine's usable cores, as the monitor saw them
    # [time.time(), core-seconds others used since the sample before], every few seconds.
    samples: list[list[float]] = field(default_factory=list)
    busy_processes: list[BusyProcess] = field(default_factory=list)  # the busiest first

    @classmethod
    def of(cls, monitor: ContentionMonitor) -> ContentionRecord:
        return cls(
            sampled_seconds=round(monitor.sampled_seconds, 1),
            others_core_seconds=round(monitor.others_core_seconds, 1),
            cores=monitor.cores,
            samples=monitor.samples,
            busy_processes=monitor.busy_processes(),
        )

    @classmethod
    def from_json(cls, data: dict) -> ContentionRecord:
        known = {f.name for f in fields(cls)}
        values = {name: value for name, value in data.items() if name in known}
        values["busy_processes"] = [BusyProcess(**p) for p in values.get("busy_processes", [])]
        return cls(**values)


@dataclass(frozen=True)
class RunRecord:
    """One run's facts. Every field has a default: a record of an older runner, or of a run
    that has not ended yet, lacks some; a folder without run.json reads as RunRecord()."""

    run_name: str | None = None
    command: str | None = None
    launcher: str | None = None  # "horovodrun" or "python" (one process, no Horovod)
    layout: str | None = None  # the layout in words (workbook.runner.layout.Layout.describe)
    workers: int | None = None
    threads_per_worker: int | None = None  # None: TensorFlow's default threads
    cores: int | None = None
    gpus: int | None = None
    hidden_gpus: int | None = None  # this machine's GPUs hidden from the workers (a CPU layout)
    pinned: bool | None = None  # each worker on its own block of threads_per_worker cores
    hosts: str | None = None
    started: float | None = None  # time.time() when the launcher started
    timeline: str | None = None  # Horovod's timeline's path, when the run records one
    # Set when the run has ended:
    ended: float | None = None  # time.time() when its last process was gone
    exit_code: int | None = None
    ok: bool | None = None
    busy_others: list[str] = field(default_factory=list)  # one sentence per busy neighbour
    contention: ContentionRecord | None = None

    @classmethod
    def at_start(cls, plan: RunPlan, started_at: float) -> RunRecord:
        """The plan's facts and the start."""
        layout = plan.layout
        return cls(
            run_name=plan.run_name,
            command=plan.display_command,
            launcher=plan.launcher,
            layout=layout.describe(),
            workers=layout.workers,
            threads_per_worker=layout.threads,
            cores=layout.cores,
            gpus=layout.gpus,
            hidden_gpus=layout.hidden_gpus,
            pinned=layout.pinned,
            hosts=plan.hosts,
            started=started_at,
            timeline=str(plan.timeline_path) if plan.timeline_path else None,
        )

    def at_end(self, result: RunResult, monitor: ContentionMonitor) -> RunRecord:
        """This record completed: how and when the run ended, what other processes took."""
        return replace(
            self,
            ended=result.ended_at,
            exit_code=result.exit_code,
            ok=result.ok,
            busy_others=list(result.busy_others),
            contention=ContentionRecord.of(monitor),
        )

    @property
    def finished(self) -> bool:
        """Whether the run ended well; a record without `ok` (an older runner's): whether it
        ended at all."""
        return bool(self.ok) if self.ok is not None else self.ended is not None

    def write(self, run_dir: Path) -> Path:
        path = Path(run_dir) / RUN_RECORD_NAME
        path.write_text(json.dumps(asdict(self), indent=1) + "\n", encoding="utf-8")
        return path

    @classmethod
    def from_json(cls, data: dict) -> RunRecord:
        known = {f.name for f in fields(cls)}
        values = {name: value for name, value in data.items() if name in known}
        if values.get("contention") is not None:
            values["contention"] = ContentionRecord.from_json(values["contention"])
        values["busy_others"] = list(values.get("busy_others") or [])
        return cls(**values)

    @classmethod
    def read(cls, run_dir: Path) -> RunRecord:
        """The record in `run_dir` (RunRecord() if it has none: not a run of the runner)."""
        path = Path(run_dir) / RUN_RECORD_NAME
        if not path.is_file():
            return cls()
        return cls.from_json(json.loads(path.read_text(encoding="utf-8")))


def write_record(
    plan: RunPlan, started_at: float, monitor: ContentionMonitor, result: RunResult | None = None
) -> None:
    """run.json: the plan's facts and the start; with the result, also how and when it ended
    and what the other processes took meanwhile."""
    record = RunRecord.at_start(plan, started_at)
    if result is not None:
        record = record.at_end(result, monitor)
    record.write(plan.run_dir)

"""The solution script's benchmark runs: how it is launched, and what it reports.

A run is described by a Launch: how many workers, threads per worker (None: TensorFlow's
default, all cores), and whether horovodrun starts it. A Launch is planned by the runner's own
plan_run, with the runner's RunOptions, and run by the runner's execute (bench/processes.py):
the benchmarks start and supervise the workers as a notebook cell's horovodrun() does, with
its command line, environment, time limit and clean-up. The script's own measurements are read
back: its `RESULT {json}` line, as the runner parsed it (workbook.facts.parse_result), and the
per-epoch scalars of its TensorBoard log (workbook.tensorboard_events.epoch_scalars).
"""

from __future__ import annotations

import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from bench.processes import CommandFailed, Timed, run_timed
from workbook import speed
from workbook.facts import SOLUTION_FILE_NAME
from workbook.paths import SOLUTIONS_DIR, STARTER_SCRIPT
from workbook.runner.command import RunOptions, RunPlan, plan_run
from workbook.tensorboard_events import epoch_scalars

SOLUTION = SOLUTIONS_DIR / SOLUTION_FILE_NAME
STARTER = STARTER_SCRIPT


@dataclass(frozen=True)
class Launch:
    workers: int = 1
    threads: int | None = None  # intra-op threads per worker; None: TensorFlow's default
    horovodrun: bool = True  # False: `python script.py`, one process, no launcher
    gpus: bool = False
    pinned: bool = False  # each worker on its own `threads` cores (the runner's pin_cores.py)
    separate: bool = False  # `workers` plain processes side by side, no Horovod between them

    @property
    def label(self) -> str:
        if self.separate:
            return f"{self.workers} separate processes, {self.threads} core each, no Horovod"
        if not self.horovodrun:
            return "python, 1 process" + (f", {self.threads} thread" if self.threads else "")
        unit = "GPU" if self.gpus else "worker"
        share = ""
        if self.threads:
            noun = "core" if self.pinned else "thread"
            share = f", {self.threads} {noun}{'s' if self.threads > 1 else ''}"
            share += " each" if self.workers > 1 else ""
        return f"{self.workers} {unit}{'s' if self.workers > 1 else ''}{share}"

    def options(
        self,
        log_dir: Path,
        env: dict | None = None,
        *,
        timeout: float | None = None,
        group: str | None = None,
    ) -> RunOptions:
        """The runner's options for this launch (for one of the processes of a `separate` one):
        pinned threads are the runner's `share`; threads unpinned, a split of that many cores;
        no threads, TensorFlow's own defaults."""
        env = {
            "TF_CPP_MIN_LOG_LEVEL": "2",
            **({} if self.gpus else {"CUDA_VISIBLE_DEVICES": ""}),
            **(env or {}),
        }
        common = dict(
            run_name=log_dir.name,
            logs_root=log_dir.parent,
            log_dir=log_dir,
            env=env,
            gpus=None if self.gpus else 0,
            timeout=timeout,
            group=group,
        )
        if not self.horovodrun or self.separate:
            return RunOptions(np=1, launcher="python", share=self.threads, **common)
        if self.threads is None:
            return RunOptions(np=self.workers, tf_threads=False, **common)
        if self.pinned:
            return RunOptions(np=self.workers, share=self.threads, **common)
        return RunOptions(np=self.workers, cores=self.workers * self.threads, **common)

    def plan(
        self, script: Path, args: list, log_dir: Path, env: dict | None = None, **options
    ) -> RunPlan:
        """The runner's plan of this launch: the command line and environment of the run; the
        script gets `--log-dir log_dir`. `options`: timeout, group (see options())."""
        return plan_run([str(script), *args], options=self.options(log_dir, env, **options))


@dataclass
class Run:
    launch: Launch
    timed: Timed
    result: dict  # the script's RESULT line
    log_dir: Path

    @property
    def images_per_second(self) -> float:
        return float(self.result["images_per_second"])

    def throughput(self) -> float:
        """workbook.speed's images/s (the steps of the epochs after the first), from the run's
        TensorBoard log; else the script's RESULT, which is the same figure."""
        per_epoch = epoch_scalars(self.log_dir, "train", "epoch_images_per_second")
        return speed.images_per_second([v for _, _, v in per_epoch]) or self.images_per_second


def run_script(
    launch: Launch,
    args: list,
    log_dir: Path,
    script: Path = SOLUTION,
    env: dict | None = None,
    *,
    timeout: float,
    group: str | None = None,
) -> Run:
    """Runs the script with a fresh --log-dir (it would resume from old checkpoints); its output
    goes to the runner's horovodrun.log there."""
    shutil.rmtree(log_dir, ignore_errors=True)
    plan = launch.plan(script, args, log_dir, env, timeout=timeout, group=group)
    timed = run_timed(plan)
    if not timed.result.metrics:
        raise CommandFailed(
            f"{plan.display_command} printed no `RESULT {{...}}` line; its log: {timed.log_path}"
        )
    return Run(launch, timed, timed.result.metrics, log_dir)


def run_separate(
    launch: Launch, args: list, log_dir: Path, script: Path = SOLUTION, *, timeout: float
) -> list:
    """Starts launch.workers plain processes at once, process i pinned to the i-th core block.

    They share nothing but the machine: their total throughput is the most N Horovod workers
    could reach here, which separates the machine's limits (shared caches, memory bandwidth,
    clock) from Horovod's own cost.
    """
    from concurrent.futures import ThreadPoolExecutor

    group = uuid.uuid4().hex  # each run's contention leaves the others out

    def one(index: int) -> Run:
        return run_script(
            launch,
            args,
            log_dir / f"process-{index}",
            script,
            env={"WORKBOOK_CORE_BLOCK": str(index)},
            timeout=timeout,
            group=group,
        )

    with ThreadPoolExecutor(launch.workers) as pool:
        return list(pool.map(one, range(launch.workers)))

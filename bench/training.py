"""The solution script's benchmark runs: how it is launched, and what it reports.

A run is described by a Launch: how many workers, threads per worker (None: TensorFlow's
default, all cores), and whether horovodrun starts it. A Launch is planned by the runner's own
plan_run, with the runner's RunOptions: the benchmarks start the workers with the command line
and the environment a notebook cell's horovodrun() gives them. The script's own measurements
are read back: its final `RESULT {json}` line and the per-epoch scalars of its TensorBoard log.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from bench.processes import Timed, run_timed
from workbook.comparison import epoch_scalars  # noqa: F401 (the benchmarks read it from here)
from workbook.facts import SOLUTION_FILE_NAME, parse_result
from workbook.paths import SOLUTIONS_DIR, STARTER_SCRIPT
from workbook.runner.command import PIN_LAUNCHER, RunOptions, RunPlan, plan_run

SOLUTION = SOLUTIONS_DIR / SOLUTION_FILE_NAME
STARTER = STARTER_SCRIPT
PINNED = PIN_LAUNCHER  # the runner's: pins worker i to the i-th block of cores


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

    def options(self, log_dir: Path, env: dict | None = None) -> RunOptions:
        """The runner's options for this launch (for one of the processes of a `separate` one):
        pinned threads are the runner's `share`; threads unpinned, a split of that many cores;
        no threads, TensorFlow's own defaults."""
        env = {"TF_CPP_MIN_LOG_LEVEL": "2", **({} if self.gpus else {"CUDA_VISIBLE_DEVICES": ""}),
               **(env or {})}  # fmt: skip
        common = dict(run_name=log_dir.name, logs_root=log_dir.parent, log_dir=log_dir,
                      env=env, gpus=None if self.gpus else 0)  # fmt: skip
        if not self.horovodrun or self.separate:
            return RunOptions(np=1, launcher="python", share=self.threads, **common)
        if self.threads is None:
            return RunOptions(np=self.workers, tf_threads=False, **common)
        if self.pinned:
            return RunOptions(np=self.workers, share=self.threads, **common)
        return RunOptions(np=self.workers, cores=self.workers * self.threads, **common)

    def plan(self, script: Path, args: list, log_dir: Path, env: dict | None = None) -> RunPlan:
        """The runner's plan of this launch: the command line and environment of the run; the
        script gets `--log-dir log_dir`."""
        return plan_run([str(script), *args], options=self.options(log_dir, env))


@dataclass
class Run:
    launch: Launch
    timed: Timed
    result: dict  # the script's RESULT line
    log_dir: Path

    @property
    def images_per_second(self) -> float:
        return float(self.result["images_per_second"])


def run_script(launch: Launch, args: list, log_dir: Path, script: Path = SOLUTION,
               env: dict | None = None, *, timeout: float) -> Run:
    """Runs the script with a fresh --log-dir (it would resume from old checkpoints); its output
    goes to output.log there."""
    shutil.rmtree(log_dir, ignore_errors=True)
    plan = launch.plan(script, args, log_dir, env)
    timed = run_timed(plan.argv, log_dir / "output.log", env=plan.env, cwd=plan.cwd,
                      timeout=timeout)
    return Run(launch, timed, parse_result(timed.output), log_dir)


def run_separate(launch: Launch, args: list, log_dir: Path, script: Path = SOLUTION, *,
                 timeout: float) -> list:
    """Starts launch.workers plain processes at once, process i pinned to the i-th core block.

    They share nothing but the machine: their total throughput is the most N Horovod workers
    could reach here, which separates the machine's limits (shared caches, memory bandwidth,
    clock) from Horovod's own cost.
    """
    from concurrent.futures import ThreadPoolExecutor

    def one(index: int) -> Run:
        return run_script(launch, args, log_dir / f"process-{index}", script,
                          env={"WORKBOOK_CORE_BLOCK": str(index)}, timeout=timeout)

    with ThreadPoolExecutor(launch.workers) as pool:
        return list(pool.map(one, range(launch.workers)))

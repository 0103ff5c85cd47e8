"""The solution script's benchmark runs: how it is launched, and what it reports.

A run is described by a Launch: how many workers, threads per worker (None: TensorFlow's
default, all cores), and whether horovodrun starts it. The script's own measurements are read
back: its final `RESULT {json}` line and the per-epoch scalars of its TensorBoard log.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.processes import Timed, run_timed
from workbook.comparison import epoch_scalars  # noqa: F401 (the benchmarks read it from here)
from workbook.facts import SOLUTION_FILE_NAME, parse_result, usable_cores
from workbook.paths import SOLUTIONS_DIR, STARTER_SCRIPT
from workbook.runner.command import PIN_LAUNCHER, Layout

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

    def env(self) -> dict:
        env = {"TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"}
        # The runner's own settings for a worker with this share of the cores.
        env.update(Layout(self.workers, self.threads, cores=usable_cores()).env())
        if not self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ""  # a CPU run stays on the CPU
        return env

    def argv(self, script: Path, args: list) -> list:
        python = [sys.executable, str(script), *args]
        if self.pinned and self.threads:
            python = [sys.executable, str(PINNED), str(self.threads), str(script), *args]
        if not self.horovodrun or self.separate:
            return python
        horovodrun = str(Path(sys.executable).with_name("horovodrun"))
        hosts = f"localhost:{self.workers}"
        return [horovodrun, "--gloo", "-np", str(self.workers), "-H", hosts, *python]


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
    argv = launch.argv(script, [*args, "--log-dir", str(log_dir)])
    timed = run_timed(argv, log_dir / "output.log", env={**launch.env(), **(env or {})},
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

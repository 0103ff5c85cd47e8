"""The benchmarks' runs, started and supervised by the runner (workbook.runner.execute).

A benchmark plans its run with the runner's plan_run (bench/training.Launch gives the options)
and hands the plan here: the runner bounds it by its timeout and stops everything it started
(the workers horovodrun puts in sessions of their own, and OpenMPI's `orted`, which leaves the
process tree and ignores SIGTERM), and the benchmark fails with the path of the run's log.

The runner also watches every run for neighbours: a process outside the run (and outside the
runs started beside it on purpose, RunOptions.group) that used the CPU meanwhile makes its
figures worthless, and synchronous workers suffer most (one preempted worker stalls them all).
The result files name them. What a benchmark needs besides the runner's result: when the first
training step ended (FirstStepConsole).
"""

from __future__ import annotations

import re
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from workbook.prose import plural
from workbook.runner.command import RunPlan
from workbook.runner.display import RunResult, SilentConsole
from workbook.runner.execute import execute


class StopRequest(threading.Event):
    """Set when the benchmark is asked to stop (Ctrl-C or SIGTERM): every run in progress, in
    this thread or in the threads of runs side by side, stops its workers and raises
    KeyboardInterrupt. `signal` names what asked."""

    signal = ""


STOP = StopRequest()

# A Keras progress bar, "  3/75 [==>...": it first appears once the first step is done.
PROGRESS_BAR = re.compile(r"\b\d+/\d+ \[")


@dataclass
class Timed:
    result: RunResult  # the runner's
    wall_seconds: float
    first_step_seconds: float | None  # from the start to the first step's progress bar
    started_at: float  # time.time() at the start, to compare with TensorBoard's wall times
    log_path: Path  # the run's raw output, as it happened
    # Processes outside the benchmark that were busy during the run, one sentence each.
    neighbours: list
    # Cores that all processes outside the benchmark used, on average over the run.
    others_mean_share: float


class CommandFailed(RuntimeError):
    """A benchmarked command failed or timed out; the message names its log."""


class FirstStepConsole(SilentConsole):
    """A silent runner console that notes when the first training step's progress arrives."""

    def __init__(self):
        self.started = None
        self.first_step = None

    def start(self, plan) -> None:
        self.started = time.monotonic()

    def status(self, text: str) -> None:
        if self.first_step is None and PROGRESS_BAR.search(text.split("| ", 1)[-1]):
            self.first_step = time.monotonic()

    @property
    def first_step_seconds(self) -> float | None:
        return None if self.first_step is None else self.first_step - self.started


def busy_note(neighbours: list) -> str:
    """What the console adds to a measurement that had busy neighbours ("" if none)."""
    return f"; BUSY NEIGHBOURS: {'; '.join(neighbours)}" if neighbours else ""


@contextmanager
def runs_stopped_on_signals():
    """Within: Ctrl-C and SIGTERM (a `kill`, a job scheduler's time limit) stop the benchmark's
    runs with the runner's clean-up, instead of leaving horovodrun and its workers behind, and
    raise KeyboardInterrupt here. The handlers before it come back at the end."""

    def stop(signum, frame):
        if not STOP.is_set():  # once: a second signal must not cut the clean-up short
            STOP.signal = signal.Signals(signum).name
            STOP.set()
            raise KeyboardInterrupt(f"stopped by {STOP.signal}")

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def run_timed(plan: RunPlan, console: FirstStepConsole | None = None) -> Timed:
    """Runs the plan with the runner; CommandFailed if it fails or outlives plan.timeout;
    KeyboardInterrupt, with every process of the run stopped, once the benchmark must stop."""
    if STOP.is_set():
        raise KeyboardInterrupt(f"stopped by {STOP.signal} before run {plan.run_name}")
    console = console or FirstStepConsole()
    result, ctrl_c = execute(plan, console, stop=STOP)
    if STOP.is_set():
        raise KeyboardInterrupt(
            f"stopped by {STOP.signal} in run {plan.run_name}, its "
            f"{plural(result.stopped_processes, 'process')} stopped"
        )
    if ctrl_c:
        raise KeyboardInterrupt(f"benchmark run {plan.run_name} interrupted")
    checked(plan, result)
    return Timed(
        result,
        result.wall_seconds,
        console.first_step_seconds,
        result.started_at,
        result.log_path,
        result.busy_others,
        result.others_mean_cores,
    )


def checked(plan: RunPlan, result: RunResult) -> RunResult:
    """The result of a run that went well; CommandFailed, naming its log, otherwise."""
    shown = plan.display_command
    if result.timed_out:
        raise CommandFailed(
            f"{shown} did not finish in {plan.timeout:.0f} s; its log: {result.log_path}"
        )
    if not result.ok:
        raise CommandFailed(
            f"{shown} exited with {result.exit_code}; its log: "
            f"{result.log_path}; its error:\n{result.error}"
        )
    return result

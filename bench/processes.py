"""Running a command to its end while noting when its first training step finished.

Every run is bounded: after `timeout` seconds it is stopped, with everything it started (the
workers horovodrun puts in sessions of their own, and OpenMPI's `orted`, which leaves the
process tree and ignores SIGTERM), and the benchmark fails with the path of the run's log.

Every run is also watched for neighbours: a process outside the benchmark that used the CPU
meanwhile (another training, a test suite) makes its figures worthless, and synchronous workers
suffer most (one preempted worker stalls all of them). The result files name them.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psutil

from workbook.facts import with_safe_env
from workbook.runner.contention import ContentionMonitor

# Keras's progress bar after the first step: "  1/200 [..." (horovodrun prefixes "[0]<stdout>:").
FIRST_STEP = re.compile(rb"(?:^|[\r\n:])\s*1/\d+ \[")
# Set in the environment of each run, so that every process it started can be found at the end.
RUN_MARKER = "WORKBOOK_BENCH_RUN"


@dataclass
class Timed:
    argv: list
    exit_code: int
    wall_seconds: float
    first_step_seconds: float | None  # from the start to the first step's progress bar
    output: str
    started_at: float  # time.time() at the start, to compare with TensorBoard's wall times
    log_path: Path  # stdout and stderr of the run, as it happened
    # Processes outside the benchmark that were busy during the run, one sentence each.
    neighbours: list
    # Cores that all processes outside the benchmark used, on average over the run.
    others_mean_share: float


class CommandFailed(RuntimeError):
    """A benchmarked command failed or timed out; the message names its log."""


def busy_note(neighbours: list) -> str:
    """What the console adds to a measurement that had busy neighbours ("" if none)."""
    return f"; BUSY NEIGHBOURS: {'; '.join(neighbours)}" if neighbours else ""


def benchmark_pids() -> set:
    """The processes of every benchmarked run (this one's and a side-by-side one's)."""
    pids = set()
    for process in psutil.process_iter():
        try:
            if RUN_MARKER in process.environ():
                pids.add(process.pid)
        except psutil.Error:
            pass
    return pids


def stop_run(marker: str) -> None:
    """Kills every process that carries the run's marker (SIGKILL: orted ignores SIGTERM)."""
    left = []
    for process in psutil.process_iter():
        try:
            if process.pid != os.getpid() and process.environ().get(RUN_MARKER) == marker:
                process.kill()
                left.append(process)
        except psutil.Error:
            pass
    psutil.wait_procs(left, timeout=10)


def run_timed(argv: list, log_path: Path, env: dict | None = None, cwd=None,
              timeout: float = 3600) -> Timed:
    """Runs argv, stdout and stderr together into log_path; CommandFailed if it fails or
    outlives `timeout` seconds."""
    marker = uuid.uuid4().hex
    full_env = with_safe_env({**os.environ, **(env or {}), RUN_MARKER: marker})
    log_path.parent.mkdir(parents=True, exist_ok=True)
    shown = " ".join(map(str, argv))
    started_at, started = time.time(), time.monotonic()
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            argv, cwd=cwd, env=full_env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )
        chunks, first_step = [], []

        def read() -> None:
            tail = b""
            for chunk in iter(lambda: process.stdout.read1(65536), b""):
                if not first_step and FIRST_STEP.search(tail + chunk):
                    first_step.append(time.monotonic() - started)
                tail = chunk[-64:]
                chunks.append(chunk)
                log.write(chunk)
                log.flush()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        monitor = ContentionMonitor()
        try:
            exit_code = _wait_watching(process, monitor, started + timeout)
        except subprocess.TimeoutExpired:
            stop_run(marker)
            process.wait()
            raise CommandFailed(f"{shown} did not finish in {timeout:.0f} s; its log: {log_path}")
        finally:
            stop_run(marker)  # whatever it left behind (a straggler would skew the next run)
            reader.join(30)
    wall = time.monotonic() - started
    output = b"".join(chunks).decode("utf-8", errors="replace")
    if exit_code != 0:
        last = "\n".join(output.replace("\r", "\n").splitlines()[-15:])
        raise CommandFailed(
            f"{shown} exited with {exit_code}; its log: {log_path}; its last lines:\n{last}"
        )
    return Timed(argv, exit_code, wall, first_step[0] if first_step else None, output,
                 started_at, log_path, monitor.findings(), round(monitor.others_mean_share, 2))


def _wait_watching(process, monitor: ContentionMonitor, deadline: float) -> int:
    """process.wait() until the monotonic deadline, sampling the other processes' CPU use."""
    while True:
        now = time.monotonic()
        if monitor.due(now):
            monitor.sample(now, benchmark_pids())
        try:
            return process.wait(timeout=max(0.0, min(monitor.interval, deadline - now)))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise

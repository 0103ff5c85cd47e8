"""Running a command to its end while noting when its first training step finished."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass

# Keras's progress bar after the first step: "  1/200 [..." (horovodrun prefixes "[0]<stdout>:").
FIRST_STEP = re.compile(rb"(?:^|[\r\n:])\s*1/\d+ \[")


@dataclass
class Timed:
    argv: list
    exit_code: int
    wall_seconds: float
    first_step_seconds: float | None  # from the start to the first step's progress bar
    output: str
    started_at: float  # time.time() at the start, to compare with TensorBoard's wall times


class CommandFailed(RuntimeError):
    """A benchmarked command exited with an error; the message ends with its last lines."""


def run_timed(argv: list, env: dict | None = None, cwd=None, timeout: float = 3600) -> Timed:
    """Runs argv, stdout and stderr together, and raises CommandFailed if it fails."""
    full_env = {**os.environ, **(env or {})}
    started_at, started = time.time(), time.monotonic()
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

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        exit_code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        process.wait()
        raise CommandFailed(f"{' '.join(map(str, argv))} did not finish in {timeout:.0f} s")
    reader.join(30)
    wall = time.monotonic() - started
    output = b"".join(chunks).decode("utf-8", errors="replace")
    if exit_code != 0:
        last = "\n".join(output.replace("\r", "\n").splitlines()[-15:])
        raise CommandFailed(
            f"{' '.join(map(str, argv))} exited with {exit_code}; its last lines:\n{last}"
        )
    return Timed(argv, exit_code, wall, first_step[0] if first_step else None, output, started_at)

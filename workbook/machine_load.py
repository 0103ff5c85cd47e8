"""How busy this machine is now: what other programs take of its CPU, measured for a moment.

    load = load_now()           samples every process's CPU time for SAMPLE_S (psutil)
    meter = Meter() ... meter.load()    the same over a whole task
    load.share                  of the CPU the other programs took (0.62: 62% of all cores)
    load.slowdown               how much longer a run that wants every core may take now
    load.describe()             `other programs are taking 62% of the CPU (2 cores, load 13.2)`

The estimates (workbook.estimates) scale a time measured on a quiet machine by `slowdown`, so
that what the workbook promises holds at this moment, on this machine. Other programs are every
process but this one and its children (a notebook's kernel measures the rest of the machine).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psutil

from workbook.facts import usable_cores
from workbook.prose import plural

SAMPLE_S = 0.5  # long enough for psutil's CPU times to mean something, short for a cell
# From this share of the CPU taken by others, a run is said to be slowed.
BUSY_SHARE = 0.10
# From this share on, the others may want more than they got: the load average says how much.
SATURATED = 0.5


@dataclass(frozen=True)
class Load:
    share: float  # of the usable cores' time, what other programs took while sampled (0..1)
    cores: int
    load_average: float | None  # the 1-minute load average (runnable threads), when known

    @property
    def wanting(self) -> float:
        """Cores' worth of CPU other programs want: what they took, or, when they took half of
        it or more (they may want more than they got), the runnable threads of the load
        average, when more."""
        took = self.share * self.cores
        if self.share >= SATURATED and self.load_average is not None:
            return max(took, self.load_average)
        return took

    @property
    def slowdown(self) -> float:
        """How many times as long a run that wants every core takes now: the cores shared
        fairly between its threads and the others' (1.0 on a quiet machine)."""
        return (self.cores + self.wanting) / self.cores

    @property
    def busy(self) -> bool:
        return self.share >= BUSY_SHARE

    def describe(self, past: bool = False) -> str:
        load = f", load {self.load_average:.1f}" if self.load_average is not None else ""
        return (
            f"other programs {'took' if past else 'are taking'} {self.share:.0%} of the CPU "
            f"({plural(self.cores, 'core')}{load})"
        )


def _own_pids() -> set[int]:
    me = psutil.Process()
    try:
        return {me.pid, *(child.pid for child in me.children(recursive=True))}
    except psutil.Error:
        return {me.pid}


def _cpu_seconds(skip: set[int]) -> dict[int, float]:
    used = {}
    for process in psutil.process_iter():
        if process.pid in skip:
            continue
        try:
            times = process.cpu_times()
            used[process.pid] = times.user + times.system
        except psutil.Error:  # gone, or another user's
            continue
    return used


class Meter:
    """Measures what other programs take of the CPU from its creation to `load()`: over a
    whole task (the preflight), not a moment."""

    def __init__(self):
        self.cores = usable_cores()
        self.started = time.monotonic()
        self._before = _cpu_seconds(_own_pids())

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.started

    def load(self) -> Load:
        elapsed = max(self.seconds, 1e-3)
        after = _cpu_seconds(_own_pids())
        # Processes that started meanwhile count from nothing; ones that ended, not at all.
        took = sum(max(0.0, used - self._before.get(pid, 0.0)) for pid, used in after.items())
        try:
            average = os.getloadavg()[0]
        except (AttributeError, OSError):
            average = None
        return Load(
            share=min(1.0, took / (self.cores * elapsed)), cores=self.cores, load_average=average
        )


def load_now(seconds: float = SAMPLE_S) -> Load:
    """What the other programs take of this process's cores, over the next `seconds`."""
    meter = Meter()
    time.sleep(seconds)
    return meter.load()

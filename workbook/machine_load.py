"""How busy this machine is now: what other programs take of its CPU, measured for a moment.

    load = load_now()           samples every process's CPU time for SAMPLE_S (psutil)
    meter = Meter() ... meter.load()    the same over a whole task
    load.share                  of the CPU the other programs took (0.62: 62% of all cores)
    load.runnable               the threads that were ready to run meanwhile, on average
    load.slowdown               how much longer a run that wants every core may take now, at
                                most (the others get what they want, fairly shared)
    load.slowdown_taken         the same if the others want only what they took (the least)
    load.describe()             `other programs are taking 62% of the CPU (2 cores, load 13.2)`

The estimates (workbook.estimates) scale a time measured on a quiet machine by `slowdown`, so
that what the workbook promises holds at this moment, on this machine. Other programs are every
process but this one and its children (a notebook's kernel measures the rest of the machine).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace

import psutil

from workbook.facts import usable_cores
from workbook.prose import plural

SAMPLE_S = 0.5  # long enough for psutil's CPU times to mean something, short for a cell
RUNNABLE_EVERY_S = 0.05  # how often a sample reads how many threads are ready to run
# From this share of the CPU taken by others, a run is said to be slowed.
BUSY_SHARE = 0.10
# From this share on, the others may want more than they got: the load average says how much.
SATURATED = 0.5


@dataclass(frozen=True)
class Load:
    share: float  # of the usable cores' time, what other programs took while sampled (0..1)
    cores: int
    load_average: float | None  # the 1-minute load average (runnable threads), when known
    # Other programs' threads ready to run, on average while sampled (Linux's procs_running,
    # read every RUNNABLE_EVERY_S): what they want now. None when not sampled.
    runnable: float | None = None

    @property
    def wanting(self) -> float:
        """Cores' worth of CPU other programs want: what they took, or, when they took half of
        it or more (they may want more than they got), the threads they had ready to run, when
        more. Those are counted during the sample when it could (the load average, a minute's
        decaying mean that counts threads waiting on disks too, made a baseline's estimate
        2.4 times too long on a busy machine); else the load average says it."""
        took = self.share * self.cores
        wanted = self.runnable if self.runnable is not None else self.load_average
        if self.share >= SATURATED and wanted is not None:
            return max(took, wanted)
        return took

    @property
    def slowdown(self) -> float:
        """How many times as long a run that wants every core takes now: the cores shared
        fairly between its threads and the others' (1.0 on a quiet machine)."""
        return (self.cores + self.wanting) / self.cores

    @property
    def slowdown_taken(self) -> float:
        """How many times as long such a run takes if the others want only what they took:
        the low end. On 2 busy cores the real slowdowns of the walks of issue 39 were 2.4x,
        2.3x and 1.8x where this said 1.6x, 2.0x and 2.0x and `slowdown` 5.8x, 5.6x and 2.3x:
        near this end (a TensorFlow run's many threads win it more than a fair share)."""
        return 1.0 + self.share  # (cores + share x cores) / cores

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


def _runnable_threads() -> int | None:
    """The threads of the whole machine ready to run at this instant (/proc/stat's
    procs_running), this one included; None where it can't be read."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            for line in stat:
                if line.startswith("procs_running "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def load_now(seconds: float = SAMPLE_S) -> Load:
    """What the other programs take of this process's cores, over the next `seconds`, and how
    many threads they had ready to run meanwhile."""
    meter = Meter()
    counts = []
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        count = _runnable_threads()
        if count is not None:
            counts.append(count - 1)  # this thread, running as it reads
        time.sleep(min(RUNNABLE_EVERY_S, left))
    load = meter.load()
    return replace(load, runnable=sum(counts) / len(counts)) if counts else load

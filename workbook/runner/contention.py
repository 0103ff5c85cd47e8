"""Contention: the other processes that used the CPU while a run went on.

A run's times mean what they seem only if its workers had their cores to themselves. Another
training (the baseline in the background, a step notebook's experiment, a benchmark) makes
every run it overlaps slower, so the runner samples, every few seconds, what the processes
outside the run use, and the run's result says it when they used enough to matter: a share of
the run's CPU that can lengthen it by SAME_SPEED or more (workbook.speed), the difference two
runs of one script show anyway. A short burst, such as a check cell run meanwhile, is not named.
The samples are kept (run.json's contention, workbook.runner.record.ContentionRecord), so that a
comparison can count what others took during the part of the run it compares, and say whether
that could change its verdict.
"""

from __future__ import annotations

import os
import shlex
import time
from dataclasses import dataclass

import psutil

from workbook.facts import usable_cores
from workbook.prose import plural
from workbook.speed import SAME_SPEED, worst_case_slowdown

SAMPLE_INTERVAL_S = 2.0
# A process counts as busy in a sample when it used at least half a core since the last one.
BUSY_CORE_SHARE = 0.5
# ...and is worth a mention when it was busy for this long, in all; the busiest few are named.
MENTION_AFTER_S = 10.0
MENTION_AT_MOST = 3
# While the run goes on, it is said at once (one line) to be slowed when others took enough to
# lengthen it by this much, over at least this many seconds of samples.
LIVE_SLOWDOWN = 0.10
LIVE_AFTER_S = 4.0


@dataclass
class BusyProcess:
    pid: int
    command: str  # short: `python fashion_mnist.py --epochs 1`
    # Seconds watched from its first sample at BUSY_CORE_SHARE or more on (idle ones too: a
    # neighbour sharing a core at about half of it was said to run 283 s of a 707 s run), and
    # the CPU time it used meanwhile, in seconds of one core.
    busy_seconds: float = 0.0
    core_seconds: float = 0.0

    @property
    def mean_share(self) -> float:
        """The cores it used on average while watched (1.0: one whole core)."""
        return self.core_seconds / self.busy_seconds if self.busy_seconds else 0.0


def short_command(cmdline: list[str], name: str, words: int = 4) -> str:
    """`python fashion_mnist.py --epochs 1 ...`: the program's name and the first arguments."""
    if not cmdline:
        return name
    program = os.path.basename(cmdline[0])
    if program.startswith("python"):
        program = "python"
    args = [os.path.basename(a) if a.endswith(".py") else a for a in cmdline[1:]]
    text = shlex.join([program, *args[:words]])
    return text + (" ..." if len(args) > words else "")


class ContentionMonitor:
    """Samples the CPU use of every process but the run's own; `findings()` says who was busy."""

    def __init__(
        self,
        interval: float = SAMPLE_INTERVAL_S,
        mention_after: float | None = None,
        cores: int | None = None,
    ):
        self.interval = interval
        # MENTION_AFTER_S read now, not when this module loaded: a test may lower it.
        self.mention_after = MENTION_AFTER_S if mention_after is None else mention_after
        self.cores = cores or usable_cores()
        # [time.time(), core-seconds all other processes used since the previous sample]
        self.samples: list[list[float]] = []
        self.busy: dict[int, BusyProcess] = {}
        self.sampled_seconds = 0.0
        self.others_core_seconds = 0.0  # every other process together, busy or not
        self._last: float | None = None
        self._processes: dict[int, psutil.Process] = {}

    def due(self, now: float) -> bool:
        return self._last is None or now - self._last >= self.interval

    def sample(self, now: float, own_pids: set[int]) -> None:
        """Records the CPU each other process used since the previous sample (monotonic `now`)."""
        elapsed = None if self._last is None else now - self._last
        self._last = now
        own = set(own_pids) | {os.getpid()}
        seen = {}
        others = 0.0
        for process in psutil.process_iter():
            seen[process.pid] = process = self._processes.get(process.pid, process)
            try:
                share = process.cpu_percent(None) / 100  # since this object's previous call
                if elapsed is None or process.pid in own:
                    continue
                others += share * elapsed
                entry = self.busy.get(process.pid)
                if entry is None and share >= BUSY_CORE_SHARE:
                    command = short_command(process.cmdline(), process.name())
                    entry = self.busy[process.pid] = BusyProcess(process.pid, command)
                if entry is not None:
                    entry.busy_seconds += elapsed
                    entry.core_seconds += share * elapsed
            except psutil.Error:  # gone, or another user's
                continue
        self._processes = seen
        if elapsed is not None:
            self.sampled_seconds += elapsed
            self.others_core_seconds += others
            self.samples.append([round(time.time(), 2), round(others, 3)])

    def busy_processes(self) -> list[BusyProcess]:
        """The processes worth a mention, the busiest first."""
        heavy = [p for p in self.busy.values() if p.busy_seconds >= self.mention_after]
        return sorted(heavy, key=lambda p: p.core_seconds, reverse=True)

    @property
    def others_mean_share(self) -> float:
        """The cores all other processes used together, on average over the run."""
        return self.others_core_seconds / self.sampled_seconds if self.sampled_seconds else 0.0

    def matters(self) -> bool:
        """Whether others took enough to lengthen the run by SAME_SPEED (see workbook.speed)."""
        return worst_case_slowdown(self.others_core_seconds, self.sampled_seconds) >= SAME_SPEED

    def slowed_line(self) -> str | None:
        """One line while the run goes on, once others have taken enough of the CPU to slow it
        by LIVE_SLOWDOWN (None before): their share, and the busiest of them."""
        seconds = self.sampled_seconds
        if seconds < LIVE_AFTER_S:
            return None
        worst = worst_case_slowdown(self.others_core_seconds, seconds)
        if worst < LIVE_SLOWDOWN:
            return None
        share = self.others_core_seconds / (self.cores * seconds)
        busiest = max(self.busy.values(), key=lambda p: p.core_seconds, default=None)
        return (
            f"Slowed by other programs: in the run's first {seconds:.0f} s they took "
            f"{share:.0%} of the CPU ({plural(self.cores, 'core')}), which can make it up to "
            f"{worst:.0%} longer; its times will say so"
            + (f" (the busiest: {busiest.command}, pid {busiest.pid})" if busiest else "")
            + "."
        )

    def findings(self) -> list[str]:
        """[] when others took too little of the CPU to matter; else how much they took, then
        one sentence per busy process (the busiest few)."""
        if not self.matters():
            return []
        found = [describe_share(self.others_core_seconds, self.sampled_seconds, self.cores)]
        busy = self.busy_processes()
        found += [describe_busy(p, self.sampled_seconds) for p in busy[:MENTION_AT_MOST]]
        if len(busy) > MENTION_AT_MOST:
            found.append(f"{plural(len(busy) - MENTION_AT_MOST, 'other process')} too")
        return found


def describe_busy(process: BusyProcess, run_seconds: float) -> str:
    share = process.mean_share
    used = f"{share:.1f} cores" if share > 1.05 else f"{share:.0%} of a core"
    return (
        f"`{process.command}` (pid {process.pid}) used {used} "
        f"for {process.busy_seconds:.0f} s of the run's {run_seconds:.0f} s"
    )


def describe_share(core_seconds: float, seconds: float, cores: int) -> str:
    """`other processes took 4% of the CPU (34 core-seconds in the run's 487 s on 2 cores)`."""
    share = core_seconds / (cores * seconds) if seconds else 0.0
    return (
        f"other processes took {share:.0%} of the CPU ({core_seconds:.0f} core-seconds in the "
        f"run's {seconds:.0f} s on {plural(cores, 'core')}): up to "
        f"{worst_case_slowdown(core_seconds, seconds):.0%} of its time, as a worker that "
        "loses its core stalls them all"
    )

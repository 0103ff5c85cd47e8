"""Contention: the other processes that used the CPU while a run went on.

A run's times mean what they seem only if its workers had their cores to themselves. Another
training (the baseline in the background, a step notebook's experiment, a benchmark) makes
every run it overlaps slower, so the runner samples, every few seconds, what the processes
outside the run use, and the run's result says it when they used much.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import asdict, dataclass

import psutil

from workbook.runner.command import plural

SAMPLE_INTERVAL_S = 2.0
# A process counts as busy in a sample when it used at least half a core since the last one.
BUSY_CORE_SHARE = 0.5
# ...and is worth a mention when it was busy for this long, in all; the busiest few are named.
MENTION_AFTER_S = 10.0
MENTION_AT_MOST = 3


@dataclass
class BusyProcess:
    pid: int
    command: str  # short: `python fashion_mnist.py --epochs 1`
    busy_seconds: float = 0.0
    core_seconds: float = 0.0  # CPU time while busy, in seconds of one core

    @property
    def mean_share(self) -> float:
        """The cores it used on average while busy (1.0: one whole core)."""
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

    def __init__(self, interval: float = SAMPLE_INTERVAL_S, mention_after: float = MENTION_AFTER_S):
        self.interval = interval
        self.mention_after = mention_after
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
        for process in psutil.process_iter():
            seen[process.pid] = process = self._processes.get(process.pid, process)
            try:
                share = process.cpu_percent(None) / 100  # since this object's previous call
                if elapsed is None or process.pid in own or share <= 0:
                    continue
                self.others_core_seconds += share * elapsed
                if share >= BUSY_CORE_SHARE:
                    entry = self.busy.get(process.pid)
                    if entry is None:
                        command = short_command(process.cmdline(), process.name())
                        entry = self.busy[process.pid] = BusyProcess(process.pid, command)
                    entry.busy_seconds += elapsed
                    entry.core_seconds += share * elapsed
            except psutil.Error:  # gone, or another user's
                continue
        self._processes = seen
        if elapsed is not None:
            self.sampled_seconds += elapsed

    def busy_processes(self) -> list[BusyProcess]:
        """The processes worth a mention, the busiest first."""
        heavy = [p for p in self.busy.values() if p.busy_seconds >= self.mention_after]
        return sorted(heavy, key=lambda p: p.core_seconds, reverse=True)

    @property
    def others_mean_share(self) -> float:
        """The cores all other processes used together, on average over the run."""
        return self.others_core_seconds / self.sampled_seconds if self.sampled_seconds else 0.0

    def findings(self) -> list[str]:
        """One sentence per busy process, and one for all others together when they used half a
        core or more on average; [] when the run had the CPU to itself."""
        busy = self.busy_processes()
        found = [describe_busy(p, self.sampled_seconds) for p in busy[:MENTION_AT_MOST]]
        if len(busy) > MENTION_AT_MOST:
            found.append(f"{plural(len(busy) - MENTION_AT_MOST, 'other process')} too")
        long_enough = self.sampled_seconds >= self.mention_after
        if long_enough and self.others_mean_share >= BUSY_CORE_SHARE:
            found.append(
                f"all other processes together used {self.others_mean_share:.1f} cores on "
                f"average during the run's {self.sampled_seconds:.0f} s"
            )
        return found

    def record(self) -> dict:
        """What run.json keeps of it."""
        return {
            "sampled_seconds": round(self.sampled_seconds, 1),
            "others_core_seconds": round(self.others_core_seconds, 1),
            "busy_processes": [asdict(p) for p in self.busy_processes()],
        }


def describe_busy(process: BusyProcess, run_seconds: float) -> str:
    share = process.mean_share
    used = f"{share:.1f} cores" if share > 1.05 else f"{share:.0%} of a core"
    return (
        f"`{process.command}` (pid {process.pid}) used {used} "
        f"for {process.busy_seconds:.0f} s of the run's {run_seconds:.0f} s"
    )

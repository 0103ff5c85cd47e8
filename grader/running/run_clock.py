"""A run's clock: its time limit counts the time the machine let the run's processes run.

A busy machine (a class training beside the instructor's grading) stretches a run's wall time
many times over; the script is not to blame for that. So the run check (grader/running/run_check.py)
counts a run's time by this clock:

- a poll interval counts in full, unless the run's processes were kept waiting for a core
  (their run-queue delay, /proc/PID/task/TID/schedstat) while processes outside the run used
  the machine (/proc/stat's busy time less the run's own): then it counts only the share of
  the machine the others left (never less than MIN_SHARE of it);
- the run's own processes keeping each other waiting count in full: a script that starts busy
  processes beside its workers starves itself, not the machine;
- the CPU time of every process of the run is added up (processes that ended included), and
  so is the part that went to processes other than the workers.

Whether a run was cut by the machine is then a matter of evidence: the wall-clock cap came
before the run had had its time on this clock.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

MIN_SHARE = 0.05  # an interval counts at least this much, however busy the machine
WAITED_SHARE = 0.2  # the run waited for a core for at least this share of an interval: starved
# The processes that start the workers (horovodrun, the sandbox's): not the script's.
LAUNCHERS = ("horovodrun", "workbook.runner.launcher", "bwrap", "prlimit", "setpriv", "sh")


def innermost_pid(pid: int) -> int:
    """`pid`'s number in the innermost PID namespace it is in (the last of /proc/PID/status's
    NSpid: a sandboxed worker's own os.getpid()); `pid` itself where that can't be read."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError, IndexError):
        pass
    return pid


def machine_busy_seconds() -> float:
    """The CPU time all processes of this machine used since boot, in seconds (/proc/stat)."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle and iowait
    busy = sum(fields[:8]) - idle  # user nice system idle iowait irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


def memory_available_share() -> float:
    """The share of this machine's memory still available (/proc/meminfo; 1.0 if unknown)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            values = {line.split(":")[0]: int(line.split()[1]) for line in meminfo if ":" in line}
        return values["MemAvailable"] / values["MemTotal"]
    except (OSError, ValueError, KeyError, IndexError, ZeroDivisionError):
        return 1.0


def waited_seconds(pid: int) -> dict:
    """{thread id: seconds it waited, runnable, for a core}, of each thread of `pid`."""
    waited = {}
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return waited
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat", encoding="ascii") as stat:
                waited[int(task)] = int(stat.read().split()[1]) / 1e9
        except (OSError, ValueError, IndexError):
            continue
    return waited


@dataclass
class RunClock:
    """The time of one run check (both launches), as the machine let it run.

    tick(pids) every poll: `pids` the run's processes now. `counted` is the run's time,
    `wall` the wall-clock time, `cpu` all the run's processes' CPU time and others_cpu() the
    part of it that went to processes neither workers nor launchers (a script's own busy
    helpers)."""

    cores: int = field(default_factory=lambda: os.cpu_count() or 1)
    counted: float = 0.0
    wall: float = 0.0
    starved: float = 0.0  # wall seconds in which the machine's other processes held the run back
    lowest_memory: float = 1.0  # the least share of the machine's memory available at a tick
    _last: float | None = None
    _machine: float = 0.0
    _cpu: dict = field(default_factory=dict)  # pid: (CPU seconds, a launcher?)
    _waited: dict = field(default_factory=dict)  # (pid, tid): seconds waited
    _names: dict = field(default_factory=dict)  # pid: its short command line
    # pid: the pid the process has in its own PID namespace (the sandbox's, where the probe
    # records os.getpid()); the same pid outside a box.
    _inner: dict = field(default_factory=dict)

    @property
    def cpu(self) -> float:
        return sum(seconds for seconds, _ in self._cpu.values())

    def others_cpu(self, workers) -> float:
        """The CPU time of the run's processes but `workers` (pids as the workers see them:
        their records' own) and those of the launcher."""
        return sum(seconds for seconds, _ in self._others(workers))

    def busiest_other(self, workers) -> str:
        """The command line of the busiest process counted by others_cpu ("" if none)."""
        others = self._others(workers)
        return self._names.get(max(others)[1], "") if others else ""

    def _others(self, workers) -> list:
        """[(CPU seconds, pid)] of the run's processes that are neither `workers` nor launchers."""
        return [
            (seconds, pid)
            for pid, (seconds, launcher) in self._cpu.items()
            if self._inner.get(pid, pid) not in workers and not launcher
        ]

    def start(self) -> None:
        """Starts (or restarts, for the next launch) the interval count."""
        self._last, self._machine = time.monotonic(), machine_busy_seconds()
        self._waited = {}

    def tick(self, pids) -> float:
        """Adds the interval since the last tick; returns how much of it counted."""
        now, machine = time.monotonic(), machine_busy_seconds()
        if self._last is None:
            self._last, self._machine = now, machine
        interval = now - self._last
        cpu_before = self.cpu
        waited = 0.0
        for pid in pids:
            self._note_cpu(pid)
            for tid, seconds in waited_seconds(pid).items():
                waited += max(0.0, seconds - self._waited.get((pid, tid), seconds))
                self._waited[(pid, tid)] = seconds
        run_cpu = self.cpu - cpu_before
        outside = max(0.0, (machine - self._machine) - run_cpu)
        counted = interval
        if interval > 0 and waited >= WAITED_SHARE * interval:
            others_share = min(1.0, outside / (self.cores * interval))
            counted = interval * max(MIN_SHARE, 1.0 - others_share)
            if counted < interval:
                self.starved += interval
        self.counted += counted
        self.wall += interval
        self.lowest_memory = min(self.lowest_memory, memory_available_share())
        self._last, self._machine = now, machine
        return counted

    def _note_cpu(self, pid: int) -> None:
        import psutil  # here: importing the grader stays light

        try:
            process = psutil.Process(pid)
            times = process.cpu_times()
            if pid not in self._cpu:
                command = process.cmdline()
                launcher = any(word.endswith(LAUNCHERS) for word in command[:3])
                self._names[pid] = " ".join(
                    os.path.basename(w) if w.endswith(".py") else w for w in command[:5]
                )[:100]
                self._inner[pid] = innermost_pid(pid)
            else:
                launcher = self._cpu[pid][1]
        except (psutil.Error, OSError):
            return
        self._cpu[pid] = (times.user + times.system, launcher)

    def share_given(self) -> float:
        """The share of the wall-clock time that counted (1.0 on a quiet machine)."""
        return self.counted / self.wall if self.wall else 1.0

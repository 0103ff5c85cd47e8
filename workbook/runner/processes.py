"""Processes: stop everything a run started on this machine, wherever its launcher put it.

Two ways to find them: the process tree below horovodrun (recorded while the run goes on, so
that orphans are still known), and the run's marker, an environment variable every process of
the run inherits: OpenMPI's orted daemonizes (a new session, re-parented to init) where no
tree reaches it. Stopping goes SIGINT, SIGTERM, then SIGKILL: orted ignores SIGTERM.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import defaultdict
from contextlib import contextmanager

import psutil

# Seconds each stage of stopping waits before the next, harsher signal.
STOP_STAGES = ((signal.SIGINT, 3.0), (signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0))


class ProcessTree:
    """horovodrun and every process below it, remembered even after their parent died.

    horovodrun's Gloo launcher starts each worker through a "middleman" process that calls
    setsid(), so the workers are in sessions and process groups of their own: signalling
    horovodrun's process group alone would leave them running.
    """

    def __init__(self, process: subprocess.Popen, marker: tuple[str, str] | None = None):
        self.process = process
        self.marker = marker  # (name, value): the environment variable the run's processes carry
        self.known: dict[int, psutil.Process] = {}

    def snapshot(self, marked: bool = False) -> None:
        """Records the processes below horovodrun, and below any already known (orphans too);
        with `marked`, also those that carry the run's marker (reading every environment)."""
        children = defaultdict(list)
        for process in psutil.process_iter(["ppid"]):
            children[process.info["ppid"]].append(process)
            if marked and self._is_marked_stranger(process):
                self.known[process.pid] = process
        parents = [self.process.pid] + [p.pid for p in self.alive_descendants()]
        seen = set(parents)
        while parents:
            for child in children.get(parents.pop(), []):
                if child.pid in seen:
                    continue
                seen.add(child.pid)
                parents.append(child.pid)
                if not _is_alive(self.known.get(child.pid)):
                    self.known[child.pid] = child

    def _is_marked_stranger(self, process: psutil.Process) -> bool:
        """Carries the run's marker, yet is not horovodrun nor known already."""
        return (
            self.marker is not None
            and process.pid != self.process.pid
            and not _is_alive(self.known.get(process.pid))
            and _carries(process, self.marker)
        )

    def alive_descendants(self) -> list[psutil.Process]:
        return [p for p in self.known.values() if _is_alive(p)]

    def root_alive(self) -> bool:
        return self.process.poll() is None

    def signal(self, signum: int) -> None:
        try:
            os.killpg(self.process.pid, signum)  # horovodrun and its own helpers
        except (ProcessLookupError, PermissionError):
            pass
        for child in self.alive_descendants():
            try:
                child.send_signal(signum)
            except psutil.Error:
                pass

    def wait(self, seconds: float) -> bool:
        """Waits until every process is gone; True if they are."""
        deadline = time.monotonic() + seconds
        while True:
            self.snapshot(marked=True)
            if not self.root_alive() and not self.alive_descendants():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)

    def stop(self, stages=STOP_STAGES) -> list[int]:
        """SIGINT, then SIGTERM, then SIGKILL to all; returns the pids still alive after."""
        self.snapshot(marked=True)
        for signum, seconds in stages:
            if not self.root_alive() and not self.alive_descendants():
                break
            self.signal(signum)
            if self.wait(seconds):
                break
        return ([self.process.pid] if self.root_alive() else []) + [
            p.pid for p in self.alive_descendants()
        ]


def marked_pids(marker: tuple[str, str]) -> set[int]:
    """The processes on this machine (but this one) that carry the marker (name, value)."""
    return {process.pid for process in psutil.process_iter() if _carries(process, marker)}


def _network_namespace(pid: int | str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:  # gone, another user's, or no /proc (macOS)
        return None


def _carries(process: psutil.Process, marker: tuple[str, str]) -> bool:
    """Whether `process` carries the marker and runs on this machine.

    This machine as hosts.is_this_machine() sees it: its network addresses. A process of the
    run in another network namespace (a container, or a test's fake host) is on another host,
    which the clean-up reaches with ssh.
    """
    name, value = marker
    try:
        if process.pid == os.getpid() or process.environ().get(name) != value:
            return False
    except psutil.Error:  # gone, a zombie, or another user's
        return False
    return _network_namespace(process.pid) == _network_namespace("self")


def _is_alive(process: psutil.Process | None) -> bool:
    if process is None:
        return False
    try:
        # is_running() also compares the start time, so a reused pid does not count.
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def wait_briefly(process: subprocess.Popen, seconds: float) -> None:
    """Gives the process up to `seconds` to end; whoever asks checks whether it did."""
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        pass


@contextmanager
def interrupts_deferred():
    """Keeps a second Ctrl-C from cutting the cleanup short, and holds back a SIGTERM that a
    Python handler turns into an exception (the benchmarks' does) until the cleanup is done.
    Signals reach the main thread only: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = []
    previous_int = signal.signal(signal.SIGINT, lambda *_: None)
    previous_term = signal.getsignal(signal.SIGTERM)
    if callable(previous_term):
        signal.signal(signal.SIGTERM, lambda signum, frame: held.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous_int)
        if callable(previous_term):
            signal.signal(signal.SIGTERM, previous_term)
            if held:
                previous_term(signal.SIGTERM, held[0])

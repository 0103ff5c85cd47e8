"""Every check ends within a fixed time and memory budget, whatever the script holds.

The checker never runs a learner's script, but it works things out from it (names through
chains of assignments, the conditions around a line, which workers run it), and a broken or
hostile script can make that slow or huge: `9 ** 9 ** 9 ** 2`, a loop over `range(10**12)`,
deep nesting, a 1 MB file. Two layers keep every check bounded (grader/reading/guard.py runs every
check within them):

- `cpu_limit(seconds)` stops a piece of checking after `seconds` of CPU time (SIGPROF, so a
  busy machine does not make a good script fail), naming the line the checker was working on;
- `isolated(function, ...)` runs the whole check in a forked child with an address-space limit,
  a hard CPU limit and a wall-clock deadline, for what Python cannot interrupt (one huge C-level
  operation). The parent only receives the pickled result.

Where forking is not safe (no fork, or MPI initialised in this process: OpenMPI forbids it),
`isolated` runs in-process: `cpu_limit` still holds.
"""

from __future__ import annotations

import ast
import os
import pickle
import resource
import select
import signal
import sys
import threading
import time
from contextlib import contextmanager

STEP_CPU_SECONDS = 3.0  # one rule on one script; a rule takes milliseconds
PARSE_CPU_SECONDS = 5.0  # reading and parsing the file, building the Script
MEMORY_BYTES = 1 << 30  # address space a check may add to the process
WALL_MARGIN_SECONDS = 20.0  # on top of the CPU budgets: a loaded machine stretches wall time


class Spent(BaseException):
    """A budget ran out. A BaseException, so that no rule's `except Exception` swallows it."""

    def __init__(self, what: str, line: int | None = None):
        super().__init__(what)
        self.what = what
        self.line = line

    def message(self, subject: str = "this step") -> str:
        where = f" at line {self.line}" if self.line else ""
        return (
            f"{subject} could not be checked: the checker gave up{where} ({self.what}). "
            "It works out what the script does without running it; this line asks for more "
            "than a training script ever needs, so it counts as not done."
        )


def line_of(traceback) -> int | None:
    """The line of the script the checker was working on: the innermost frame of `traceback`
    holding an AST node with a line number."""
    line = None
    while traceback is not None:
        for value in traceback.tb_frame.f_locals.values():
            if isinstance(value, ast.AST) and getattr(value, "lineno", None):
                line = value.lineno
                break
        traceback = traceback.tb_next
    return line


class _CpuDeadline(BaseException):
    pass


@contextmanager
def cpu_limit(seconds: float, what: str):
    """Raises Spent(what, line) when the block uses more than `seconds` of CPU time.

    SIGPROF counts this process's CPU time, so waiting for a busy machine costs nothing. Only
    the main thread can receive signals; elsewhere the block runs without this limit (`isolated`'s
    hard limits still apply)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGPROF"):
        yield
        return

    def expire(signum, frame):
        raise _CpuDeadline()

    previous = signal.signal(signal.SIGPROF, expire)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    except _CpuDeadline as expired:
        raise Spent(
            f"{what} took more than {seconds:g} s of CPU time", line_of(expired.__traceback__)
        ) from None
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def fork_is_safe() -> bool:
    """Forking copies one thread of this process; that is safe for the checker's pure-Python
    work, except after MPI started here (OpenMPI aborts or corrupts memory) or without fork."""
    if not hasattr(os, "fork") or sys.platform != "linux":
        return False
    return not any(name == "mpi4py" or name.startswith("horovod.") for name in sys.modules)


def isolated(function, *args, cpu_seconds: float, memory_bytes: int = MEMORY_BYTES):
    """function(*args), computed in a forked child with limits (see the module docstring).

    Returns its result, or raises Spent when the child ran out of time or memory, or died.
    An exception the function raises is raised here too."""
    if not fork_is_safe():
        return function(*args)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, send, leave without running the parent's exit handlers
        status = 0
        try:
            os.close(read_end)
            _limit_child(cpu_seconds, memory_bytes)
            try:
                payload = pickle.dumps(("ok", function(*args)))
            except Spent as spent:
                payload = pickle.dumps(("spent", (spent.what, spent.line)))
            except MemoryError:
                payload = pickle.dumps(("spent", (f"more than {memory_bytes >> 20} MB", None)))
            except Exception as error:  # the caller sees the exception it would have seen
                try:
                    payload = pickle.dumps(("error", error))
                except Exception:
                    payload = pickle.dumps(("error", RuntimeError(repr(error))))
            with os.fdopen(write_end, "wb") as out:
                out.write(payload)
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write_end)
    return _receive(pid, read_end, cpu_seconds + WALL_MARGIN_SECONDS, memory_bytes)


def _limit_child(cpu_seconds: float, memory_bytes: int) -> None:
    used = resource.getrusage(resource.RUSAGE_SELF)
    cpu_now = used.ru_utime + used.ru_stime
    hard_cpu = int(cpu_now + cpu_seconds) + 2
    resource.setrlimit(resource.RLIMIT_CPU, (hard_cpu, hard_cpu))
    try:
        with open("/proc/self/statm") as statm:
            address_space = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        limit = address_space + memory_bytes
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (OSError, ValueError):
        pass  # no /proc: the time limits still hold


def _receive(pid: int, read_end: int, wall_seconds: float, memory_bytes: int):
    chunks, deadline = [], time.monotonic() + wall_seconds
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                raise Spent(f"no result within {wall_seconds:g} s")
            ready, _, _ = select.select([read_end], [], [], left)
            if ready:
                chunk = os.read(read_end, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
    except BaseException:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        raise
    finally:
        os.close(read_end)
        _, status = os.waitpid(pid, 0)
    if not chunks:
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU:
            raise Spent("it ran out of CPU time in one operation")
        raise Spent(
            f"the checking process ended without a result (more than "
            f"{memory_bytes >> 20} MB of memory, or a crash)"
        )
    kind, value = pickle.loads(b"".join(chunks))
    if kind == "spent":
        raise Spent(*value)
    if kind == "error":
        raise value
    return value

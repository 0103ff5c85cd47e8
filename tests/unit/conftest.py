"""tests/unit/ starts no process: a test here that starts one fails, saying where.

Every way Python starts a process goes through one of the functions replaced below while a test
of this folder is set up, run and torn down (subprocess, multiprocessing, pty, os.system,
os.posix_spawn, os.fork), so a test that runs a program, a server or horovodrun cannot land
here by mistake: it fails even when the code under test catches the error. The one fork allowed
is the checker's own: grader/reading/budget.py's `isolated` checks in a forked copy of this process that
only computes and returns the verdict, within its budget (it is what many tests here test).
"""

from __future__ import annotations

import _posixsubprocess
import os
import platform
import subprocess
import sys
import traceback
from contextlib import contextmanager
from pathlib import Path

import pytest

ELSEWHERE = (
    "tests/smoke/ (starts processes, seconds: make check) or tests/system/ "
    "(real runs, servers, browsers, nbgrader: make test)"
)
CHECKER_FORK = ("grader/reading/budget.py", "isolated")  # file and function of the one fork allowed
REPO = str(Path(__file__).resolve().parents[2]) + os.sep
VENV = str(Path(sys.executable).parents[1]) + os.sep
# Probes that libraries run once and cache, done here before any test so that no test here
# starts them: Python's platform module runs `uname -p` the first time it is asked (importing
# TensorFlow asks); importing jupytext runs `pandoc --version`; the first import of matplotlib's
# font manager on a machine runs `fc-list` to build its font cache (~/.cache/matplotlib: on a
# fresh machine, or where that folder can't be written, in every session).
platform.processor()
import jupytext  # noqa: E402, F401
import matplotlib.font_manager  # noqa: E402, F401

OS_STARTS = (
    "forkpty",
    "system",
    "posix_spawn",
    "posix_spawnp",
    "spawnv",
    "spawnve",
    "execv",
    "execve",
)


def _where() -> str:
    """The innermost frames of the workbook and its tests that led to the start."""
    frames = [
        f
        for f in traceback.extract_stack()[:-3]
        if f.filename.startswith(REPO) and not f.filename.startswith(VENV)
    ]
    return "\n".join(f"  {f.filename}:{f.lineno} in {f.name}" for f in frames[-4:])


@contextmanager
def refusing_processes(started: list[str]):
    """Within the block, starting a process raises and is noted in `started`."""

    def refused(what):
        def refuse(*args, **kwargs):
            started.append(f"{what}, from\n{_where()}")
            raise AssertionError(f"tests/unit/ starts no process; this test started one ({what})")

        return refuse

    real_fork = os.fork

    def checker_fork_only():
        caller = sys._getframe(1).f_code
        if caller.co_filename.endswith(CHECKER_FORK[0]) and caller.co_name == CHECKER_FORK[1]:
            return real_fork()
        return refused("os.fork")()

    replaced = [
        (subprocess, "_fork_exec", refused("subprocess")),
        (_posixsubprocess, "fork_exec", refused("multiprocessing or _posixsubprocess")),
        (os, "fork", checker_fork_only),
    ]
    replaced += [(os, name, refused(f"os.{name}")) for name in OS_STARTS if hasattr(os, name)]
    originals = [(module, name, getattr(module, name)) for module, name, _ in replaced]
    for module, name, replacement in replaced:
        setattr(module, name, replacement)
    try:
        yield
    finally:
        for module, name, original in originals:
            setattr(module, name, original)


def _guarded(item):
    """One phase of `item` (a generator for the hook wrappers below)."""
    started: list[str] = []
    error = None
    with refusing_processes(started):
        try:
            result = yield
        except BaseException as raised:
            error = raised
    if started:  # also when the code under test caught the error
        pytest.fail(
            f"{item.nodeid} started a process ({started[0]})\ntests/unit/ starts "
            f"none: move the test to {ELSEWHERE}.",
            pytrace=False,
        )
    if error is not None:
        raise error
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    return (yield from _guarded(item))

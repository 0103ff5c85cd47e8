"""Nothing hangs, the quick part: conftest.py's listener holds TensorBoard's port during the tests,
a benchmark run that outlives its limit is stopped with its log, and a test that times out is
stopped with everything it started (a pytest of its own). Real MPI runs: system/test_no_hang.py.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from bench.processes import CommandFailed, run_timed
from processes import python_c_plan


def test_tensorboards_port_is_taken_during_the_tests():
    # Another program may hold the port and let it go (a TensorBoard closed beside the tests):
    # the session's holder takes it within half a second, so a connection succeeds by then.
    deadline = time.monotonic() + 10
    while True:
        try:
            with socket.create_connection(("127.0.0.1", 6006), timeout=5):
                return
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_a_benchmark_run_that_outlives_its_limit_is_stopped_with_its_log(tmp_path):
    # The child leaves the run's session, as horovodrun's workers and orted do.
    script = "import os, time; os.setsid() if os.fork() == 0 else None; time.sleep(600)"
    started = time.monotonic()
    with pytest.raises(CommandFailed) as failure:
        run_timed(python_c_plan(script, tmp_path, timeout=3))
    assert time.monotonic() - started < 30
    assert str(tmp_path / "run" / "horovodrun.log") in str(failure.value)
    sleepers = [
        p
        for p in psutil.process_iter(["cmdline"])
        if p.info["cmdline"] and script in p.info["cmdline"]
    ]
    assert not sleepers, f"left running: {sleepers}"


def test_a_test_that_times_out_is_stopped_with_everything_it_started(tmp_path):
    """pytest-timeout ends the test; conftest shows and kills what it started, even what left
    its session (as orted does) and ignores SIGTERM."""
    (tmp_path / "conftest.py").write_text(
        (Path(__file__).resolve().parents[1] / "conftest.py")
        .read_text()
        .replace(
            "sys.path.insert(0, str(Path(__file__).resolve().parent))",
            f"sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})",
        )
    )
    (tmp_path / "test_stuck.py").write_text(
        textwrap.dedent(f"""
        import subprocess, sys, time
        import pytest

        @pytest.mark.timeout(3)
        def test_stuck():
            code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
            subprocess.Popen([sys.executable, "-c", code, "stuck-marker-{tmp_path.name}"],
                             start_new_session=True)
            time.sleep(600)
    """)
    )
    reply = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            "-o",
            "timeout_method=signal",
            str(tmp_path / "test_stuck.py"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    output = reply.stdout + reply.stderr
    assert reply.returncode == 1, output
    assert "Timeout" in output
    assert "killing 1 process(es) left behind" in output and "stuck-marker" in output
    left = [
        p
        for p in psutil.process_iter(["cmdline"])
        if f"stuck-marker-{tmp_path.name}" in " ".join(p.info["cmdline"] or [])
    ]
    assert not left, f"left running: {left}"

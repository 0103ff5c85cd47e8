"""Nothing hangs: MPI with TensorBoard's port taken, and the tests' own time limits.

conftest.py holds a listener on 127.0.0.1:6006 for the whole session (or `make lab`'s TensorBoard
does). With Horovod built with MPI, OpenMPI's hwloc takes it for X display :6 and waits forever,
unless HWLOC_COMPONENTS=-gl is set (workbook.facts.SAFE_PROCESS_ENV). The runner's own launches
are tested in test_runner.py, the Slurm job script in test_cluster.py, mpirun in test_mpirun.py.
"""

from __future__ import annotations

import os
import shutil
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
from workbook.facts import SAFE_PROCESS_ENV, with_safe_env

HOROVOD_INIT = (
    "import horovod.tensorflow.keras as hvd; hvd.init(); "
    "print(f'initialized rank {hvd.rank()} of {hvd.size()}', flush=True)"
)
HOROVODRUN = Path(sys.executable).with_name("horovodrun")
MPIRUN = shutil.which("mpirun")
QUIET = {"TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONUNBUFFERED": "1"}


def horovod_has_mpi() -> bool:
    reply = subprocess.run(
        [sys.executable, "-c", "import horovod.tensorflow as h; print(h.mpi_built())"],
        capture_output=True, text=True, timeout=120, env={**os.environ, **QUIET},
    )
    return reply.stdout.strip().endswith("True")


needs_mpi = pytest.mark.skipif(
    MPIRUN is None or not horovod_has_mpi(),
    reason="Horovod is not built with MPI here (make mpi, then make env REBUILD_HOROVOD=1)",
)


def without_safe_env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in SAFE_PROCESS_ENV}


def test_tensorboards_port_is_taken_during_the_tests():
    with socket.create_connection(("127.0.0.1", 6006), timeout=5):
        pass


@needs_mpi
@pytest.mark.slow
def test_without_the_setting_hvd_init_hangs(tmp_path, tensorboard_port_taken):
    """The control: the hang is real here, so the runs below could fail."""
    if tensorboard_port_taken != "the tests":
        # A listener that answers or closes the connection lets the X probe give up.
        pytest.skip(f"port 6006 is held by {tensorboard_port_taken}, not by the tests' silent one")
    with pytest.raises(CommandFailed, match="did not finish in 30 s; its log: "):
        run_timed(python_c_plan(HOROVOD_INIT, tmp_path, timeout=30,
                                env={**QUIET, "HWLOC_COMPONENTS": ""}))


@needs_mpi
@pytest.mark.slow
@pytest.mark.parametrize(
    "launch",
    [
        pytest.param([sys.executable, "-c", HOROVOD_INIT], id="python"),
        pytest.param([str(HOROVODRUN), "--mpi", "-np", "2", sys.executable, "-c", HOROVOD_INIT],
                     id="horovodrun-mpi"),
        pytest.param([str(HOROVODRUN), "--gloo", "-np", "2", sys.executable, "-c", HOROVOD_INIT],
                     id="horovodrun-gloo"),
        pytest.param([MPIRUN or "mpirun", *(["--allow-run-as-root"] if os.geteuid() == 0 else []),
                      "-np", "2", "--oversubscribe", "--bind-to", "none",
                      sys.executable, "-c", HOROVOD_INIT], id="mpirun"),
    ],
)
def test_a_make_lab_terminal_launches_with_the_port_taken(launch, tmp_path):
    """What a learner types in a JupyterLab terminal, whose environment `make lab` made safe."""
    env = {**with_safe_env(), **QUIET,
           "PATH": os.pathsep.join([str(HOROVODRUN.parent), os.environ["PATH"]])}
    reply = subprocess.run(launch, env=env, capture_output=True, text=True, timeout=180,
                           start_new_session=True)
    assert reply.returncode == 0, reply.stdout[-2000:] + reply.stderr[-2000:]
    workers = 1 if launch[0] == sys.executable else 2
    assert reply.stdout.count("initialized rank") == workers, reply.stdout


@needs_mpi
@pytest.mark.slow
def test_benchmark_runs_are_made_safe_by_the_benchmark(tmp_path, monkeypatch):
    for variable in SAFE_PROCESS_ENV:
        monkeypatch.delenv(variable, raising=False)
    timed = run_timed(python_c_plan(HOROVOD_INIT, tmp_path, timeout=180, env=QUIET))
    assert "initialized rank 0 of 1" in timed.output
    assert "initialized rank 0 of 1" in timed.log_path.read_text()


def test_a_benchmark_run_that_outlives_its_limit_is_stopped_with_its_log(tmp_path):
    # The child leaves the run's session, as horovodrun's workers and orted do.
    script = "import os, time; os.setsid() if os.fork() == 0 else None; time.sleep(600)"
    started = time.monotonic()
    with pytest.raises(CommandFailed) as failure:
        run_timed(python_c_plan(script, tmp_path, timeout=3))
    assert time.monotonic() - started < 30
    assert str(tmp_path / "run" / "horovodrun.log") in str(failure.value)
    sleepers = [p for p in psutil.process_iter(["cmdline"])
                if p.info["cmdline"] and script in p.info["cmdline"]]
    assert not sleepers, f"left running: {sleepers}"


def test_a_test_that_times_out_is_stopped_with_everything_it_started(tmp_path):
    """pytest-timeout ends the test; conftest shows and kills what it started, even what left
    its session (as orted does) and ignores SIGTERM."""
    (tmp_path / "conftest.py").write_text(
        (Path(__file__).with_name("conftest.py")).read_text().replace(
            "sys.path.insert(0, str(Path(__file__).resolve().parent))",
            f"sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})",
        )
    )
    (tmp_path / "test_stuck.py").write_text(textwrap.dedent(f"""
        import subprocess, sys, time
        import pytest

        @pytest.mark.timeout(3)
        def test_stuck():
            code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
            subprocess.Popen([sys.executable, "-c", code, "stuck-marker-{tmp_path.name}"],
                             start_new_session=True)
            time.sleep(600)
    """))
    reply = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
         "-o", "timeout_method=signal", str(tmp_path / "test_stuck.py")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    output = reply.stdout + reply.stderr
    assert reply.returncode == 1, output
    assert "Timeout" in output
    assert "killing 1 process(es) left behind" in output and "stuck-marker" in output
    left = [p for p in psutil.process_iter(["cmdline"])
            if f"stuck-marker-{tmp_path.name}" in " ".join(p.info["cmdline"] or [])]
    assert not left, f"left running: {left}"

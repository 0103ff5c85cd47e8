"""Nothing hangs: MPI with TensorBoard's port taken, for real.

conftest.py holds a listener on 127.0.0.1:6006 for the whole session (or `make lab`'s TensorBoard
does). With Horovod built with MPI, OpenMPI's hwloc takes it for X display :6 and waits forever,
unless HWLOC_COMPONENTS=-gl is set (workbook.facts.SAFE_PROCESS_ENV). The runner's own launches
are tested in system/test_runner_cleanup.py, the Slurm job script in system/test_cluster_runs.py,
mpirun in system/test_mpirun.py; the tests' own time limits in smoke/test_no_hang_processes.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

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
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **QUIET},
    )
    return reply.stdout.strip().endswith("True")


needs_mpi = pytest.mark.skipif(
    MPIRUN is None or not horovod_has_mpi(),
    reason="Horovod is not built with MPI here (make mpi, then make env REBUILD_HOROVOD=1)",
)


@needs_mpi
def test_without_the_setting_hvd_init_hangs(tmp_path, tensorboard_port_taken):
    """The control: the hang is real here, so the runs below could fail."""
    if tensorboard_port_taken.holder() != "the tests":
        # A listener that answers or closes the connection lets the X probe give up.
        pytest.skip(f"port 6006 is held by {tensorboard_port_taken}, not by the tests' silent one")
    # 20 s: the same line finishes in 2-6 s with the setting (its import of TensorFlow).
    with pytest.raises(CommandFailed, match="did not finish in 20 s; its log: "):
        run_timed(
            python_c_plan(HOROVOD_INIT, tmp_path, timeout=20, env={**QUIET, "HWLOC_COMPONENTS": ""})
        )


@needs_mpi
@pytest.mark.parametrize(
    "launch",
    [
        pytest.param([sys.executable, "-c", HOROVOD_INIT], id="python"),
        pytest.param(
            [str(HOROVODRUN), "--mpi", "-np", "2", sys.executable, "-c", HOROVOD_INIT],
            id="horovodrun-mpi",
        ),
        pytest.param(
            [str(HOROVODRUN), "--gloo", "-np", "2", sys.executable, "-c", HOROVOD_INIT],
            id="horovodrun-gloo",
        ),
        pytest.param(
            [
                MPIRUN or "mpirun",
                *(["--allow-run-as-root"] if os.geteuid() == 0 else []),
                "-np",
                "2",
                "--oversubscribe",
                "--bind-to",
                "none",
                sys.executable,
                "-c",
                HOROVOD_INIT,
            ],
            id="mpirun",
        ),
    ],
)
def test_a_make_lab_terminal_launches_with_the_port_taken(launch, tmp_path):
    """What a learner types in a JupyterLab terminal, whose environment `make lab` made safe."""
    env = {
        **with_safe_env(),
        **QUIET,
        "PATH": os.pathsep.join([str(HOROVODRUN.parent), os.environ["PATH"]]),
    }
    reply = subprocess.run(
        launch, env=env, capture_output=True, text=True, timeout=180, start_new_session=True
    )
    assert reply.returncode == 0, reply.stdout[-2000:] + reply.stderr[-2000:]
    workers = 1 if launch[0] == sys.executable else 2
    assert reply.stdout.count("initialized rank") == workers, reply.stdout


@needs_mpi
def test_benchmark_runs_are_made_safe_by_the_benchmark(tmp_path, monkeypatch):
    for variable in SAFE_PROCESS_ENV:
        monkeypatch.delenv(variable, raising=False)
    timed = run_timed(python_c_plan(HOROVOD_INIT, tmp_path, timeout=180, env=QUIET))
    assert "initialized rank 0 of 1" in timed.log_path.read_text()

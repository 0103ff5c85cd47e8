"""Horovod's MPI controller: the solution trains on 2 workers started by a bare `mpirun`.

Slow. Runs only where this environment's Horovod was built with MPI and OpenMPI's `mpirun` is on
PATH: `make test` installs OpenMPI (tests/setup_mpi.sh) before it builds the environment, and
bootstrap then compiles Horovod with MPI. Elsewhere the tests are skipped and say why.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workbook.facts import results, with_safe_env
from workbook.paths import REPO

SOLUTION = REPO / "solutions" / "fashion_mnist_solution.py"
SAMPLE = REPO / "data" / "sample"
INSTALL_OPENMPI = "apt-get install openmpi-bin libopenmpi-dev"
TINY_RUN = [
    "--data-dir",
    str(SAMPLE),
    "--train-images",
    "1024",
    "--test-images",
    "256",
    "--depth",
    "10",
    "--width",
    "1",
    "--epochs",
    "1",
    "--steps-per-epoch",
    "8",
]
TIMEOUT = 900  # seconds: generous, the test machines are shared


def horovod_mpi_built() -> bool:
    """Asked in a subprocess: importing Horovod here would load TensorFlow into pytest."""
    probe = "import horovod.tensorflow as hvd; print(hvd.mpi_built())"
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    return result.returncode == 0 and result.stdout.strip().endswith("True")


MPIRUN = shutil.which("mpirun")


@pytest.fixture(scope="module")
def mpi_horovod():
    """Skips, naming the fix, unless mpirun and an MPI-built Horovod are both here.

    A fixture rather than a skipif mark: the check imports TensorFlow (seconds), which must
    not slow down collecting the other tests.
    """
    if MPIRUN is None:
        pytest.skip(
            f"mpirun not found: install OpenMPI ({INSTALL_OPENMPI}) "
            "and run make env REBUILD_HOROVOD=1"
        )
    if not horovod_mpi_built():
        pytest.skip(
            f"Horovod in this environment was built without MPI: install OpenMPI "
            f"({INSTALL_OPENMPI}) and run make env REBUILD_HOROVOD=1"
        )
    if not (SAMPLE / "train.npz").is_file():
        pytest.skip(f"no sample data in {SAMPLE}: git checkout -- data/sample")


def worker_env() -> dict:
    """A terminal or kernel of `make lab`, which has the settings that keep MPI from hanging."""
    env = with_safe_env()
    env.update(
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
        # Two workers on the machine's cores: one thread each, or they fight over them.
        TF_NUM_INTRAOP_THREADS="1",
        TF_NUM_INTEROP_THREADS="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def mpirun_command(log_dir: Path) -> list[str]:
    as_root = (
        ["--allow-run-as-root"] if os.geteuid() == 0 else []
    )  # OpenMPI refuses root without it
    forwarded = [
        arg
        for name in ("PATH", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "PYTHONUNBUFFERED")
        for arg in ("-x", name)
    ]
    return [
        MPIRUN,
        *as_root,
        "-np",
        "2",
        "--oversubscribe",
        "--bind-to",
        "none",
        "--tag-output",
        *forwarded,
        sys.executable,
        str(SOLUTION),
        *TINY_RUN,
        "--log-dir",
        str(log_dir),
    ]


def run(command: list[str], cwd: Path) -> tuple[int, str]:
    result = subprocess.run(
        command,
        env=worker_env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        start_new_session=True,
    )
    return result.returncode, result.stdout + result.stderr


def the_result(output: str) -> dict:
    printed = results(output)
    assert len(printed) == 1, "exactly one RESULT line, from rank 0"
    return printed[0]


def test_solution_trains_on_two_workers_under_mpirun(mpi_horovod, tmp_path):
    code, output = run(mpirun_command(tmp_path / "logs"), tmp_path)
    tail = "\n".join(output.splitlines()[-30:])
    assert code == 0, f"mpirun exited with {code}:\n{tail}"
    # Both workers trained as one job of 2: rank 0's epoch has 8 // 2 = 4 steps (one worker
    # would show 8/8), and a step of 2 workers cannot finish unless rank 1 joins its allreduce.
    # Started by a bare mpirun, the workers can only know of each other through MPI.
    assert re.search(r"\b4/4\b", output), f"rank 0 did not train 4 steps of 2 workers:\n{tail}"
    assert re.search(r"^\[\d+,0\]<stdout>:RESULT ", output, re.M), "rank 0 prints the results"
    metrics = the_result(output)
    assert metrics["epochs"] == 1 and 0.0 <= metrics["test_accuracy"] <= 1.0
    assert (tmp_path / "logs" / "checkpoint-1.h5").is_file()


def test_plain_python_still_works_when_horovod_has_mpi(mpi_horovod, tmp_path):
    """Without a launcher, MPI starts as a one-process job: the baseline runs keep working."""
    command = [sys.executable, str(SOLUTION), *TINY_RUN, "--log-dir", str(tmp_path / "logs")]
    code, output = run(command, tmp_path)
    assert code == 0, "\n".join(output.splitlines()[-30:])
    assert re.search(r"\b8/8\b", output), "one worker trains all 8 steps"
    assert the_result(output)["epochs"] == 1

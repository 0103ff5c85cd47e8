"""Real 2-worker runs from a plain shell do not hang (bootstrap/safe_env.py): `env -i` with
PATH=/usr/bin:/bin, nothing exported by hand, while conftest's silent listener holds
127.0.0.1:6006 (TensorBoard's port). A hang never ends; a run that works takes 35-120 s on 2
busy cores, so each has a limit of 300 s.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from bootstrap import safe_env
from processes import plain_shell
from workbook.paths import REPO

THIS_ENV = Path(sys.prefix)
SOLUTION = REPO / "solutions" / "fashion_mnist_solution.py"
TINY_RUN = [
    "--data-dir",
    str(REPO / "data" / "sample"),
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
HANG_LIMIT_S = 300


@pytest.fixture
def mpi_environment():
    """Skips (a failure under make test) unless this environment's Horovod has MPI."""
    if safe_env.real_program("mpirun", THIS_ENV) is None:
        pytest.skip("no OpenMPI mpirun: make mpi, then make env REBUILD_HOROVOD=1")
    probe = plain_shell(
        f"{THIS_ENV}/bin/python -c 'import horovod.tensorflow as h; print(h.mpi_built())'",
        timeout=120,
    )
    if not probe.stdout.strip().endswith("True"):
        pytest.skip(
            "Horovod in this environment was built without MPI: make env "
            "REBUILD_HOROVOD=1 after make mpi"
        )
    if not (THIS_ENV / "bin" / "mpirun").exists():
        pytest.skip("no mpirun wrapper in this environment (built before it existed): make env")


@pytest.mark.parametrize("launch", ["python", "horovodrun", "mpirun"])
def test_a_2_worker_run_from_a_plain_shell_does_not_hang(
    launch, mpi_environment, tensorboard_port_taken, tmp_path
):
    assert tensorboard_port_taken  # 127.0.0.1:6006 is held for the whole session
    bin_dir = THIS_ENV / "bin"
    run = " ".join(
        shlex.quote(a) for a in [str(SOLUTION), *TINY_RUN, "--log-dir", str(tmp_path / "logs")]
    )
    root = "--allow-run-as-root " if os.geteuid() == 0 else ""
    commands = {
        # hvd.init() in a plain process starts OpenMPI's orted: the hang of the issue.
        "python": f"{bin_dir}/python {run}",
        "horovodrun": f"{bin_dir}/horovodrun --mpi -np 2 {bin_dir}/python {run}",
        "mpirun": f"{bin_dir}/mpirun {root}-np 2 --oversubscribe --bind-to none "
        f"{bin_dir}/python {run}",
    }
    try:
        reply = plain_shell(commands[launch], timeout=HANG_LIMIT_S)
    except subprocess.TimeoutExpired as stuck:
        pytest.fail(
            f"{launch} from a plain shell still running after {HANG_LIMIT_S} s: "
            f"{(stuck.stdout or b'')[-1500:]!r}"
        )
    output = reply.stdout + reply.stderr
    assert reply.returncode == 0, output[-3000:]
    assert "RESULT {" in output, output[-3000:]
    # Rank 0's bar counts 4 steps of 8 when two workers split the epoch; a lone process, 8.
    steps = "8/8" if launch == "python" else "4/4"
    assert re.search(rf"\b{steps}\b", output), output[-3000:]

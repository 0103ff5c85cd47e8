"""The Slurm job script for real: solutions/cluster/fashion_mnist.sbatch through bash, as sbatch
would run it on the first node, with the variables Slurm sets for one node `localhost` with 2
tasks: a real 2-worker horovodrun training run.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from cluster_jobs import job_env
from workbook.facts import results
from workbook.paths import REPO

TEMPLATE = REPO / "solutions" / "cluster" / "fashion_mnist.sbatch"
SAMPLE = REPO / "data" / "sample"
VENV_BIN = Path(sys.executable).parent


# --- host lists --------------------------------------------------------------------------------


@pytest.mark.skipif(
    not (VENV_BIN / "activate").exists(),
    reason=f"the job script activates a venv; {sys.prefix} has no bin/activate",
)
@pytest.mark.skipif(not (SAMPLE / "train.npz").is_file(), reason=f"no sample data in {SAMPLE}")
def test_sbatch_script_trains_on_two_workers(tmp_path):
    train_args = shlex.join(
        [
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
            "--log-dir",
            str(tmp_path / "logs"),
        ]
    )
    env = job_env(
        tmp_path,
        train_args,
        SLURM_JOB_NODELIST="localhost",
        SLURM_TASKS_PER_NODE="2",
        SLURM_NTASKS="2",
        SLURM_NNODES="1",
    )
    result = subprocess.run(
        ["bash", str(TEMPLATE)],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=900,
        start_new_session=True,
    )
    output = result.stdout + result.stderr
    tail = "\n".join(output.splitlines()[-30:])
    assert result.returncode == 0, f"the job script failed:\n{tail}"
    assert "Horovod: 2 workers on localhost:2 (job 4242)" in output
    # Both workers trained as one job of 2: rank 0's epoch has 8 // 2 = 4 steps (one worker
    # would show 8/8), and a step of 2 workers cannot finish unless rank 1 joins its allreduce.
    assert re.search(r"\b4/4\b", output), f"rank 0 did not train 4 steps of 2 workers:\n{tail}"
    assert not re.search(r"\b8/8\b", output)
    printed = results(output)
    assert len(printed) == 1, "only rank 0 prints its results"
    metrics = printed[0]
    assert metrics["epochs"] == 1 and 0.0 <= metrics["test_accuracy"] <= 1.0
    assert list((tmp_path / "logs").glob("checkpoint-1.h5")), "rank 0 wrote no checkpoint"

"""Slurm's helpers run for real: `python -m workbook.cluster slurm-hosts` prints the values for
horovodrun or one line of error, and solutions/cluster/fashion_mnist.sbatch parses (bash -n),
shows the srun alternative, and stops with one line without Slurm's variables.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from cluster_jobs import job_env
from workbook import cluster
from workbook.paths import REPO

TEMPLATE = REPO / "solutions" / "cluster" / "fashion_mnist.sbatch"


# --- host lists --------------------------------------------------------------------------------


def run_cli(command, variables):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    return subprocess.run(
        [sys.executable, "-m", "workbook.cluster", command],
        capture_output=True,
        text=True,
        env={**env, **variables},
        cwd=REPO,
        timeout=60,
    )


def test_cli_prints_the_values_for_horovodrun():
    variables = {
        "SLURM_JOB_NODELIST": "gpu[01-02]",
        "SLURM_TASKS_PER_NODE": "4(x2)",
        "SLURM_NTASKS": "8",
    }
    hosts, np_ = run_cli("slurm-hosts", variables), run_cli("slurm-np", variables)
    assert (hosts.returncode, hosts.stdout) == (0, "gpu01:4,gpu02:4\n")
    assert (np_.returncode, np_.stdout) == (0, "8\n")


def test_cli_error_is_one_line_without_a_traceback():
    result = run_cli("slurm-hosts", {"SLURM_JOB_NODELIST": "node[01-"})
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "SLURM_JOB_NODELIST" in result.stderr and "'[' without ']'" in result.stderr
    assert cluster.main(["no-such-command"], env={}) == 2


def test_sbatch_shows_the_srun_alternative_and_uses_the_cluster_module():
    text = TEMPLATE.read_text()
    assert re.search(r"^#\s+srun --mpi=\w+ python ", text, re.M)
    assert "python -m workbook.cluster slurm-np" in text
    assert "python -m workbook.cluster slurm-hosts" in text
    result = subprocess.run(["bash", "-n", str(TEMPLATE)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_sbatch_stops_with_one_line_when_slurm_variables_are_missing(tmp_path):
    result = subprocess.run(
        ["bash", str(TEMPLATE)],
        env=job_env(tmp_path, "--epochs 1"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "SLURM_JOB_NODELIST is not set" in result.stderr and "Traceback" not in result.stderr

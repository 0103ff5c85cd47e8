"""Slurm: host lists and task counts become horovodrun's -np and -H, and the job script runs.

Fast tests cover workbook.cluster (Slurm's compressed host lists and task counts, expanded
without Slurm) and the #SBATCH lines of solutions/cluster/fashion_mnist.sbatch. The slow one
runs that job script through bash, as sbatch would on the first node, with the variables Slurm
sets for one node `localhost` with 2 tasks: a real 2-worker horovodrun training run.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workbook import cluster
from workbook.cluster import SlurmError, expand_hostlist, expand_tasks_per_node, slurm_layout
from workbook.facts import results
from workbook.paths import REPO

TEMPLATE = REPO / "solutions" / "cluster" / "fashion_mnist.sbatch"
SAMPLE = REPO / "data" / "sample"
VENV_BIN = Path(sys.executable).parent


# --- host lists --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("localhost", ["localhost"]),
        ("node01,node02", ["node01", "node02"]),
        ("node[01-03,07]", ["node01", "node02", "node03", "node07"]),
        ("node[8-11]", ["node8", "node9", "node10", "node11"]),  # no padding: widths vary
        ("node[008-010]", ["node008", "node009", "node010"]),  # padding kept past a carry
        ("node[0-1]", ["node0", "node1"]),
        ("gpu[1-2],cpu[05-06],login", ["gpu1", "gpu2", "cpu05", "cpu06", "login"]),
        ("rack[1-2]-n[01-02]", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]),
        ("a[3]", ["a3"]),
        ("node-[1-2].cluster", ["node-1.cluster", "node-2.cluster"]),
        (" node[1-2] ", ["node1", "node2"]),
    ],
)
def test_hostlist_expansion(text, hosts):
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "is empty"),
        ("node[1-3", "'[' without ']'"),
        ("node1-3]", "']' without '['"),
        ("node[[1-2]]", "nested"),
        ("node[3-1]", "runs backwards"),
        ("node[a-b]", "is not a number or a range"),
        ("node[1-2,]", "is not a number or a range"),
        ("node1,,node2", "an empty name"),
    ],
)
def test_malformed_hostlists_are_named(text, message):
    with pytest.raises(SlurmError, match=re.escape(message)):
        expand_hostlist(text, "SLURM_JOB_NODELIST")


# --- tasks per node ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "counts"),
    [
        ("4", [4]),
        ("2(x3)", [2, 2, 2]),
        ("2(x3),1", [2, 2, 2, 1]),
        ("1,4(x2),2", [1, 4, 4, 2]),
    ],
)
def test_tasks_per_node_expansion(text, counts):
    assert expand_tasks_per_node(text) == counts


@pytest.mark.parametrize("text", ["", "2x3", "2(3)", "(x2)", "-1", "two"])
def test_malformed_tasks_per_node_are_named(text):
    with pytest.raises(SlurmError, match="SLURM_TASKS_PER_NODE"):
        expand_tasks_per_node(text)


# --- the layout: which variable wins, and the checks ---------------------------------------------


def test_tasks_per_node_give_uneven_slots():
    layout = slurm_layout({"SLURM_JOB_NODELIST": "node[01-03,07]",
                           "SLURM_TASKS_PER_NODE": "2(x3),1", "SLURM_NTASKS": "7"})
    assert layout.hosts == "node01:2,node02:2,node03:2,node07:1"
    assert layout.workers == 7


@pytest.mark.parametrize(
    ("variables", "hosts", "workers"),
    [
        ({"SLURM_NTASKS_PER_NODE": "4"}, "n1:4,n2:4", 8),
        ({"SLURM_GPUS_ON_NODE": "2"}, "n1:2,n2:2", 4),
        ({"SLURM_NTASKS": "6"}, "n1:3,n2:3", 6),
        # The precise per-node list wins over the job-wide numbers.
        ({"SLURM_TASKS_PER_NODE": "3,1", "SLURM_NTASKS_PER_NODE": "4"}, "n1:3,n2:1", 4),
        # Fewer tasks than slots: horovodrun fills the first slots.
        ({"SLURM_NTASKS_PER_NODE": "4", "SLURM_NTASKS": "5"}, "n1:4,n2:4", 5),
    ],
)
def test_slots_come_from_the_most_precise_variable(variables, hosts, workers):
    layout = slurm_layout({"SLURM_JOB_NODELIST": "n[1-2]", **variables})
    assert (layout.hosts, layout.workers) == (hosts, workers)


def test_older_slurm_nodelist_variable_is_read():
    assert slurm_layout({"SLURM_NODELIST": "a,b", "SLURM_NTASKS": "2"}).hosts == "a:1,b:1"


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({}, "SLURM_JOB_NODELIST is not set"),
        ({"SLURM_JOB_NODELIST": "n[1-2]"}, "none of SLURM_TASKS_PER_NODE"),
        ({"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "2(x3)"},
         "gives 3 node(s) but the node list has 2"),
        ({"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NTASKS": "3"}, "does not split evenly"),
        ({"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NTASKS_PER_NODE": "2", "SLURM_NTASKS": "9"},
         "more than the 4 slots"),
        ({"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_GPUS_ON_NODE": "lots"}, "SLURM_GPUS_ON_NODE"),
        ({"SLURM_JOB_NODELIST": "n1,n1", "SLURM_NTASKS": "2"}, "names a node twice"),
    ],
)
def test_missing_or_malformed_variables_are_named(variables, message):
    with pytest.raises(SlurmError, match=re.escape(message)):
        slurm_layout(variables)


def run_cli(command, variables):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    return subprocess.run([sys.executable, "-m", "workbook.cluster", command],
                          capture_output=True, text=True, env={**env, **variables}, cwd=REPO,
                          timeout=60)


def test_cli_prints_the_values_for_horovodrun():
    variables = {"SLURM_JOB_NODELIST": "gpu[01-02]", "SLURM_TASKS_PER_NODE": "4(x2)",
                 "SLURM_NTASKS": "8"}
    hosts, np_ = run_cli("slurm-hosts", variables), run_cli("slurm-np", variables)
    assert (hosts.returncode, hosts.stdout) == (0, "gpu01:4,gpu02:4\n")
    assert (np_.returncode, np_.stdout) == (0, "8\n")


def test_cli_error_is_one_line_without_a_traceback():
    result = run_cli("slurm-hosts", {"SLURM_JOB_NODELIST": "node[01-"})
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "SLURM_JOB_NODELIST" in result.stderr and "'[' without ']'" in result.stderr
    assert cluster.main(["no-such-command"], env={}) == 2


# --- the job script's #SBATCH lines --------------------------------------------------------------


def sbatch_directives(text):
    """{option: value} of the #SBATCH lines that sbatch reads: those above the first command."""
    directives = {}
    for line in text.splitlines()[1:]:  # after the #! line
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            break  # sbatch stops reading directives at the first command
        if stripped.startswith("#SBATCH"):
            option = stripped[len("#SBATCH"):].split("#", 1)[0].strip()
            name, _, value = option.partition("=")
            directives[name] = value
    return directives


def test_sbatch_directives_are_complete_and_consistent():
    text = TEMPLATE.read_text()
    directives = sbatch_directives(text)
    assert {"--nodes", "--ntasks-per-node", "--gres", "--cpus-per-task", "--time",
            "--output"} <= set(directives)
    # Every #SBATCH line is above the first command, or sbatch would silently ignore it.
    assert text.count("\n#SBATCH") == len(directives)
    gpus = re.fullmatch(r"gpu:(?:[\w-]+:)?(\d+)", directives["--gres"])
    assert gpus, f"--gres={directives['--gres']} is not gpu:N"
    assert int(directives["--ntasks-per-node"]) == int(gpus.group(1)), \
        "one Horovod worker per GPU: --ntasks-per-node must equal the GPUs in --gres"
    assert int(directives["--nodes"]) >= 1 and int(directives["--cpus-per-task"]) >= 1
    assert re.fullmatch(r"\d+:\d\d:\d\d", directives["--time"])
    assert "%j" in directives["--output"]  # one output file per job
    assert "--ntasks" not in directives  # it would have to agree with nodes x tasks per node


def test_sbatch_shows_the_srun_alternative_and_uses_the_cluster_module():
    text = TEMPLATE.read_text()
    assert re.search(r"^#\s+srun --mpi=\w+ python ", text, re.M)
    assert "python -m workbook.cluster slurm-np" in text
    assert "python -m workbook.cluster slurm-hosts" in text
    result = subprocess.run(["bash", "-n", str(TEMPLATE)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


# --- the job script, run for real ---------------------------------------------------------------


def job_env(tmp_path, train_args, **slurm):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(
        SLURM_JOB_ID="4242",
        SLURM_SUBMIT_DIR=str(REPO),
        WORKBOOK_VENV=sys.prefix,
        TRAIN_ARGS=train_args,
        # Two workers on this machine's cores: one thread each, or they fight over them.
        TF_NUM_INTRAOP_THREADS="1",
        TF_NUM_INTEROP_THREADS="1",
        PYTHONUNBUFFERED="1",
        **slurm,
    )
    return env


def test_sbatch_stops_with_one_line_when_slurm_variables_are_missing(tmp_path):
    result = subprocess.run(["bash", str(TEMPLATE)], env=job_env(tmp_path, "--epochs 1"),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "SLURM_JOB_NODELIST is not set" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
@pytest.mark.skipif(not (VENV_BIN / "activate").exists(),
                    reason=f"the job script activates a venv; {sys.prefix} has no bin/activate")
@pytest.mark.skipif(not (SAMPLE / "train.npz").is_file(), reason=f"no sample data in {SAMPLE}")
def test_sbatch_script_trains_on_two_workers(tmp_path):
    train_args = shlex.join([
        "--data-dir", str(SAMPLE), "--train-images", "1024", "--test-images", "256",
        "--depth", "10", "--width", "1", "--epochs", "1", "--steps-per-epoch", "8",
        "--log-dir", str(tmp_path / "logs"),
    ])
    env = job_env(tmp_path, train_args, SLURM_JOB_NODELIST="localhost",
                  SLURM_TASKS_PER_NODE="2", SLURM_NTASKS="2", SLURM_NNODES="1")
    result = subprocess.run(["bash", str(TEMPLATE)], env=env, capture_output=True, text=True,
                            cwd=tmp_path, timeout=900, start_new_session=True)
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

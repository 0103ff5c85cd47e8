"""Slurm: host lists and task counts become horovodrun's -np and -H (workbook.cluster, Slurm's
compressed host lists and task counts expanded without Slurm), and the #SBATCH lines of
solutions/cluster/fashion_mnist.sbatch. Its command line and the job script through bash:
tests/smoke/test_cluster_processes.py; a real 2-worker run: tests/system/test_cluster_runs.py.
"""

from __future__ import annotations

import re

import pytest

from workbook import cluster
from workbook.cluster import SlurmError, expand_hostlist, expand_tasks_per_node, slurm_layout
from workbook.paths import REPO

TEMPLATE = REPO / "solutions" / "cluster" / "fashion_mnist.sbatch"


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


def test_tasks_per_node_give_uneven_slots():
    layout = slurm_layout(
        {
            "SLURM_JOB_NODELIST": "node[01-03,07]",
            "SLURM_TASKS_PER_NODE": "2(x3),1",
            "SLURM_NTASKS": "7",
        }
    )
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
        (
            {"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "2(x3)"},
            "gives 3 node(s) but the node list has 2",
        ),
        ({"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NTASKS": "3"}, "does not split evenly"),
        (
            {"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NTASKS_PER_NODE": "2", "SLURM_NTASKS": "9"},
            "more than the 4 slots",
        ),
        ({"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_GPUS_ON_NODE": "lots"}, "SLURM_GPUS_ON_NODE"),
        ({"SLURM_JOB_NODELIST": "n1,n1", "SLURM_NTASKS": "2"}, "names a node twice"),
    ],
)
def test_missing_or_malformed_variables_are_named(variables, message):
    with pytest.raises(SlurmError, match=re.escape(message)):
        slurm_layout(variables)


def sbatch_directives(text):
    """{option: value} of the #SBATCH lines that sbatch reads: those above the first command."""
    directives = {}
    for line in text.splitlines()[1:]:  # after the #! line
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            break  # sbatch stops reading directives at the first command
        if stripped.startswith("#SBATCH"):
            option = stripped[len("#SBATCH") :].split("#", 1)[0].strip()
            name, _, value = option.partition("=")
            directives[name] = value
    return directives


def test_sbatch_directives_are_complete_and_consistent():
    text = TEMPLATE.read_text()
    directives = sbatch_directives(text)
    assert {
        "--nodes",
        "--ntasks-per-node",
        "--gres",
        "--cpus-per-task",
        "--time",
        "--output",
    } <= set(directives)
    # Every #SBATCH line is above the first command, or sbatch would silently ignore it.
    assert text.count("\n#SBATCH") == len(directives)
    gpus = re.fullmatch(r"gpu:(?:[\w-]+:)?(\d+)", directives["--gres"])
    assert gpus, f"--gres={directives['--gres']} is not gpu:N"
    assert int(directives["--ntasks-per-node"]) == int(gpus.group(1)), (
        "one Horovod worker per GPU: --ntasks-per-node must equal the GPUs in --gres"
    )
    assert int(directives["--nodes"]) >= 1 and int(directives["--cpus-per-task"]) >= 1
    assert re.fullmatch(r"\d+:\d\d:\d\d", directives["--time"])
    assert "%j" in directives["--output"]  # one output file per job
    assert "--ntasks" not in directives  # it would have to agree with nodes x tasks per node

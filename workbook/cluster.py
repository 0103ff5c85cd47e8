"""Slurm's allocation as horovodrun options: how many workers (-np) and where (-H host:slots,...).

Inside a Slurm job (sbatch or salloc) the allocation is described by environment variables:

    SLURM_JOB_NODELIST     the nodes, compressed: node[01-03,07],gpu-a1
    SLURM_TASKS_PER_NODE   tasks on each of them, compressed: 2(x3),1
    SLURM_NTASKS_PER_NODE  the job's --ntasks-per-node (set only when the job asked for it)
    SLURM_GPUS_ON_NODE     GPUs allocated on the node the script runs on
    SLURM_NTASKS           the job's total number of tasks

    python -m workbook.cluster slurm-hosts    # node01:4,node02:4  (the value of horovodrun -H)
    python -m workbook.cluster slurm-np       # 8                  (the value of horovodrun -np)

The host list is expanded here, without Slurm's `scontrol show hostnames`, so this also works
(and is tested) on a machine without Slurm. A missing or malformed variable is one line on
stderr naming the variable and what was expected, and exit code 2.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import product

__all__ = [
    "SlurmError",
    "SlurmLayout",
    "expand_hostlist",
    "expand_tasks_per_node",
    "slurm_layout",
]

NODELIST_VARIABLES = ("SLURM_JOB_NODELIST", "SLURM_NODELIST")  # the second: older Slurm, srun
RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
TASKS_GROUP = re.compile(r"^(\d+)(?:\(x(\d+)\))?$")


class SlurmError(ValueError):
    """A Slurm variable is missing or not in the form Slurm writes it; the message says which."""


# --- host lists: node[01-03,07] -> node01 node02 node03 node07 ---------------------------------


def split_top_level(text: str, what: str) -> list[str]:
    """Split on the commas that are not inside [...]."""
    parts, depth, current = [], 0, []
    for char in text:
        if char == "[":
            depth += 1
            if depth > 1:
                raise SlurmError(f"{what}: nested '[' in {text!r}")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise SlurmError(f"{what}: ']' without '[' in {text!r}")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0:
        raise SlurmError(f"{what}: '[' without ']' in {text!r}")
    parts.append("".join(current))
    return parts


def expand_ranges(ranges: str, what: str) -> list[str]:
    """`01-03,07` -> 01 02 03 07: the width of a range's first number is kept (zero padding)."""
    numbers = []
    for item in ranges.split(","):
        match = RANGE.match(item.strip())
        if not match:
            raise SlurmError(
                f"{what}: {item!r} in [{ranges}] is not a number or a range like 01-03"
            )
        first, last = match.group(1), match.group(2) or match.group(1)
        if int(last) < int(first):
            raise SlurmError(f"{what}: the range {item!r} in [{ranges}] runs backwards")
        width = len(first) if first.startswith("0") else 0
        numbers += [str(n).zfill(width) for n in range(int(first), int(last) + 1)]
    return numbers


def expand_hostname(pattern: str, what: str) -> list[str]:
    """One name, possibly with several bracket groups: rack[1-2]-node[01-02] -> 4 names."""
    pieces = re.split(r"\[([^\]]*)\]", pattern)  # text, ranges, text, ranges, ..., text
    choices = [
        [piece] if index % 2 == 0 else expand_ranges(piece, what)
        for index, piece in enumerate(pieces)
    ]
    return ["".join(parts) for parts in product(*choices)]


def expand_hostlist(text: str, what: str = "host list") -> list[str]:
    """Slurm's compressed host list as names, in Slurm's order: `a[1-2],b` -> a1 a2 b."""
    text = text.strip()
    if not text:
        raise SlurmError(f"{what} is empty")
    hosts = []
    for part in split_top_level(text, what):
        part = part.strip()
        if not part:
            raise SlurmError(f"{what}: an empty name in {text!r}")
        hosts += expand_hostname(part, what)
    return hosts


# --- tasks per node: 2(x3),1 -> 2 2 2 1 --------------------------------------------------------


def expand_tasks_per_node(text: str, what: str = "SLURM_TASKS_PER_NODE") -> list[int]:
    """Slurm's compressed counts: `2(x3),1` means 2 on each of three nodes, then 1."""
    counts = []
    for group in text.strip().split(","):
        match = TASKS_GROUP.match(group.strip())
        if not match:
            raise SlurmError(f"{what}: {group!r} in {text!r} is not a count like 4 or 2(x3)")
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts


# --- the layout --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SlurmLayout:
    """Where the workers go: one (host, slots) pair per node, and how many workers in all."""

    slots: tuple[tuple[str, int], ...]
    workers: int
    source: str  # which variable gave the slots per node, for messages

    @property
    def hosts(self) -> str:
        """horovodrun's -H value."""
        return ",".join(f"{host}:{count}" for host, count in self.slots)


def positive_int(env: Mapping[str, str], name: str) -> int | None:
    value = env.get(name, "").strip()
    if not value:
        return None
    # SLURM_NTASKS_PER_NODE can look like SLURM_TASKS_PER_NODE when nodes differ.
    counts = expand_tasks_per_node(value, name)
    if len(set(counts)) != 1 or counts[0] < 1:
        raise SlurmError(f"{name}={value!r}: expected one positive whole number")
    return counts[0]


def slots_per_node(env: Mapping[str, str], hosts: list[str]) -> tuple[list[int], str]:
    """Workers on each node, from the most precise variable that is set."""
    tasks = env.get("SLURM_TASKS_PER_NODE", "").strip()
    if tasks:
        counts = expand_tasks_per_node(tasks)
        if len(counts) != len(hosts):
            raise SlurmError(
                f"SLURM_TASKS_PER_NODE={tasks!r} gives {len(counts)} node(s) but the "
                f"node list has {len(hosts)}"
            )
        return counts, "SLURM_TASKS_PER_NODE"
    for name in ("SLURM_NTASKS_PER_NODE", "SLURM_GPUS_ON_NODE"):
        count = positive_int(env, name)
        if count:
            return [count] * len(hosts), name
    total = positive_int(env, "SLURM_NTASKS")
    if total:
        if total % len(hosts):
            raise SlurmError(
                f"SLURM_NTASKS={total} does not split evenly over {len(hosts)} "
                "nodes; set --ntasks-per-node in the job script"
            )
        return [total // len(hosts)] * len(hosts), "SLURM_NTASKS"
    raise SlurmError(
        "none of SLURM_TASKS_PER_NODE, SLURM_NTASKS_PER_NODE, SLURM_GPUS_ON_NODE, "
        "SLURM_NTASKS is set: run this inside a Slurm job (sbatch or salloc) that "
        "asks for tasks, e.g. #SBATCH --ntasks-per-node=4"
    )


def slurm_layout(env: Mapping[str, str]) -> SlurmLayout:
    """horovodrun's -np and -H for the Slurm allocation described by env."""
    name = next((n for n in NODELIST_VARIABLES if env.get(n, "").strip()), None)
    if name is None:
        raise SlurmError(
            "SLURM_JOB_NODELIST is not set: run this inside a Slurm job "
            "(sbatch or salloc), or set it, e.g. SLURM_JOB_NODELIST='node[01-02]'"
        )
    hosts = expand_hostlist(env[name], name)
    if len(set(hosts)) != len(hosts):
        raise SlurmError(f"{name}={env[name]!r} names a node twice")
    counts, source = slots_per_node(env, hosts)
    slots = tuple((host, count) for host, count in zip(hosts, counts) if count > 0)
    capacity = sum(counts)
    if capacity == 0:
        raise SlurmError(f"{source} gives no tasks on any node")
    workers = positive_int(env, "SLURM_NTASKS") or capacity
    if workers > capacity:
        raise SlurmError(
            f"SLURM_NTASKS={workers} is more than the {capacity} slots that "
            f"{source} gives on {len(slots)} node(s)"
        )
    return SlurmLayout(slots=slots, workers=workers, source=source)


COMMANDS = {
    "slurm-hosts": lambda layout: layout.hosts,
    "slurm-np": lambda layout: str(layout.workers),
}


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0] not in COMMANDS:
        print(
            f"usage: python -m workbook.cluster {{{','.join(COMMANDS)}}}  (inside a Slurm job)",
            file=sys.stderr,
        )
        return 2
    try:
        layout = slurm_layout(os.environ if env is None else env)
    except SlurmError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(COMMANDS[argv[0]](layout))
    return 0


if __name__ == "__main__":
    sys.exit(main())

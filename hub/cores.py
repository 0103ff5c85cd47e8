"""Each attendee's CPU set: sized from the machine and the roster, applied with a cgroup v1
cpuset where one is mounted and writable (every process of the attendee, whatever it does with
its affinity), and with the CPU affinity of the server otherwise (inherited by every process it
starts). The runner and the benchmarks size their runs from os.sched_getaffinity
(workbook.facts.usable_cores), which both give.

Sizing: the machine's cores are shared out in blocks of max(1, cores // attendees), round robin.
When there are more attendees than cores, blocks are reused and the hub is oversubscribed:
attendees sharing a core take turns on it (`oversubscribed` says so, for the banner).
"""

from __future__ import annotations

import os
from pathlib import Path

from hub import limits

CPUSET_ROOT = Path("/sys/fs/cgroup/cpuset")
CGROUP_NAME = "horovod-workbook"


def machine_cores() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def plan(attendees: list[str], cores: list[int]) -> dict[str, list[int]]:
    """attendee -> their cores: blocks of the same size, disjoint while there are enough."""
    if not attendees:
        return {}
    per = max(1, len(cores) // len(attendees))
    blocks = [cores[i : i + per] for i in range(0, len(cores) - per + 1, per)]
    return {name: blocks[i % len(blocks)] for i, name in enumerate(attendees)}


def oversubscribed(planned: dict[str, list[int]]) -> bool:
    seen = [core for cores in planned.values() for core in cores]
    return len(seen) != len(set(seen))


def cpuset_available(root: Path = CPUSET_ROOT) -> bool:
    return (root / "cpuset.cpus").is_file() and os.access(root, os.W_OK)


def cpuset_dir(user: str, root: Path = CPUSET_ROOT) -> Path:
    return root / CGROUP_NAME / user


def as_list(cores: list[int]) -> str:
    return ",".join(str(core) for core in cores)


def make_cpuset(user: str, cores: list[int], root: Path = CPUSET_ROOT) -> Path:
    """The attendee's cgroup, with their cores (and the machine's memory nodes)."""
    parent = root / CGROUP_NAME
    for folder in (parent, cpuset_dir(user, root)):
        folder.mkdir(exist_ok=True)
        # A new cpuset starts empty; cpus and mems must be set before a task can join.
        if not (folder / "cpuset.mems").read_text().strip():
            (folder / "cpuset.mems").write_text((root / "cpuset.mems").read_text())
        if folder == parent and not (folder / "cpuset.cpus").read_text().strip():
            (folder / "cpuset.cpus").write_text((root / "cpuset.cpus").read_text())
    folder = cpuset_dir(user, root)
    (folder / "cpuset.cpus").write_text(as_list(cores))
    limits.private_to(folder, user)  # its tasks file lists the attendee's processes
    return folder


def remove_cpuset(user: str, root: Path = CPUSET_ROOT) -> None:
    """Remove the attendee's cgroup once it has no tasks (an empty parent goes too)."""
    for folder in (cpuset_dir(user, root), root / CGROUP_NAME):
        try:
            folder.rmdir()
        except OSError:
            return


def confine(pid: int, user: str, cores: list[int]) -> str:
    """Put process `pid` (and so what it starts) on the attendee's cores; says how."""
    if cpuset_available():
        (make_cpuset(user, cores) / "tasks").write_text(str(pid))
        how = f"cgroup {cpuset_dir(user)}"
    else:
        how = "CPU affinity"
    os.sched_setaffinity(pid, cores)  # in a cpuset too: the process sees its cores at once
    return how

"""Each attendee's memory and process limits (issue 29): cgroup v1's memory and pids
controllers, one group per attendee, which their server joins before it starts (so every
kernel, terminal, training run and TensorBoard it starts is inside). A runaway allocation
ends with the kernel out of memory killing a process of that attendee (JupyterLab says the
kernel died and restarts it); a fork loop gets "Resource temporarily unavailable" at the
attendee's process limit. The hub, the instructor and the other attendees go on.

Sizing (INSTALL.md, "Workshop VM"): the machine's memory less 1 GiB for the system and the
hub, shared equally (`--memory-per-attendee` sets it); 1024 processes and threads each
(`--pids-per-attendee`): a 2-worker run with its kernel and server uses about 150 of them.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
CGROUP_NAME = "horovod-workbook"
RESERVED_MIB = 1024  # the system, the hub, its proxy
DEFAULT_PIDS = 1024
# What the workbook needs per attendee (INSTALL.md's sizing): the run notebook's 2-worker run with
# a server and kernels; with one core, one worker.
NEEDED_MIB = {2: 2560, 1: 1740}


def machine_mib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise RuntimeError("no MemTotal in /proc/meminfo")


def memory_each(attendees: int, total_mib: int) -> int:
    """Each attendee's share of the machine's memory, in MiB (a multiple of 64)."""
    share = (total_mib - RESERVED_MIB) // max(1, attendees)
    return max(256, share // 64 * 64)


def needed(cores_each: int) -> int:
    return NEEDED_MIB[2 if cores_each >= 2 else 1]


def parse_size(text: str) -> int:
    """'3G', '2560M', '3072' (MiB) -> MiB."""
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    factor = {"G": 1024, "M": 1}.get(text[-1:], None)
    number = float(text[:-1]) if factor else float(text)
    return int(number * (factor or 1))


def available(root: Path = ROOT) -> dict[str, bool]:
    return {
        kind: (root / kind / "tasks").is_file() and os.access(root / kind, os.W_OK)
        for kind in ("memory", "pids")
    }


def group(kind: str, user: str, root: Path = ROOT) -> Path:
    return root / kind / CGROUP_NAME / user


def private_to(folder: Path, user: str) -> None:
    """Only `user` (and root) may look into the attendee's group: its files say how much
    memory they use and which processes they run. The folder above: passable, not listable."""
    folder.parent.chmod(0o711)
    os.chown(folder, 0, pwd.getpwnam(user).pw_gid)
    folder.chmod(0o750)


def make(user: str, memory_mib: int, pids_max: int, root: Path = ROOT) -> list[Path]:
    """The attendee's memory and pids groups, with their limits, readable by them only; the
    folders made."""
    made = []
    have = available(root)
    if have["memory"]:
        folder = group("memory", user, root)
        folder.mkdir(parents=True, exist_ok=True)
        private_to(folder, user)
        limit = str(memory_mib * 2**20)
        swap = folder / "memory.memsw.limit_in_bytes"  # memory + swap: no way round by swapping
        try:
            (folder / "memory.limit_in_bytes").write_text(limit)
            if swap.is_file():
                swap.write_text(limit)
        except OSError:  # lowering: memory+swap may not be below memory, so the other order
            if swap.is_file():
                swap.write_text(limit)
            (folder / "memory.limit_in_bytes").write_text(limit)
        made.append(folder)
    if have["pids"]:
        folder = group("pids", user, root)
        folder.mkdir(parents=True, exist_ok=True)
        private_to(folder, user)
        (folder / "pids.max").write_text(str(pids_max))
        made.append(folder)
    return made


def join(pid: int, user: str, root: Path = ROOT) -> list[str]:
    """Put `pid` (and what it will start) into the attendee's groups made by `make`."""
    joined = []
    for kind in ("memory", "pids"):
        folder = group(kind, user, root)
        if (folder / "tasks").is_file():
            (folder / "cgroup.procs").write_text(str(pid))
            joined.append(str(folder))
    return joined


def remove(user: str, root: Path = ROOT) -> None:
    """The attendee's groups, once no process is in them (empty parents go too)."""
    for kind in ("memory", "pids"):
        for folder in (group(kind, user, root), root / kind / CGROUP_NAME):
            try:
                folder.rmdir()
            except OSError:
                break


def describe(memory_mib: int, pids_max: int, have: dict[str, bool]) -> str:
    parts = [
        f"memory {memory_mib / 1024:.1f} GiB"
        + ("" if have["memory"] else " (not enforced: no memory cgroup)"),
        f"{pids_max} processes and threads"
        + ("" if have["pids"] else " (not enforced: no pids cgroup)"),
    ]
    return ", ".join(parts)

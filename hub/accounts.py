"""The workshop's Unix accounts: one per attendee and the instructor, each home private (0700).

Accounts made here are listed in the group (settings.group), so that `remove` deletes only
those, never an account that was there before.
"""

from __future__ import annotations

import grp
import os
import pwd
import subprocess
from pathlib import Path

import psutil


def exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def members(group: str) -> list[str]:
    try:
        return sorted(grp.getgrnam(group).gr_mem)
    except KeyError:
        return []


def ensure(name: str, group: str) -> tuple[pwd.struct_passwd, bool]:
    """The account (made, in `group`, when missing) and whether it was made now."""
    subprocess.run(["groupadd", "-f", group], check=True)
    made = not exists(name)
    if made:
        subprocess.run(
            ["useradd", "--create-home", "--shell", "/bin/bash", "--groups", group, name],
            check=True,
            capture_output=True,
        )
    entry = pwd.getpwnam(name)
    os.chmod(entry.pw_dir, 0o700)  # attendees cannot read each other's files
    return entry, made


def stop_processes(name: str, timeout: float = 10) -> list[int]:
    """Kill what the account still runs (its server, kernels, training runs, orted)."""
    mine = [p for p in psutil.process_iter(["username"]) if p.info["username"] == name]
    for process in mine:
        try:
            process.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(mine, timeout=timeout)
    return [process.pid for process in mine]


def remove(name: str, group: str) -> bool:
    """Delete an account made by `ensure` (a member of `group`), with its home and processes."""
    if name not in members(group):
        return False
    stop_processes(name)
    subprocess.run(["userdel", "--remove", name], check=True, capture_output=True)
    return True


def remove_group_if_empty(group: str) -> None:
    if not members(group):
        subprocess.run(["groupdel", group], capture_output=True)


def home(name: str) -> Path:
    return Path(pwd.getpwnam(name).pw_dir)

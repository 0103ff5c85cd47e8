"""Where each attendee's check cells leave their verdicts for the instructor's class view.

    <state folder>-progress/        root's, 0711: passable, not listable, nothing can be made in it
        alice.jsonl                 instructor:alice 0620: alice's kernels append to it (the group
                                    may write), only the instructor's account reads it, nobody
                                    else opens it; alice cannot chmod it (not hers) nor replace it

The records' format is workbook/class_progress.py's; the spawner names the file in the
attendee's server environment (PROGRESS_VARIABLE), and the class view (hub/class_view_service.py,
run as the instructor's account) reads these files and nothing else of the attendees'.
"""

from __future__ import annotations

import os
import pwd
import shutil
from pathlib import Path

from hub.settings import HubSettings

SUFFIX = ".jsonl"


def path_of(folder: Path, user: str) -> Path:
    return Path(folder) / f"{user}{SUFFIX}"


def make(settings: HubSettings) -> list[str]:
    """The folder and every attendee's file (kept when there: their records stay); notes for
    the attendees whose file cannot be theirs alone."""
    folder = settings.progress_dir
    folder.mkdir(mode=0o711, exist_ok=True)
    os.chown(folder, 0, 0)
    folder.chmod(0o711)
    instructor = pwd.getpwnam(settings.instructor)
    groups = {name: pwd.getpwnam(name).pw_gid for name in settings.attendees}
    notes = []
    for name, gid in groups.items():
        path = path_of(folder, name)
        shared = gid == instructor.pw_gid or list(groups.values()).count(gid) > 1
        if path.is_symlink() or (path.exists() and not path.is_file()):
            path.unlink()
        path.touch(exist_ok=True)
        os.chown(path, instructor.pw_uid, gid)
        # A group another account is in would let that account write this one's records.
        path.chmod(0o600 if shared else 0o620)
        if shared:
            notes.append(
                f"the class view cannot show {name}: their primary group is not theirs alone"
            )
    return notes


def remove(settings: HubSettings) -> bool:
    folder = settings.progress_dir
    if not folder.is_dir():
        return False
    shutil.rmtree(folder)
    return True

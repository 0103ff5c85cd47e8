"""Commands run as root on a course that belongs to someone else (`make grade` as root on the
workshop hub's course, owned by the instructor's account): what root made in the course folder
and in the course's folder of the exchange is given to the course folder's owner afterwards, so
that the owner's own nbgrader (the formgrader) can still write there. nbgrader refuses an
exchange folder it does not own ("You don't own the directory") and a course file it cannot
write (PermissionError on Generate Feedback).

Only what root owns changes hands: the students' submissions in the exchange stay theirs.
"""

from __future__ import annotations

import os
from pathlib import Path


def owner(path: Path) -> tuple[int, int] | None:
    try:
        info = Path(path).stat()
    except OSError:
        return None
    return info.st_uid, info.st_gid


def give_back(course_root: Path, exchange_course: Path | None = None) -> list[Path]:
    """Root's files in the course (and in the exchange's folder of the course) to the course
    folder's owner; the paths changed. Nothing when not root or when root owns the course."""
    found = owner(course_root)
    if os.geteuid() != 0 or found is None or found[0] == 0:
        return []
    uid, gid = found
    changed = []
    for top in (Path(course_root), exchange_course):
        if top is None or not Path(top).is_dir():
            continue
        for folder, dirs, files in os.walk(top):
            for path in [folder, *(os.path.join(folder, name) for name in dirs + files)]:
                try:
                    if os.lstat(path).st_uid == 0:
                        os.lchown(path, uid, gid)
                        changed.append(Path(path))
                except OSError:
                    pass  # gone meanwhile
    return changed

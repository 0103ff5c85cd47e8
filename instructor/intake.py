"""Only the student's own files reach grading: what else a submission holds is set aside.

nbgrader copies a submission's files with `shutil.copy`, which follows links and reads
whatever is there. A link in a submission could make grading read the instructor's reference
solution (and score it as the student's), a gradebook, or `/dev/zero` forever; a FIFO blocks
the reader; a huge file fills the disk. Before grading, `screen` moves out of
submitted/STUDENT/ into set_aside/STUDENT/ (kept, never deleted):

- a link that leads outside the student's own submitted folder, or nowhere;
- anything that is neither a regular file nor a folder (FIFO, socket, device);
- a file over MAX_FILE_BYTES (a notebook with its outputs is a few MB);
- a whole submission whose folder is a link, or whose name (the student id) nbgrader would
  read as a pattern or a list.

What it moved is recorded in set_aside/STUDENT/intake.json and listed in the class report
as tampering. Links that stay inside the submission are harmless and kept. Hard links are
out of scope: a student cannot make one to a file of the instructor's that they cannot read.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import asdict, dataclass
from pathlib import Path

MAX_FILE_BYTES = 50 * 1000 * 1000
UNSAFE_ID = re.compile(r"[,*?\[\]\s]")
RECORD_NAME = "intake.json"


@dataclass(frozen=True)
class SetAside:
    path: str  # relative to the student's submitted folder
    why: str

    def __str__(self) -> str:
        return f"{self.path}: {self.why}, set aside"


def screen(submitted: Path, set_aside: Path) -> list:
    """Moves what must not be graded from `submitted` (one student's folder) to `set_aside`;
    returns a SetAside for each, and adds them to set_aside/intake.json."""
    submitted = Path(submitted)
    root = submitted.resolve()
    moved = []
    for folder, dirs, files in os.walk(submitted):  # does not enter links to folders
        for name in [*dirs, *files]:
            path = Path(folder) / name
            why = _unsafe(path, root)
            if why:
                moved.append(SetAside(str(path.relative_to(submitted)), why))
                _move(path, set_aside / path.relative_to(submitted))
                if name in dirs:
                    dirs.remove(name)
    if moved:
        _record(set_aside, moved)
    return moved


def _unsafe(path: Path, root: Path) -> str:
    """Why `path` must not be graded, or ""."""
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        target = os.path.realpath(path)
        if not os.path.exists(target):
            return f"a link to {os.readlink(path)}, which does not exist"
        if not Path(target).is_relative_to(root):
            return f"a link to {target}, outside the submission: not followed"
        return ""
    if stat.S_ISDIR(info.st_mode):
        return ""
    if not stat.S_ISREG(info.st_mode):
        kind = (
            "a FIFO"
            if stat.S_ISFIFO(info.st_mode)
            else ("a socket" if stat.S_ISSOCK(info.st_mode) else "a device")
        )
        return f"{kind}, not a file"
    if info.st_size > MAX_FILE_BYTES:
        return f"{info.st_size / 1e6:.0f} MB, over the {MAX_FILE_BYTES / 1e6:.0f} MB limit"
    return ""


def _move(path: Path, destination: Path) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    if destination.exists() or destination.is_symlink():  # an earlier intake's: keep both
        destination = destination.with_name(destination.name + f".{os.getpid()}")
    os.rename(path, destination)  # a link moves as a link: its target is never read


def _record(set_aside: Path, moved: list) -> None:
    record = set_aside / RECORD_NAME
    entries = recorded(set_aside)
    entries += [asdict(item) for item in moved]
    record.write_text(json.dumps(entries, indent=2) + "\n", encoding="utf-8")


def recorded(set_aside: Path) -> list:
    """[{"path", "why"}] of everything intake ever set aside for this student."""
    try:
        entries = json.loads((Path(set_aside) / RECORD_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return entries if isinstance(entries, list) else []


def screen_class(submitted_root: Path, set_aside_root: Path) -> dict:
    """screen() for every student folder in submitted/; a student folder that is itself a link
    is set aside whole. Returns {student: [SetAside]} for those with something moved."""
    found = {}
    if not Path(submitted_root).is_dir():
        return found
    for entry in sorted(Path(submitted_root).iterdir()):
        if entry.is_symlink():
            found[entry.name] = _set_aside_whole(
                entry,
                set_aside_root,
                f"the submission is a link to {os.path.realpath(entry)}: not followed",
            )
            continue
        if not entry.is_dir():
            continue  # nbgrader looks at folders only
        if UNSAFE_ID.search(entry.name):
            # nbgrader reads student ids as glob patterns and comma-separated lists: such a
            # name would be graded as, or together with, someone else.
            found[entry.name] = _set_aside_whole(
                entry,
                set_aside_root,
                f"the student id {entry.name!r} has characters nbgrader reads as a pattern or "
                "a list (, * ? [ ] or spaces): rename it",
            )
            continue
        moved = screen(entry, Path(set_aside_root) / entry.name)
        if moved:
            found[entry.name] = moved
    return found


def _set_aside_whole(entry: Path, set_aside_root: Path, why: str) -> list:
    """Moves a student's whole submission to set_aside/STUDENT/submission."""
    item = SetAside(".", why)
    _move(entry, Path(set_aside_root) / entry.name / "submission")
    _record(Path(set_aside_root) / entry.name, [item])
    return [item]

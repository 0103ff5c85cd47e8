"""Who made what, on a machine where the students have accounts (the workshop hub).

A submission in the exchange is a folder named STUDENT+ASSIGNMENT+TIMESTAMP(+RANDOM) in a
folder every student can write to, so anyone can make one in anyone's name. `not_their_own`
says why a submission is not the work of the student it names: a folder or file in it that
another account made (only the student's own account, root and whoever collects, the
instructor, may have made them). Collect (instructor/exchange.py) takes only submissions that
pass, records the others here (`set_aside/not_collected.json`), and the class report lists them.

`give_back`: commands run as root on a course that belongs to someone else (`make grade` as root
on the workshop hub's course, owned by the instructor's account): what root made in the course
folder and in the course's folder of the exchange is given to the course folder's owner
afterwards, so that the owner's own nbgrader (the formgrader) can still write there. nbgrader
refuses an exchange folder it does not own ("You don't own the directory") and a course file it
cannot write (PermissionError on Generate Feedback). Only what root owns changes hands: the
students' submissions in the exchange stay theirs.
"""

from __future__ import annotations

import json
import os
import pwd
from dataclasses import asdict, dataclass
from pathlib import Path

NOT_COLLECTED = Path("set_aside") / "not_collected.json"  # in the course folder


def owner(path: Path) -> tuple[int, int] | None:
    try:
        info = Path(path).stat()
    except OSError:
        return None
    return info.st_uid, info.st_gid


def account_uid(name: str) -> int | None:
    try:
        return pwd.getpwnam(name).pw_uid
    except (KeyError, TypeError, ValueError):
        return None


def account_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def trusted_uids() -> set[int]:
    """Who may have made any submission: root and whoever collects (the instructor)."""
    return {0, os.geteuid()}


def not_their_own(folder: Path, student: str, trusted: set[int] | None = None) -> str:
    """Why the submission `folder` in `student`'s name is not that student's work, or "" when
    the folder and everything in it (links themselves, not what they point to) were made by the
    student's own account or a `trusted` one (default: trusted_uids())."""
    allowed = set(trusted_uids() if trusted is None else trusted)
    uid = account_uid(student)
    if uid is not None:
        allowed.add(uid)
    folder = Path(folder)
    unreadable = []
    for path in [folder, *_everything_in(folder, unreadable)]:
        try:
            made_by = path.lstat().st_uid
        except OSError as error:
            return f"cannot be read ({error.strerror})"
        if made_by not in allowed:
            what = "the folder" if path == folder else str(path.relative_to(folder))
            if uid is None:
                return f"no account is named {student!r}; {what} is {account_name(made_by)}'s"
            return f"in {student}'s name, but {what} is {account_name(made_by)}'s"
    if unreadable:
        return f"cannot be read ({unreadable[0]})"
    return ""


def _everything_in(folder: Path, unreadable: list):
    def failed(error: OSError) -> None:
        unreadable.append(f"{error.strerror}: {error.filename}")

    for top, dirs, files in os.walk(folder, onerror=failed):  # links are not followed
        for name in dirs + files:
            yield Path(top) / name


@dataclass(frozen=True)
class NotCollected:
    submission: str  # its folder's name in the exchange's inbound
    student: str  # whom it names
    why: str

    def __str__(self) -> str:
        return f"{self.submission}: {self.why}; set aside, never graded as {self.student}"


def record(course_root: Path, found: list, replace: bool) -> None:
    """Writes what collect set aside to the course's record (`replace`: this collect looked at
    every submission; otherwise what it found is added)."""
    path = Path(course_root) / NOT_COLLECTED
    entries = {} if replace else {item.submission: item for item in not_collected(course_root)}
    entries.update({item.submission: item for item in found})
    if not entries and not path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps([asdict(item) for item in entries.values()], indent=2) + "\n", encoding="utf-8"
    )


def not_collected(course_root: Path) -> list:
    """The submissions the last collects set aside: [NotCollected]."""
    try:
        entries = json.loads((Path(course_root) / NOT_COLLECTED).read_text(encoding="utf-8"))
        return [
            NotCollected(str(e["submission"]), str(e["student"]), str(e["why"])) for e in entries
        ]
    except (OSError, ValueError, KeyError, TypeError):
        return []


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

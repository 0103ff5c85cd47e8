"""What the grader keeps of a run: the probe's records, each launch's log and the names of the
files in the --log-dir folders, taken from the run's writable folder as data.

The run is untrusted, and so is everything it left: the reader takes only regular files with
one link (os.open with O_NOFOLLOW, relative to an already opened folder, O_NONBLOCK: a named
pipe is never waited on), names it expects, and at most so many of them, so many bytes and so
deep. It keeps no mode, owner or link: each thing kept is written anew by the grader, a plain
0600 file in a 0700 folder of its own. Everything else the script wrote stays in the box and
goes with it (grader/running/sandbox.py unmounts it). The folders' files are kept as their names
alone (an empty file per name: step 9 asks which rank wrote what, never what it holds), so the
step checks read the kept copy with the same code as any folder.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

KiB, MiB = 1 << 10, 1 << 20
# The probe's records (grader/running/probe.py): run1-rank0.json, run1-rank0-first-update.npy...
RECORD_NAME = re.compile(r"run\d{1,3}-rank\d{1,4}(?:\.json|-[a-z][a-z-]{0,39}\.npy)")
MAX_RECORDS = 256  # the check's 2 workers, 2 runs write 24
MAX_RECORD_BYTES = 16 * MiB  # each; the check's tiny model's largest is far less
MAX_RECORDS_BYTES = 64 * MiB  # all of them
MAX_ENTRIES_SEEN = 10_000  # entries looked at in one folder, kept or not
MAX_LISTED = 512  # names kept of one --log-dir folder
MAX_DEPTH = 8  # folders deep below it
LOG_HEAD_BYTES, LOG_TAIL_BYTES = 256 * KiB, 768 * KiB  # of a launch's log; the middle is cut
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


def plain_name(name: str) -> str:
    """`name` with control characters (a newline, an escape) made '?': it may be shown."""
    return "".join(c if c.isprintable() else "?" for c in name)[:255] or "?"


def _open_regular(name: str, folder_fd: int | None = None) -> int | None:
    """A descriptor of the regular file `name` (in the folder `folder_fd`) with one link, or
    None: a link, a pipe, a device, a folder, a hard link to another file."""
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=folder_fd)
    except OSError:
        return None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        return None
    return fd


def read_regular(path, most: int, folder_fd: int | None = None) -> bytes | None:
    """The bytes of the regular file at `path`, or None when it is no such file or holds more
    than `most` bytes (a file that grows while it is read stops at `most`)."""
    fd = _open_regular(str(path), folder_fd)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as file:
        if os.fstat(fd).st_size > most:
            return None
        data = file.read(most + 1)
    return None if len(data) > most else data


def write_plain(path: Path, data: bytes) -> None:
    """A new file of the grader's own, 0600, at `path` (never through a link)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)


def _open_folder(path, folder_fd: int | None = None) -> int | None:
    try:
        return os.open(str(path), _DIR_FLAGS, dir_fd=folder_fd)
    except OSError:
        return None


def _entries(folder_fd: int):
    """(name, is a folder, is a regular file) of a folder's first MAX_ENTRIES_SEEN entries,
    links not followed."""
    with os.scandir(folder_fd) as found:
        for seen, entry in enumerate(found):
            if seen >= MAX_ENTRIES_SEEN:
                return
            try:
                yield (
                    entry.name,
                    entry.is_dir(follow_symlinks=False),
                    entry.is_file(follow_symlinks=False),
                )
            except OSError:
                continue


def keep_records(source: Path, target: Path) -> int:
    """Copies the probe's records in `source` into the new folder `target`; how many."""
    target.mkdir(mode=0o700)
    folder_fd = _open_folder(source)
    if folder_fd is None:
        return 0
    kept, total = 0, 0
    try:
        names = sorted(
            name
            for name, _, regular in _entries(folder_fd)
            if regular and RECORD_NAME.fullmatch(name)
        )
        for name in names[:MAX_RECORDS]:
            data = read_regular(name, MAX_RECORD_BYTES, folder_fd)
            if data is None or total + len(data) > MAX_RECORDS_BYTES:
                continue
            write_plain(target / name, data)
            kept, total = kept + 1, total + len(data)
    finally:
        os.close(folder_fd)
    return kept


def keep_names(source: Path, target: Path) -> int:
    """Makes, in the new folder `target`, an empty file for each regular file under `source`
    (MAX_LISTED at most, MAX_DEPTH deep, names made printable); how many."""
    target.mkdir(mode=0o700)
    root_fd = _open_folder(source)
    if root_fd is None:
        return 0
    listed = 0
    pending = [(root_fd, target, 0)]  # a stack, not recursion: any depth is safe
    try:
        while pending:
            folder_fd, into, depth = pending.pop()
            try:
                for name, is_dir, regular in _entries(folder_fd):
                    if listed >= MAX_LISTED:
                        break
                    shown = into / plain_name(name)
                    if regular:
                        if not shown.exists():
                            write_plain(shown, b"")
                            listed += 1
                    elif is_dir and depth < MAX_DEPTH:
                        inner = _open_folder(name, folder_fd)
                        if inner is not None:
                            shown.mkdir(mode=0o700, exist_ok=True)
                            pending.append((inner, shown, depth + 1))
            finally:
                os.close(folder_fd)
    finally:
        for folder_fd, _, _ in pending:
            os.close(folder_fd)
    return listed


def keep_log(source: Path, target: Path) -> bool:
    """Copies a launch's log to `target`: its first LOG_HEAD_BYTES and last LOG_TAIL_BYTES
    (a line says what was cut between); False when there is no such regular file."""
    fd = _open_regular(str(source))
    if fd is None:
        return False
    with os.fdopen(fd, "rb") as file:
        size = os.fstat(fd).st_size
        if size <= LOG_HEAD_BYTES + LOG_TAIL_BYTES:
            data = file.read(LOG_HEAD_BYTES + LOG_TAIL_BYTES)
        else:
            head = file.read(LOG_HEAD_BYTES)
            file.seek(size - LOG_TAIL_BYTES)
            tail = file.read(LOG_TAIL_BYTES)
            cut = size - len(head) - len(tail)
            data = head + f"\n[grader] {cut} bytes of the log cut here\n".encode() + tail
    write_plain(target, data)
    return True


def keep_run(box: Path, kept: Path, log_dir_name: str) -> None:
    """Keeps, from the run's writable folder `box`, its records (box/records) and the names of
    the files in rank 0's --log-dir (box/`log_dir_name`) and in every other rank's
    (box/`log_dir_name`-rankR-runN), into `kept` under the same names."""
    keep_records(box / "records", kept / "records")
    private = re.compile(re.escape(log_dir_name) + r"-rank\d{1,4}-run\d{1,3}")
    box_fd = _open_folder(box)
    if box_fd is None:
        return
    try:
        folders = sorted(
            name
            for name, is_dir, _ in _entries(box_fd)
            if is_dir and (name == log_dir_name or private.fullmatch(name))
        )
    finally:
        os.close(box_fd)
    for name in folders[:MAX_RECORDS]:
        keep_names(box / name, kept / name)

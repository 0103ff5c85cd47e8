"""A step check's verdict as one line, for the instructor's class view on a workshop hub.

    note(step, status)      append {"step": 4, "status": "failed", "time": 1764320000.0} to the
                            file the hub gave this attendee (PROGRESS_VARIABLE); nothing when
                            there is none (a learner's own machine, the instructor's grading)
    read(path)              a file's records, read with a bounded reader (the view's side)

The record's format lives here only: grader.check_step writes it (every "check my step" cell
goes through it), hub/class_view.py reads it. The hub makes each attendee's file (hub/
progress_drop.py): the attendee may write theirs, only the instructor's view may read it.
Standard library only: notebook kernels import it.
"""

from __future__ import annotations

import json
import math
import os
import stat
import time
from dataclasses import dataclass

from workbook.facts import STEPS

# The hub's spawner names each attendee's file in their server's environment (hub/spawner.py).
PROGRESS_VARIABLE = "WORKBOOK_PROGRESS_FILE"
# grader.report.STATUSES, which this module cannot import (tests/unit/test_hub_parts.py holds
# them equal); PASSED is the one that ends a step's trouble.
PASSED, FAILED, CANT_TELL = "passed", "failed", "can't tell"
STATUSES = (PASSED, FAILED, CANT_TELL)
READ_BYTES = 64 * 1024  # the view reads at most a file's last 64 KiB: about 1,300 checks
LINE_BYTES = 200  # longer lines are no record of ours


@dataclass(frozen=True)
class Record:
    step: int
    status: str  # one of STATUSES
    time: float  # seconds since the epoch, as the attendee's kernel saw it

    def line(self) -> str:
        return (
            json.dumps({"step": self.step, "status": self.status, "time": round(self.time, 3)})
            + "\n"
        )


def parse(line: str | bytes) -> Record | None:
    """The record of one line; None for anything else (a partial line, an edit by hand)."""
    if len(line) > LINE_BYTES:
        return None
    try:
        data = json.loads(line)
        step, status, when = data["step"], data["status"], float(data["time"])
    except (ValueError, TypeError, KeyError):
        return None
    if type(step) is not int or step not in STEPS or status not in STATUSES:
        return None
    if not math.isfinite(when) or when <= 0:
        return None
    return Record(step, status, when)


def note(step: int, status: str, now: float | None = None, environ=os.environ) -> bool:
    """Append the record to the attendee's file; whether it was written. Never raises: a check
    must not fail because the class view cannot be told."""
    path = environ.get(PROGRESS_VARIABLE)
    if not path or step not in STEPS or status not in STATUSES:
        return False
    data = Record(step, status, time.time() if now is None else now).line().encode()
    try:
        # The hub made the file: never made here, never through a link. One write of a short
        # line with O_APPEND lands whole, after the others.
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        return os.write(descriptor, data) == len(data)
    except OSError:
        return False
    finally:
        os.close(descriptor)


def read(path, max_bytes: int = READ_BYTES) -> list[Record]:
    """The records of the file at `path`, oldest first: a regular file only (no link, no pipe),
    its last `max_bytes` at most. OSError when it cannot be opened."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            return []
        start = max(0, info.st_size - max_bytes)
        os.lseek(descriptor, start, os.SEEK_SET)
        data = os.read(descriptor, max_bytes)
    finally:
        os.close(descriptor)
    lines = data.split(b"\n")
    if start:
        lines = lines[1:]  # the first one is cut
    return [record for record in map(parse, lines) if record is not None]

"""The attendees of a roster CSV: the file `python -m instructor add-students` reads
(columns id,first_name,last_name,email; only id is required). Each id becomes a Unix account."""

from __future__ import annotations

import csv
import re
from pathlib import Path

# What useradd accepts on Debian without --badname, and JupyterHub keeps as it is (lower case).
UNIX_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


class RosterError(Exception):
    """The roster cannot be used; the message names the line and the fix."""


def attendees(path) -> list[str]:
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8") as table:
            rows = list(csv.DictReader(table))
    except OSError as error:
        raise RosterError(f"cannot read the roster {path}: {error.strerror}") from None
    if not rows or "id" not in rows[0]:
        raise RosterError(f"{path} has no id column (columns: id,first_name,last_name,email)")
    ids = []
    for line, row in enumerate(rows, start=2):
        name = (row.get("id") or "").strip()
        if not UNIX_NAME.match(name):
            raise RosterError(
                f"{path}, line {line}: id {name!r} cannot be a Unix account name "
                "(lower-case letters, digits, _ and -; 32 at most; not first a digit)"
            )
        if name in ids:
            raise RosterError(f"{path}, line {line}: id {name!r} twice")
        ids.append(name)
    return ids


def rows(path) -> list[dict]:
    """The roster's rows as read (names for the password sheet); [] when it cannot be read."""
    try:
        with Path(path).open(newline="", encoding="utf-8") as table:
            return [
                {k: (v or "").strip() for k, v in row.items() if k} for row in csv.DictReader(table)
            ]
    except OSError:
        return []

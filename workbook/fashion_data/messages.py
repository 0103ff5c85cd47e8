"""How fashion_data reports: DataError (what is wrong and the fix), paths as typed, progress."""

from __future__ import annotations

from pathlib import Path


class DataError(Exception):
    """An expected data problem: the message says what is wrong and how to fix it."""


def shown(path: Path) -> str:
    """The path relative to the working directory when it is inside it, for messages."""
    path = Path(path).absolute()
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def log(verbose: bool, message: str) -> None:
    if verbose:
        print(message, flush=True)

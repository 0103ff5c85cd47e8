"""Reading a learner's file safely and parsing it: the first thing every check does.

Only a regular UTF-8 text file of at most MAX_BYTES is read (a FIFO, a device, a binary or a
huge file is refused with a FileProblem that says why); `parse` names the line of a syntax
error. Plain `ast`: nothing of the script is imported or run.
"""

from __future__ import annotations

import ast
import stat
from pathlib import Path

MAX_BYTES = 1_000_000  # a training script is ~20 kB; anything this big is the wrong file


class FileProblem(Exception):
    """The file cannot be checked at all; `unreadable` ones are not even Python text."""

    def __init__(self, message: str, unreadable: bool = False, line: int | None = None):
        super().__init__(message)
        self.message = message
        self.unreadable = unreadable
        self.line = line


def read_source(path) -> str:
    """Returns the text of the file at `path`, with "\\n" line endings; raises FileProblem.

    Only a regular file is read, and never more than MAX_BYTES of it: a FIFO or a device
    (a link to /dev/zero) would block or never end."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode):
            raise FileProblem(f"{path} is a directory, not a Python file", unreadable=True)
        if not stat.S_ISREG(mode):
            raise FileProblem(
                f"{path} is not a regular file (a FIFO, socket or device), not a Python script",
                unreadable=True,
            )
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            size = max(path.stat().st_size, len(data))
            raise FileProblem(
                f"{path} is {size / 1e6:.1f} MB; a training script is a few kB "
                f"(the limit is {MAX_BYTES // 1000} kB): is it the right file?",
                unreadable=True,
            )
    except FileNotFoundError:
        raise FileProblem(f"{path}: no such file", unreadable=True) from None
    except PermissionError:
        raise FileProblem(f"{path}: permission denied", unreadable=True) from None
    except OSError as error:
        raise FileProblem(f"{path}: cannot read it ({error.strerror})", unreadable=True) from None
    return decode(data, str(path))


def decode(data: bytes, name: str = "the file") -> str:
    """Returns `data` as text; CRLF and CR line endings become "\\n"."""
    if b"\0" in data:
        raise FileProblem(
            f"{name} is a binary file (it contains NUL bytes), not a Python script",
            unreadable=True,
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise FileProblem(
            f"{name} is not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start}); "
            "save it as UTF-8",
            unreadable=True,
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def parse(text: str) -> ast.Module:
    """Returns the module's AST; raises FileProblem naming the line of a syntax error."""
    if not text.strip():
        raise FileProblem("the file is empty")
    try:
        tree = ast.parse(text)
    except SyntaxError as error:
        line = error.lineno or 0
        raise FileProblem(f"line {line}: {error.msg}", line=line) from None
    except (RecursionError, MemoryError, ValueError):
        raise FileProblem("the file is too deeply nested for Python to parse") from None
    if not tree.body:
        raise FileProblem("the file has no code, only comments or blank lines")
    return tree

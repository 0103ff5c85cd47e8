"""Every pin of requirements/constraints.txt installs on the oldest Python the workbook takes.

`make lock` pins what `pip freeze` finds in the maintainer's venv, whose Python 3.11 may be
newer than a learner's: soupsieve 4.1.2 needs 3.11.5, and on Debian 12 (Python 3.11.2) a fresh
`make lock`/`make test` then failed in its first minute. This asks pip, without installing
anything, whether each pin has a release file for Python 3.11.0 on this platform and is not
yanked (soupsieve 3.0.1 is, for 3.11 before 3.11.5).

    python -m bootstrap.pins [CONSTRAINTS]        exit 0, or 1 with one line per bad pin

`make lock` runs it after writing the pins; tests/system/test_pins.py runs it too.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

from bootstrap.environment import PYTHON_VERSION, REQUIREMENTS

OLDEST = ".".join(map(str, (*PYTHON_VERSION, 0)))
NOT_FOUND = re.compile(r"No matching distribution found for ([^\s]+)")
UNREACHABLE = ("Failed to establish a new connection", "Temporary failure in name resolution")


class PinsUnchecked(RuntimeError):
    """pip could not reach the package index: nothing was decided."""


def pins(constraints: Path) -> list[str]:
    """The `name==version` lines of a constraints file (comments and markers left out)."""
    lines = (
        line.split("#")[0].split(";")[0].strip() for line in constraints.read_text().splitlines()
    )
    return [line for line in lines if "==" in line]


def bad_pins(constraints: Path, timeout: float = 600) -> list[str]:
    """One line per pin that Python OLDEST can't install (or that is yanked); [] when all can.
    PinsUnchecked when the index can't be reached."""
    wanted = pins(constraints)
    bad = []
    while wanted:
        with tempfile.TemporaryDirectory() as target:
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "--dry-run",
                    "--ignore-installed",
                    "--no-deps",
                    "--disable-pip-version-check",
                    "--python-version",
                    OLDEST,
                    "--target",
                    target,
                    *wanted,
                ],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        said = done.stdout + done.stderr
        if any(text in said for text in UNREACHABLE):
            raise PinsUnchecked(f"the package index can't be reached: {said.strip()[-300:]}")
        bad += [
            f"{pin}: yanked (pip would install it, with a warning)"
            for pin in wanted
            if f"yanked version: '{pin.split('==')[0].lower()}'" in said.lower()
        ]
        missing = NOT_FOUND.search(said)
        if done.returncode == 0 or missing is None:
            if done.returncode != 0:
                bad.append(f"pip failed: {said.strip()[-500:]}")
            return bad
        # pip stops at the first pin it can't find: name it, and ask again without it.
        pin = missing.group(1)
        bad.append(f"{pin}: no release of it installs on Python {OLDEST} here")
        wanted = [other for other in wanted if other.lower() != pin.lower()]
    return bad


def main(argv: list[str]) -> int:
    constraints = Path(argv[0]) if argv else REQUIREMENTS / "constraints.txt"
    try:
        bad = bad_pins(constraints)
    except PinsUnchecked as error:
        print(f"pins not checked: {error}", file=sys.stderr)
        return 2
    for line in bad:
        print(f"{constraints}: {line}", file=sys.stderr)
    if not bad:
        print(f"{constraints}: every pin installs on Python {OLDEST}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

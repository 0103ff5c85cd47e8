"""Files the repository generates from a source of truth and commits (step scripts, notebooks).

Both generators share this: write only what changed, list what is stale, and the same
`build` / `check` command line, so CI and a reviewer see one behaviour.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

# One command regenerates everything, in order (the notebooks quote the chain).
REGENERATE_COMMAND = "python -m authoring build"


def differs(path: Path, text: str) -> bool:
    return not path.is_file() or path.read_text(encoding="utf-8") != text


def stale_names(expected: dict[str, str], output_dir: Path) -> list[str]:
    """The names whose file in output_dir is missing or differs from the expected text."""
    return [name for name, text in expected.items() if differs(output_dir / name, text)]


def write_changed(expected: dict[str, str], output_dir: Path) -> list[str]:
    """Writes the files that changed; returns their names."""
    written = []
    for name, text in expected.items():
        path = output_dir / name
        if differs(path, text):
            path.parent.mkdir(parents=True, exist_ok=True)  # e.g. solutions/bonus/
            path.write_text(text, encoding="utf-8")
            written.append(name)
    return written


def build_or_check_main(
    argv,
    *,
    prog: str,
    description: str,
    what: str,
    build: Callable[[], list],
    stale: Callable[[], list],
    source_error: type[Exception] | tuple[type[Exception], ...],
) -> int:
    """`PROG build` writes the generated files; `PROG check` exits 1 naming the stale ones."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("command", choices=["build", "check"])
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            written = build()
            print(f"wrote {len(written)} {what}" + "".join(f"\n  {name}" for name in written))
            return 0
        outdated = stale()
    except source_error as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if outdated:
        print("stale: " + ", ".join(outdated), file=sys.stderr)
        print(f"regenerate with: {REGENERATE_COMMAND}", file=sys.stderr)
        return 1
    print(f"all {what} are up to date")
    return 0

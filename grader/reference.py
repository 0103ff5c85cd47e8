"""The reference chain, as the grader shows it: step titles, expected diffs, reference files.

Everything comes from the generated scripts in solutions/ (`python -m authoring build` writes
them from the annotated source, and `python -m authoring check` fails when they are stale), so
the grader never depends on the authoring tools.
"""

from __future__ import annotations

import difflib
from functools import lru_cache
from pathlib import Path

from workbook.facts import (
    BONUSES,
    LAST_STEP,
    SOLUTION_FILE_NAME,
    STEP_TITLES,
    chain_file_name,
)
from workbook.paths import SOLUTIONS_DIR

DIFF_CONTEXT = 2  # lines of context around each change in the expected diff


def title(step: int) -> str:
    return STEP_TITLES[step]


def reference_path(step: int = LAST_STEP) -> Path:
    """The generated script after `step` (0: the starting script)."""
    return SOLUTIONS_DIR / (SOLUTION_FILE_NAME if step == LAST_STEP else chain_file_name(step))


@lru_cache(maxsize=None)
def _lines(path: Path) -> list | None:
    try:
        return path.read_text(encoding="utf-8").splitlines(keepends=True)
    except OSError:
        return None


def script_lines(step: int = LAST_STEP) -> list:
    """The lines of the generated script after `step` ([] when it can't be read)."""
    return _lines(reference_path(step)) or []


def _diff(before: Path, after: Path, fromfile: str, tofile: str) -> str:
    old, new = _lines(before), _lines(after)
    if old is None or new is None:
        return ""
    return "".join(difflib.unified_diff(old, new, fromfile=fromfile, tofile=tofile, n=DIFF_CONTEXT))


def expected_diff(step: int) -> str:
    """The unified diff from the reference after step-1 to after step (only that step's lines)."""
    return _diff(
        reference_path(step - 1),
        reference_path(step),
        f"after step {step - 1}" if step > 1 else "starting script",
        f"after step {step}",
    )


def bonus_diff(name: str) -> str:
    """The unified diff from the solution to the reference of a bonus (its blocks only)."""
    if name not in BONUSES:
        return ""
    return _diff(
        reference_path(LAST_STEP),
        SOLUTIONS_DIR / BONUSES[name],
        "solution",
        f"with the {name} bonus",
    )

"""The reference chain, as the grader shows it: step titles, expected diffs, reference files.

Everything comes from `workbook.step_chain` and its annotated source at run time, so the
feedback follows the reference when it changes.
"""

from __future__ import annotations

import difflib
from functools import lru_cache
from pathlib import Path

from workbook.step_chain import (
    BONUSES,
    LAST_STEP,
    OUTPUT_DIR,
    SOURCE,
    STEP_TITLES,
    output_name,
    render,
    render_bonus,
)

STEPS = range(1, LAST_STEP + 1)
DIFF_CONTEXT = 2  # lines of context around each change in the expected diff


def title(step: int) -> str:
    return STEP_TITLES[step]


def reference_path(step: int = LAST_STEP) -> Path:
    """The generated script after `step` (0: the starting script)."""
    if step == LAST_STEP:
        return OUTPUT_DIR / "fashion_mnist_solution.py"
    return OUTPUT_DIR / output_name(step)


@lru_cache(maxsize=None)
def _source_text() -> str | None:
    try:
        return SOURCE.read_text(encoding="utf-8")
    except OSError:
        return None


@lru_cache(maxsize=None)
def _script_at(step: int) -> list | None:
    """The reference script after `step`, as lines: rendered from the annotated source, or
    (if that is missing or being edited into a broken state) the generated file."""
    text = _source_text()
    if text is not None:
        try:
            return render(text, step).splitlines(keepends=True)
        except ValueError:  # a malformed marker: fall back to the last generated script
            pass
    try:
        return reference_path(step).read_text(encoding="utf-8").splitlines(keepends=True)
    except OSError:
        return None


@lru_cache(maxsize=None)
def expected_diff(step: int) -> str:
    """The unified diff from the reference after step-1 to after step (only that step's lines)."""
    before, after = _script_at(step - 1), _script_at(step)
    if before is None or after is None:
        return ""
    diff = difflib.unified_diff(
        before,
        after,
        fromfile=f"after step {step - 1}" if step > 1 else "starting script",
        tofile=f"after step {step}",
        n=DIFF_CONTEXT,
    )
    return "".join(diff)


@lru_cache(maxsize=None)
def bonus_diff(name: str) -> str:
    """The unified diff from the solution to the reference of a bonus (its blocks only)."""
    text = _source_text()
    try:
        if text is None:
            raise ValueError("no annotated source")
        before = render(text, LAST_STEP).splitlines(keepends=True)
        after = render_bonus(text, name).splitlines(keepends=True)
    except ValueError:
        try:
            before = reference_path(LAST_STEP).read_text(encoding="utf-8").splitlines(True)
            after = (OUTPUT_DIR / BONUSES[name]).read_text(encoding="utf-8").splitlines(True)
        except (OSError, KeyError):
            return ""
    diff = difflib.unified_diff(
        before, after, fromfile="solution", tofile=f"with the {name} bonus", n=DIFF_CONTEXT
    )
    return "".join(diff)

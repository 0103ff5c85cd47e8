"""After a crash blamed on one step, the script with that step's failing line replaced by the
reference's: run again, it shows the steps the crash kept the first run from showing (issue 37:
a step counts only when a run shows it, and one mistake must not hide the work after it).

Only a one-line swap is made: of the script's lines that may hold the failing code (the line
that built the failing object, the lines naming a class passed for an instance, else the
innermost line on the failing path), the one most alike a line of the blamed step's reference
code (grader.decision's likeness) becomes that line, in the script's own indentation. When no line
of the step is alike enough, or the swapped script does not parse, there is no swap.
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass

from grader import decision


@dataclass(frozen=True)
class Swap:
    """The swapped script and what changed in it."""

    source: str
    step: int
    line: int
    before: str
    after: str

    def words(self) -> str:
        return (
            f"a second run with step {self.step}'s line {self.line} swapped for the reference's "
            f"`{self.after.strip()}`"
        )


def failing_lines(source: str, run) -> list[int]:
    """The script's lines that may hold the failing code of a crashed run (grader.report.Run):
    the line that built the failing object; else, for a class passed where an instance was
    needed (no line built it), every line naming that class; else the innermost line."""
    culprit = run.culprit or {}
    if culprit.get("class") and culprit.get("line"):
        return [culprit["line"]]
    if culprit.get("class"):
        name = re.compile(rf"\b{re.escape(culprit['class'])}\b")
        return [n for n, text in enumerate(source.splitlines(), 1) if name.search(text)]
    return [run.line] if run.line else []


def swapped(source: str, lines: list[int], step: int) -> Swap | None:
    """`source` with the one of its `lines` (1-based) most alike a line step `step` adds in the
    reference chain replaced by that line, or None when none is alike enough (or already the
    same) or the result does not parse."""
    text_lines = source.splitlines(keepends=True)
    best, best_ratio = None, decision.SAME_LINE
    for line in lines:
        if not 1 <= line <= len(text_lines):
            continue
        ours = decision.normalized_code(text_lines[line - 1])
        for candidate in decision.reference_lines(step):
            theirs = decision.normalized_code(candidate)
            ratio = difflib.SequenceMatcher(None, ours, theirs).ratio()
            if ratio > best_ratio and theirs != ours:
                best, best_ratio = (line, candidate), ratio
    if best is None:
        return None
    line, candidate = best
    before = text_lines[line - 1]
    indent = before[: len(before) - len(before.lstrip())]
    after = indent + candidate.lstrip() + ("\n" if before.endswith("\n") else "")
    text = "".join([*text_lines[: line - 1], after, *text_lines[line:]])
    try:
        ast.parse(text)
    except SyntaxError:
        return None
    return Swap(text, step, line, before.rstrip("\n"), after.rstrip("\n"))

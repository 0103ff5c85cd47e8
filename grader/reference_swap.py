"""After a crash blamed on one step, the script with that step's failing line replaced by the
reference's: run again, it shows the steps the crash kept the first run from showing (issue 37:
a step counts only when a run shows it, and one mistake must not hide the work after it).

Only a one-line swap is made: of the script's lines that may hold the failing code (the line
that built the failing object, the lines naming a class passed for an instance, else the
innermost line on the failing path), the one most alike a line of the blamed step's reference
code (grader.decision's likeness) becomes that line, in the script's own indentation. When no line
of the step is alike, the step's code may be missing instead (hvd.init() left out: Horovod's
first use fails): the top-level lines the step adds in the reference and the script lacks are
put before the top-level statement that holds the failing line. When the swapped script does
not parse, there is no swap.
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
    added: bool = False  # `after` was put before line `line`, which is unchanged

    def failing_line(self, first_line: int | None) -> int | None:
        """Where the second run fails if the swap did not take the first run's crash (at
        `first_line`) away: the swapped line, or the failing line moved down by the insertion."""
        if not self.added:
            return self.line
        if first_line is None or first_line < self.line:
            return first_line
        return first_line + len(self.after.splitlines())

    def words(self) -> str:
        if self.added:
            code = "`, `".join(line.strip() for line in self.after.splitlines())
            return f"a second run with step {self.step}'s `{code}` added before line {self.line}"
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


def inserted(source: str, line: int | None, step: int) -> Swap | None:
    """`source` with the top-level lines step `step` adds in the reference chain that it lacks
    at its top level put before the top-level statement holding `line` (1-based); None when it
    lacks none, `line` is in no statement, or the result does not parse."""
    # Present at the top level: an import only inside a branch or a function is missing there.
    present = {decision.normalized_code(t) for t in source.splitlines() if t == t.lstrip()}
    missing = [
        text
        for text in decision.reference_lines(step)
        if text == text.lstrip() and decision.normalized_code(text) not in present
    ]
    if not missing or not line:
        return None
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    holding = next((n for n in tree.body if n.lineno <= line <= (n.end_lineno or n.lineno)), None)
    if holding is None:
        return None
    at = min([holding.lineno, *(d.lineno for d in getattr(holding, "decorator_list", []))])
    text_lines = source.splitlines(keepends=True)
    added = "".join(text + "\n" for text in missing)
    text = "".join([*text_lines[: at - 1], added, *text_lines[at - 1 :]])
    try:
        ast.parse(text)
    except SyntaxError:
        return None
    return Swap(text, step, at, "", added.rstrip("\n"), added=True)

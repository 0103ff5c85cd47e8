"""After a crash blamed on one step, the script with that step's failing line replaced by the
reference's: run again, it shows the steps the crash kept the first run from showing (issue 37:
a step counts only when a run shows it, and one mistake must not hide the work after it).

Only a one-line swap is made: of the script's lines that may hold the failing code (the line
that built the failing object, the lines naming a class passed for an instance, else the
innermost line on the failing path), the one most alike a line of the blamed step's reference
code (grader.decision's likeness) becomes that line, in the script's own indentation and names.
A call over several lines to the function a reference line calls gets the reference's keywords
(`op=hvd.Sum` dropped: the ranks' allreduces then agree on resume).
When no line of the step is alike, the step's code may be missing instead (hvd.init() left out:
Horovod's first use fails; NovoGrad's import only in a branch of main(): on resume `tfa` is an
unbound local): the top-level lines the step adds in the reference and the script lacks where
the failing line runs are put before the statement holding it, in the innermost function that
holds it. When the swapped script does not parse, there is no swap.
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass

from grader import data_flow, decision, reference_names


@dataclass(frozen=True)
class Swap:
    """The swapped script and what changed in it."""

    source: str
    step: int
    line: int
    before: str
    after: str
    added: bool = False  # `after` was put before line `line`, which is unchanged
    span: int = 1  # how many of the script's lines `before` was (a call over several)
    keywords: bool = False  # a call given the reference's keywords, not a whole line

    def failing_line(self, first_line: int | None) -> int | None:
        """Where the second run fails if the swap did not take the first run's crash (at
        `first_line`) away: the same line, moved by what the swap added or joined, or the
        swapped line itself when the crash was in it."""
        if first_line is None or first_line < self.line:
            return first_line
        new_lines = len(self.after.splitlines())
        if self.added:
            return first_line + new_lines
        if first_line < self.line + self.span:
            return self.line
        return first_line + new_lines - self.span

    def words(self) -> str:
        if self.added:
            code = "`, `".join(line.split("  #")[0].strip() for line in self.after.splitlines())
            return f"a second run with step {self.step}'s `{code}` added before line {self.line}"
        if self.keywords:
            return (
                f"a second run with the call on line {self.line} given step {self.step}'s "
                f"keywords, as the reference's: `{self.after.strip()}`"
            )
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


def feeding_lines(source: str, run) -> list[int]:
    """The script's lines that assign what the failing statement uses, one assignment back
    (grader/data_flow.py): where a value the crash choked on was made."""
    fed = data_flow.feeding(source, run.line)
    return sorted({line for lines in fed.values() for line in lines})


def swapped(source: str, lines: list[int], step: int) -> Swap | None:
    """`source` with the one of its `lines` (1-based) most alike a line step `step` adds in the
    reference chain replaced by that line, or None when none is alike enough (or already the
    same) or the result does not parse."""
    text_lines = source.splitlines(keepends=True)
    bound = reference_names.bound_names(source)
    best, best_ratio = None, decision.SAME_LINE
    for line in lines:
        if not 1 <= line <= len(text_lines):
            continue
        ours = decision.normalized_code(text_lines[line - 1])
        for candidate in decision.reference_lines(step):
            theirs = decision.normalized_code(candidate)
            ratio = difflib.SequenceMatcher(None, ours, theirs).ratio()
            fitted = reference_names.in_the_scripts_names(
                candidate.lstrip(), text_lines[line - 1].strip(), bound
            )
            if ratio > best_ratio and decision.normalized_code(fitted) != ours:
                best, best_ratio = (line, fitted), ratio
    if best is None:
        return None
    line, candidate = best
    before = text_lines[line - 1]
    indent = before[: len(before) - len(before.lstrip())]
    after = indent + candidate + ("\n" if before.endswith("\n") else "")
    text = "".join([*text_lines[: line - 1], after, *text_lines[line:]])
    try:
        ast.parse(text)
    except SyntaxError:
        return None
    return Swap(text, step, line, before.rstrip("\n"), after.rstrip("\n"))


def call_swapped(source: str, line: int | None, step: int) -> Swap | None:
    """`source` with a call on `line` (1-based) to a function the blamed step's reference line
    calls given the reference's keywords instead of its own (`hvd.DistributedOptimizer(...,
    op=hvd.Sum)` over three lines: the script's arguments, the reference's keywords), or None
    when no such call differs or the result does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and line
        and node.lineno <= line <= (node.end_lineno or node.lineno)
    ]
    for text in decision.reference_lines(step):
        try:
            theirs = [n for n in ast.walk(ast.parse(text.strip())) if isinstance(n, ast.Call)]
        except SyntaxError:
            continue
        for reference_call in theirs:
            for call in calls:
                if ast.unparse(call.func) != ast.unparse(reference_call.func):
                    continue
                fixed = ast.Call(call.func, call.args, reference_call.keywords)
                if ast.dump(fixed) == ast.dump(call):
                    continue
                swap = _replaced(source, call, ast.unparse(fixed), step)
                if swap is not None:
                    return swap
    return None


def _replaced(source: str, node: ast.expr, code: str, step: int) -> Swap | None:
    """`source` with `node`'s text (over however many lines) replaced by `code`."""
    lines = source.encode("utf-8").splitlines(keepends=True)  # ast's columns count bytes
    start = sum(len(text) for text in lines[: node.lineno - 1]) + node.col_offset
    end = sum(len(text) for text in lines[: node.end_lineno - 1]) + node.end_col_offset
    data = source.encode("utf-8")
    text = (data[:start] + code.encode("utf-8") + data[end:]).decode("utf-8")
    try:
        ast.parse(text)
    except SyntaxError:
        return None
    before = data[start:end].decode("utf-8")
    span = node.end_lineno - node.lineno + 1
    return Swap(text, step, node.lineno, " ".join(before.split()), code, span=span, keywords=True)


def inserted(source: str, line: int | None, step: int) -> Swap | None:
    """`source` with the lines step `step` adds at the reference's top level that the script
    lacks where the failing `line` (1-based) runs put before the statement holding it, in the
    innermost function holding it (else at the top level), in that body's indentation; only
    lines whose names the script binds. None when it lacks none, `line` is in no statement, or
    the result does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    if not line:
        return None
    body = _innermost_body(tree, line)
    holding = next((n for n in body if n.lineno <= line <= (n.end_lineno or n.lineno)), None)
    if holding is None:
        return None
    text_lines = source.splitlines(keepends=True)
    first = text_lines[body[0].lineno - 1]
    indent = first[: len(first) - len(first.lstrip())]
    # Present in that body: an import only inside a branch of it is missing there (its name is
    # the function's local, unbound where the branch was not taken).
    span = range(body[0].lineno, (body[-1].end_lineno or body[-1].lineno) + 1)
    present = {
        decision.normalized_code(text_lines[n - 1])
        for n in span
        if text_lines[n - 1][len(indent) :] == text_lines[n - 1][len(indent) :].lstrip()
    }
    bound, missing = reference_names.bound_names(source), []
    for text in decision.reference_lines(step):
        if text != text.lstrip() or decision.normalized_code(text) in present:
            continue
        try:
            statement = ast.parse(text)
        except SyntaxError:
            continue  # the start of a statement over several lines: not one to add alone
        used = {n.id for n in ast.walk(statement) if isinstance(n, ast.Name)}
        if used - bound - reference_names.bound_by(statement):
            continue  # it needs a name the script never binds (the reference's own)
        missing.append(indent + text)
        bound |= reference_names.bound_by(statement)
    if not missing:
        return None
    at = min([holding.lineno, *(d.lineno for d in getattr(holding, "decorator_list", []))])
    added = "".join(text + "\n" for text in missing)
    text = "".join([*text_lines[: at - 1], added, *text_lines[at - 1 :]])
    try:
        ast.parse(text)
    except SyntaxError:
        return None
    return Swap(text, step, at, "", added.rstrip("\n"), added=True)


def _innermost_body(tree: ast.Module, line: int) -> list:
    """The body of the innermost function holding `line`, else the module's."""
    functions = [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body[0].lineno <= line <= (node.end_lineno or node.lineno)
    ]
    return max(functions, key=lambda node: node.lineno).body if functions else tree.body

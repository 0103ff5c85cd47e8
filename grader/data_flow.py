"""Which of a script's assignments feed the statement a run failed at: the names it uses, and the
names those were assigned from, one assignment back (`result = {"epoch": resume_from_epoch}`,
then `json.dumps(result)` fails because resume_from_epoch is still a tensor: step 8's line).
Read from the script's text alone, for grader/decision.py's blame and reference_swap's lines."""

from __future__ import annotations

import ast

from grader.reading.source import FileProblem, parse


def failing_statement(tree: ast.Module, line: int) -> ast.stmt | None:
    """The innermost statement of `tree` that spans `line` (1-based)."""
    spanning = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno)
    ]
    return min(
        spanning, key=lambda node: (node.end_lineno or node.lineno) - node.lineno, default=None
    )


def feeding(source: str, line: int | None) -> dict[str, list[int]]:
    """{name: the lines assigning it}: the names the statement at `line` uses (lines: their
    assignments before it), and the names the values of those assignments use (lines: theirs).
    {} when the script does not parse or no statement spans `line`."""
    try:
        tree = parse(source)
    except FileProblem:  # not Python, empty, or too deeply nested to parse
        return {}
    statement = failing_statement(tree, line) if line else None
    if statement is None:
        return {}
    assignments = _assignments_before(tree, statement.lineno)
    used = _names(statement)
    fed = {name: [n for n, _ in assignments.get(name, [])] for name in used}
    for name in used:
        for _, value in assignments.get(name, []):
            for inner in _names(value) - used:
                fed.setdefault(inner, [n for n, _ in assignments.get(inner, [])])
    return fed


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _assignments_before(tree: ast.Module, line: int) -> dict[str, list]:
    """{name: [(line, value)]} of the plain assignments to a name before `line`."""
    found: dict[str, list] = {}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            continue
        if node.lineno >= line or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    found.setdefault(name.id, []).append((node.lineno, node.value))
    return found

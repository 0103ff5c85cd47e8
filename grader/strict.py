"""Strict mode: does the whole file match a reference, up to comments and formatting?

Two files match when their ASTs are equal without positions (`ast.dump` without attributes):
comments, blank lines, line breaks and quote style don't count; docstrings and every
expression do. When they differ, the first differing statement is reported on both sides.
"""

from __future__ import annotations

import ast
import difflib

CONTEXT_LINES = 3  # lines shown from each side around the first difference


def matches(tree: ast.AST, reference: ast.AST) -> bool:
    return ast.dump(tree) == ast.dump(reference)


def first_difference(tree: ast.AST, reference: ast.AST):
    """Returns (line in tree, line in reference) of the first difference, or None if equal.

    A line is 0 when that side has no statement there (the other has extra code at the end).
    """
    found = _compare(tree, reference, 1, 1)
    return found


def _compare(a, b, line_a: int, line_b: int):
    if type(a) is not type(b):
        return (line_a, line_b)
    if isinstance(a, ast.AST):
        line_a = getattr(a, "lineno", line_a)
        line_b = getattr(b, "lineno", line_b)
        for name in a._fields:
            found = _compare(getattr(a, name, None), getattr(b, name, None), line_a, line_b)
            if found:
                return found
        return None
    if isinstance(a, list):
        for x, y in zip(a, b):
            found = _compare(x, y, line_a, line_b)
            if found:
                return found
        if len(a) != len(b):
            extra_a = getattr(a[len(b)], "lineno", 0) if len(a) > len(b) else 0
            extra_b = getattr(b[len(a)], "lineno", 0) if len(b) > len(a) else 0
            return (extra_a, extra_b)
        return None
    return None if a == b else (line_a, line_b)


def describe_difference(text: str, reference_text: str, found, reference_name: str):
    """Returns (message, a short diff of the lines around the first difference)."""
    line_a, line_b = found
    lines_a, lines_b = text.split("\n"), reference_text.split("\n")
    if not line_a:
        message = f"the reference has more code from its line {line_b} on"
    elif not line_b:
        message = f"your file has extra code from line {line_a} on"
    else:
        message = (
            f"first difference: your line {line_a} "
            f"(`{_line(lines_a, line_a)}`) vs. reference line {line_b} "
            f"(`{_line(lines_b, line_b)}`)"
        )
    start_a, start_b = max(line_a, 1), max(line_b, 1)
    excerpt_a = [line + "\n" for line in lines_a[start_a - 1 : start_a - 1 + CONTEXT_LINES]]
    excerpt_b = [line + "\n" for line in lines_b[start_b - 1 : start_b - 1 + CONTEXT_LINES]]
    diff = difflib.unified_diff(
        excerpt_a if line_a else [],
        excerpt_b if line_b else [],
        fromfile=f"your file, line {line_a}",
        tofile=f"{reference_name}, line {line_b}",
        n=CONTEXT_LINES,
    )
    return message, "".join(diff)


def _line(lines: list, number: int) -> str:
    return lines[number - 1].strip() if 0 < number <= len(lines) else ""

"""Strict mode: does the whole file match a reference, up to comments and formatting?

Two files match when their ASTs are equal without positions (`ast.dump` without attributes):
comments, blank lines, line breaks and quote style don't count; docstrings and every
expression do. When they differ, the first difference is reported on both sides: the line of
the innermost node that differs, and, when that node spans several lines (a docstring, a call
over several lines), the line of its first differing token, or of the first differing line
inside a string.
"""

from __future__ import annotations

import ast
import difflib
import io
import re
import tokenize

CONTEXT_LINES = 3  # lines shown from each side around the first difference

# Tokens that only lay the code out: they never make two files differ.
_LAYOUT = frozenset(
    {
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENDMARKER,
        tokenize.ENCODING,
    }
)
_STRING_START = re.compile(r"[A-Za-z]*(\"\"\"|'''|\"|')")


def matches(tree: ast.AST, reference: ast.AST) -> bool:
    return ast.dump(tree) == ast.dump(reference)


def first_difference(tree: ast.AST, reference: ast.AST, text: str = "", reference_text: str = ""):
    """Returns (line in tree, line in reference) of the first difference, or None if equal.

    A line is 0 when that side has no statement there (the other has extra code at the end).
    With the source texts, a difference inside a node of several lines is narrowed down to the
    line where the two sides' tokens (or a string's characters) first differ.
    """
    found = _compare(tree, reference, None, None)
    if found is None:
        return None
    (node_a, line_a), (node_b, line_b) = found
    if type(node_a) is type(node_b) and node_a is not None and text and reference_text:
        return _narrow(text, node_a, reference_text, node_b) or (line_a, line_b)
    return (line_a, line_b)


def _compare(a, b, at_a, at_b):
    """The first difference of a and b, as ((node, line), (node, line)) per side, or None.

    at_a, at_b are the innermost nodes with a position around a and b (None: the module).
    The node is the one whose tokens hold the difference, None when only a line is known.
    """
    if isinstance(a, ast.AST) and hasattr(a, "lineno"):
        at_a = a
    if isinstance(b, ast.AST) and hasattr(b, "lineno"):
        at_b = b
    if type(a) is not type(b):
        return _at(at_a), _at(at_b)
    if isinstance(a, ast.AST):
        for name in a._fields:
            found = _compare(getattr(a, name, None), getattr(b, name, None), at_a, at_b)
            if found:
                return found
        return None
    if isinstance(a, list):
        for x, y in zip(a, b):
            found = _compare(x, y, at_a, at_b)
            if found:
                return found
        if len(a) != len(b):
            return _extra(a, len(b), at_a), _extra(b, len(a), at_b)
        return None
    return None if a == b else (_at(at_a), _at(at_b))


def _at(node):
    return (node, node.lineno) if node is not None else (None, 1)


def _extra(items: list, other_length: int, around):
    """Where a list differs in length: its first extra item, or (shorter) its end."""
    if len(items) > other_length:
        return None, getattr(items[other_length], "lineno", _at(around)[1])
    if around is None:
        return None, 0  # the module ends here: no statement on this side
    last = items[-1] if items else around
    return None, getattr(last, "end_lineno", None) or _at(around)[1]


def _narrow(text: str, node_a, reference_text: str, node_b):
    """The lines of the first differing token of two nodes, or None if no token differs."""
    if node_a.lineno == node_a.end_lineno and node_b.lineno == node_b.end_lineno:
        return node_a.lineno, node_b.lineno
    tokens_a, tokens_b = _tokens(text, node_a), _tokens(reference_text, node_b)
    if tokens_a is None or tokens_b is None:
        return None
    for token_a, token_b in zip(tokens_a, tokens_b):
        if not _same(token_a, token_b):
            extra_a, extra_b = _string_line_offsets(token_a, token_b)
            return (
                node_a.lineno + token_a.start[0] - 1 + extra_a,
                node_b.lineno + token_b.start[0] - 1 + extra_b,
            )
    if len(tokens_a) != len(tokens_b):
        # The longer side's first extra token, the shorter side's last one.
        where_a = tokens_a[min(len(tokens_a), len(tokens_b) + 1) - 1]
        where_b = tokens_b[min(len(tokens_b), len(tokens_a) + 1) - 1]
        return node_a.lineno + where_a.start[0] - 1, node_b.lineno + where_b.start[0] - 1
    return None


def _tokens(text: str, node) -> list | None:
    """The node's tokens without layout; positions count from the node's first line."""
    segment = ast.get_source_segment(text, node, padded=True)
    if segment is None:
        return None
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(segment + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    return [token for token in tokens if token.type not in _LAYOUT]


def _same(token_a, token_b) -> bool:
    if token_a.type != token_b.type:
        return False
    if token_a.string == token_b.string:
        return True
    if token_a.type in (tokenize.STRING, tokenize.NUMBER):
        try:  # 'a' and "a", 1e3 and 1000.0 are the same constant
            return ast.literal_eval(token_a.string) == ast.literal_eval(token_b.string)
        except (ValueError, SyntaxError):
            return False
    return False


def _string_line_offsets(token_a, token_b) -> tuple:
    """For two differing strings: how many lines into each the first different character is."""
    if token_a.type != tokenize.STRING or token_b.type != tokenize.STRING:
        return 0, 0
    body_a, body_b = _string_body(token_a.string), _string_body(token_b.string)
    common = 0
    for char_a, char_b in zip(body_a, body_b):
        if char_a != char_b:
            break
        common += 1
    return body_a[:common].count("\n"), body_b[:common].count("\n")


def _string_body(literal: str) -> str:
    """A string literal without its prefix and opening quote (its closing quote stays)."""
    start = _STRING_START.match(literal)
    return literal[start.end() :] if start else literal


def describe_difference(text: str, reference_text: str, found, reference_name: str):
    """Returns (message, a short diff of the lines around the first difference)."""
    line_a, line_b = found
    lines_a, lines_b = text.split("\n"), reference_text.split("\n")
    if not line_a:
        message = f"the reference has more code from its line {line_b} on"
    elif not line_b:
        message = f"your file has extra code from line {line_a} on"
    else:
        shown_a, shown_b = _shown(lines_a, line_a), _shown(lines_b, line_b)
        if shown_a == shown_b:  # they differ in spaces or tabs only: show those
            shown_a, shown_b = (
                _shown(lines_a, line_a, exact=True),
                _shown(lines_b, line_b, exact=True),
            )
        message = f"first difference: your line {line_a} ({shown_a}) vs. reference line {line_b} ({shown_b})"
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


def _shown(lines: list, number: int, exact: bool = False) -> str:
    """A line as the message shows it: `stripped`, an empty line, or (exact) its repr."""
    line = lines[number - 1] if 0 < number <= len(lines) else ""
    if exact:
        return repr(line)
    return f"`{line.strip()}`" if line.strip() else "an empty line"

"""The reference's code in the script's own names, for grader/reference_swap.py: a swapped
line keeps the names the script chose (`physical`, where the reference says `gpus`), so that
the second run tests the step's code, not a name the script never made.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import io
import keyword
import tokenize

from grader import decision


def in_the_scripts_names(theirs: str, ours: str, bound: set) -> str:
    """The reference's line `theirs` with each name the script never binds (the reference's
    `gpus`, where the script says `physical`) written as the name in its place on the script's
    line `ours`, token for token: the swap changes the step's code, not the script's names.
    Attributes and keywords (`.local_rank`, `root_rank=`) stay the reference's."""
    mine, yours = _tokens(theirs), _tokens(ours)
    matcher = difflib.SequenceMatcher(
        None,
        [decision.normalized_code(t.string) for t in mine],
        [decision.normalized_code(t.string) for t in yours],
        autojunk=False,
    )
    renamed = {}
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "replace" or i2 - i1 != 1 or j2 - j1 != 1:
            continue
        name, own = mine[i1], yours[j1]
        attribute = i1 > 0 and mine[i1 - 1].string == "."
        keyword_argument = (
            i1 + 1 < len(mine) and mine[i1 + 1].string == "=" and _depth(mine, i1) > 0
        )
        if (
            name.type == own.type == tokenize.NAME
            and name.string not in bound
            and not keyword.iskeyword(own.string)
            and not attribute
            and not keyword_argument
        ):
            renamed[i1] = own.string
    text = theirs
    for index in sorted(renamed, reverse=True):  # from the end: earlier columns stay put
        start, end = mine[index].start[1], mine[index].end[1]
        text = text[:start] + renamed[index] + text[end:]
    return text


def _depth(tokens: list, index: int) -> int:
    """How many brackets are open before token `index`."""
    opened = sum(t.string in "([{" for t in tokens[:index] if t.type == tokenize.OP)
    return opened - sum(t.string in ")]}" for t in tokens[:index] if t.type == tokenize.OP)


def _tokens(line: str) -> list:
    """The tokens of one line of code, a statement's first line too (`model = f(`)."""
    found = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(line).readline):
            if token.type in (tokenize.NAME, tokenize.OP, tokenize.NUMBER, tokenize.STRING):
                found.append(token)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # the statement goes on past this line: its tokens so far
    return found


def bound_names(source: str) -> set:
    """Every name `source` binds anywhere (assigned, imported, defined, a parameter), and
    Python's builtins."""
    names = set(dir(builtins))
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return names
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def bound_by(statement: ast.Module) -> set:
    """The names one statement binds (an import's, an assignment's)."""
    return bound_names(ast.unparse(statement)) - set(dir(builtins))

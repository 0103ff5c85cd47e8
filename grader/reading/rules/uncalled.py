"""Horovod's functions named but not called: `args.base_lr * hvd.size` multiplies by the
function itself, never by a number. Several steps' values can hide one; each rule asks here
first, so the learner is sent to the line where the parentheses are missing."""

from __future__ import annotations

from grader.reading.syntax import HVD, HVD_FUNCTIONS
from grader.reading.verdicts import Failure

FUNCTIONS = tuple(f"{HVD}.{name}" for name in HVD_FUNCTIONS)


def functions(script) -> list:
    """Every Horovod function the script names without calling it, in source order."""
    return script.uncalled(*FUNCTIONS)


def inside(script, expr):
    """The first Horovod function inside `expr` (following names) that is named but not
    called, as in `args.base_lr * hvd.size`; None if there is none."""
    named = {id(node) for node in functions(script)}
    if expr is None or not named:
        return None
    return script.first_mention(expr, lambda node: id(node) in named)


def failure(script, *exprs):
    """A Failure at its own line for the first uncalled Horovod function in `exprs`."""
    for expr in exprs:
        node = inside(script, expr)
        if node is not None:
            shown = script.source(node)
            return Failure(
                f"line {node.lineno}: {shown} is a function: call it, {shown}() (without "
                f"the parentheses it is the function itself, never a number)",
                node.lineno,
            )
    return None

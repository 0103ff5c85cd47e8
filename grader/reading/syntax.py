"""Small helpers over Python's `ast`: positions, call arguments, canonical module names."""

from __future__ import annotations

import ast
import operator

# Canonical module names; `Script.qualified_name` maps every alias onto these.
HVD = "horovod.tensorflow.keras"
TF = "tensorflow"
TFA = "tensorflow_addons"

MAX_DEPTH = 8  # how many assignments deep a name is followed

# Members of horovod.tensorflow that horovod.tensorflow.keras re-exports or wraps identically.
HVD_SHARED = {
    "init",
    "shutdown",
    "is_initialized",
    "size",
    "local_size",
    "rank",
    "local_rank",
    "cross_rank",
    "cross_size",
    "DistributedOptimizer",  # given a Keras optimizer, it returns the Keras wrapper
}

# The functions of horovod.tensorflow(.keras) that a script must call, not just name.
HVD_FUNCTIONS = ("init", "size", "local_size", "rank", "local_rank", "cross_rank", "cross_size")


def position(node: ast.AST) -> tuple:
    return (node.lineno, node.col_offset)


def end_position(node: ast.AST) -> tuple:
    return (node.end_lineno, node.end_col_offset)


def argument(call: ast.Call, name: str, index: int | None = None):
    """Returns the argument `name` of `call` (by keyword, else at positional `index`), or None."""
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    if index is not None and index < len(call.args):
        if not any(isinstance(arg, ast.Starred) for arg in call.args[: index + 1]):
            return call.args[index]
    return None


def method_name(call: ast.Call) -> str:
    return call.func.attr if isinstance(call.func, ast.Attribute) else ""


def canonical(name: str) -> str:
    """One spelling per module: horovod.tensorflow(.keras) -> HVD, keras -> tensorflow.keras."""
    if name == HVD or name.startswith(HVD + "."):
        return name
    if name.startswith("horovod.tensorflow."):
        member = name[len("horovod.tensorflow.") :]
        if member in HVD_SHARED:
            return f"{HVD}.{member}"
    if name == "keras" or name.startswith("keras."):
        return f"{TF}.{name}"
    return name


# Python's comparison operators as functions, once for every module that evaluates them
# (`is` / `is not` between the integers a script compares behave as == / !=).
COMPARISONS = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.eq,
    ast.IsNot: operator.ne,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
# `a < b` is `b > a`: the operator with its sides swapped.
FLIPPED = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}


def flipped(op: ast.cmpop) -> ast.cmpop:
    return FLIPPED.get(type(op), type(op))()


# The nodes whose body runs only when they are called (or, for a class, defined).
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def assignment_key(node) -> str:
    """The name an assignment binds: "x" for x, "args.base_lr" for args.base_lr; else ""."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return ""

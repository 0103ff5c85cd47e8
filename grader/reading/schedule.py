"""What a learning-rate multiplier is, read without working out any value: what it returns at
each epoch is for a run to show (grader/running/expected.py), so this module only names its form.

`multiplier(script, node)` returns a `Multiplier` for the expression passed as a multiplier:
- `function`: one of the script's module-level defs, named (`step_decay`) or in a lambda that
  only calls it with its own parameter (`lambda epoch: step_decay(epoch)`);
- `number`: a constant number (`0.1`);
- `called`: a call of one of the script's defs that makes a number, not a function
  (`step_decay(epoch)`, whose result is passed instead of the function);
- none of them: a lambda, an object, a name it can't follow (`kind` says which, for messages).

`is_step_decay(script, function)`: the def is the starting script's step_decay, written the same
way up to its name, its parameter's name, its docstring and formatting.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

# The starting script's step_decay (tests/unit/test_grader.py holds it to the script).
STEP_DECAY = """
def step_decay(epoch):
    return 0.1 ** sum(epoch >= drop for drop in args.lr_drops)
"""
# What a def returns when it makes a number: arithmetic or a number.
_NUMERIC = (ast.BinOp, ast.UnaryOp, ast.Constant)


@dataclass(frozen=True)
class Multiplier:
    kind: str  # "function", "number", "called", "lambda" or "other"
    function: ast.FunctionDef | None = None  # the def: of a function, or the one called
    number: float | None = None


def multiplier(script, node) -> Multiplier:
    """The form of the multiplier expression `node` (see the module)."""
    value = _number(script.constant(node))
    if value is not None:
        return Multiplier("number", number=value)
    function = _def_named(script, node)
    if function is not None:
        return Multiplier("function", function)
    resolved = script.resolve(node)
    if isinstance(resolved, ast.Lambda):
        function = _only_calls(script, resolved)
        return Multiplier("function", function) if function else Multiplier("lambda")
    if isinstance(resolved, ast.Call):
        called = script.function_of(resolved)
        if called is not None and _makes_a_number(called):
            return Multiplier("called", called)
    return Multiplier("other")


def is_step_decay(script, function) -> bool:
    """True if the def computes the starting script's step_decay, written as it is there, and
    `args` is what the script's parse_args() returned."""
    if not isinstance(function, ast.FunctionDef) or not _parses_args(script):
        return False
    spec = function.args
    if spec.posonlyargs or spec.kwonlyargs or spec.vararg or spec.kwarg or spec.defaults:
        return False
    if len(spec.args) != 1 or function.decorator_list:
        return False
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    parameter = spec.args[0].arg
    names = {
        node.id for statement in body for node in ast.walk(statement) if isinstance(node, ast.Name)
    }
    if parameter != "epoch" and "epoch" in names:
        return False  # renaming the parameter would make another name equal
    renamed = [_Rename(parameter, "epoch").visit(_copy(statement)) for statement in body]
    wanted = ast.parse(STEP_DECAY).body[0].body
    return [ast.dump(s) for s in renamed] == [ast.dump(s) for s in wanted]


def _number(value):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return None


def _def_named(script, node):
    """The module-level def the name `node` stands for (bound once), or None."""
    if not isinstance(node, ast.Name):
        return None
    reaching = script.bindings_before(node)
    if len(reaching) == 1 and isinstance(reaching[0].statement, ast.FunctionDef):
        return reaching[0].statement
    resolved = script.resolve(node)
    if isinstance(resolved, ast.Name) and resolved is not node:
        return _def_named(script, resolved)
    return None


def _only_calls(script, function: ast.Lambda):
    """The def a lambda only calls with its one parameter (`lambda e: step_decay(e)`), or None."""
    spec = function.args
    if spec.posonlyargs or spec.kwonlyargs or spec.vararg or spec.kwarg or spec.defaults:
        return None
    body = function.body
    if len(spec.args) != 1 or not isinstance(body, ast.Call) or body.keywords:
        return None
    if len(body.args) != 1 or not isinstance(body.args[0], ast.Name):
        return None
    if body.args[0].id != spec.args[0].arg or not isinstance(body.func, ast.Name):
        return None
    if body.func.id == spec.args[0].arg:
        return None
    return script.function_of(body)


def _makes_a_number(function: ast.FunctionDef) -> bool:
    """True if every return of the def gives arithmetic or a number, and it defines nothing."""
    returns = []
    for node in ast.walk(function):
        if node is not function and isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
        ):
            return False
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return False
        if isinstance(node, ast.Return):
            returns.append(node.value)
    return bool(returns) and all(isinstance(value, _NUMERIC) for value in returns)


def _parses_args(script) -> bool:
    """`args` is bound once, at the module level, to what a parse_args() call returns."""
    found = script.bindings.get("args", [])
    return (
        len(found) == 1
        and isinstance(found[0].value, ast.Call)
        and script.qualified_name(found[0].value.func).endswith("parse_args")
    )


def _copy(node):
    return ast.parse(ast.unparse(node)).body[0]


class _Rename(ast.NodeTransformer):
    def __init__(self, old: str, new: str):
        self.old, self.new = old, new

    def visit_Name(self, node):
        if node.id == self.old:
            return ast.copy_location(ast.Name(self.new, node.ctx), node)
        return node

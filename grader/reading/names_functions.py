"""The learner's script's own functions: which one a call runs (`function_of`), what it returns
(`returned`), and an expression followed into them (`followed`).

Part of the names layer: grader.reading.names.Script builds one of these per script and answers through it
(`script.functions`); it reaches the other parts through `script`. Plain `ast`, nothing of Horovod.
"""

from __future__ import annotations

import ast

from grader.reading.syntax import MAX_DEPTH


class OwnFunctions:
    """What the script's own functions are and return."""

    def __init__(self, script):
        self.script = script
        self._returned: dict = {}  # {id of a call: what it stands for, see returned()}

    def function_of(self, call):
        """The module-level `def` that `call` calls, or None."""
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
            return None
        reaching = self.script.assignments.bindings_before(call.func)
        if len(reaching) == 1 and isinstance(reaching[0].statement, ast.FunctionDef):
            return reaching[0].statement
        return None

    def returned(self, call):
        """What a call of one of the script's straight-line functions (plain assignments, then
        a return) stands for: `def is_root(): return hvd.rank() == 0` makes `is_root()` mean
        `hvd.rank() == 0`, `def per_worker(n): return n // hvd.size()` makes `per_worker(steps)`
        mean `steps // hvd.size()`, and `def make(lr): opt = SGD(lr); return
        hvd.DistributedOptimizer(opt)` makes `make(0.1)` mean the wrapped SGD(0.1). None for
        other calls."""
        key = id(call)
        if key not in self._returned:
            self._returned[key] = self._find_returned(call)
        return self._returned[key]

    def followed(self, expr):
        """`resolve`, and through the script's one-line functions: with
        `def make(rate): return SGD(rate)`, `opt = make(0.1)` stands for `SGD(0.1)`."""
        value = self.script.values.resolve(expr)
        for _ in range(MAX_DEPTH):
            returned = self.returned(value)
            if returned is None:
                return value
            value = self.script.values.resolve(returned)
        return value

    def _find_returned(self, call):
        function = self.function_of(call)
        if function is None or call.keywords:
            return None
        arguments = function.args
        parameters = [arg.arg for arg in arguments.posonlyargs + arguments.args]
        if arguments.kwonlyargs or arguments.vararg or arguments.kwarg or arguments.defaults:
            return None
        if len(call.args) != len(parameters) or any(
            isinstance(arg, ast.Starred) for arg in call.args
        ):
            return None
        body = function.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
            return None
        *steps, last = body
        given = dict(zip(parameters, call.args))
        # Straight-line helpers: `opt = SGD(rate)` then `return hvd.DistributedOptimizer(opt)`
        # stands for `hvd.DistributedOptimizer(SGD(rate))`.
        if not all(_simple_assignment(step) for step in steps):
            # Any body whose one return reads none of its variables: `...; return hvd.rank(),
            # hvd.size()` stands for the tuple, whatever runs before it.
            returns = [n for step in steps for n in ast.walk(step) if isinstance(n, ast.Return)]
            local = self.script.assignments.locals_of(function) - set(parameters)
            read = {n.id for n in ast.walk(last.value) if isinstance(n, ast.Name)}
            if (
                returns
                or read & local
                or any(
                    isinstance(n, (ast.Global, ast.Nonlocal, ast.Yield, ast.YieldFrom))
                    for step in steps
                    for n in ast.walk(step)
                )
            ):
                return None
            return self.script.loops.substituted(last.value, given, given)
        if not given and not steps:
            return last.value
        for step in steps:
            value = self.script.loops.substituted(step.value, given, given)
            given = {**given, step.targets[0].id: value}
        return self.script.loops.substituted(last.value, given, given)


def _simple_assignment(statement) -> bool:
    """`name = value`: one plain name, no unpacking, no attribute."""
    return (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
    )

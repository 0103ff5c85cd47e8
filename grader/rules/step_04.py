"""Step 4: the optimizer passed to model.compile is wrapped in hvd.DistributedOptimizer."""

import ast

from grader.engine import Failure
from grader.rules.common import DISTRIBUTED_OPTIMIZER
from grader.syntax import argument

STEP = 4
HINT = (
    "Wrap the optimizer in hvd.DistributedOptimizer right after creating it, and give the "
    "wrapped one to model.compile."
)


def check(script):
    compiles = script.compile_calls()
    if not compiles:
        return Failure("no model.compile(...) call found outside a function")
    wrappers = script.calls_to(DISTRIBUTED_OPTIMIZER)
    for compile_call in compiles:
        line = compile_call.lineno
        given = argument(compile_call, "optimizer", 0)
        if given is None:
            return Failure(f"line {line}: model.compile(...) gets no optimizer", line)
        value = script.resolve(given)
        if _is_wrapper(script, value):
            inner = argument(value, "optimizer", 0)
            if inner is not None and _is_wrapper(script, script.resolve(inner)):
                return Failure(
                    f"line {line}: the optimizer is wrapped in DistributedOptimizer twice, so "
                    "gradients are averaged twice: wrap it once",
                    line,
                )
            continue
        if wrappers:
            wrapper = wrappers[0]
            if script.is_discarded(wrapper):
                return Failure(
                    f"line {wrapper.lineno}: hvd.DistributedOptimizer(...) returns the wrapped "
                    "optimizer, but the result is thrown away: opt = hvd.DistributedOptimizer(opt)",
                    wrapper.lineno,
                )
            if wrapper.lineno > line:
                return Failure(
                    f"line {wrapper.lineno}: the optimizer is wrapped after model.compile (line "
                    f"{line}), which has already taken the unwrapped one: wrap it before",
                    wrapper.lineno,
                )
            return Failure(
                f"line {line}: model.compile gets `{script.source(given)}`, the unwrapped "
                f"optimizer, not the DistributedOptimizer made on line {wrapper.lineno}",
                line,
            )
        return Failure(
            f"line {line}: model.compile gets a plain optimizer (`{script.source(given)}`): "
            "wrap it first, opt = hvd.DistributedOptimizer(opt)",
            line,
        )
    return None


def _is_wrapper(script, value):
    return (
        isinstance(value, ast.Call) and script.qualified_name(value.func) == DISTRIBUTED_OPTIMIZER
    )

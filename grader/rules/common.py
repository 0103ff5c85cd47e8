"""Questions several steps ask, phrased once: the callbacks, the optimizer, rank-0 conditions."""

from __future__ import annotations

import ast

from grader.engine import Failure
from grader.syntax import HVD, TF, argument

NO_FIT = "no model.fit(...) call found outside a function: keep the script's model.fit(...)"
BROADCAST = f"{HVD}.callbacks.BroadcastGlobalVariablesCallback"
METRIC_AVERAGE = f"{HVD}.callbacks.MetricAverageCallback"
WARMUP = f"{HVD}.callbacks.LearningRateWarmupCallback"
SCHEDULE = f"{HVD}.callbacks.LearningRateScheduleCallback"
DISTRIBUTED_OPTIMIZER = f"{HVD}.DistributedOptimizer"
KERAS_LOAD_MODEL = (
    f"{TF}.keras.models.load_model",
    f"{TF}.keras.saving.load_model",
    f"{TF}.saved_model.load",
)


def callbacks(script):
    """Returns (the callbacks that reach model.fit, None) or (None, a Failure)."""
    if script.fit_call() is None:
        return None, Failure(NO_FIT)
    entries = script.callbacks()
    if entries is None:
        return None, Failure(
            "the grader can't follow the callbacks passed to model.fit: build them as one list "
            "(callbacks = [...], then .append/.insert) and pass callbacks=callbacks"
        )
    return entries, None


def missing_callback(script, entries, name: str, what: str):
    """The Failure for a Horovod callback that does not reach model.fit."""
    made = [call for call in script.calls_to(name) if all(e.call is not call for e in entries)]
    if made:
        return Failure(
            f"line {made[0].lineno}: the {what} is created but never reaches "
            "model.fit(callbacks=...): put it in the callbacks list",
            made[0].lineno,
        )
    return Failure(f"no hvd.callbacks.{name.rsplit('.', 1)[1]} in the callbacks of model.fit")


def describe(test) -> str:
    return f"hvd.{test.which}() {test.op} {test.value}"


def not_rank0_reason(tests) -> str:
    """Why conditions that don't mean "rank 0 only" are wrong, for a message."""
    for test in tests:
        if test.which == "local_rank" and test.op == "==":
            return (
                f"`{describe(test)}` is true on one worker per machine: use hvd.rank() == 0, "
                "true on exactly one worker"
            )
        if test.which == "rank" and test.op == "!=":
            return f"`{describe(test)}` is true on every worker except rank 0: turn it around"
        if test.which == "rank" and test.op == "==":
            return f"`{describe(test)}` picks rank {test.value}; the first worker is rank 0"
    return ""


def rank0_guard_failure(tests, line: int, what: str, why: str = ""):
    """A Failure unless the RankTests guarding `what` (on `line`) mean rank 0 only; else None.

    `why` ends the message: why `what` belongs on rank 0 only.
    """
    if any(test.means_rank0 for test in tests):
        return None
    reason = not_rank0_reason(tests)
    if reason:
        return Failure(f"line {line}: {what} is guarded wrongly: {reason}", line)
    return Failure(
        f"line {line}: {what} runs on every worker; it belongs on rank 0 only{why}", line
    )


def every_rank_failure(script, entry, what: str):
    """A Failure if a callback that every worker must run is added under a rank condition."""
    tests = script.rank_tests(entry.guards)
    if not tests:
        return None
    return Failure(
        f"line {entry.line}: the {what} is only added when `{describe(tests[0])}`; every worker "
        "must run it (the others would wait for it forever, or train differently)",
        entry.line,
    )


def rank0_value_failure(script, expr, what: str, line: int):
    """A Failure unless `expr` is truthy on rank 0 and falsy on every other rank."""
    test = script.rank_test(expr)
    if test is not None and test.means_rank0:
        return None
    if test is not None:
        reason = not_rank0_reason([test])
        if reason:
            return Failure(f"line {line}: {what}: {reason}", line)
    value = script.constant(expr)
    if value is not None:
        return Failure(
            f"line {line}: {what} is {value!r} on every worker: make it 1 on rank 0 and 0 "
            "elsewhere (1 if hvd.rank() == 0 else 0)",
            line,
        )
    return Failure(
        f"line {line}: {what} (`{script.source(expr)}`) does not depend on hvd.rank(): make it 1 "
        "on rank 0 and 0 elsewhere (1 if hvd.rank() == 0 else 0)",
        line,
    )


def optimizer_call(script):
    """Returns (the optimizer constructor passed to model.compile, None) or (None, a Failure).

    Looks through hvd.DistributedOptimizer(...) to the optimizer it wraps.
    """
    compiles = script.compile_calls()
    if not compiles:
        return None, Failure("no model.compile(...) call found outside a function")
    given = argument(compiles[0], "optimizer", 0)
    value = script.resolve(given) if given is not None else None
    for _ in range(3):
        if (
            isinstance(value, ast.Call)
            and script.qualified_name(value.func) == DISTRIBUTED_OPTIMIZER
        ):
            inner = argument(value, "optimizer", 0)
            value = script.resolve(inner) if inner is not None else None
    if not isinstance(value, ast.Call):
        return None, Failure(
            f"line {compiles[0].lineno}: model.compile(...) gets no optimizer object the grader "
            "can follow: create it with its class, opt = tf.keras.optimizers.legacy.SGD(...)",
            compiles[0].lineno,
        )
    return value, None


def scaling_failure(script, expr, what: str, line: int):
    """A Failure unless `expr` is proportional to hvd.size() (and nothing else of Horovod's)."""
    scale = script.scale(expr)
    shown = f"{what} (`{script.source(expr)}`)"
    if scale.unclear:
        return Failure(
            f"line {line}: {shown} adds up terms that change differently with the number of "
            "workers: make it a plain multiple of hvd.size()",
            line,
        )
    if scale.mixed:
        return Failure(
            f"line {line}: {shown} is scaled by hvd.size() on some paths only: scale it on all",
            line,
        )
    if scale.power("local_size"):
        return Failure(
            f"line {line}: {shown} uses hvd.local_size(), the workers on this machine only: "
            "use hvd.size(), all workers",
            line,
        )
    if scale.power("rank") or scale.power("local_rank"):
        return Failure(
            f"line {line}: {shown} depends on the worker's rank, so each worker gets another "
            "value: scale by hvd.size()",
            line,
        )
    if scale.power("sqrt_size"):
        return Failure(
            f"line {line}: {shown} grows with the square root of hvd.size(); this workbook "
            "scales linearly: multiply by hvd.size()",
            line,
        )
    power = scale.power("size")
    if power == 1:
        return None
    if power == 0:
        return Failure(
            f"line {line}: {shown} is not scaled by the number of workers: multiply it by "
            "hvd.size()",
            line,
        )
    if power < 0:
        return Failure(f"line {line}: {shown} is divided by hvd.size(): multiply instead", line)
    return Failure(f"line {line}: {shown} is multiplied by hvd.size() more than once", line)

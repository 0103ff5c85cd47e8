"""Questions several steps ask, phrased once: the callbacks, the optimizer, rank-0 conditions."""

from __future__ import annotations

import ast

from dataclasses import dataclass

from grader import ranks, scaling, training
from grader.rules import uncalled
from grader.verdicts import Advice, Failure, Note  # noqa: F401 (Advice: rules import it here)
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


def callbacks(script, looked_for: str):
    """Returns (the callbacks that reach model.fit, None), or (None, a Failure when there is
    no model.fit, a Note when the grader can't follow them; it looked for `looked_for`)."""
    fit = training.of(script).fit_call()
    if fit is None:
        return None, Failure(NO_FIT)
    entries = training.of(script).callbacks()
    if entries is None:
        return None, Note(
            f"it can't follow the callbacks passed to model.fit on line {fit.lineno}, where it "
            f"looked for {looked_for} (it follows one list, callbacks = [...], with .append, "
            ".insert, .extend, += and loops over a written-out list)",
            fit.lineno,
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


def rank0_guard_failure(script, guards, line: int, what: str, why: str = ""):
    """None if the (test, polarity) `guards` of `what` (on `line`) mean rank 0 only; else a
    Failure, or a Note when a guard depends on the rank in a way the grader can't read.

    `why` ends the message: why `what` belongs on rank 0 only.
    """
    tests = ranks.of(script).rank_tests(guards)
    if any(test.means_rank0 for test in tests):
        return None
    failure = uncalled.failure(script, *(test for test, _ in guards))
    if failure:
        return failure
    reason = not_rank0_reason(tests)
    if reason:
        return Failure(f"line {line}: {what} is guarded wrongly: {reason}", line)
    for test, _ in guards:
        variation = ranks.of(script).varies(test)
        if variation is not None and variation.kind in ("rank", "unknown"):
            return Note(
                f"line {line}: it can't tell whether `{script.source(test)}` holds on rank 0 "
                f"only; it looked for {what} under `if hvd.rank() == 0:`",
                line,
            )
    return Failure(
        f"line {line}: {what} runs on every worker; it belongs on rank 0 only{why}", line
    )


def every_rank_failure(script, entry, what: str):
    """A Failure (or a Note) if a callback every worker must run is added under a condition
    that may differ between workers."""
    failure = uncalled.failure(script, *(test for test, _ in entry.guards))
    if failure:
        return failure
    for test, polarity in entry.guards:
        found = ranks.of(script).rank_tests([(test, polarity)])
        if found:
            shown, meaning = script.source(test), describe(found[0])
            when = f"`{meaning}`" if shown == meaning else f"`{shown}` (that is, {meaning})"
            if not polarity:
                when = f"`{shown}` is false (that is, {meaning})"
            return Failure(
                f"line {entry.line}: the {what} is only added when {when}; every worker must "
                "run it (the others would wait for it forever, or train differently)",
                entry.line,
            )
    return differing_guard(
        script,
        entry.guards,
        entry.line,
        f"the {what} is added",
        "every worker must run it (the others would wait for it forever, or train differently)",
    )


def collective_failure(script, node, what: str, consequence: str):
    """A Failure (or a Note) unless every worker reaches `node`, a call that needs them all.

    `what` names the call; `consequence` says what happens when only some workers reach it.
    """
    return differing_guard(script, script.guards(node), node.lineno, f"{what} runs", consequence)


def differing_guard(script, guards, line: int, what: str, consequence: str):
    """A Failure if one of the (test, polarity) `guards` may differ between workers (their rank,
    or what each finds on its own disk), a Note if the grader can't tell, else None."""
    note = None
    for test, polarity in guards:
        variation = ranks.of(script).varies(test)
        if variation is None:
            continue
        when = f"`{script.source(test)}` is {'true' if polarity else 'false'}"
        if variation.kind == "rank":
            return Failure(
                f"line {line}: {what} only when {when}, which depends on the worker's rank: "
                f"{consequence}",
                line,
            )
        if variation.kind == "state":
            return Failure(
                f"line {line}: {what} only when {when}, and each worker works that out for "
                f"itself (`{script.source(variation.cause)}`: its own files, clock or "
                f"environment), so they may disagree: {consequence}",
                line,
            )
        note = note or Note(
            f"line {line}: it can't tell whether `{script.source(test)}` is the same on every "
            f"worker, where {what}; it looked for conditions that don't depend on the rank or "
            "on a worker's own files",
            line,
        )
    return note


def written_line(script, node, used: int) -> tuple:
    """(the line where the learner wrote `node`'s value, words naming where it is used): the
    line of the assignment it comes from, e.g. `verbose = ...` for fit(verbose=verbose)."""
    value = script.resolve(node)
    written = getattr(value, "lineno", None)
    if written is None or written == used:
        return used, ""
    return written, f" (used at line {used})"


def horovod_call_in(script, expr, *functions: str):
    """The first call of one of Horovod's `functions` (local_size, rank...) that flows into
    `expr`, following names; None if there is none."""
    def is_one(node):
        if not isinstance(node, ast.Call):
            return False
        name = script.qualified_name(node.func)
        return name.startswith("horovod.") and name.rsplit(".", 1)[-1] in functions

    return script.first_mention(expr, is_one)


def _rank0_branches(script, expr):
    """(what rank 0 gets, what the others get) of `A if <rank test> else B`, or None."""
    value = script.resolve(expr)
    if not isinstance(value, ast.IfExp):
        return None
    test = ranks.of(script).rank_test(value.test)
    if test is None or not test.exact or test.which != "rank" or test.value != 0:
        return None
    return (value.body, value.orelse) if test.op == "==" else (value.orelse, value.body)


def rank0_value_failure(script, expr, what: str, line: int):
    """A Failure unless `expr` is truthy on rank 0 and falsy on every other rank."""
    test = ranks.of(script).rank_test(expr)
    if test is not None and test.means_rank0:
        return None
    failure = uncalled.failure(script, expr)
    if failure:
        return failure
    branches = _rank0_branches(script, expr)
    if branches is not None:  # `A if hvd.rank() == 0 else B`: what each side gets
        on_rank0, elsewhere = (script.constant(branch) for branch in branches)
        written, used = written_line(script, expr, line)
        if elsewhere is not None and elsewhere:
            return Failure(
                f"line {written}: {what}{used} is {elsewhere!r} on every worker but rank 0, so "
                "they all print too: make it 0 there", written)
        if on_rank0 is not None and not on_rank0:
            return Failure(f"line {written}: {what}{used} is {on_rank0!r} on rank 0, so nothing "
                           "is printed: make it 1 there", written)
        if on_rank0 is not None and elsewhere is not None:
            return None
    if test is not None:
        reason = not_rank0_reason([test])
        if reason:
            written, used = written_line(script, expr, line)
            return Failure(f"line {written}: {what}{used}: {reason}", written)
    value = script.constant(expr)
    if value is not None:
        return Failure(
            f"line {line}: {what} is {value!r} on every worker: make it 1 on rank 0 and 0 "
            "elsewhere (1 if hvd.rank() == 0 else 0)",
            line,
        )
    variation = ranks.of(script).varies(expr)
    if variation is not None and variation.kind in ("rank", "unknown"):
        return Note(
            f"line {line}: it can't tell whether {what} (`{script.source(expr)}`) is 1 on rank 0 "
            "and 0 elsewhere, as in 1 if hvd.rank() == 0 else 0",
            line,
        )
    return Failure(
        f"line {line}: {what} (`{script.source(expr)}`) does not depend on hvd.rank(): make it 1 "
        "on rank 0 and 0 elsewhere (1 if hvd.rank() == 0 else 0)",
        line,
    )


def optimizer_call(script):
    """Returns (the optimizer constructor passed to model.compile, None), or (None, a Failure,
    or a Note when the grader can't follow it).

    Looks through hvd.DistributedOptimizer(...) to the optimizer it wraps.
    """
    compiles = training.of(script).compile_calls()
    if not compiles:
        return None, Failure("no model.compile(...) call found outside a function")
    given = argument(compiles[0], "optimizer", 0)
    value = script.followed(given) if given is not None else None
    for _ in range(3):
        if (
            isinstance(value, ast.Call)
            and script.qualified_name(value.func) == DISTRIBUTED_OPTIMIZER
        ):
            inner = argument(value, "optimizer", 0)
            value = script.followed(inner) if inner is not None else None
    if not isinstance(value, ast.Call):
        line = compiles[0].lineno
        return None, Note(
            f"line {line}: it can't follow the optimizer given to model.compile(...); it looked "
            "for one created with its class, opt = tf.keras.optimizers.legacy.SGD(...)",
            line,
        )
    return value, None


@dataclass(frozen=True)
class Scaling:
    """How a value must grow with the number of workers: hvd.size() ** power, and the words."""

    power: int  # 1: a multiple of hvd.size(); -1: divided by it
    plain: str  # what the grader looked for
    fix: str  # what to do
    unscaled: str  # what a value that ignores the number of workers is not, and why it matters


MULTIPLIED = Scaling(1, "a plain multiple of hvd.size()", "multiply it by hvd.size()",
                     "is not scaled by the number of workers")
DIVIDED = Scaling(
    -1, "a plain division by hvd.size()", "divide it by hvd.size()",
    "is not divided by the number of workers, so every epoch trains N times the data",
)


def scaling_failure(script, expr, what: str, line: int, wanted: Scaling = MULTIPLIED):
    """A Failure unless `expr` grows as hvd.size() ** wanted.power (and nothing else of
    Horovod's): a learning rate is multiplied by it, a number of steps divided."""
    scale = scaling.of(script).scale(expr)
    if scale.powers == (("size", wanted.power),) and not scale.mixed and not scale.unclear:
        return None
    failure = uncalled.failure(script, expr)
    if failure:
        return failure
    shown = f"{what} (`{script.source(expr)}`)"
    if scale.opaque:
        return Note(
            f"line {line}: it can't tell how {shown} changes with the number of workers; it "
            f"looked for {wanted.plain}",
            line,
        )
    if scale.unclear:
        return Failure(
            f"line {line}: {shown} adds up terms that change differently with the number of "
            f"workers: make it {wanted.plain}",
            line,
        )
    if scale.mixed:
        return Failure(
            f"line {line}: {shown} does not change with hvd.size() the same way on every path "
            f"(e.g. only when an option is 0): {wanted.fix} once, on all",
            line,
        )
    for functions, why in (
        (("local_size",), "uses hvd.local_size(), the workers on this machine only"),
        (("rank", "local_rank"), "depends on the worker's rank, so each worker gets another "
                                 "value"),
    ):
        if any(scale.power(function) for function in functions):
            call = horovod_call_in(script, expr, *functions)
            written = getattr(call, "lineno", line)
            used = f" (used at line {line})" if written != line else ""
            return Failure(f"line {written}: {shown}{used} {why}: {wanted.fix}", written)
    if scale.power("sqrt_size"):
        return Failure(
            f"line {line}: {shown} changes with the square root of hvd.size(); this workbook "
            f"scales linearly: {wanted.fix}",
            line,
        )
    power = scale.power("size")
    if power == wanted.power:
        return None
    if power == 0:
        return Failure(
            f"line {line}: {shown} {wanted.unscaled}: {wanted.fix}",
            line,
        )
    if (power > 0) != (wanted.power > 0):
        done = "divided by" if power < 0 else "multiplied by"
        return Failure(f"line {line}: {shown} is {done} hvd.size(): {wanted.fix} instead", line)
    done = "multiplied by" if power > 0 else "divided by"
    return Failure(f"line {line}: {shown} is {done} hvd.size() more than once", line)
"""Step 4: the optimizer passed to model.compile is wrapped in hvd.DistributedOptimizer."""

import ast

from grader.reading import ranks, training
from grader.reading.horovod_optimizer import (
    DISTRIBUTED_OPTIMIZER,
    KERAS_LOAD_MODEL,
    LOAD_MODEL,
    is_wrapper,
    known_optimizer,
)
from grader.reading.rules.fit import NO_FIT, missing_compile
from grader.reading.rules.workers import collective_failure
from grader.reading.syntax import argument
from grader.reading.verdicts import Failure, Note, first_verdict

STEP = 4
HINT = (
    "Wrap the optimizer in hvd.DistributedOptimizer right after creating it, and give the "
    "wrapped one to model.compile."
)


FIT_HANG = (
    "with a DistributedOptimizer every training step averages the gradients of all workers, so "
    "the workers that train wait forever for the others (training hangs): train on every worker"
)
# Which workers a line runs on, in each case the grader tells apart.
CASES = {
    (True, True): "rank 0 when resuming",
    (False, True): "the other workers when resuming",
    (True, False): "rank 0 on a fresh run",
    (False, False): "the other workers on a fresh run",
}


def check(script):
    return first_verdict(
        lambda: _wrapping_failure(script),
        lambda: _every_worker_wraps(script),
        lambda: _every_compile_wraps(script),
        lambda: _every_worker_trains(script),
    )


def _wrapping_failure(script):
    compiles = training.of(script).compile_calls()
    if not compiles:
        return missing_compile(script)
    wrappers = script.calls_to(DISTRIBUTED_OPTIMIZER)
    for compile_call in compiles:
        line = compile_call.lineno
        given = argument(compile_call, "optimizer", 0)
        if given is None:
            return Failure(f"line {line}: model.compile(...) gets no optimizer", line)
        value = script.followed(given)
        if is_wrapper(script, value):
            inner = argument(value, "optimizer", 0)
            if inner is not None and is_wrapper(script, script.followed(inner)):
                return Failure(
                    f"line {line}: the optimizer is wrapped in DistributedOptimizer twice, and "
                    "Horovod can't wrap its own wrapper: the first training step fails with "
                    "RecursionError: wrap it once",
                    line,
                )
            continue
        if not known_optimizer(script, value):
            return Note(
                f"line {line}: it can't tell what optimizer `{script.source(given)}` is; it "
                "looked for opt = hvd.DistributedOptimizer(opt) before model.compile(...)",
                line,
            )
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


def _every_compile_wraps(script):
    for compile_call in training.of(script).compile_calls():
        given = argument(compile_call, "optimizer", 0)
        if given is not None:
            verdict = _unwrapped_somewhere(script, compile_call, given, compile_call.lineno)
            if verdict:
                return verdict
    return None


def _unwrapped_somewhere(script, compile_call, given, line):
    """A Failure if, on a run with more than one worker, the optimizer that reaches
    model.compile is a plain one on some path (`if hvd.size() == 1: opt = hvd.Distributed...`),
    read once for each case of CASES; a Note if the grader can't tell which assignment reaches."""
    if len(script.bindings_before(given)) < 2:
        return None
    values = {}
    for (rank0, resuming), who in CASES.items():
        if ranks.of(script).runs(compile_call, rank0, resuming) is False:
            continue
        value = ranks.of(script).value_on(given, rank0, resuming)
        if value is None:
            return Note(
                f"line {line}: it can't tell which assignment of `{script.source(given)}` reaches "
                f"model.compile on {who}; it looked for opt = hvd.DistributedOptimizer(opt) on "
                "every worker",
                line,
            )
        values[who] = script.followed(value)
    for who, value in values.items():
        if not is_wrapper(script, value) and known_optimizer(script, value):
            return Failure(
                f"line {line}: on {who}, with more than one worker, model.compile gets the "
                f"plain optimizer (`{script.source(value)}`, line {value.lineno}): the "
                "condition around hvd.DistributedOptimizer(...) is false there: "
                f"{_wrap_consequence()}",
                line,
            )
    return None


def _every_worker_wraps(script):
    """Every worker trains with a DistributedOptimizer: its own, or rank 0's from the checkpoint
    (hvd.load_model wraps the restored optimizer)."""
    wrappers = [c for c in script.calls_to(DISTRIBUTED_OPTIMIZER) if not script.in_function(c)]
    loads = [c for c in script.calls_to(LOAD_MODEL) if not script.in_function(c)]
    for wrapper in wrappers:
        tests = [t for t, p in script.guards(wrapper) if not _loads_otherwise(script, t, p)]
        kinds = {variation.kind for variation in map(ranks.of(script).varies, tests) if variation}
        if not kinds:
            return None  # every worker wraps its optimizer
        if "state" in kinds:
            return collective_failure(
                script, wrapper, "hvd.DistributedOptimizer(...)", _wrap_consequence()
            )
    if not wrappers:
        return None
    note = None
    for (rank0, resuming), who in CASES.items():
        reached = [ranks.of(script).runs(call, rank0, resuming) for call in wrappers + loads]
        if True in reached:
            continue
        if None in reached:
            note = note or Note(
                f"line {wrappers[0].lineno}: it can't tell whether {who} get a "
                "DistributedOptimizer (their own, or rank 0's from hvd.load_model); it looked "
                "at the conditions around both",
                wrappers[0].lineno,
            )
            continue
        return Failure(
            f"line {wrappers[0].lineno}: hvd.DistributedOptimizer(...) never runs on {who} "
            f"(and no hvd.load_model gives one there): {_wrap_consequence()}",
            wrappers[0].lineno,
        )
    return note


def _loads_otherwise(script, test, polarity) -> bool:
    """True if `test` picks between loading the checkpoint and building a fresh model (which
    workers look for and load checkpoints is step 8's question)."""
    branch = script.parent(test)
    if not isinstance(branch, ast.If) or branch.test is not test:
        return False
    other = branch.orelse if polarity else branch.body
    names = (LOAD_MODEL, *KERAS_LOAD_MODEL)
    return any(
        isinstance(node, ast.Call) and script.qualified_name(node.func) in names
        for statement in other
        for node in ast.walk(statement)
    )


def _wrap_consequence():
    return (
        "a worker with a plain optimizer never averages its gradients with the others, so the "
        "workers that do wait forever for it (training hangs): wrap the optimizer on every worker"
    )


def _every_worker_trains(script):
    fit = training.of(script).fit_call()
    if fit is None:
        return Failure(NO_FIT)
    return collective_failure(script, fit, "model.fit(...)", FIT_HANG)

"""Which workers must run what, phrased once for every step: a line (or a value) for rank 0
only, a callback or a collective on every worker, a condition that may differ between workers.
Built on grader.reading.ranks (which workers run a line, and why a value differs between them); each
returns None, a Failure at the line where the learner wrote it, or a Note when it can't tell."""

from __future__ import annotations

import ast

from grader.reading import ranks
from grader.reading.rules import uncalled
from grader.reading.verdicts import Failure, Note


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
    if branches is None and len(script.bindings_before(expr)) > 1:
        # `v = 1`, then `if hvd.rank() != 0: v = 0`: what each rank gets
        per_rank = [ranks.of(script).value_on(expr, rank0) for rank0 in (True, False)]
        if None not in per_rank and not any(v is expr for v in per_rank):
            branches = per_rank
    if branches is not None:  # `A if hvd.rank() == 0 else B`: what each side gets
        on_rank0, elsewhere = (script.constant(branch) for branch in branches)
        written, used = written_line(script, expr, line)
        if elsewhere is not None and elsewhere:
            return Failure(
                f"line {written}: {what}{used} is {elsewhere!r} on every worker but rank 0, so "
                "they all print too: make it 0 there",
                written,
            )
        if on_rank0 is not None and not on_rank0:
            return Failure(
                f"line {written}: {what}{used} is {on_rank0!r} on rank 0, so nothing "
                "is printed: make it 1 there",
                written,
            )
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


def where_defined(script, node) -> str:
    """`Trainer.model`, `main`... the function, method or class `node` is written in, for a
    message ("a lambda" when it is in one only)."""
    names = [
        a.name
        for a in script.ancestors(node)
        if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    ]
    return f"`{'.'.join(reversed(names))}`" if names else "a lambda"


def unfollowed_note(script, node, what: str, looked_for: str):
    """A Note for `what` (on node's line) written in a function, method or class the grader
    did not follow: it can't tell when, nor on which workers, it runs."""
    line = node.lineno
    return Note(
        f"line {line}: {what} is in {where_defined(script, node)}, which the grader did not "
        "follow (it follows the module-level functions the script calls by name, not methods, "
        f"nested functions or functions passed around); it looked for {looked_for}",
        line,
    )

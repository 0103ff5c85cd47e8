"""Values that grow with the number of workers: a learning rate multiplied by hvd.size(), a
number of steps divided by it (grader.reading.scaling works out how an expression scales). A value
scaled by hvd.local_size() or the rank is reported at the line where that call is written."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from grader.reading import scaling
from grader.reading.rules import uncalled
from grader.reading.verdicts import Failure, Note


@dataclass(frozen=True)
class Scaling:
    """How a value must grow with the number of workers: hvd.size() ** power, and the words."""

    power: int  # 1: a multiple of hvd.size(); -1: divided by it
    plain: str  # what the grader looked for
    fix: str  # what to do
    unscaled: str  # what a value that ignores the number of workers is not, and why it matters


MULTIPLIED = Scaling(
    1,
    "a plain multiple of hvd.size()",
    "multiply it by hvd.size()",
    "is not scaled by the number of workers",
)
DIVIDED = Scaling(
    -1,
    "a plain division by hvd.size()",
    "divide it by hvd.size()",
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
        (
            ("rank", "local_rank"),
            "depends on the worker's rank, so each worker gets another value",
        ),
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


def horovod_call_in(script, expr, *functions: str):
    """The first call of one of Horovod's `functions` (local_size, rank...) that flows into
    `expr`, following names; None if there is none."""

    def is_one(node):
        if not isinstance(node, ast.Call):
            return False
        name = script.qualified_name(node.func)
        return name.startswith("horovod.") and name.rsplit(".", 1)[-1] in functions

    return script.first_mention(expr, is_one)


def factor_failure(script, expr, what: str, line: int):
    """A Failure if `expr`, a multiple of hvd.size(), also multiplies the one setting it scales
    by other settings or numbers: `args.base_lr * args.batch_size * hvd.size() / 256` is not
    the base rate times hvd.size(). None when the grader can't tell the factors apart."""
    scale = scaling.of(script).scale(expr)
    if scale.factors is None or scale.opaque or scale.mixed or scale.unclear:
        return None
    settings = [factor for factor, power in scale.factors]
    if len(settings) == 1 and scale.factors[0][1] == 1 and abs(scale.coef - 1) < 1e-9:
        return None
    if not settings:
        return None  # a written number times hvd.size(): the base rate written out
    extra = f" and by {scale.coef:g}" if abs(scale.coef - 1) >= 1e-9 else ""
    named = ", ".join(
        f"`{factor}`" + (f" ** {power}" if power != 1 else "") for factor, power in scale.factors
    )
    return Failure(
        f"line {line}: {what} (`{script.source(expr)}`) multiplies hvd.size() by {named}{extra}: "
        "the workbook scales the base rate by hvd.size() alone (args.base_lr * hvd.size())",
        line,
    )

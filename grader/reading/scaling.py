"""How a value grows with the number of workers: steps / hvd.size(), base_lr * hvd.size().

A question module on the names layer (grader.reading.names) and grader.reading.ranks: `scaling.of(script)` is
the script's `Scaling`, whose public questions are `scale(expr)`, a `Scale` (the expression as
coef * hvd.size()**p * hvd.local_size()**q ..., following names and the script's own small
functions), and `is_rank_slice(node)`, `x[hvd.rank()::hvd.size()]`, this worker's 1/N of x.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from grader.reading import ranks
from grader.reading.syntax import HVD, MAX_DEPTH

# Functions that cut an array into N parts: f(x, N)[i] is the i-th.
SPLITS = ("numpy.array_split", "numpy.split")


@dataclass(frozen=True)
class Scale:
    """An expression seen as coef * size**p * local_size**q * ... times opaque factors.

    `mixed` means its branches (`a or b`, `x if c else y`, two assignments) scale differently;
    `unclear` that it adds terms that scale differently (`n // (hvd.rank() + 1)`); `opaque`
    that it calls a function of the script that uses Horovod in a way the grader can't follow;
    `factors` the values it multiplies that the grader can't work out (args.base_lr).
    """

    powers: tuple = ()  # sorted (horovod quantity, power) pairs, zero powers left out
    coef: float = 1.0
    mixed: bool = False
    unclear: bool = False
    opaque: bool = False
    # The other factors, values the grader can't work out (args.base_lr, args.batch_size), as
    # sorted (expression as written, power) pairs; None when it can't say which they are.
    factors: tuple | None = ()

    def power(self, quantity: str) -> int:
        return dict(self.powers).get(quantity, 0)

    def combine(self, other: Scale, sign: int, coef: float) -> Scale:
        powers = dict(self.powers)
        for quantity, power in other.powers:
            powers[quantity] = powers.get(quantity, 0) + sign * power
        kept = tuple(sorted((q, p) for q, p in powers.items() if p))
        factors = None
        if self.factors is not None and other.factors is not None:
            counted = dict(self.factors)
            for factor, power in other.factors:
                counted[factor] = counted.get(factor, 0) + sign * power
            factors = tuple(sorted((f, p) for f, p in counted.items() if p))
        return Scale(
            kept,
            coef,
            self.mixed or other.mixed,
            self.unclear or other.unclear,
            self.opaque or other.opaque,
            factors,
        )


def of(script) -> Scaling:
    """The scaling questions of `script` (grader.reading.names.Script), built once per script."""
    return script.memo(Scaling)


class Scaling:
    """How the values of one script grow with the number of workers (see the module)."""

    def __init__(self, script):
        self.script = script
        self._scales: dict = {}  # {id of a name: its Scale}: names repeat, each is worked out once
        self._ranks = ranks.of(script)

    def scale(self, expr, depth: int = 0) -> Scale:
        """How `expr` scales with hvd.size() (and local_size, rank, local_rank), see Scale."""
        if depth > MAX_DEPTH * 4:
            return Scale()
        if isinstance(expr, (ast.Name, ast.Attribute)) and self.script.values_of(expr) != [expr]:
            if id(expr) not in self._scales:
                self._scales[id(expr)] = self._scale_of_name(expr, depth)
            return self._scales[id(expr)]
        if self.script.object_attribute(expr):  # trainer.steps, set in a method
            return Scale(opaque=True, factors=None)
        if isinstance(expr, (ast.Name, ast.Attribute)):  # a value the grader can't work out
            if any(
                self.script.binding_value(binding) is None
                and not isinstance(binding.statement, (ast.FunctionDef, ast.ClassDef))
                for binding in self.script.bindings_before(expr)
            ):  # assigned something the grader can't read: it may hold hvd.size()
                return Scale(opaque=True, factors=None)
            return Scale(factors=((ast.unparse(expr), 1),))
        if isinstance(expr, ast.Constant) and isinstance(expr.value, (int, float)):
            return Scale((), _factor(expr.value)) if not isinstance(expr.value, bool) else Scale()
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
            inner = self.scale(expr.operand, depth + 1)
            return Scale(
                inner.powers, -inner.coef, inner.mixed, inner.unclear, inner.opaque, inner.factors
            )
        if isinstance(expr, ast.Call):
            return self._scale_of_call(expr, depth)
        if isinstance(expr, ast.BinOp):
            return self._scale_of_operation(expr, depth)
        if isinstance(expr, ast.BoolOp):
            return _same_scale([self.scale(value, depth + 1) for value in expr.values])
        if isinstance(expr, ast.IfExp):
            taken = self._taken_branch(expr)
            if taken is not None:  # n = hvd.size() if hvd.is_initialized() else 1
                return self.scale(taken, depth + 1)
            return _same_scale(
                [self.scale(expr.body, depth + 1), self.scale(expr.orelse, depth + 1)]
            )
        return Scale(factors=None)

    def _scale_of_operation(self, expr: ast.BinOp, depth: int) -> Scale:
        """How `left op right` scales, from how each side does."""
        left, right = self.scale(expr.left, depth + 1), self.scale(expr.right, depth + 1)
        if isinstance(expr.op, ast.Mult):
            return left.combine(right, +1, left.coef * right.coef)
        if isinstance(expr.op, (ast.Div, ast.FloorDiv)):
            coef = left.coef / right.coef if right.coef else left.coef
            return left.combine(right, -1, coef)
        if isinstance(expr.op, (ast.Add, ast.Sub)):
            total = _same_scale([left, right])
            return Scale(
                total.powers,
                total.coef,
                left.mixed or right.mixed,
                total.mixed,
                total.opaque,
                None,
            )
        if isinstance(expr.op, ast.Pow):
            return _power(left, right, _number(self.script.constant(expr.right)))
        # x % hvd.size(), x << hvd.rank(): a Horovod value in a way the grader can't follow.
        return Scale(opaque=True, factors=None) if left.powers or right.powers else Scale()

    def _taken_branch(self, choice: ast.IfExp):
        """The branch of `a if test else b` that every worker takes, resuming or not, when the
        grader knows the test's value there (hvd.is_initialized() after hvd.init()); else None."""
        answers = {
            self._ranks.holds(choice.test, rank0, resuming)
            for rank0 in (True, False)
            for resuming in (True, False)
        }
        if len(answers) != 1 or None in answers:
            return None
        return choice.body if answers.pop() else choice.orelse

    def _scale_of_name(self, name: ast.Name, depth: int) -> Scale:
        values = self.script.values_of(name)
        if values == [name]:
            return Scale()
        scales = [self.scale(value, depth + 1) for value in values]
        first = scales[0]
        if any(s.powers != first.powers or s.mixed for s in scales):
            opaque = any(s.opaque for s in scales)
            return Scale(first.powers, first.coef, True, first.unclear, opaque, None)
        if any(s.factors != first.factors or s.coef != first.coef for s in scales):
            return Scale(first.powers, first.coef, first.mixed, first.unclear, first.opaque, None)
        return first

    def _scale_of_call(self, call: ast.Call, depth: int) -> Scale:
        returned = self.script.returned(call)  # def workers(): return hvd.size()
        if returned is not None:
            return self.scale(returned, depth + 1)
        function = self.script.function_of(call)
        if function is not None and any(
            isinstance(node, ast.Attribute)
            and self.script.qualified_name(node).startswith(HVD + ".")
            for node in ast.walk(function)
        ):
            return Scale(opaque=True, factors=None)
        name = self.script.qualified_name(call.func)
        if name.startswith(HVD + ".") and not call.args:
            quantity = name[len(HVD) + 1 :]
            if quantity in ("size", "local_size", "rank", "local_rank"):
                return Scale(((quantity, 1),))
        rounding = ("int", "float", "round", "abs", "math.floor", "math.ceil", "math.trunc")
        if name in rounding and call.args:
            return self.scale(call.args[0], depth + 1)
        if name in ("math.sqrt", "numpy.sqrt") and call.args:
            inner = self.scale(call.args[0], depth + 1)
            if inner.power("size") == 1:
                return Scale((("sqrt_size", 1),))
            return inner
        one = call.args[0] if len(call.args) == 1 else None
        if name == "len" and one is not None and self.is_rank_slice(self.script.resolve(one)):
            return Scale((("size", -1),))  # len(x[hvd.rank()::hvd.size()]) is len(x) / N
        if name in ("max", "min"):
            # max(1, n // size) still scales like n // size.
            varying = [arg for arg in call.args if self.script.constant(arg) is None]
            return _same_scale([self.scale(arg, depth + 1) for arg in varying] or [Scale()])
        return Scale(factors=None)

    def is_rank_slice(self, node) -> bool:
        """True for x[hvd.rank()::hvd.size()] or np.array_split(x, hvd.size())[hvd.rank()],
        this worker's 1/N of x."""
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Call)
            and self.script.qualified_name(node.value.func) in SPLITS
            and len(node.value.args) >= 2
            and self._ranks.rank_kind(node.slice) == "rank"
        ):
            return self.scale(node.value.args[1]).powers == (("size", 1),)
        return (
            isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Slice)
            and node.slice.lower is not None
            and node.slice.step is not None
            and self._ranks.rank_kind(node.slice.lower) == "rank"
            and self.scale(node.slice.step).powers == (("size", 1),)
        )


def _factor(value) -> float:
    """A written number as a factor; one too large for a float (a 400-digit literal) counts as
    infinite."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _number(value):
    """`value` if it is a number (a constant the script wrote, names followed), else None."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _power(base: Scale, exponent: Scale, written) -> Scale:
    """base ** exponent, where `written` is the exponent's value when the script writes it as
    a number: `2 ** 70` is a factor of 2 ** 70, `hvd.size() ** 2` is size squared."""
    if written is None:
        # x ** n: a number the grader can't work out, unless Horovod takes part in it.
        return Scale(opaque=True, factors=None) if base.powers or exponent.powers else Scale()
    if base.powers and isinstance(written, float) and not written.is_integer():
        return Scale(opaque=True, factors=None)  # hvd.size() ** 0.5, hvd.size() ** 1e999
    try:
        coef = math.pow(base.coef, written)
    except OverflowError:
        coef = math.inf
    except ValueError:  # (-2) ** 0.5
        return Scale(opaque=True, factors=None)
    powers = tuple((quantity, power * int(written)) for quantity, power in base.powers)
    factors = None
    if base.factors is not None and float(written).is_integer():
        factors = tuple((f, p * int(written)) for f, p in base.factors)
    return Scale(
        tuple(p for p in powers if p[1]), coef, base.mixed, base.unclear, base.opaque, factors
    )


def _same_scale(scales: list) -> Scale:
    """The scale of alternatives (or terms): theirs if they agree, else a `mixed` one."""
    first = scales[0]
    unclear = any(s.unclear for s in scales)
    opaque = any(s.opaque for s in scales)
    if any(s.powers != first.powers for s in scales[1:]):
        return Scale(first.powers, 1.0, True, unclear, opaque, None)
    coef = first.coef if all(s.coef == first.coef for s in scales) else 1.0
    same = all(s.factors == first.factors and s.coef == first.coef for s in scales)
    factors = first.factors if same else None
    return Scale(first.powers, coef, any(s.mixed for s in scales), unclear, opaque, factors)

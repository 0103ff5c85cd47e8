"""What one condition says about the worker's rank: the rank tests of grader.reading.ranks.

`hvd.rank() == 0`, `not hvd.rank()`, `verbose > 0` where verbose = 1 if hvd.rank() == 0 else 0,
a helper function that returns one: each is a `RankTest` (`rank_test`), and the guards around a
line are the rank tests that must hold for it to run (`guard_tests`, `rank0_only`).

grader.reading.ranks builds the one `RankTests` of a script and answers through it; a name assigned in
branches is read per rank through that `Ranks` (its `value_on`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from grader.reading.syntax import COMPARISONS, HVD, MAX_DEPTH, flipped

_MISSING = object()
# The comparisons a rank test may use (not `in`, `is`: no rank is a container or an object).
RANK_COMPARISONS = {
    op: COMPARISONS[op] for op in (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
}


@dataclass(frozen=True)
class RankTest:
    """A condition that is true exactly when `which` (rank or local_rank) `op` `value`.

    `exact` is False for `x and hvd.rank() == 0`: true only on rank 0, but not on every rank 0.
    """

    which: str
    op: str  # "==" or "!="
    value: int
    exact: bool = True

    def negated(self):
        if not self.exact:
            return None
        return RankTest(self.which, "!=" if self.op == "==" else "==", self.value)

    @property
    def means_rank0(self) -> bool:
        return self.which == "rank" and self.op == "==" and self.value == 0


class RankTests:
    """The rank tests of one script's conditions; `ranks` is its grader.reading.ranks.Ranks."""

    def __init__(self, script, ranks):
        self.script = script
        self.ranks = ranks
        self._busy: set = set()  # names being read per rank (a name's value may test itself)

    def rank_test(self, expr, depth: int = 0) -> RankTest | None:
        """What `expr` says about this worker's rank when it is true, if anything."""
        if expr is None or depth > MAX_DEPTH:
            return None
        if len(self.script.bindings_before(expr)) > 1:  # assigned in branches: read per rank
            return self._per_rank_test(expr)
        expr = self.script.resolve(expr)
        which = self.rank_kind(expr)
        if which:
            return RankTest(which, "!=", 0)  # `if hvd.rank():` is true on every rank but 0
        returned = self.script.returned(expr)
        if returned is not None:  # def is_root(): return hvd.rank() == 0
            return self.rank_test(returned, depth + 1)
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            inner = self.rank_test(expr.operand, depth + 1)
            return inner.negated() if inner else None
        if isinstance(expr, ast.Call) and self.script.qualified_name(expr.func) in ("int", "bool"):
            return self.rank_test(expr.args[0], depth + 1) if len(expr.args) == 1 else None
        if isinstance(expr, ast.Compare) and len(expr.ops) == 1:
            left, op, right = expr.left, expr.ops[0], expr.comparators[0]
            return self._rank_comparison(left, op, right) or self._choice_comparison(
                left, op, right, depth
            )
        if isinstance(expr, ast.IfExp):  # `True if hvd.rank() == 0 else False`
            return self._choice_test(expr, bool, depth)
        if isinstance(expr, ast.BoolOp) and isinstance(expr.op, ast.And):
            for value in expr.values:
                inner = self.rank_test(value, depth + 1)
                if inner and inner.op == "==":
                    return RankTest(inner.which, "==", inner.value, exact=len(expr.values) == 1)
        return None

    def _per_rank_test(self, name) -> RankTest | None:
        """A name assigned in branches as a rank test: true on rank 0 only, or on the others."""
        if id(name) in self._busy:
            return None
        self._busy.add(id(name))
        try:
            values = [self.ranks.value_on(name, rank0) for rank0 in (True, False)]
            truths = [
                self.script.constant(value, _MISSING) for value in values if value is not None
            ]
        finally:
            self._busy.discard(id(name))
        if len(truths) != 2 or _MISSING in truths:
            return None
        if bool(truths[0]) and not bool(truths[1]):
            return RankTest("rank", "==", 0)
        if bool(truths[1]) and not bool(truths[0]):
            return RankTest("rank", "!=", 0)
        return None

    def rank_kind(self, expr, depth: int = 0) -> str:
        """ "rank" or "local_rank" if `expr` is that call (or a helper returning it), else ""."""
        name = self.script.call_name(expr)
        if name in (f"{HVD}.rank", f"{HVD}.local_rank"):
            return name.rsplit(".", 1)[1]
        returned = self.script.returned(self.script.resolve(expr))
        if returned is not None and depth < MAX_DEPTH:
            return self.rank_kind(returned, depth + 1)
        return ""

    def _rank_comparison(self, left, op, right) -> RankTest | None:
        which = self.rank_kind(left)
        value = self.script.constant(right)
        if not which:
            which, value = self.rank_kind(right), self.script.constant(left)
            op = flipped(op)
        if not which or not isinstance(value, int) or isinstance(value, bool):
            return None
        if isinstance(op, (ast.Eq, ast.Is)):
            return RankTest(which, "==", value)
        if isinstance(op, (ast.NotEq, ast.IsNot)):
            return RankTest(which, "!=", value)
        # Ranks are never negative: rank < 1 and rank <= 0 mean rank == 0.
        if (isinstance(op, ast.Lt) and value == 1) or (isinstance(op, ast.LtE) and value == 0):
            return RankTest(which, "==", 0)
        if (isinstance(op, ast.Gt) and value == 0) or (isinstance(op, ast.GtE) and value == 1):
            return RankTest(which, "!=", 0)
        return None

    def _choice_comparison(self, left, op, right, depth: int) -> RankTest | None:
        """`verbose > 0` where verbose = 1 if hvd.rank() == 0 else 0: a test of the rank."""
        compare = RANK_COMPARISONS.get(type(op))
        choice, bound = self.script.resolve(left), self.script.constant(right, _MISSING)
        if not isinstance(choice, ast.IfExp):
            choice, bound = self.script.resolve(right), self.script.constant(left, _MISSING)
            compare = RANK_COMPARISONS.get(type(flipped(op)))
        if compare is None or not isinstance(choice, ast.IfExp) or bound is _MISSING:
            return None
        return self._choice_test(choice, lambda value: compare(value, bound), depth)

    def _choice_test(self, choice, truth, depth: int) -> RankTest | None:
        """`A if <rank test> else B` as a test of the rank, where `truth(A)` and `truth(B)` say
        whether each branch's constant makes the whole condition true."""
        inner = self.rank_test(choice.test, depth + 1)
        constant = self.script.constant
        body, orelse = constant(choice.body, _MISSING), constant(choice.orelse, _MISSING)
        if inner is None or body is _MISSING or orelse is _MISSING:
            return None
        try:
            when_true, when_false = truth(body), truth(orelse)
        except TypeError:
            return None
        if when_true and not when_false:
            return inner
        if when_false and not when_true:
            return inner.negated()
        return None

    def guard_tests(self, node) -> list:
        """The RankTests that must hold for `node` to run (else-branches negated)."""
        return self.rank_tests(self.script.guards(node))

    def rank_tests(self, guards) -> list:
        """The RankTests among (test, polarity) guards, as conditions that hold."""
        tests = []
        for test, polarity in guards:
            if not polarity and isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
                # `else` of `a or b`: neither holds, so the negation of each does.
                tests.extend(self.rank_tests((value, False) for value in test.values))
                continue
            found = self.rank_test(test)
            if found is not None and not polarity:
                found = found.negated()
            if found is not None:
                tests.append(found)
        return tests

    def rank0_only(self, node) -> bool:
        """True if `node` runs on rank 0 only (inside `if hvd.rank() == 0:` or similar)."""
        return any(test.means_rank0 for test in self.guard_tests(node))

"""Conditions about this worker's rank: is this line, value or guard "rank 0 only"?"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from grader.syntax import HVD, MAX_DEPTH

_MISSING = object()


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


class RankQuestions:
    """Script methods about ranks (a mixin of engine.Script; uses its name resolution)."""

    def rank_test(self, expr, depth: int = 0) -> RankTest | None:
        """What `expr` says about this worker's rank when it is true, if anything."""
        if expr is None or depth > MAX_DEPTH:
            return None
        expr = self.resolve(expr)
        which = self.rank_kind(expr)
        if which:
            return RankTest(which, "!=", 0)  # `if hvd.rank():` is true on every rank but 0
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            inner = self.rank_test(expr.operand, depth + 1)
            return inner.negated() if inner else None
        if isinstance(expr, ast.Call) and self.qualified_name(expr.func) in ("int", "bool"):
            return self.rank_test(expr.args[0], depth + 1) if len(expr.args) == 1 else None
        if isinstance(expr, ast.Compare) and len(expr.ops) == 1:
            return self._rank_comparison(expr.left, expr.ops[0], expr.comparators[0])
        if isinstance(expr, ast.IfExp):
            inner = self.rank_test(expr.test, depth + 1)
            body, orelse = self.constant(expr.body, _MISSING), self.constant(expr.orelse, _MISSING)
            if inner is None or body is _MISSING or orelse is _MISSING:
                return None
            if body and not orelse:
                return inner
            if orelse and not body:
                return inner.negated()
            return None
        if isinstance(expr, ast.BoolOp) and isinstance(expr.op, ast.And):
            for value in expr.values:
                inner = self.rank_test(value, depth + 1)
                if inner and inner.op == "==":
                    return RankTest(inner.which, "==", inner.value, exact=len(expr.values) == 1)
        return None

    def rank_kind(self, expr) -> str:
        name = self.call_name(expr)
        if name in (f"{HVD}.rank", f"{HVD}.local_rank"):
            return name.rsplit(".", 1)[1]
        return ""

    def _rank_comparison(self, left, op, right) -> RankTest | None:
        flipped = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}
        which = self.rank_kind(left)
        value = self.constant(right)
        if not which:
            which, value = self.rank_kind(right), self.constant(left)
            op = flipped.get(type(op), type(op))()
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

    def guard_tests(self, node) -> list:
        """The RankTests that must hold for `node` to run (else-branches negated)."""
        return self.rank_tests(self.guards(node))

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

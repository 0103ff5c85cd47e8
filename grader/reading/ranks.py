"""Which workers run a line, and which values differ between workers: the one rank evaluator.

A question module on the names layer (grader.reading.names): `ranks.of(script)` is the script's
`Ranks`, whose public questions are (the rank tests answered by its grader.reading.rank_tests.RankTests)
- `rank_test(expr)`: what one condition says about the rank (`hvd.rank() == 0`, `not
  hvd.rank()`, a helper function that returns one), a `RankTest`; `rank_kind(expr)`: is it
  hvd.rank() or hvd.local_rank(); `rank_tests(guards)`, `guard_tests(node)`, `rank0_only(node)`;
- `holds(expr, rank0, resuming)` and `runs(node, rank0, resuming)`: is a condition true, does a
  line run, on rank 0 or on another worker, when resuming from a checkpoint or on a fresh run
  (True, False, or None when the grader can't tell); `value_on(expr, rank0)`: what a name
  holds there, its assignments read once for rank 0 and once for another rank;
  `is_shared_epoch(expr)`: the epoch rank 0 broadcast;
- `varies(expr)`: why a value may differ between workers (their rank, or what each finds on its
  own disk), a `Variation`, which decides whether every worker reaches a collective.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from grader.reading.horovod_collectives import BROADCASTS, COLLECTIVES
from grader.reading.rank_tests import RANK_COMPARISONS, RankTest, RankTests
from grader.reading.syntax import COMPARISONS, HVD, MAX_DEPTH, flipped, position

# Calls whose result each worker works out for itself: its files, clock, environment, chance.
STATE_CALLS = {
    "open",
    "os.path.exists",
    "os.path.isfile",
    "os.path.isdir",
    "os.path.getsize",
    "os.path.getmtime",
    "os.listdir",
    "os.scandir",
    "os.walk",
    "os.getenv",
    "os.environ.get",
    "os.getpid",
    "glob.glob",
    "glob.iglob",
    "socket.gethostname",
    "platform.node",
    "time.time",
    "time.monotonic",
    "time.perf_counter",
}
STATE_MODULES = ("random.", "numpy.random.", "tensorflow.random.")
STATE_METHODS = {"exists", "is_file", "is_dir", "glob", "rglob", "iterdir", "stat"}
_SEVERITY = {"rank": 0, "state": 1, "unknown": 2}


@dataclass(frozen=True)
class Variation:
    """Why a value may differ between workers: `kind` "rank" (it depends on the worker's rank),
    "state" (on what each worker finds: files on its disk, its clock...) or "unknown" (the
    grader can't tell); `cause` is the expression it comes from."""

    kind: str
    cause: ast.AST


def of(script) -> Ranks:
    """The rank questions of `script` (grader.reading.names.Script), built once per script."""
    return script.memo(Ranks)


class Ranks:
    """The rank questions of one script, on its names layer (see the module)."""

    def __init__(self, script):
        self.script = script
        self.tests = RankTests(script, self)

    # ---- one condition on the rank (grader/reading/rank_tests.py) ---------------------------------

    def rank_test(self, expr, depth: int = 0) -> RankTest | None:
        return self.tests.rank_test(expr, depth)

    def rank_kind(self, expr, depth: int = 0) -> str:
        return self.tests.rank_kind(expr, depth)

    def guard_tests(self, node) -> list:
        return self.tests.guard_tests(node)

    def rank_tests(self, guards) -> list:
        return self.tests.rank_tests(guards)

    def rank0_only(self, node) -> bool:
        return self.tests.rank0_only(node)

    # ---- where a line runs: rank 0 or another worker, resuming or not --------------------
    #
    # When resuming, the epoch rank 0 broadcast is at least 1; on a fresh run it is 0. A
    # condition then holds (True), doesn't (False), or the grader can't tell (None).

    def runs(self, node, rank0: bool, resuming: bool = True):
        """Does `node` run on rank 0 (`rank0`) or on another worker, when resuming or not?"""
        verdict = True
        for test, polarity in self.script.guards(node):
            value = self.holds(test, rank0, resuming)
            if value is None:
                verdict = None
            elif value != polarity:
                return False
        return verdict

    def holds(self, expr, rank0: bool, resuming: bool, depth: int = 0):
        """Is condition `expr` true on rank 0 (`rank0`) or on another worker, resuming or not?"""
        if depth > MAX_DEPTH:
            return None
        if isinstance(expr, ast.Name):
            value = self.script.resolve(expr)
            if isinstance(value, (ast.BoolOp, ast.UnaryOp, ast.Compare)):  # a condition in a name
                return self.holds(value, rank0, resuming, depth + 1)
        returned = self.script.returned(expr)
        if returned is not None:
            return self.holds(returned, rank0, resuming, depth + 1)
        if isinstance(expr, ast.BoolOp):
            values = [self.holds(value, rank0, resuming, depth + 1) for value in expr.values]
            decisive = isinstance(expr.op, ast.Or)  # True decides `or`, False decides `and`
            if decisive in values:
                return decisive
            return None if None in values else not decisive
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            inner = self.holds(expr.operand, rank0, resuming, depth + 1)
            return None if inner is None else not inner
        if (
            isinstance(expr, ast.Call)
            and self.script.qualified_name(expr.func) in ("int", "bool")
            and len(expr.args) == 1
            and not expr.keywords
        ):
            return self.holds(expr.args[0], rank0, resuming, depth + 1)
        if self._initialized_before(expr):
            return True  # hvd.is_initialized() after hvd.init()
        test = self.rank_test(expr)
        if test is not None:
            return _rank_holds(test, rank0)
        if isinstance(expr, ast.Compare) and len(expr.ops) == 1:
            size = self._size_comparison(expr)
            if size is not None:
                return size
            return self._epoch_comparison(expr, resuming)
        if self.is_shared_epoch(expr):
            return resuming  # the epoch is at least 1 when resuming, else 0
        return None

    def _initialized_before(self, expr) -> bool:
        """True for `hvd.is_initialized()` outside any function, after an hvd.init() that the
        script runs (outside a function, or in a function it calls by name) before it."""
        if (
            not isinstance(expr, ast.Call)
            or expr.args
            or self.script.qualified_name(expr.func) != f"{HVD}.is_initialized"
            or self.script.in_function(expr)
        ):
            return False
        where = position(expr)
        return any(
            chain is not None and position(chain[0] if chain else call) < where
            for call, chain in self.script.calls_reached(f"{HVD}.init")
        )

    def _size_comparison(self, compare):
        """`hvd.size() == 1`, `hvd.size() > 1`... in a run on more than one worker (the runs
        the checks are about): True or False if it is the same for every such size, else None."""
        left, op, right = compare.left, compare.ops[0], compare.comparators[0]
        size = f"{HVD}.size"
        if self.script.call_name(left) != size:
            left, right, op = right, left, flipped(op)
        bound = self.script.constant(right)
        function = RANK_COMPARISONS.get(type(op))
        if self.script.call_name(left) != size or function is None:
            return None
        if not isinstance(bound, int) or isinstance(bound, bool):
            return None
        answers = {function(n, bound) for n in (2, bound - 1, bound, bound + 1) if n >= 2}
        return answers.pop() if len(answers) == 1 else None

    def _epoch_comparison(self, compare, resuming: bool):
        left, op, right = compare.left, compare.ops[0], compare.comparators[0]
        if not self.is_shared_epoch(left):
            left, right, op = right, left, flipped(op)
        bound = self.script.constant(right)
        if not self.is_shared_epoch(left) or not isinstance(bound, int) or isinstance(bound, bool):
            return None
        function = COMPARISONS.get(type(op))
        if function is None or isinstance(op, (ast.In, ast.NotIn)):
            return None
        compare_to = lambda n: function(n, bound)  # noqa: E731
        if not resuming:
            return compare_to(0)
        # When resuming the epoch is some n >= 1: the answer is known if it is the same for all.
        # A comparison with a constant changes its answer only at the bound.
        answers = {compare_to(n) for n in (1, bound - 1, bound, bound + 1) if n >= 1}
        return answers.pop() if len(answers) == 1 else None

    def value_on(self, expr, rank0: bool, resuming: bool = False):
        """The expression a name holds on rank 0 (`rank0`) or on the other workers, reading the
        assignments that may reach it once for each: `verbose = 1`, then `if hvd.rank() != 0:
        verbose = 0` is 1 on rank 0 and 0 on the others; `A if <rank test> else B` is A or B.
        None when the grader can't tell which assignment reaches there."""
        for _ in range(MAX_DEPTH):
            if isinstance(expr, ast.IfExp):
                holds = self.holds(expr.test, rank0, resuming)
                if holds is None:
                    return None
                expr = expr.body if holds else expr.orelse
                continue
            reaching = self.script.bindings_before(expr)
            if not reaching:
                return expr
            chosen = None
            for binding in reaching:  # latest first; the last one always runs
                if self.script.binding_value(binding) is None:
                    return None
                own = self.script.guards(binding.statement)
                used = {id(test) for test, _ in self.script.guards(expr)}
                verdict = True
                for test, polarity in own:
                    if id(test) in used:
                        continue
                    holds = self.holds(test, rank0, resuming)
                    if holds is None:
                        verdict = None
                    elif holds != polarity:
                        verdict = False
                        break
                if verdict is None:
                    return None
                if verdict:
                    chosen = binding
                    break
            if chosen is None:
                return None
            expr = self.script.binding_value(chosen)
        return None

    def is_shared_epoch(self, expr) -> bool:
        """True if `expr` is the epoch to resume from, as rank 0 broadcast it."""
        if not isinstance(expr, (ast.Name, ast.Call)):
            return False
        return self.script.mentions_call(expr, *BROADCASTS)

    # ---- values that differ between workers ---------------------------------------------

    def varies(self, expr) -> Variation | None:
        """Why `expr` may have another value on another worker, or None if it can't.

        Follows names (and the conditions they are assigned under) and the script's own
        functions; a collective's result (hvd.broadcast(...)) is the same on every worker.
        """
        found = self._varies(expr, 0, set())
        return found

    def _varies(self, node, depth: int, seen: set) -> Variation | None:
        if node is None or id(node) in seen:
            return None
        if depth > MAX_DEPTH * 4:
            return Variation("unknown", node)
        seen.add(id(node))
        found = []
        if isinstance(node, ast.Lambda):
            return None  # a function, not a value: its body runs when it is called
        if isinstance(node, ast.Call):
            name = self.script.qualified_name(node.func)
            if name in COLLECTIVES:
                return None
            direct = self._call_variation(node, name)
            if direct is not None:
                return direct
            function = self.script.function_of(node)
            if function is not None:
                found.append(self._varies_in_function(function, node, depth, seen))
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
            if self.script.object_attribute(node):  # trainer.verbose, set in a method
                return Variation("unknown", node)
            reaching = self.script.bindings_before(node)
            found += self._bindings_vary(node, reaching, depth, seen)
            if reaching and isinstance(node, ast.Name):
                return _worst(found)
        for child in ast.iter_child_nodes(node):
            found.append(self._varies(child, depth + 1, seen))
        return _worst(found)

    def _call_variation(self, call, name: str) -> Variation | None:
        """A call whose result is the worker's rank, or what the worker finds for itself."""
        if self.rank_kind(call):
            return Variation("rank", call)
        method = call.func.attr if isinstance(call.func, ast.Attribute) else ""
        if name in STATE_CALLS or name.startswith(STATE_MODULES) or method in STATE_METHODS:
            return Variation("state", call)
        return None

    def _bindings_vary(self, node, reaching: list, depth: int, seen: set) -> list:
        """How each assignment that reaches the name `node` may vary: its value, the list a loop
        takes it from, and the conditions it is assigned under."""
        found = []
        for binding in reaching:
            value = self.script.binding_value(binding)
            if value is not None:
                found.append(self._varies(value, depth + 1, seen))
            elif isinstance(binding.statement, (ast.For, ast.AsyncFor)):
                found.append(self._varies(binding.statement.iter, depth + 1, seen))
            elif not isinstance(binding.statement, (ast.FunctionDef, ast.ClassDef)):
                found.append(Variation("unknown", node))
            for test, _ in self.script.guards(binding.statement):
                found.append(self._varies(test, depth + 1, seen))
        return found

    def _varies_in_function(self, function, call, depth: int, seen: set) -> Variation | None:
        """A call of the script's own function varies if what it computes does."""
        found = []
        for node in ast.walk(function):
            if node is function or not isinstance(node, ast.Call):
                continue
            name = self.script.qualified_name(node.func)
            method = node.func.attr if isinstance(node.func, ast.Attribute) else ""
            if self.rank_kind(node):
                found.append(Variation("rank", call))
            elif name in STATE_CALLS or name.startswith(STATE_MODULES) or method in STATE_METHODS:
                found.append(Variation("state", call))
            elif self.script.function_of(node) is not None and id(node) not in seen:
                seen.add(id(node))
                inner = self._varies_in_function(
                    self.script.function_of(node), call, depth + 1, seen
                )
                found.append(inner)
        return _worst(found)


def _worst(found) -> Variation | None:
    """The most telling variation: a rank beats state, state beats "can't tell"."""
    found = [item for item in found if item is not None]
    return min(found, key=lambda item: _SEVERITY[item.kind]) if found else None


def _rank_holds(test, rank0: bool):
    if test.which != "rank" or not test.exact:
        return None
    if rank0:
        return (test.value == 0) == (test.op == "==")
    if test.value == 0:
        return test.op == "!="
    return None  # `hvd.rank() == 1` holds on one of the other workers only

"""What a learning rate multiplier returns, worked out from the script without running it.

Horovod's LearningRateScheduleCallback sets `initial_lr * multiplier(epoch)` at the first batch
of every epoch in [start_epoch, end_epoch) when `multiplier` is a function, and
`initial_lr * multiplier ** (epoch - start_epoch)` when it is a number (horovod/_keras/
callbacks.py, 0.28.1). `Evaluator` computes a multiplier's value at an epoch for the functions
learners write: numbers, lambdas (with defaults) and the script's own small functions
(assignments, if/elif/else, for over a tuple, return; sum, min, max, len, range...), and the
options they read (`args.lr_drops`) with the values of the run being checked. It imports
nothing and runs nothing of the script; anything else raises CantTell. Work it can see is too
big (a number of thousands of digits, a range of millions, a loop that runs away) raises
grader.budget.TooCostly instead: the check fails at that line rather than hang or pass.
"""

from __future__ import annotations

import ast
import math
import operator

from grader.budget import TooCostly
from grader.syntax import COMPARISONS

BUDGET = 20_000  # nodes evaluated per multiplier call, so that no loop runs away
MAX_INT_BITS = 4096  # a learning-rate multiplier never needs a bigger integer
MAX_RANGE = 10_000  # nor a longer range

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
}
_COMPARE = {op: COMPARISONS[op] for op in COMPARISONS if op not in (ast.Is, ast.IsNot)}
_BUILTINS = {
    "abs": abs,
    "all": all,
    "any": any,
    "bool": bool,
    "float": float,
    "int": int,
    "len": len,
    "max": max,
    "min": min,
    "range": range,
    "round": round,
    "sum": sum,
    "math.ceil": math.ceil,
    "math.exp": math.exp,
    "math.floor": math.floor,
    "math.log": math.log,
    "math.pow": math.pow,
    "math.sqrt": math.sqrt,
    "numpy.floor": math.floor,
    "numpy.ceil": math.ceil,
}


class CantTell(Exception):
    """The multiplier uses something the evaluator doesn't follow (`node`, for the message)."""

    def __init__(self, node):
        super().__init__("can't evaluate")
        self.node = node


class _Return(Exception):
    def __init__(self, value):
        self.value = value


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class Function:
    """A lambda or def of the script, with the defaults it was made with."""

    def __init__(self, node, defaults: dict):
        self.node = node
        self.defaults = defaults


class Evaluator:
    """Evaluates a multiplier of the script (see the module docstring)."""

    def __init__(self, script, options: dict | None = None):
        self.script = script
        self.options = options or {}  # {"lr_drops": (3,)}: what args.lr_drops holds in the run
        self.steps = 0

    def multiplier(self, node, epoch):
        """The value of `multiplier(epoch)` for the multiplier expression `node` (a number, or
        a function called with the epoch)."""
        self.steps = 0
        value = self.expr(node, {})
        if isinstance(value, Function):
            value = self.call(value, [epoch], node)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise CantTell(node)
        return float(value)

    def is_function(self, node) -> bool:
        """True if the multiplier is a function (Horovod calls it), False if a number."""
        self.steps = 0
        return isinstance(self.expr(node, {}), Function)

    # ---- expressions --------------------------------------------------------------------

    def _count(self, node) -> None:
        self.steps += 1
        if self.steps > BUDGET:
            raise TooCostly(node, f"working out the multiplier takes over {BUDGET:,} steps")

    def expr(self, node, env: dict):
        self._count(node)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (int, float, bool, str)) or node.value is None:
                return node.value
            raise CantTell(node)
        if isinstance(node, ast.Name):
            return self._name(node, env)
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self.expr(element, env) for element in node.elts)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = self.expr(node.left, env), self.expr(node.right, env)
            return self._arithmetic(_BINARY[type(node.op)], left, right, node)
        if isinstance(node, ast.UnaryOp):
            operand = self.expr(node.operand, env)
            if isinstance(node.op, ast.Not):
                return not operand
            if isinstance(node.op, ast.USub):
                return self._arithmetic(operator.neg, operand, None, node)
            if isinstance(node.op, ast.UAdd):
                return operand
        if isinstance(node, ast.BoolOp):
            result = None
            for value in node.values:
                result = self.expr(value, env)
                if bool(result) == isinstance(node.op, ast.Or):
                    return result
            return result
        if isinstance(node, ast.Compare):
            left = self.expr(node.left, env)
            for op, comparator in zip(node.ops, node.comparators):
                right = self.expr(comparator, env)
                if type(op) not in _COMPARE:
                    raise CantTell(node)
                try:
                    if not _COMPARE[type(op)](left, right):
                        return False
                except TypeError:
                    raise CantTell(node) from None
                left = right
            return True
        if isinstance(node, ast.IfExp):
            branch = node.body if self.expr(node.test, env) else node.orelse
            return self.expr(branch, env)
        if isinstance(node, ast.Lambda):
            return Function(node, self._defaults(node.args, env))
        if isinstance(node, (ast.GeneratorExp, ast.ListComp)):
            return tuple(self._comprehension(node, env))
        if isinstance(node, ast.Subscript):
            container, index = self.expr(node.value, env), self.expr(node.slice, env)
            try:
                return container[index]
            except (TypeError, IndexError, KeyError):
                raise CantTell(node) from None
        if isinstance(node, ast.Call):
            return self._call_expr(node, env)
        if isinstance(node, ast.Attribute):
            return self._option(node, env)
        raise CantTell(node)

    def _option(self, node, env: dict):
        """`args.NAME`, args being what parse_args() returned: the option's value in the run
        being checked. Any module-level `args = parse_args()` counts, also one further down:
        a function reads the global when it runs, after the script has parsed its options."""
        holder = node.value
        if (
            node.attr in self.options
            and isinstance(holder, ast.Name)
            and holder.id not in env
            and any(
                isinstance(binding.value, ast.Call)
                and self.script.qualified_name(binding.value.func).endswith("parse_args")
                for binding in self.script.bindings.get(holder.id, [])
            )
        ):
            return self.options[node.attr]
        raise CantTell(node)

    def _name(self, node, env: dict):
        if node.id in env:
            return env[node.id]
        script = self.script
        reaching = script.bindings_before(node)
        if len(reaching) == 1 and isinstance(reaching[0].statement, ast.FunctionDef):
            function = reaching[0].statement
            return Function(function, self._defaults(function.args, {}))
        value = script.resolve(node)
        if value is node or isinstance(value, ast.Name) and value.id == node.id:
            raise CantTell(node)
        return self.expr(value, {})

    def _arithmetic(self, function, left, right, node):
        numbers = (int, float)
        if function is operator.mul and _repeats(left, right) > MAX_RANGE:
            raise TooCostly(node, f"it builds a sequence of {_repeats(left, right):,} items")
        if not isinstance(left, numbers) or (right is not None and not isinstance(right, numbers)):
            raise CantTell(node)
        if _result_bits(function, left, right) > MAX_INT_BITS:
            raise TooCostly(node, f"it computes an integer of over {MAX_INT_BITS:,} bits")
        try:
            return function(left) if right is None else function(left, right)
        except (ArithmeticError, ValueError):
            raise CantTell(node) from None

    def _call_expr(self, node, env: dict):
        if any(isinstance(arg, ast.Starred) for arg in node.args) or node.keywords:
            raise CantTell(node)
        name = self.script.qualified_name(node.func)
        arguments = [self.expr(arg, env) for arg in node.args]
        if isinstance(node.func, ast.Name) and node.func.id in env:
            function = env[node.func.id]
        elif name in _BUILTINS:
            if name == "range":
                _check_range(arguments, node)
            try:
                result = _BUILTINS[name](*arguments)
            except (TypeError, ValueError, ArithmeticError):
                raise CantTell(node) from None
            return tuple(result) if isinstance(result, range) else result
        else:
            function = self.expr(node.func, env)
        if not isinstance(function, Function):
            raise CantTell(node)
        return self.call(function, arguments, node)

    def _defaults(self, arguments: ast.arguments, env: dict) -> dict:
        positional = arguments.posonlyargs + arguments.args
        defaults = dict(
            zip(
                [arg.arg for arg in positional[len(positional) - len(arguments.defaults) :]],
                [self.expr(default, env) for default in arguments.defaults],
            )
        )
        for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults):
            if default is not None:
                defaults[arg.arg] = self.expr(default, env)
        return defaults

    def call(self, function: Function, arguments: list, node):
        """Calls a lambda or def of the script with positional `arguments`."""
        spec = function.node.args
        if spec.vararg or spec.kwarg:
            raise CantTell(node)
        names = [arg.arg for arg in spec.posonlyargs + spec.args]
        if len(arguments) > len(names):
            raise CantTell(node)
        env = dict(function.defaults)
        env.update(zip(names, arguments))
        if any(name not in env for name in names + [arg.arg for arg in spec.kwonlyargs]):
            raise CantTell(node)
        if isinstance(function.node, ast.Lambda):
            return self.expr(function.node.body, env)
        try:
            self._block(function.node.body, env)
        except _Return as returned:
            return returned.value
        return None

    def _comprehension(self, node, env: dict, index: int = 0):
        if index == len(node.generators):
            yield self.expr(node.elt, env)
            return
        generator = node.generators[index]
        if generator.is_async:
            raise CantTell(node)
        for item in self._iterable(self.expr(generator.iter, env), node):
            inner = dict(env)
            self._assign(generator.target, item, inner)
            if all(self.expr(test, inner) for test in generator.ifs):
                yield from self._comprehension(node, inner, index + 1)

    def _iterable(self, value, node):
        if not isinstance(value, (tuple, list, range, str)):
            raise CantTell(node)
        return value

    # ---- statements ---------------------------------------------------------------------

    def _block(self, statements, env: dict):
        for statement in statements:
            self._statement(statement, env)

    def _statement(self, node, env: dict):
        self._count(node)
        if isinstance(node, ast.Return):
            raise _Return(None if node.value is None else self.expr(node.value, env))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            return  # a docstring
        if isinstance(node, ast.Pass):
            return
        if isinstance(node, ast.Assign):
            value = self.expr(node.value, env)
            for target in node.targets:
                self._assign(target, value, env)
            return
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            if node.target.id not in env or type(node.op) not in _BINARY:
                raise CantTell(node)
            right = self.expr(node.value, env)
            env[node.target.id] = self._arithmetic(
                _BINARY[type(node.op)], env[node.target.id], right, node
            )
            return
        if isinstance(node, ast.If):
            self._block(node.body if self.expr(node.test, env) else node.orelse, env)
            return
        if isinstance(node, ast.For) and not node.orelse:
            for item in self._iterable(self.expr(node.iter, env), node):
                self._assign(node.target, item, env)
                try:
                    self._block(node.body, env)
                except _Break:
                    break
                except _Continue:
                    continue
            return
        if isinstance(node, ast.Break):
            raise _Break()
        if isinstance(node, ast.Continue):
            raise _Continue()
        raise CantTell(node)

    def _assign(self, target, value, env: dict):
        if isinstance(target, ast.Name):
            env[target.id] = value
            return
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (tuple, list)):
            if len(target.elts) == len(value):
                for element, item in zip(target.elts, value):
                    self._assign(element, item, env)
                return
        raise CantTell(target)


def _result_bits(function, left, right) -> int:
    """An upper bound of the bit length of `function(left, right)` for integers (0 otherwise),
    found without computing it: `9 ** 9 ** 9 ** 2` would not finish."""
    if not isinstance(left, int) or not isinstance(right, int):
        return 0
    bits = max(abs(left).bit_length(), abs(right).bit_length())
    if function is operator.pow:
        if right <= 0 or abs(left) <= 1:
            return abs(left).bit_length()
        return abs(left).bit_length() * right
    if function is operator.mul:
        return abs(left).bit_length() + abs(right).bit_length()
    if function is operator.lshift:
        return abs(left).bit_length() + max(right, 0)
    return bits + 1


def _repeats(left, right) -> int:
    """How many items `left * right` makes when one side is a sequence (a string, a tuple or
    a list) and the other a count; 0 otherwise."""
    for sequence, count in ((left, right), (right, left)):
        if isinstance(sequence, (str, tuple)) and isinstance(count, int) and not isinstance(
                count, bool):
            return len(sequence) * max(count, 0)
    return 0


def _check_range(arguments: list, node) -> None:
    if all(isinstance(a, int) for a in arguments) and 1 <= len(arguments) <= 3:
        try:
            length = len(range(*arguments))
        except (ValueError, OverflowError):
            raise TooCostly(node, "it asks for a range of astronomical length") from None
        if length > MAX_RANGE:
            raise TooCostly(node, f"it asks for a range of {length:,} numbers")

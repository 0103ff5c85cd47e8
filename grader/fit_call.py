"""Static questions about the training call: model.fit, compile, the callbacks, the dataset."""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field

from grader.syntax import MAX_DEPTH, argument, position

MUTATORS = ("append", "insert", "extend")  # list methods that add callbacks


@dataclass
class CallbackEntry:
    """One callback that reaches model.fit: where it was added and under which conditions."""

    expr: ast.expr
    call: ast.Call | None  # the constructor call the entry resolves to
    name: str  # qualified name of the constructor ("" if unknown)
    guards: list = field(default_factory=list)  # (test, polarity) pairs
    line: int = 0

    @property
    def kind(self) -> str:
        return self.name.rsplit(".", 1)[-1]


class TrainingQuestions:
    """Script methods about training (a mixin of engine.Script; uses its name resolution)."""

    def fit_call(self) -> ast.Call | None:
        """The script's `model.fit(...)` call (the first one outside any function)."""
        found = self._method_calls("fit")
        top_level = [call for call in found if not self.in_function(call)]
        return (top_level or found or [None])[0]

    def compile_calls(self) -> list:
        """The `model.compile(...)` calls outside any function."""
        return [call for call in self._method_calls("compile") if not self.in_function(call)]

    def _method_calls(self, name: str) -> list:
        """Every `x.name(...)` call, in source order."""
        return self.calls_by_method.get(name, [])

    def callbacks(self) -> list | None:
        """The callbacks that reach model.fit, in order, or None if the grader can't follow them.

        Follows `callbacks=[...]` or a name assigned a list, `+`, `+=`, conditional lists
        (`[...] if hvd.rank() == 0 else []`, `*([...] if ... else [])`) and, between the
        assignment and model.fit, `.append(x)`, `.insert(i, x)` and `.extend([...])`.
        """
        fit = self.fit_call()
        if fit is None:
            return None
        given = argument(fit, "callbacks", 5)
        if given is None:
            return []
        entries = self._list_entries(given, [], 0)
        if entries is None:
            return None
        for entry in entries:
            entry.guards = entry.guards + self.guards(fit)
        return entries

    def _list_entries(self, expr, guards: list, depth: int) -> list | None:
        if depth > MAX_DEPTH * 2:
            return None
        if isinstance(expr, (ast.List, ast.Tuple)):
            entries = []
            for element in expr.elts:
                if isinstance(element, ast.Starred):
                    inner = self._list_entries(element.value, guards, depth + 1)
                    if inner is None:
                        return None
                    entries.extend(inner)
                else:
                    entries.append(self._entry(element, guards))
            return entries
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            left = self._list_entries(expr.left, guards, depth + 1)
            right = self._list_entries(expr.right, guards, depth + 1)
            return None if left is None or right is None else left + right
        if isinstance(expr, ast.IfExp):
            body = self._list_entries(expr.body, guards + [(expr.test, True)], depth + 1)
            orelse = self._list_entries(expr.orelse, guards + [(expr.test, False)], depth + 1)
            return None if body is None or orelse is None else body + orelse
        if isinstance(expr, ast.Call) and self.qualified_name(expr.func) == "list":
            return self._list_entries(expr.args[0], guards, depth + 1) if expr.args else []
        if isinstance(expr, (ast.ListComp, ast.GeneratorExp)):
            return self._comprehension_entries(expr, guards)
        if isinstance(expr, ast.Name):
            return self._variable_entries(expr, depth)
        return None

    def _variable_entries(self, name: ast.Name, depth: int) -> list | None:
        reaching = self.bindings_before(name)
        if not reaching or reaching[0].value is None:
            return None
        binding = reaching[0]
        entries = self._list_entries(binding.value, self.guards(binding.statement), depth + 1)
        if entries is None:
            return None
        start, end = binding.visible_from, position(name)
        mutations = sorted(
            (call for method in MUTATORS for call in self.calls_by_method.get(method, [])),
            key=position,
        )
        for original in mutations:
            if not (start <= position(original) < end) or self.in_function(original):
                continue
            func = original.func
            if not isinstance(func.value, ast.Name) or func.value.id != name.id:
                continue
            guards = self.guards(original)
            loop = self._enclosing_loop(original)
            if loop is None:
                unrolled = [original]
            else:  # for start, end, m in [...]: callbacks.append(...), once per item
                iterations = self.loop_iterations(loop.target, loop.iter)
                if iterations is None:
                    return None
                unrolled = [self.substituted(original, now, iterations[-1]) for now in iterations]
            for call in unrolled:
                if not self._mutate(entries, call, guards, depth):
                    return None
        return entries

    def _mutate(self, entries: list, call: ast.Call, guards: list, depth: int) -> bool:
        """Applies callbacks.append/insert/extend(...) to `entries`; False if it can't."""
        func = call.func
        if func.attr == "append" and len(call.args) == 1:
            entries.append(self._entry(call.args[0], guards))
        elif func.attr == "insert" and len(call.args) == 2:
            index = self.constant(call.args[0])
            if not isinstance(index, int):
                return False
            entries.insert(index, self._entry(call.args[1], guards))
        elif func.attr == "extend" and len(call.args) == 1:
            more = self._list_entries(call.args[0], guards, depth + 1)
            if more is None:
                return False
            entries.extend(more)
        return True

    def _comprehension_entries(self, comprehension, guards: list) -> list | None:
        """[Callback(...) for start, end in [...]]: one entry per item of a list the grader
        can read."""
        if len(comprehension.generators) != 1 or comprehension.generators[0].ifs:
            return None
        generator = comprehension.generators[0]
        iterations = self.loop_iterations(generator.target, generator.iter)
        if iterations is None:
            return None
        return [
            self._entry(self.substituted(comprehension.elt, now, iterations[-1]), guards)
            for now in iterations
        ]

    def _enclosing_loop(self, node):
        """The innermost `for` loop around `node` (outside functions), or None."""
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, (ast.For, ast.AsyncFor)) and not _contains(
                ancestor.orelse, node
            ):
                return ancestor
        return None

    # ---- loops the grader can unroll ------------------------------------------------------

    def loop_iterations(self, target, iterable) -> list | None:
        """[{name: value expression}, ...] for each item of `for target in iterable`, or None
        if the items are not written out (a list or tuple, zip or enumerate of them, range)."""
        items = self._loop_items(self.resolve(iterable))
        if items is None:
            return None
        iterations = []
        for item in items:
            names = {}
            if not self._unpack(target, item, names):
                return None
            iterations.append(names)
        return iterations or None

    def _loop_items(self, iterable) -> list | None:
        if isinstance(iterable, (ast.List, ast.Tuple)):
            if any(isinstance(item, ast.Starred) for item in iterable.elts):
                return None
            return list(iterable.elts)
        if not isinstance(iterable, ast.Call) or iterable.keywords:
            return None
        name = self.qualified_name(iterable.func)
        columns = [self._loop_items(self.resolve(arg)) for arg in iterable.args]

        def made(node):  # a node of the grader's, placed where the loop reads its items
            for part in ast.walk(node):
                if not hasattr(part, "lineno"):
                    ast.copy_location(part, iterable)
            return node

        if name == "zip" and columns and None not in columns:
            return [made(ast.Tuple(list(row), ast.Load())) for row in zip(*columns)]
        if name == "enumerate" and len(columns) == 1 and columns[0] is not None:
            return [
                made(ast.Tuple([ast.Constant(index), item], ast.Load()))
                for index, item in enumerate(columns[0])
            ]
        if name == "range" and 1 <= len(iterable.args) <= 3:
            bounds = [self.constant(arg) for arg in iterable.args]
            if all(isinstance(b, int) and not isinstance(b, bool) for b in bounds):
                numbers = range(*bounds)
                if len(numbers) <= 1000:
                    return [made(ast.Constant(number)) for number in numbers]
        return None

    def _unpack(self, target, item, names: dict) -> bool:
        if isinstance(target, ast.Name):
            names[target.id] = item
            return True
        item = self.resolve(item)
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(item, (ast.Tuple, ast.List)):
            if len(target.elts) != len(item.elts):
                return False
            return all(self._unpack(t, i, names) for t, i in zip(target.elts, item.elts))
        return False

    def substituted(self, node, now: dict, last: dict):
        """A copy of `node` with the loop variables replaced by this item's values (`now`).

        A lambda's defaults take this item's values too, but its body reads the loop variables
        only when it is called, after the loop: there they take the last item's values
        (`last`), as in Python. `late_bound` records which names a lambda reads that way.
        """
        copied = _Substitution(now, last, self.late_bound).visit(copy.deepcopy(node))
        parent = self.parent(node)
        inside = self.in_function(node)
        for child in ast.walk(copied):
            self._originals[id(child)] = node
            for grandchild in ast.iter_child_nodes(child):
                self._parents[grandchild] = child
                if inside or isinstance(child, ast.Lambda) or self.in_function(child):
                    self._in_scope.add(id(grandchild))
        if parent is not None:
            self._parents[copied] = parent
        return copied

    def original(self, node):
        """The node of the script that `node` was copied from when unrolling a loop."""
        return self._originals.get(id(node), node)

    def _entry(self, expr, guards: list) -> CallbackEntry:
        value = self.resolve(expr)
        call = value if isinstance(value, ast.Call) else None
        name = self.qualified_name(call.func) if call else ""
        return CallbackEntry(expr, call, name, list(guards), expr.lineno)

    # ---- datasets -------------------------------------------------------------------------

    def method_chain(self, expr, depth: int = 0) -> list:
        """The method calls that built `expr`, first applied first: [(name, call), ...].

        `ds = from_tensor_slices(...)`, `ds = ds.shard(...)`, `ds = ds.shuffle(...).batch(...)`
        gives [("from_tensor_slices", ...), ("shard", ...), ("shuffle", ...), ("batch", ...)].
        """
        if depth > MAX_DEPTH * 4:
            return []
        if isinstance(expr, ast.Name):
            value = self.resolve(expr)
            return [] if value is expr else self.method_chain(value, depth + 1)
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            return self.method_chain(expr.func.value, depth + 1) + [(expr.func.attr, expr)]
        return []


class _Substitution(ast.NodeTransformer):
    """Replaces loop variables by their values, late-binding inside lambdas (see substituted)."""

    def __init__(self, now: dict, last: dict, late_bound: dict, parameters=frozenset()):
        self.now, self.last, self.late_bound, self.parameters = now, last, late_bound, parameters

    def visit_Name(self, node):
        if (
            isinstance(node.ctx, ast.Load)
            and node.id in self.now
            and node.id not in self.parameters
        ):
            return copy.deepcopy(self.now[node.id])  # where it was written: names resolve there
        return node

    def visit_Lambda(self, node):
        node.args = self.visit(node.args)  # defaults: evaluated when the lambda is made
        arguments = node.args
        every = arguments.posonlyargs + arguments.args + arguments.kwonlyargs
        every += [a for a in (arguments.vararg, arguments.kwarg) if a]
        parameters = self.parameters | {arg.arg for arg in every}
        read_late = sorted(
            name.id
            for name in ast.walk(node.body)
            if isinstance(name, ast.Name) and name.id in self.last and name.id not in parameters
        )
        node.body = _Substitution(self.last, self.last, self.late_bound, parameters).visit(
            node.body
        )
        if read_late:
            self.late_bound[id(node)] = read_late
        return node


def _contains(statements, node) -> bool:
    return any(item is node for item in statements)

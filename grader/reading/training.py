"""The training loop: model.fit, model.compile, the callbacks that reach fit, the dataset.

A question module on the names layer (grader.reading.names): `training.of(script)` is the script's
`Training`, whose public questions are `fit_call()` (the script's model.fit call),
`compile_calls()`, `callbacks()` (the `CallbackEntry`s that reach model.fit, in order, each with
the conditions it is added under; None if the grader can't follow them),
`method_chain(expr)` (the method calls that built a dataset, first applied first, through the
script's straight-line helpers) and `unfollowed_source(expr)` (a helper it could not follow).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from grader.reading.syntax import MAX_DEPTH, position

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


def of(script) -> Training:
    """The training questions of `script` (grader.reading.names.Script), built once per script."""
    return script.memo(Training)


class Training:
    """The training call of one script and what reaches it (see the module)."""

    def __init__(self, script):
        self.script = script

    def fit_call(self) -> ast.Call | None:
        """The script's `model.fit(...)` call (the first one outside any function)."""
        found = self._method_calls("fit")
        top_level = [call for call in found if not self.script.in_function(call)]
        return (top_level or found or [None])[0]

    def compile_calls(self) -> list:
        """The `model.compile(...)` calls outside any function."""
        return [call for call in self._method_calls("compile") if not self.script.in_function(call)]

    def _method_calls(self, name: str) -> list:
        """Every `x.name(...)` call, in source order."""
        return self.script.calls_by_method.get(name, [])

    def callbacks(self) -> list | None:
        """The callbacks that reach model.fit, in order, or None if the grader can't follow them.

        Follows `callbacks=[...]` or a name assigned a list, `+`, `+=`, conditional lists
        (`[...] if hvd.rank() == 0 else []`, `*([...] if ... else [])`) and, between the
        assignment and model.fit, `.append(x)`, `.insert(i, x)` and `.extend([...])`.
        """
        fit = self.fit_call()
        if fit is None:
            return None
        given = self.script.argument(fit, "callbacks", 5)
        if given is None:
            return None if self.script.unpacks_unknown(fit) else []
        entries = self._list_entries(given, [], 0)
        if entries is None:
            return None
        for entry in entries:
            entry.guards = entry.guards + self.script.guards(fit)
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
        if isinstance(expr, ast.Call) and self.script.qualified_name(expr.func) == "list":
            return self._list_entries(expr.args[0], guards, depth + 1) if expr.args else []
        if isinstance(expr, (ast.ListComp, ast.GeneratorExp)):
            return self._comprehension_entries(expr, guards)
        if isinstance(expr, ast.Name):
            return self._variable_entries(expr, depth)
        return None

    def _variable_entries(self, name: ast.Name, depth: int) -> list | None:
        reaching = self.script.bindings_before(name)
        if not reaching or reaching[0].value is None:
            return None
        binding = reaching[0]
        guards = self.script.guards(binding.statement)
        entries = self._list_entries(binding.value, guards, depth + 1)
        if entries is None:
            return None
        start, end = binding.visible_from, position(name)
        mutations = sorted(
            (call for method in MUTATORS for call in self.script.calls_by_method.get(method, [])),
            key=position,
        )
        for original in mutations:
            if not (start <= position(original) < end) or self.script.in_function(original):
                continue
            func = original.func
            if not isinstance(func.value, ast.Name) or func.value.id != name.id:
                continue
            guards = self.script.guards(original)
            loop = self._enclosing_loop(original)
            if loop is None:
                unrolled = [original]
            else:  # for start, end, m in [...]: callbacks.append(...), once per item
                iterations = self.script.loop_iterations(loop.target, loop.iter)
                if iterations is None:
                    return None
                last = iterations[-1]
                unrolled = [self.script.substituted(original, now, last) for now in iterations]
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
            index = self.script.constant(call.args[0])
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
        iterations = self.script.loop_iterations(generator.target, generator.iter)
        if iterations is None:
            return None
        return [
            self._entry(self.script.substituted(comprehension.elt, now, iterations[-1]), guards)
            for now in iterations
        ]

    def _enclosing_loop(self, node):
        """The innermost `for` loop around `node` (outside functions), or None."""
        for ancestor in self.script.ancestors(node):
            if isinstance(ancestor, (ast.For, ast.AsyncFor)) and not _contains(
                ancestor.orelse, node
            ):
                return ancestor
        return None

    def _entry(self, expr, guards: list) -> CallbackEntry:
        value = self.script.resolve(expr)
        call = value if isinstance(value, ast.Call) else None
        name = self.script.qualified_name(call.func) if call else ""
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
            value = self.script.resolve(expr)
            return [] if value is expr else self.method_chain(value, depth + 1)
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            return self.method_chain(expr.func.value, depth + 1) + [(expr.func.attr, expr)]
        returned = self.script.returned(expr) if isinstance(expr, ast.Call) else None
        if returned is not None:  # def sharded(x, y): ...; return ds.shard(...)
            return self.method_chain(returned, depth + 1)
        return []

    def unfollowed_source(self, expr, depth: int = 0):
        """The call of one of the script's own functions that a dataset's method chain starts
        from and that the grader could not follow into (a helper with branches or loops), or
        None: then method_chain is not the whole story."""
        while depth <= MAX_DEPTH * 4:
            depth += 1
            if isinstance(expr, ast.Name):
                value = self.script.resolve(expr)
                if value is expr:
                    return None
                expr = value
            elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
                expr = expr.func.value
            elif isinstance(expr, ast.Call) and self.script.returned(expr) is not None:
                expr = self.script.returned(expr)
            elif isinstance(expr, ast.Call) and self.script.function_of(expr) is not None:
                return expr
            else:
                return None
        return None


def _contains(statements, node) -> bool:
    return any(item is node for item in statements)

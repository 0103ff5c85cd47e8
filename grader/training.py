"""The training call: model.fit, model.compile, the callbacks list and the dataset pipeline."""

from __future__ import annotations

import ast
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
        for call in mutations:
            if not (start <= position(call) < end) or self.in_function(call):
                continue
            func = call.func
            if not isinstance(func.value, ast.Name) or func.value.id != name.id:
                continue
            guards = self.guards(call)
            if func.attr == "append" and len(call.args) == 1:
                entries.append(self._entry(call.args[0], guards))
            elif func.attr == "insert" and len(call.args) == 2:
                index = self.constant(call.args[0])
                if not isinstance(index, int):
                    return None
                entries.insert(index, self._entry(call.args[1], guards))
            elif func.attr == "extend" and len(call.args) == 1:
                more = self._list_entries(call.args[0], guards, depth + 1)
                if more is None:
                    return None
                entries.extend(more)
        return entries

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

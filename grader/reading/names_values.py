"""What an expression of the learner's script holds where it is used: the values a name may have
(`values_of`, `resolve`), a constant it reduces to, and whether it mentions a name or a call.

Part of the names layer: grader.reading.names.Script builds one of these per script and answers through it
(`script.values`); it reaches the other parts through `script`. Plain `ast`, nothing of Horovod.
"""

from __future__ import annotations

import ast

from grader.reading.syntax import MAX_DEPTH, assignment_key

_MISSING = object()


class Values:
    """The values the script's expressions hold where they are used."""

    def __init__(self, script):
        self.script = script

    def values_of(self, expr, depth: int = 0) -> list:
        """The expressions `expr` may stand for: itself, or the values the name may hold."""
        if not assignment_key(expr) or depth >= MAX_DEPTH:
            return [expr]
        reaching = self.script.assignments.bindings_before(expr)
        if not reaching or any(b.value is None for b in reaching):
            return [expr]
        values = []
        for binding in reaching:
            value = binding.value
            if getattr(value, "unpacked", False):
                value = self.script.assignments.unpacked_item(value)
                if value is None:
                    return [expr]
            values.extend(self.values_of(value, depth + 1))
        return values

    def resolve(self, expr):
        """Follows a name to the value of its latest assignment (through names, a few deep)."""
        for _ in range(MAX_DEPTH):
            if not assignment_key(expr):
                return expr
            reaching = self.script.assignments.bindings_before(expr)
            if not reaching or reaching[0].value is None:
                return expr
            value = reaching[0].value
            if getattr(value, "unpacked", False):
                value = self.script.assignments.unpacked_item(value)
                if value is None:
                    return expr
            expr = value
        return expr

    def mentions(self, expr, predicate) -> bool:
        """True if `predicate` holds for `expr` or anything inside it, following names."""
        pending, seen = [expr], set()
        while pending:
            current = pending.pop()
            if current is None or id(current) in seen:
                continue
            seen.add(id(current))
            for node in ast.walk(current):
                if predicate(node):
                    return True
                if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
                    pending.extend(value for value in self.values_of(node) if value is not node)
        return False

    def first_mention(self, expr, predicate):
        """The first node inside `expr` (following names) for which `predicate` holds, or None."""
        found = []
        self.mentions(expr, lambda node: predicate(node) and not found.append(node))
        return found[0] if found else None

    def constant(self, expr, default=None):
        """The constant value `expr` holds (following names), or `default`: also when the
        assignments that may reach it (`verbose = 1`, then `verbose = 0` under an `if`) give it
        different values."""
        found = []
        for value in self.values_of(expr):
            if isinstance(value, ast.Constant):
                found.append(value.value)
            elif isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
                inner = self.constant(value.operand, _MISSING)
                if not isinstance(inner, (int, float)) or isinstance(inner, bool):
                    return default
                found.append(-inner)
            else:
                return default
        if not found or any(type(v) is not type(found[0]) or v != found[0] for v in found):
            return default
        return found[0]

    def same_value(self, a, b) -> bool:
        """True if `a` and `b` are the same expression once names are followed."""
        first, second = self.resolve(a), self.resolve(b)
        if ast.dump(first) == ast.dump(second):
            return True
        x, y = self.constant(a), self.constant(b)
        return x is not None and x == y

    def mentions_call(self, expr, *names: str, through_functions: bool = False) -> bool:
        """True if `expr` (following names) calls one of `names`; with `through_functions`,
        also if it calls one of the script's functions whose body (a few deep) calls one."""
        seen = set()

        def calls(node, depth=0):
            if not isinstance(node, ast.Call):
                return False
            if self.script.imports.qualified_name(node.func) in names:
                return True
            function = self.script.functions.function_of(node) if through_functions else None
            if function is None or id(function) in seen or depth > MAX_DEPTH:
                return False
            seen.add(id(function))
            return any(calls(inner, depth + 1) for inner in ast.walk(function))

        return self.mentions(expr, calls)

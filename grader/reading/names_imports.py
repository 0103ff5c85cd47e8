"""What a name of the learner's script is: its imports, and the qualified name of what it reads
(`hvd.size` is `horovod.tensorflow.keras.size` whatever `hvd` is called), the calls by name.

Part of the names layer: grader.reading.names.Script builds one of these per script and answers through it
(`script.imports`); it reaches the other parts through `script`. Plain `ast`, nothing of Horovod.
"""

from __future__ import annotations

import ast

from grader.reading.syntax import MAX_DEPTH, canonical, position


class Imports:
    """The script's imports and the qualified names they give what it reads and calls."""

    def __init__(self, script, statements: list):
        self.script = script
        self._qualified: dict = {}
        # {name: the dotted module or member it is bound to}, {every module imported}
        self.bound, self.imported = self.collect_imports(statements)

    def collect_imports(self, nodes) -> tuple:
        """({name: the dotted module or member it is bound to}, {every module imported})."""
        imports, imported = {}, set()
        self._import_statements: dict = {}  # {name: the import statements that bind it}
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    imported.add(canonical(alias.name))
                    if alias.asname:
                        imports[alias.asname] = alias.name
                    else:
                        head = alias.name.split(".")[0]
                        imports[head] = head
                    bound = alias.asname or alias.name.split(".")[0]
                    self._import_statements.setdefault(bound, []).append(node)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    if alias.name != "*":
                        full = f"{node.module}.{alias.name}"
                        imported.add(canonical(full))
                        imports[alias.asname or alias.name] = full
                        bound = alias.asname or alias.name
                        self._import_statements.setdefault(bound, []).append(node)
        return imports, imported

    def import_reaches(self, name):
        """Has an import of `name` (a Name node, or the head of a dotted use) run where it is
        used, outside any function? True if one before it always runs on the way; False if
        none can: each is further down, in a function, or in another branch of an `if` the
        use is in (`import tensorflow_addons as tfa` in the `else:` only, used in the `if`);
        None if the grader can't tell (a branch, a loop)."""
        while isinstance(name, ast.Attribute):
            name = name.value
        statements = self._import_statements.get(getattr(name, "id", None), [])
        if not statements or self.script.places.in_function(name):
            return True if statements else None
        maybe = False
        for statement in statements:
            if self.script.places.in_function(statement):
                continue  # binds a name of its function
            loops = [
                a
                for a in self.script.places.ancestors(statement)
                if isinstance(a, (ast.For, ast.While))
            ]
            if any(loop in set(self.script.places.ancestors(name)) for loop in loops):
                maybe = True
                continue
            if position(statement) > position(name):
                continue
            own, used = (
                self.script.places.branch_chain(statement),
                self.script.places.branch_chain(name),
            )
            if own <= used:
                return True
            exclusive = any(
                (branch, other) in used
                for branch, field in own
                for other in ("body", "orelse", "handlers", "cases")
                if other != field and field in ("body", "orelse")
            )
            maybe = maybe or not exclusive
        return None if maybe else False

    def imported_modules(self) -> set:
        """Every module (or module member) the script imports, with its full dotted name."""
        return set(self.imported)

    def qualified_name(self, expr, depth: int = 0) -> str:
        """Returns the dotted name of `expr`, with import aliases resolved and canonical.

        `hvd.callbacks.MetricAverageCallback` -> `horovod.tensorflow.keras.callbacks.Metric...`
        whatever `hvd` is called; `tf.keras.X`, `keras.X` -> `tensorflow.keras.X`. Names that
        are not imported stay as written (`model.fit`, `restart_epoch`); "" if not a name.
        """
        if depth == 0:
            key = id(expr)
            if key not in self._qualified:
                self._qualified[key] = self._qualified_name(expr, 0)
            return self._qualified[key]
        return self._qualified_name(expr, depth)

    def _qualified_name(self, expr, depth: int) -> str:
        parts = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name):
            return ""
        parts.reverse()
        head = expr.id
        if head in self.bound and not self.script.assignments.bound_locally(expr):
            return canonical(".".join([self.bound[head], *parts]))
        if depth < MAX_DEPTH:
            value = self.script.values.resolve(expr)
            if value is not expr and isinstance(value, (ast.Name, ast.Attribute)):
                base = self.qualified_name(value, depth + 1)
                if base:
                    return ".".join([base, *parts])
        return ".".join([head, *parts])

    def call_name(self, node) -> str:
        """The qualified name of the function a call (or a name holding one) calls."""
        node = self.script.values.resolve(node)
        if isinstance(node, ast.Call):
            return self.qualified_name(node.func)
        return ""

    def calls_to(self, *names: str) -> list:
        """Every call in the script (in source order) whose function is one of `names`."""
        return [call for call in self.script.calls if self.qualified_name(call.func) in names]

"""What a call of the learner's script is given (`argument`, also inside a `**dict` it can
read; `argument_for` one of the script's own functions' parameters), the names it reads without
calling them (`uncalled`), and attributes set where the grader does not follow (`object_attribute`).

Part of the names layer: grader.reading.names.Script builds one of these per script and answers through it
(`script.arguments`); it reaches the other parts through `script`. Plain `ast`, nothing of Horovod.
"""

from __future__ import annotations

import ast

from grader.reading.syntax import argument, position


class Arguments:
    """The arguments of the script's calls and the names it reads without calling."""

    def __init__(self, script):
        self.script = script
        self._called = {id(call.func) for call in script.calls}
        self._uncalled: dict = {}  # {names: what uncalled(*names) found}

    def uncalled(self, *names: str) -> list:
        """Every name or attribute with one of the qualified `names` that the script reads
        without calling it (`args.base_lr * hvd.size`), in source order."""
        if names not in self._uncalled:
            found = []
            for name in names:
                last = name.rsplit(".", 1)[-1]
                found.extend(
                    node
                    for node in self.script.places.named.get(last, [])
                    if id(node) not in self._called
                    and isinstance(node.ctx, ast.Load)
                    and self.script.imports.qualified_name(node) == name
                )
            self._uncalled[names] = sorted(found, key=position)
        return list(self._uncalled[names])

    def argument(self, call: ast.Call, name: str, index: int | None = None):
        """The argument `name` of `call` (syntax.argument), also where it comes in a `**dict`
        the grader can read: `fit_args = dict(verbose=verbose)` (or a dict literal), then
        `model.fit(x, **fit_args)`. None when it is not there."""
        given = argument(call, name, index)
        if given is not None:
            return given
        for unpacked in (keyword.value for keyword in call.keywords if keyword.arg is None):
            entries = self._dict_entries(unpacked)
            if entries is not None and name in entries:
                return entries[name]
        return None

    def unpacks_unknown(self, call: ast.Call) -> bool:
        """Whether `call` gets a `**dict` (or `*list`) whose entries the grader can't read: an
        argument it does not find may well be in there."""
        return any(isinstance(arg, ast.Starred) for arg in call.args) or any(
            keyword.arg is None and self._dict_entries(keyword.value) is None
            for keyword in call.keywords
        )

    def _dict_entries(self, expr) -> dict | None:
        """{key: value node} of a dict the grader can read (`dict(a=1)`, `{"a": 1}`, through
        one name assigned once), or None."""
        values = self.script.values.values_of(expr)
        if len(values) != 1:
            return None
        value = values[0]
        if isinstance(value, ast.Dict) and all(
            isinstance(key, ast.Constant) and isinstance(key.value, str) for key in value.keys
        ):
            entries = {key.value: item for key, item in zip(value.keys, value.values)}
        elif (
            isinstance(value, ast.Call)
            and self.script.imports.qualified_name(value.func) == "dict"
            and not value.args
            and all(keyword.arg for keyword in value.keywords)
        ):
            entries = {keyword.arg: keyword.value for keyword in value.keywords}
        else:
            return None
        if isinstance(expr, ast.Name) and self._changed_after(expr):
            return None  # fit_args["verbose"] = ... or fit_args.update(...): not followed
        return entries

    def _changed_after(self, name: ast.Name) -> bool:
        """Whether the dict a name holds is changed in place somewhere (`d[k] = v`,
        `d.update(...)`, `d.setdefault(...)`)."""
        for node in ast.walk(self.script.tree):
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id == name.id
            ):
                return True
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("update", "setdefault", "pop")
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == name.id
            ):
                return True
        return False

    def argument_for(self, name, call):
        """The argument `call` (a call of the script's function) gives the parameter `name`
        reads there: in `def pin(index): ... gpus[index]`, `pin(hvd.local_rank())` gives
        `index` the value hvd.local_rank(). None when `name` is not one of that function's
        parameters, or the call passes it in a way the grader does not follow (*args)."""
        if not isinstance(name, ast.Name) or not isinstance(call, ast.Call):
            return None
        function = self.script.functions.function_of(call)
        reaching = self.script.assignments.bindings_before(name)
        if (
            function is None
            or len(reaching) != 1
            or reaching[0].statement is not function
            or any(isinstance(arg, ast.Starred) for arg in call.args)
            or any(keyword.arg is None for keyword in call.keywords)
        ):
            return None
        arguments = function.args
        positional = [arg.arg for arg in arguments.posonlyargs + arguments.args]
        for keyword in call.keywords:
            if keyword.arg == name.id:
                return keyword.value
        if name.id in positional and positional.index(name.id) < len(call.args):
            return call.args[positional.index(name.id)]
        return None

    def object_attribute(self, expr) -> bool:
        """True for `trainer.steps` (trainer = Trainer(...), one of the script's classes) or
        `self.steps` in a method, with no assignment to it that the grader follows: what it
        holds is set in a method, the class body or a property, which the grader does not
        follow, so its value is unknown (not "no Horovod in it")."""
        if not isinstance(expr, ast.Attribute) or self.script.assignments.bindings_before(expr):
            return False
        root = expr
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name):
            return False
        for binding in self.script.assignments.bindings_before(root):
            statement = binding.statement
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                # a parameter: `self` (the first one) of a method
                arguments = statement.args.posonlyargs + statement.args.args
                if (
                    arguments
                    and arguments[0].arg == root.id
                    and isinstance(self.script.places.parent(statement), ast.ClassDef)
                ):
                    return True
                continue
            value = self.script.assignments.binding_value(binding)
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
                made_by = self.script.assignments.bindings_before(value.func)
                if made_by and isinstance(made_by[0].statement, ast.ClassDef):
                    return True
        return False

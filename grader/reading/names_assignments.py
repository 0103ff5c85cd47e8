"""The assignments of the learner's script: every binding of a name, module-level and in the
script's functions, and which of them hold where a name is read (`bindings_before`).

Part of the names layer: grader.reading.names.Script builds one of these per script and answers through it
(`script.assignments`); it reaches the other parts through `script`. Plain `ast`, nothing of Horovod.
"""

from __future__ import annotations

import ast
from bisect import bisect_right
from dataclasses import dataclass

from grader.reading.syntax import SCOPES, assignment_key, end_position, position

MAX_REACHING = 8  # how many assignments in other branches may give a name its value


@dataclass
class Binding:
    """One assignment to a module-level name; `value` is None when the grader can't follow it."""

    name: str
    value: ast.expr | None
    statement: ast.AST
    visible_from: tuple  # the binding holds for uses after this position


class Assignments:
    """Every binding of the script's names, and which ones hold at a given use."""

    def __init__(self, script, statements: list, local_statements: list):
        self.script = script
        self._scope_locals: dict = {}
        # {name: [Binding, ...] in source order} at the module level, and their positions
        self.bindings, self._binding_positions = self.collect_bindings(statements)
        self._locals = self.collect_local_bindings(local_statements)

    def collect_local_bindings(self, nodes) -> dict:
        """{id of a def: ({name: [Binding, ...]}, {name: positions})} for the statements inside
        the script's functions, each in the function whose local it binds; a parameter is a
        binding without a value, visible from the start of the body."""
        by_scope: dict = {}
        for node in nodes:
            scope = next(
                (a for a in self.script.places.ancestors(node) if isinstance(a, SCOPES)), None
            )
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
                by_scope.setdefault(id(scope), (scope, []))[1].append(node)
        tables = {}
        for key, (scope, statements) in by_scope.items():
            tables[key] = self.collect_bindings(statements, scope)
        return tables

    def collect_bindings(self, nodes, scope=None) -> tuple:
        """({name: [Binding, ...] in source order}, {name: their positions}) for the statements
        `nodes` at the module level (or in the function `scope`, with its parameters)."""
        bindings: dict = {}
        for node in nodes:
            for name, value, statement in self._bound_by(node):
                binding = Binding(name, value, statement, end_position(statement))
                bindings.setdefault(name, []).append(binding)
        if scope is not None:
            arguments = scope.args
            every = arguments.posonlyargs + arguments.args + arguments.kwonlyargs
            every += [a for a in (arguments.vararg, arguments.kwarg) if a]
            start = position(scope.body[0]) if scope.body else position(scope)
            for arg in every:
                bindings.setdefault(arg.arg, []).append(Binding(arg.arg, None, scope, start))
        for found in bindings.values():
            found.sort(key=lambda binding: binding.visible_from)
        positions = {
            name: [binding.visible_from for binding in found] for name, found in bindings.items()
        }
        return bindings, positions

    def _bound_by(self, node):
        """(name, value, statement) of each name the statement (or expression) `node` binds."""
        if isinstance(node, SCOPES):
            if not isinstance(node, ast.Lambda):
                yield node.name, None, node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                yield from self._bound_to(target, node.value, node)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            yield from self._bound_to(node.target, node.value, node)
        elif isinstance(node, ast.AugAssign) and assignment_key(node.target):
            yield assignment_key(node.target), self._augmented_value(node), node
        elif isinstance(node, ast.NamedExpr):
            yield node.target.id, node.value, self.script.places.statement_of(node) or node
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
            targets = (
                [node.target]
                if isinstance(node, (ast.For, ast.AsyncFor))
                else [item.optional_vars for item in node.items if item.optional_vars]
            )
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        yield name.id, None, node

    def _bound_to(self, target, value, statement):
        """(name, value, statement) of each name an assignment of `value` to `target` binds."""
        if isinstance(target, ast.Name):
            yield target.id, value, statement
        elif assignment_key(target):  # args.base_lr = ...: later reads of args.base_lr see it
            yield assignment_key(target), value, statement
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) else None
            if values is not None and len(values) != len(target.elts):
                values = None
            if (
                values is None
                and isinstance(value, ast.Call)
                and not any(isinstance(element, ast.Starred) for element in target.elts)
            ):
                # rank, size = setup(): each name is an item of what setup() returns
                values = [
                    self._item_of(value, index, statement) for index in range(len(target.elts))
                ]
            for index, element in enumerate(target.elts):
                yield from self._bound_to(element, values[index] if values else None, statement)
        elif isinstance(target, ast.Starred):
            yield from self._bound_to(target.value, None, statement)

    def _augmented_value(self, node):
        """x //= n is x = x // n, where the inner x is the value before this statement."""
        previous = _load_copy(node.target)
        value = ast.copy_location(ast.BinOp(previous, node.op, node.value), node)
        for child in ast.walk(previous):
            for grandchild in ast.iter_child_nodes(child):
                self.script.places.adopt(grandchild, child)
        self.script.places.adopt(previous, value)
        self.script.places.adopt(value, node)
        return value

    def _item_of(self, value, index, statement):
        """`value[index]`, a node of the grader's for one name of a tuple assignment from a
        call; `resolve` reads it from the tuple the call returns (returned)."""
        item = ast.Subscript(value, ast.Constant(index), ast.Load())
        for node in (item, item.slice):
            ast.copy_location(node, value)
        item.unpacked = True
        self.script.places.adopt(item, statement)
        self.script.places.adopt(item.slice, item)
        return item

    def binding_value(self, binding):
        """The expression an assignment gives its name (an item of a tuple assignment from a
        call followed into what the call returns), or None when the grader can't read it."""
        value = binding.value
        if getattr(value, "unpacked", False):
            return self.unpacked_item(value)
        return value

    def unpacked_item(self, item):
        """The expression an item of a tuple assignment stands for, or None."""
        if not getattr(item, "unpacked", False):
            return None
        returned = self.script.functions.followed(item.value)
        if isinstance(returned, (ast.Tuple, ast.List)) and item.slice.value < len(returned.elts):
            return returned.elts[item.slice.value]
        return None

    def bound_locally(self, name) -> bool:
        """True if `name` is a parameter or local variable of an enclosing function."""
        while isinstance(name, ast.Attribute):
            name = name.value
        if not isinstance(name, ast.Name) or not self.script.places.in_function(name):
            return False
        for scope in self.script.places.ancestors(name):
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                if name.id in self.locals_of(scope):
                    return True
        return False

    def _local_scope(self, name):
        """The function whose local `name` (a name or args.x) is, if it is the innermost function
        around the use (a closure's or a lambda's reads are not followed); else None."""
        while isinstance(name, ast.Attribute):
            name = name.value
        scope = next((a for a in self.script.places.ancestors(name) if isinstance(a, SCOPES)), None)
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if name.id in self.locals_of(scope):
                return scope
        return None

    def locals_of(self, scope) -> set:
        """The parameters of a function or lambda, and the names its body assigns."""
        key = id(scope)
        if key not in self._scope_locals:
            arguments = scope.args
            every = arguments.posonlyargs + arguments.args + arguments.kwonlyargs
            every += [a for a in (arguments.vararg, arguments.kwarg) if a]
            names = {arg.arg for arg in every}
            if not isinstance(scope, ast.Lambda):
                names.update(
                    node.id
                    for node in ast.walk(scope)
                    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
                )
            self._scope_locals[key] = names
        return self._scope_locals[key]

    def bindings_before(self, name) -> list:
        """The assignments that may give `name` its value where it is used, latest first.

        `name` is a name or an attribute of one (`args.base_lr`). Usually one; more when the
        latest sits in a branch that the use is not in (an `if` and its `else` both assign),
        up to the nearest assignment that always runs (or MAX_REACHING of them).
        """
        key = assignment_key(name)
        if not key:
            return []
        bindings, positions = self.bindings, self._binding_positions
        if self.bound_locally(name):
            scope = self._local_scope(name)
            if scope is None:
                return []
            if id(scope) not in self._locals:  # no assignments in it: its parameters only
                self._locals[id(scope)] = self.collect_bindings([], scope)
            bindings, positions = self._locals[id(scope)]
        found = bindings.get(key)
        if not found:
            return []
        visible = bisect_right(positions[key], position(name))
        use_chain = self.script.places.branch_chain(name)
        reaching = []
        for binding in reversed(found[max(0, visible - MAX_REACHING) : visible]):
            reaching.append(binding)
            if self.script.places.branch_chain(binding.statement) <= use_chain:
                break
        return reaching


def _load_copy(target):
    """A reading copy of an assignment target (x, or args.base_lr) at the same position."""
    if isinstance(target, ast.Name):
        copy = ast.Name(target.id, ast.Load())
    else:
        copy = ast.Attribute(_load_copy(target.value), target.attr, ast.Load())
    return ast.copy_location(copy, target)

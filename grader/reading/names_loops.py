"""Loops over written-out lists in the learner's script, unrolled: each iteration's values of the
loop variables (`loop_iterations`) and a node copied with them (`substituted`), lambdas
late-binding as in Python (`late_bound`).

Part of the names layer: grader.reading.names.Script builds one of these per script and answers through it
(`script.loops`); it reaches the other parts through `script`. Plain `ast`, nothing of Horovod.
"""

from __future__ import annotations

import ast
import copy


class Loops:
    """The script's loops over written-out lists, unrolled."""

    def __init__(self, script):
        self.script = script
        self.late_bound: dict = {}  # lambdas copied out of loops: {id: names read late}

    def loop_iterations(self, target, iterable) -> list | None:
        """[{name: value expression}, ...] for each item of `for target in iterable`, or None
        if the items are not written out (a list or tuple, zip or enumerate of them, range)."""
        items = self._loop_items(self.script.values.resolve(iterable))
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
        name = self.script.imports.qualified_name(iterable.func)
        columns = [self._loop_items(self.script.values.resolve(arg)) for arg in iterable.args]

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
            bounds = [self.script.values.constant(arg) for arg in iterable.args]
            if all(isinstance(b, int) and not isinstance(b, bool) for b in bounds):
                numbers = range(*bounds)
                if len(numbers) <= 1000:
                    return [made(ast.Constant(number)) for number in numbers]
        return None

    def _unpack(self, target, item, names: dict) -> bool:
        if isinstance(target, ast.Name):
            names[target.id] = item
            return True
        item = self.script.values.resolve(item)
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
        places = self.script.places
        parent = places.parent(node)
        inside = places.in_function(node)
        for child in ast.walk(copied):
            for grandchild in ast.iter_child_nodes(child):
                runs_inside = inside or isinstance(child, ast.Lambda) or places.in_function(child)
                places.adopt(grandchild, child, runs_inside)
        if parent is not None:
            places.adopt(copied, parent)
        return copied


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

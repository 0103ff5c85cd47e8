"""Where a node of the learner's script is and when it runs: its parents, its statement, the
conditions around it (`guards`), and the calls that reach it through the script's own functions
(`call_sites`, `calls_reached`, `guards_through`); `source` gives an expression as written.

Part of the names layer: grader.reading.names.Script builds one of these per script and answers through it
(`script.places`); it reaches the other parts through `script`. Plain `ast`, nothing of Horovod.
"""

from __future__ import annotations

import ast

from grader.reading.syntax import MAX_DEPTH, SCOPES, position

# Statements whose body may run zero times, or once out of several branches.
_BRANCHING = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.Match)


class Places:
    """Where each node is (its parent, whether it is inside a function) and what must hold for it
    to run."""

    def __init__(self, script, parents: dict, in_scope: set, named: dict):
        self.script = script
        self.parents = parents  # {node: its parent}, also of the nodes the grader makes
        self.in_scope = in_scope  # ids of the nodes inside a function, lambda or class
        self.named = named  # {last part: every Name or Attribute read that ends so}
        self._chains: dict = {}

    def adopt(self, node, parent, inside: bool = False) -> None:
        """Records the parent of a node the grader made (a copy, an item of a tuple), and with
        `inside` that it runs only when a function, lambda or class body runs."""
        self.parents[node] = parent
        if inside:
            self.in_scope.add(id(node))

    def parent(self, node):
        return self.parents.get(node)

    def ancestors(self, node):
        node = self.parents.get(node)
        while node is not None:
            yield node
            node = self.parents.get(node)

    def in_function(self, node) -> bool:
        """True if `node` runs only when a function, lambda or class body runs."""
        return id(node) in self.in_scope

    def statement_of(self, node):
        for candidate in [node, *self.ancestors(node)]:
            if isinstance(candidate, ast.stmt):
                return candidate
        return None

    def is_discarded(self, call: ast.Call) -> bool:
        """True if the call's value is thrown away: `f(x)` or `int(f(x))` as a statement."""
        node, parent = call, self.parent(call)
        while isinstance(parent, ast.Call) and node in parent.args:
            node, parent = parent, self.parent(parent)
        return isinstance(parent, ast.Expr)

    def source(self, node) -> str:
        """The expression as written (on one line), for messages."""
        try:
            # Column offsets count UTF-8 bytes.
            lines = [line.encode() for line in self.script.lines[node.lineno - 1 : node.end_lineno]]
            lines[-1] = lines[-1][: node.end_col_offset]
            lines[0] = lines[0][node.col_offset :]
            text = b"\n".join(lines).decode()
        except (AttributeError, IndexError, TypeError, UnicodeDecodeError):
            text = ""
        return " ".join((text or ast.unparse(node)).split())

    def guards(self, node) -> list:
        """The (test, polarity) pairs that must hold for `node` to run, innermost first."""
        found = []
        child = node
        for parent in self.ancestors(node):
            found.extend(self._early_exits(parent, child))
            if isinstance(parent, SCOPES):
                break
            if isinstance(parent, ast.IfExp) and child is not parent.test:
                found.append((parent.test, child is parent.body))
            elif isinstance(parent, (ast.If, ast.While)) and child is not parent.test:
                in_body = _contains(parent.body, child)
                if in_body or isinstance(parent, ast.If):
                    found.append((parent.test, in_body))
            elif isinstance(parent, ast.BoolOp):
                # In `a and f()`, f runs only if a is true; in `a or f()`, only if a is false.
                before = parent.values[: parent.values.index(child)]
                polarity = isinstance(parent.op, ast.And)
                found.extend((test, polarity) for test in before)
            child = parent
        return found

    def _early_exits(self, parent, child) -> list:
        """(test, polarity) pairs from the statements before `child` in `parent`'s block that
        leave it early: after `if hvd.rank() != 0: return 0`, the rest of the function runs
        only when `hvd.rank() != 0` is false."""
        found = []
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if not isinstance(block, list) or not _contains(block, child):
                continue
            for statement in block[: [id(s) for s in block].index(id(child))]:
                if not isinstance(statement, ast.If):
                    continue
                leaves_body = self._leaves(statement.body)
                leaves_else = bool(statement.orelse) and self._leaves(statement.orelse)
                if leaves_body and not leaves_else:
                    found.append((statement.test, False))
                elif leaves_else and not leaves_body:
                    found.append((statement.test, True))
        return found

    def _leaves(self, block) -> bool:
        """True if the statements end by leaving the function or the script: return, raise,
        sys.exit(...)."""
        if not block:
            return False
        last = block[-1]
        if isinstance(last, ast.Raise):
            return True
        if isinstance(last, ast.Return):
            return self.in_function(last)
        if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call):
            return self.script.imports.qualified_name(last.value.func) in (
                "sys.exit",
                "exit",
                "quit",
                "os._exit",
            )
        if isinstance(last, ast.If):
            return self._leaves(last.body) and self._leaves(last.orelse)
        return False

    def call_sites(self, node, depth: int = 0):
        """How a node inside one of the script's module-level functions runs: a list of call
        chains, each [a call outside any function, ..., the call of the function `node` is in]
        (through the script's other functions); [] if nothing outside a function calls it;
        None if a function on the way is nested, or used otherwise than called by its name
        (passed as a callback: the grader can't tell when it runs)."""
        if not self.in_function(node):
            return [[]]
        scope = next((a for a in self.ancestors(node) if isinstance(a, SCOPES)), None)
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) or depth > MAX_DEPTH:
            return None
        if self.in_function(scope):
            return None
        chains = []
        for use in self.named.get(scope.name, []):
            if not isinstance(use, ast.Name) or not isinstance(use.ctx, ast.Load):
                continue
            call = self.parent(use)
            if not (isinstance(call, ast.Call) and call.func is use):
                return None
            if self.script.functions.function_of(call) is not scope:
                continue
            outer = self.call_sites(call, depth + 1)
            if outer is None:
                return None
            chains.extend(chain + [call] for chain in outer)
        return chains

    def calls_reached(self, *names: str) -> list:
        """Every call to one of `names` with how it runs: (the call, the chain of the script's
        own calls that reaches it from outside any function: [] for a call outside one, None
        when the grader can't tell when it runs, see call_sites), in the order they run (a
        call in a function at its outermost call)."""
        found = []
        for call in self.script.imports.calls_to(*names):
            chains = self.call_sites(call)
            if chains is None:
                found.append((call, None))
            else:
                found.extend((call, chain) for chain in chains)
        return sorted(found, key=lambda item: position(item[1][0] if item[1] else item[0]))

    def guards_through(self, node, chain) -> list:
        """The (test, polarity) pairs that must hold for `node` to run when reached through
        `chain` (call_sites): its own, then those of each call on the way, innermost first."""
        found = list(self.guards(node))
        for call in reversed(chain):
            found.extend(self.guards(call))
        return found

    def branch_chain(self, node) -> frozenset:
        """The (statement, field) bodies around `node` that may not run every time."""
        key = id(node)
        if key not in self._chains:
            self._chains[key] = frozenset(self._find_branch_chain(node))
        return self._chains[key]

    def _find_branch_chain(self, node) -> set:
        chain = set()
        child = node
        for parent in self.ancestors(node):
            if isinstance(parent, _BRANCHING):
                for name in ("body", "orelse", "handlers", "finalbody", "cases"):
                    if _contains(getattr(parent, name, []), child):
                        if not (isinstance(parent, ast.Try) and name in ("body", "finalbody")):
                            chain.add((id(parent), name))
            child = parent
        return chain


def _contains(statements, node) -> bool:
    return any(item is node for item in statements)

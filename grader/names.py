"""The names layer: what a name in the learner's script is, and where a value flows.

`Script` is the parsed script and the one place that answers, with plain `ast` (nothing is
imported or run):
- what a name is: `qualified_name` (import aliases resolved: `hvd.size` is
  `horovod.tensorflow.keras.size` whatever `hvd` is called), `call_name`, `imported_modules`,
  `import_reaches` (has an import of it run where it is used),
  `calls_to`, `calls` and `calls_by_method`, `uncalled` (functions named but not called),
  `attributes` (every `.name` used), `bindings` (every module-level assignment, by name);
- what a value is where it is used: `bindings_before`, `binding_value` (a tuple assignment
  `rank, size = setup()` read from what setup returns), `values_of`, `resolve`, `constant`,
  `same_value`, `mentions`/`first_mention`/`mentions_call`; through the script's own small
  functions: `function_of`, `returned`, `followed` (a function's own variables and parameters
  are followed inside it, as module-level names are), `argument_for` (what a call gives one
  of the function's parameters); `object_attribute` (`trainer.steps`, `self.verbose`: set in a
  method or the class, which are not followed, so unknown); a call's arguments: `argument`
  (also inside a `**dict` it can read), `unpacks_unknown` (a `**dict` or `*list` it can't);
  through loops over written-out lists:
  `loop_iterations`, `substituted`, `late_bound`;
- which calls run, through the script's own functions: `call_sites` (the calls outside any
  function that run a line inside one), `calls_reached`, `guards_through`;
- where a line runs: `guards` (the conditions around it, and the early `return`s and exits
  before it), `in_function`, `statement_of`,
  `parent`/`ancestors`, `is_discarded`; `source` gives an expression as written, for messages.

It knows Python and module spellings (grader.syntax.canonical), nothing of what Horovod does:
the question modules on top of it (grader.ranks, grader.scaling, grader.training,
grader.schedule) know that, and the rules (grader/rules/) ask them. A question module keeps its
own caches in one object per script: `script.memo(Ranks)` builds `Ranks(script)` once.
"""

from __future__ import annotations

import ast
import copy
from bisect import bisect_right
from dataclasses import dataclass

from grader.source import parse
from grader.syntax import MAX_DEPTH, argument, canonical, end_position, method_name, position

_MISSING = object()
MAX_REACHING = 8  # how many assignments in other branches may give a name its value

# Statements whose body may run zero times, or once out of several branches.
_BRANCHING = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.Match)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
# Nodes that bind a name.
_BINDING = (
    ast.Assign,
    ast.AnnAssign,
    ast.AugAssign,
    ast.NamedExpr,
    ast.For,
    ast.AsyncFor,
    ast.With,
    ast.AsyncWith,
    *_SCOPES,
)


@dataclass
class Binding:
    """One assignment to a module-level name; `value` is None when the grader can't follow it."""

    name: str
    value: ast.expr | None
    statement: ast.AST
    visible_from: tuple  # the binding holds for uses after this position


class Script:
    """The learner's parsed script: its names and where their values flow (see the module)."""

    def __init__(self, text: str, tree: ast.Module):
        self.text = text
        self.tree = tree
        self.lines = text.split("\n")
        self._parents: dict = {}
        self._in_scope: set = set()  # ids of the nodes inside a function, lambda or class
        self._scope_locals: dict = {}
        self._qualified: dict = {}
        self._chains: dict = {}
        self._memo: dict = {}  # {question class: its one object for this script}
        self.attributes: set = set()  # every `.name` the script uses
        self.late_bound: dict = {}  # lambdas copied out of loops: {id: names read late}
        self._returned: dict = {}  # {id of a call: what it stands for, see returned()}
        calls, imports, assignments, local_assignments = [], [], [], []
        self._named: dict = {}  # {last part: every Name or Attribute read that ends so}
        for parent in ast.walk(tree):  # one pass over the tree collects everything
            inside = isinstance(parent, _SCOPES) or id(parent) in self._in_scope
            for child in ast.iter_child_nodes(parent):
                self._parents[child] = parent
                if inside:
                    self._in_scope.add(id(child))
            if isinstance(parent, ast.Call):
                calls.append(parent)
            elif isinstance(parent, ast.Attribute):
                self.attributes.add(parent.attr)
                self._named.setdefault(parent.attr, []).append(parent)
            elif isinstance(parent, ast.Name):
                self._named.setdefault(parent.id, []).append(parent)
            elif isinstance(parent, (ast.Import, ast.ImportFrom)):
                imports.append(parent)
            elif isinstance(parent, _BINDING):
                if self.in_function(parent):
                    local_assignments.append(parent)
                else:
                    assignments.append(parent)
        self.calls = sorted(calls, key=position)
        self.calls_by_method: dict = {}  # {"fit": [model.fit(...)], "append": [...], ...}
        for call in self.calls:
            self.calls_by_method.setdefault(method_name(call), []).append(call)
        self.imports, self.imported = self._collect_imports(imports)
        self.bindings, self._binding_positions = self._collect_bindings(assignments)
        self._locals = self._collect_local_bindings(local_assignments)
        self._called = {id(call.func) for call in calls}
        self._uncalled: dict = {}  # {names: what uncalled(*names) found}

    @classmethod
    def from_text(cls, text: str) -> Script:
        return cls(text, parse(text))

    def memo(self, kind):
        """The one `kind(self)` of this script: a question module's object (ranks.Ranks...),
        built on first use and kept with its caches for the script's life."""
        found = self._memo.get(kind)
        if found is None:
            found = self._memo[kind] = kind(self)
        return found

    # ---- structure ------------------------------------------------------------------------

    def parent(self, node):
        return self._parents.get(node)

    def ancestors(self, node):
        node = self._parents.get(node)
        while node is not None:
            yield node
            node = self._parents.get(node)

    def in_function(self, node) -> bool:
        """True if `node` runs only when a function, lambda or class body runs."""
        return id(node) in self._in_scope

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
            lines = [line.encode() for line in self.lines[node.lineno - 1 : node.end_lineno]]
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
            if isinstance(parent, _SCOPES):
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
            return self.qualified_name(last.value.func) in ("sys.exit", "exit", "quit", "os._exit")
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
        scope = next((a for a in self.ancestors(node) if isinstance(a, _SCOPES)), None)
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) or depth > MAX_DEPTH:
            return None
        if self.in_function(scope):
            return None
        chains = []
        for use in self._named.get(scope.name, []):
            if not isinstance(use, ast.Name) or not isinstance(use.ctx, ast.Load):
                continue
            call = self.parent(use)
            if not (isinstance(call, ast.Call) and call.func is use):
                return None
            if self.function_of(call) is not scope:
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
        for call in self.calls_to(*names):
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

    def _branch_chain(self, node) -> frozenset:
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

    # ---- imports and names ----------------------------------------------------------------

    def _collect_imports(self, nodes) -> tuple:
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
        if not statements or self.in_function(name):
            return True if statements else None
        maybe = False
        for statement in statements:
            if self.in_function(statement):
                continue  # binds a name of its function
            loops = [a for a in self.ancestors(statement) if isinstance(a, (ast.For, ast.While))]
            if any(loop in set(self.ancestors(name)) for loop in loops):
                maybe = True
                continue
            if position(statement) > position(name):
                continue
            own, used = self._branch_chain(statement), self._branch_chain(name)
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
        if head in self.imports and not self._bound_locally(expr):
            return canonical(".".join([self.imports[head], *parts]))
        if depth < MAX_DEPTH:
            value = self.resolve(expr)
            if value is not expr and isinstance(value, (ast.Name, ast.Attribute)):
                base = self.qualified_name(value, depth + 1)
                if base:
                    return ".".join([base, *parts])
        return ".".join([head, *parts])

    def call_name(self, node) -> str:
        """The qualified name of the function a call (or a name holding one) calls."""
        node = self.resolve(node)
        if isinstance(node, ast.Call):
            return self.qualified_name(node.func)
        return ""

    def calls_to(self, *names: str) -> list:
        """Every call in the script (in source order) whose function is one of `names`."""
        return [call for call in self.calls if self.qualified_name(call.func) in names]

    # ---- assignments ----------------------------------------------------------------------

    def _collect_local_bindings(self, nodes) -> dict:
        """{id of a def: ({name: [Binding, ...]}, {name: positions})} for the statements inside
        the script's functions, each in the function whose local it binds; a parameter is a
        binding without a value, visible from the start of the body."""
        by_scope: dict = {}
        for node in nodes:
            scope = next((a for a in self.ancestors(node) if isinstance(a, _SCOPES)), None)
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
                by_scope.setdefault(id(scope), (scope, []))[1].append(node)
        tables = {}
        for key, (scope, statements) in by_scope.items():
            tables[key] = self._collect_bindings(statements, scope)
        return tables

    def _collect_bindings(self, nodes, scope=None) -> tuple:
        """({name: [Binding, ...] in source order}, {name: their positions}) for the statements
        `nodes` at the module level (or in the function `scope`, with its parameters)."""
        bindings: dict = {}

        def bind(name, value, statement):
            binding = Binding(name, value, statement, end_position(statement))
            bindings.setdefault(name, []).append(binding)

        def bind_target(target, value, statement):
            if isinstance(target, ast.Name):
                bind(target.id, value, statement)
            elif _key(target):  # args.base_lr = ...: later reads of args.base_lr see it
                bind(_key(target), value, statement)
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
                    bind_target(element, values[index] if values else None, statement)
            elif isinstance(target, ast.Starred):
                bind_target(target.value, None, statement)

        for node in nodes:
            if isinstance(node, _SCOPES):
                if not isinstance(node, ast.Lambda):
                    bind(node.name, None, node)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    bind_target(target, node.value, node)
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                bind_target(node.target, node.value, node)
            elif isinstance(node, ast.AugAssign) and _key(node.target):
                # x //= n is x = x // n, where the inner x is the value before this statement.
                previous = _load_copy(node.target)
                value = ast.copy_location(ast.BinOp(previous, node.op, node.value), node)
                for child in ast.walk(previous):
                    for grandchild in ast.iter_child_nodes(child):
                        self._parents[grandchild] = child
                self._parents[previous] = value
                self._parents[value] = node
                bind(_key(node.target), value, node)
            elif isinstance(node, ast.NamedExpr):
                bind(node.target.id, node.value, self.statement_of(node) or node)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
                targets = (
                    [node.target]
                    if isinstance(node, (ast.For, ast.AsyncFor))
                    else [item.optional_vars for item in node.items if item.optional_vars]
                )
                for target in targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            bind(name.id, None, node)
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

    def _item_of(self, value, index, statement):
        """`value[index]`, a node of the grader's for one name of a tuple assignment from a
        call; `resolve` reads it from the tuple the call returns (returned)."""
        item = ast.Subscript(value, ast.Constant(index), ast.Load())
        for node in (item, item.slice):
            ast.copy_location(node, value)
        item.unpacked = True
        self._parents[item] = statement
        self._parents[item.slice] = item
        return item

    def binding_value(self, binding):
        """The expression an assignment gives its name (an item of a tuple assignment from a
        call followed into what the call returns), or None when the grader can't read it."""
        value = binding.value
        if getattr(value, "unpacked", False):
            return self._unpacked_item(value)
        return value

    def _unpacked_item(self, item):
        """The expression an item of a tuple assignment stands for, or None."""
        if not getattr(item, "unpacked", False):
            return None
        returned = self.followed(item.value)
        if isinstance(returned, (ast.Tuple, ast.List)) and item.slice.value < len(returned.elts):
            return returned.elts[item.slice.value]
        return None

    def _bound_locally(self, name) -> bool:
        """True if `name` is a parameter or local variable of an enclosing function."""
        while isinstance(name, ast.Attribute):
            name = name.value
        if not isinstance(name, ast.Name) or not self.in_function(name):
            return False
        for scope in self.ancestors(name):
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                if name.id in self._locals_of(scope):
                    return True
        return False

    def _local_scope(self, name):
        """The function whose local `name` (a name or args.x) is, if it is the innermost function
        around the use (a closure's or a lambda's reads are not followed); else None."""
        while isinstance(name, ast.Attribute):
            name = name.value
        scope = next((a for a in self.ancestors(name) if isinstance(a, _SCOPES)), None)
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if name.id in self._locals_of(scope):
                return scope
        return None

    def _locals_of(self, scope) -> set:
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
        key = _key(name)
        if not key:
            return []
        bindings, positions = self.bindings, self._binding_positions
        if self._bound_locally(name):
            scope = self._local_scope(name)
            if scope is None:
                return []
            if id(scope) not in self._locals:  # no assignments in it: its parameters only
                self._locals[id(scope)] = self._collect_bindings([], scope)
            bindings, positions = self._locals[id(scope)]
        found = bindings.get(key)
        if not found:
            return []
        visible = bisect_right(positions[key], position(name))
        use_chain = self._branch_chain(name)
        reaching = []
        for binding in reversed(found[max(0, visible - MAX_REACHING) : visible]):
            reaching.append(binding)
            if self._branch_chain(binding.statement) <= use_chain:
                break
        return reaching

    def values_of(self, expr, depth: int = 0) -> list:
        """The expressions `expr` may stand for: itself, or the values the name may hold."""
        if not _key(expr) or depth >= MAX_DEPTH:
            return [expr]
        reaching = self.bindings_before(expr)
        if not reaching or any(b.value is None for b in reaching):
            return [expr]
        values = []
        for binding in reaching:
            value = binding.value
            if getattr(value, "unpacked", False):
                value = self._unpacked_item(value)
                if value is None:
                    return [expr]
            values.extend(self.values_of(value, depth + 1))
        return values

    def resolve(self, expr):
        """Follows a name to the value of its latest assignment (through names, a few deep)."""
        for _ in range(MAX_DEPTH):
            if not _key(expr):
                return expr
            reaching = self.bindings_before(expr)
            if not reaching or reaching[0].value is None:
                return expr
            value = reaching[0].value
            if getattr(value, "unpacked", False):
                value = self._unpacked_item(value)
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

    def uncalled(self, *names: str) -> list:
        """Every name or attribute with one of the qualified `names` that the script reads
        without calling it (`args.base_lr * hvd.size`), in source order."""
        if names not in self._uncalled:
            found = []
            for name in names:
                last = name.rsplit(".", 1)[-1]
                found.extend(
                    node
                    for node in self._named.get(last, [])
                    if id(node) not in self._called
                    and isinstance(node.ctx, ast.Load)
                    and self.qualified_name(node) == name
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
        values = self.values_of(expr)
        if len(values) != 1:
            return None
        value = values[0]
        if isinstance(value, ast.Dict) and all(
            isinstance(key, ast.Constant) and isinstance(key.value, str) for key in value.keys
        ):
            entries = {key.value: item for key, item in zip(value.keys, value.values)}
        elif (
            isinstance(value, ast.Call)
            and self.qualified_name(value.func) == "dict"
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
        for node in ast.walk(self.tree):
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
        function = self.function_of(call)
        reaching = self.bindings_before(name)
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
        if not isinstance(expr, ast.Attribute) or self.bindings_before(expr):
            return False
        root = expr
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name):
            return False
        for binding in self.bindings_before(root):
            statement = binding.statement
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                # a parameter: `self` (the first one) of a method
                arguments = statement.args.posonlyargs + statement.args.args
                if (
                    arguments
                    and arguments[0].arg == root.id
                    and isinstance(self.parent(statement), ast.ClassDef)
                ):
                    return True
                continue
            value = self.binding_value(binding)
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
                made_by = self.bindings_before(value.func)
                if made_by and isinstance(made_by[0].statement, ast.ClassDef):
                    return True
        return False

    # ---- the script's own functions -------------------------------------------------------

    def function_of(self, call):
        """The module-level `def` that `call` calls, or None."""
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
            return None
        reaching = self.bindings_before(call.func)
        if len(reaching) == 1 and isinstance(reaching[0].statement, ast.FunctionDef):
            return reaching[0].statement
        return None

    def returned(self, call):
        """What a call of one of the script's straight-line functions (plain assignments, then
        a return) stands for: `def is_root(): return hvd.rank() == 0` makes `is_root()` mean
        `hvd.rank() == 0`, `def per_worker(n): return n // hvd.size()` makes `per_worker(steps)`
        mean `steps // hvd.size()`, and `def make(lr): opt = SGD(lr); return
        hvd.DistributedOptimizer(opt)` makes `make(0.1)` mean the wrapped SGD(0.1). None for
        other calls."""
        key = id(call)
        if key not in self._returned:
            self._returned[key] = self._find_returned(call)
        return self._returned[key]

    def followed(self, expr):
        """`resolve`, and through the script's one-line functions: with
        `def make(rate): return SGD(rate)`, `opt = make(0.1)` stands for `SGD(0.1)`."""
        value = self.resolve(expr)
        for _ in range(MAX_DEPTH):
            returned = self.returned(value)
            if returned is None:
                return value
            value = self.resolve(returned)
        return value

    def _find_returned(self, call):
        function = self.function_of(call)
        if function is None or call.keywords:
            return None
        arguments = function.args
        parameters = [arg.arg for arg in arguments.posonlyargs + arguments.args]
        if arguments.kwonlyargs or arguments.vararg or arguments.kwarg or arguments.defaults:
            return None
        if len(call.args) != len(parameters) or any(
            isinstance(arg, ast.Starred) for arg in call.args
        ):
            return None
        body = function.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
            return None
        *steps, last = body
        given = dict(zip(parameters, call.args))
        # Straight-line helpers: `opt = SGD(rate)` then `return hvd.DistributedOptimizer(opt)`
        # stands for `hvd.DistributedOptimizer(SGD(rate))`.
        if not all(_simple_assignment(step) for step in steps):
            # Any body whose one return reads none of its variables: `...; return hvd.rank(),
            # hvd.size()` stands for the tuple, whatever runs before it.
            returns = [n for step in steps for n in ast.walk(step) if isinstance(n, ast.Return)]
            local = self._locals_of(function) - set(parameters)
            read = {n.id for n in ast.walk(last.value) if isinstance(n, ast.Name)}
            if (
                returns
                or read & local
                or any(
                    isinstance(n, (ast.Global, ast.Nonlocal, ast.Yield, ast.YieldFrom))
                    for step in steps
                    for n in ast.walk(step)
                )
            ):
                return None
            return self.substituted(last.value, given, given)
        if not given and not steps:
            return last.value
        for step in steps:
            value = self.substituted(step.value, given, given)
            given = {**given, step.targets[0].id: value}
        return self.substituted(last.value, given, given)

    def mentions_call(self, expr, *names: str, through_functions: bool = False) -> bool:
        """True if `expr` (following names) calls one of `names`; with `through_functions`,
        also if it calls one of the script's functions whose body (a few deep) calls one."""
        seen = set()

        def calls(node, depth=0):
            if not isinstance(node, ast.Call):
                return False
            if self.qualified_name(node.func) in names:
                return True
            function = self.function_of(node) if through_functions else None
            if function is None or id(function) in seen or depth > MAX_DEPTH:
                return False
            seen.add(id(function))
            return any(calls(inner, depth + 1) for inner in ast.walk(function))

        return self.mentions(expr, calls)

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
            for grandchild in ast.iter_child_nodes(child):
                self._parents[grandchild] = child
                if inside or isinstance(child, ast.Lambda) or self.in_function(child):
                    self._in_scope.add(id(grandchild))
        if parent is not None:
            self._parents[copied] = parent
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


def _simple_assignment(statement) -> bool:
    """`name = value`: one plain name, no unpacking, no attribute."""
    return (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
    )


def _contains(statements, node) -> bool:
    return any(item is node for item in statements)


def _key(node) -> str:
    """The name an assignment binds: "x" for x, "args.base_lr" for args.base_lr; else ""."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return ""


def _load_copy(target):
    """A reading copy of an assignment target (x, or args.base_lr) at the same position."""
    if isinstance(target, ast.Name):
        copy = ast.Name(target.id, ast.Load())
    else:
        copy = ast.Attribute(_load_copy(target.value), target.attr, ast.Load())
    return ast.copy_location(copy, target)

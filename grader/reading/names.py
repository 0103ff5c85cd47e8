"""The names layer: what a name in the learner's script is, and where a value flows.

`Script` is the parsed script and the one place that answers, with plain `ast` (nothing is
imported or run). One pass over the tree collects its calls, imports and assignments; each part
answers its own questions, in a module of its own, and Script answers them all by name:
- what a name is (grader/reading/names_imports.py): `qualified_name` (import aliases resolved: `hvd.size`
  is `horovod.tensorflow.keras.size` whatever `hvd` is called), `call_name`, `imported_modules`,
  `import_reaches` (has an import of it run where it is used), `calls_to`; Script keeps `calls`,
  `calls_by_method` and `attributes` (every `.name` used);
- the assignments (grader/reading/names_assignments.py): `bindings` (every module-level assignment, by
  name), `bindings_before`, `binding_value` (a tuple assignment `rank, size = setup()` read from
  what setup returns);
- what an expression holds (grader/reading/names_values.py): `values_of`, `resolve`, `constant`,
  `same_value`, `mentions`/`first_mention`/`mentions_call`;
- what a call is given (grader/reading/names_arguments.py): `argument` (also inside a `**dict` it can
  read), `unpacks_unknown` (a `**dict` or `*list` it can't), `argument_for` (what a call gives
  one of the function's parameters), `uncalled` (functions named but not called),
  `object_attribute` (`trainer.steps`, `self.verbose`: set in a method or the class, which are
  not followed, so unknown);
- the script's own small functions (grader/reading/names_functions.py): `function_of`, `returned`,
  `followed` (a function's own variables and parameters are followed inside it, as module-level
  names are);
- loops over written-out lists (grader/reading/names_loops.py): `loop_iterations`, `substituted`;
- where a line runs (grader/reading/names_places.py): `guards` (the conditions around it, and the early
  `return`s and exits before it), `in_function`, `statement_of`, `parent`/`ancestors`,
  `is_discarded`; which calls run, through the script's own functions: `call_sites` (the calls
  outside any function that run a line inside one), `calls_reached`, `guards_through`; `source`
  gives an expression as written, for messages.

It knows Python and module spellings (grader.reading.syntax.canonical), nothing of what Horovod does:
the question modules on top of it (grader.reading.ranks, grader.reading.scaling, grader.reading.training,
grader.reading.schedule) know that, and the rules (grader/reading/rules/) ask them. A question module keeps its
own caches in one object per script: `script.memo(Ranks)` builds `Ranks(script)` once.
"""

from __future__ import annotations

import ast

from grader.reading.names_arguments import Arguments
from grader.reading.names_assignments import Assignments
from grader.reading.names_functions import OwnFunctions
from grader.reading.names_imports import Imports
from grader.reading.names_loops import Loops
from grader.reading.names_places import Places
from grader.reading.names_values import Values
from grader.reading.source import parse
from grader.reading.syntax import SCOPES, method_name, position

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
    *SCOPES,
)


class Script:
    """The learner's parsed script: its names and where their values flow (see the module).

    One pass over the tree collects the calls, imports and assignments; each part answers its
    own questions (`places`, `imports`, `assignments`, `values`, `arguments`, `functions`,
    `loops`) and Script answers them all by name."""

    def __init__(self, text: str, tree: ast.Module):
        self.text = text
        self.tree = tree
        self.lines = text.split("\n")
        self._memo: dict = {}  # {question class: its one object for this script}
        self.attributes: set = set()  # every `.name` the script uses
        parents: dict = {}
        in_scope: set = set()  # ids of the nodes inside a function, lambda or class
        named: dict = {}  # {last part: every Name or Attribute read that ends so}
        calls, imports, assignments, local_assignments = [], [], [], []
        for parent in ast.walk(tree):  # one pass over the tree collects everything
            inside = isinstance(parent, SCOPES) or id(parent) in in_scope
            for child in ast.iter_child_nodes(parent):
                parents[child] = parent
                if inside:
                    in_scope.add(id(child))
            if isinstance(parent, ast.Call):
                calls.append(parent)
            elif isinstance(parent, ast.Attribute):
                self.attributes.add(parent.attr)
                named.setdefault(parent.attr, []).append(parent)
            elif isinstance(parent, ast.Name):
                named.setdefault(parent.id, []).append(parent)
            elif isinstance(parent, (ast.Import, ast.ImportFrom)):
                imports.append(parent)
            elif isinstance(parent, _BINDING):
                if id(parent) in in_scope:
                    local_assignments.append(parent)
                else:
                    assignments.append(parent)
        self.calls = sorted(calls, key=position)
        self.calls_by_method: dict = {}  # {"fit": [model.fit(...)], "append": [...], ...}
        for call in self.calls:
            self.calls_by_method.setdefault(method_name(call), []).append(call)
        self.places = Places(self, parents, in_scope, named)
        self.values = Values(self)
        self.arguments = Arguments(self)
        self.functions = OwnFunctions(self)
        self.loops = Loops(self)
        self.imports = Imports(self, imports)
        self.assignments = Assignments(self, assignments, local_assignments)
        self.bindings = self.assignments.bindings  # {name: [Binding, ...]}, module-level

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

    # ---- where a node is and when it runs (names_places) -----------------------------------------

    def parent(self, node):
        return self.places.parent(node)

    def ancestors(self, node):
        return self.places.ancestors(node)

    def in_function(self, node) -> bool:
        return self.places.in_function(node)

    def statement_of(self, node):
        return self.places.statement_of(node)

    def is_discarded(self, call: ast.Call) -> bool:
        return self.places.is_discarded(call)

    def source(self, node) -> str:
        return self.places.source(node)

    def guards(self, node) -> list:
        return self.places.guards(node)

    def call_sites(self, node, depth: int = 0):
        return self.places.call_sites(node, depth)

    def calls_reached(self, *names: str) -> list:
        return self.places.calls_reached(*names)

    def guards_through(self, node, chain) -> list:
        return self.places.guards_through(node, chain)

    # ---- what a name is (names_imports) ----------------------------------------------------------

    def import_reaches(self, name):
        return self.imports.import_reaches(name)

    def imported_modules(self) -> set:
        return self.imports.imported_modules()

    def qualified_name(self, expr, depth: int = 0) -> str:
        return self.imports.qualified_name(expr, depth)

    def call_name(self, node) -> str:
        return self.imports.call_name(node)

    def calls_to(self, *names: str) -> list:
        return self.imports.calls_to(*names)

    # ---- the assignments (names_assignments) -----------------------------------------------------

    def binding_value(self, binding):
        return self.assignments.binding_value(binding)

    def bindings_before(self, name) -> list:
        return self.assignments.bindings_before(name)

    # ---- what an expression holds (names_values) -------------------------------------------------

    def values_of(self, expr, depth: int = 0) -> list:
        return self.values.values_of(expr, depth)

    def resolve(self, expr):
        return self.values.resolve(expr)

    def mentions(self, expr, predicate) -> bool:
        return self.values.mentions(expr, predicate)

    def first_mention(self, expr, predicate):
        return self.values.first_mention(expr, predicate)

    def constant(self, expr, default=None):
        return self.values.constant(expr, default)

    def same_value(self, a, b) -> bool:
        return self.values.same_value(a, b)

    def mentions_call(self, expr, *names: str, through_functions: bool = False) -> bool:
        return self.values.mentions_call(expr, *names, through_functions=through_functions)

    # ---- what a call is given (names_arguments) --------------------------------------------------

    def uncalled(self, *names: str) -> list:
        return self.arguments.uncalled(*names)

    def argument(self, call: ast.Call, name: str, index: int | None = None):
        return self.arguments.argument(call, name, index)

    def unpacks_unknown(self, call: ast.Call) -> bool:
        return self.arguments.unpacks_unknown(call)

    def argument_for(self, name, call):
        return self.arguments.argument_for(name, call)

    def object_attribute(self, expr) -> bool:
        return self.arguments.object_attribute(expr)

    # ---- the script's own functions (names_functions) --------------------------------------------

    def function_of(self, call):
        return self.functions.function_of(call)

    def returned(self, call):
        return self.functions.returned(call)

    def followed(self, expr):
        return self.functions.followed(expr)

    # ---- loops unrolled (names_loops) ------------------------------------------------------------

    def loop_iterations(self, target, iterable) -> list | None:
        return self.loops.loop_iterations(target, iterable)

    def substituted(self, node, now: dict, last: dict):
        return self.loops.substituted(node, now, last)

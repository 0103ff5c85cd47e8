"""The import graph: packages by audience, imports flowing one way, no cycles.

Every import counts, including the ones inside functions (they hide cycles, not remove them).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from workbook.paths import REPO

PACKAGES = ("workbook", "grader", "instructor", "authoring", "bootstrap", "bench", "hub")

# Which of the project's packages each package may import (besides itself).
ALLOWED = {
    "workbook": set(),  # what notebook kernels import: nothing of the grader, course or tools
    "grader": {"workbook"},
    "instructor": {"workbook", "grader"},
    "authoring": {"workbook"},
    "bootstrap": set(),  # runs before the environment exists: the standard library only
    "bench": {"workbook", "grader", "instructor", "authoring"},  # authoring: the learner corpus
    "hub": {"workbook"},  # the workshop server; instructor only as a command
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    """The packages' modules; not what runs write below them (bench/results/runs holds a
    synthetic class's scripts, some broken on purpose)."""
    return {
        module_name(path): path
        for package in PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
        if "results" not in path.relative_to(REPO / package).parts
    }


MODULES = project_modules()


def imported_names(path: Path) -> set[str]:
    """Every module an import in the file names, resolved to the project's modules where it is
    one (`from grader import check_step` is `grader`; `from grader import batch`, grader.batch)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module_name(path) if path.name == "__init__.py" else module_name(path.parent / "x.py")
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                names.add(candidate if candidate in MODULES else base)
    return names


def graph() -> dict[str, set[str]]:
    return {
        name: {imported for imported in imported_names(path) if imported in MODULES}
        for name, path in MODULES.items()
    }


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in edges:
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    assert cycles(graph()) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_flow_one_way(package):
    wrong = sorted(
        f"{name} imports {target}"
        for name, targets in graph().items()
        if name.split(".")[0] == package
        for target in targets
        if target.split(".")[0] not in ALLOWED[package] | {package}
    )
    assert wrong == []


def test_bootstrap_needs_only_the_standard_library():
    outside = sorted(
        f"{name} imports {imported}"
        for name, path in MODULES.items()
        if name.split(".")[0] == "bootstrap"
        for imported in imported_names(path)
        if imported.split(".")[0] not in sys.stdlib_module_names | {"bootstrap", "__future__"}
    )
    assert outside == []


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_says_what_it_is_for(package):
    docstring = ast.get_docstring(ast.parse((REPO / package / "__init__.py").read_text()))
    assert docstring and len(docstring.split()) >= 8


# The static checker's layers (grader/README.md): each imports only from its own layer and the
# ones before it, so a rule's author reads down, never up: syntax, reading and verdicts; the
# names layer; the question modules (which know Horovod); the rules.
CHECKER_LAYERS = (
    {
        "grader.reading.syntax",
        "grader.reading.source",
        "grader.reading.verdicts",
        "grader.reading.budget",
    },
    {
        name
        for name in MODULES
        if name == "grader.reading.names" or name.startswith("grader.reading.names_")
    },
    {
        "grader.reading.rank_tests",
        "grader.reading.ranks",
        "grader.reading.scaling",
        "grader.reading.training",
        "grader.reading.schedule",
        "grader.reading.presets",
        "grader.reading.horovod_collectives",
        "grader.reading.horovod_optimizer",
        "grader.reading.horovod_schedule",
    },
    {name for name in MODULES if name.startswith("grader.reading.rules")},
)


def test_the_checker_layers_import_downwards():
    layer_of = {name: index for index, layer in enumerate(CHECKER_LAYERS) for name in layer}
    assert set(layer_of) <= set(MODULES), "a layer names a module that is not there"
    edges = graph()
    upwards = sorted(
        f"{name} imports {target}"
        for name, index in layer_of.items()
        for target in edges[name]
        if target.startswith("grader") and layer_of.get(target, len(CHECKER_LAYERS)) > index
    )
    assert upwards == []


# The run_distributed notebook's modules, one job each: the formats (the runner's run record,
# TensorBoard's event files, bench's result files); the run model; its words and its tables;
# what the notebooks show. Each imports only from the layers before its own.
RUN_LAYERS = (
    {"workbook.runner.record", "workbook.tensorboard_events", "workbook.bench_results"},
    {"workbook.run_times"},
    {"workbook.verdict_text", "workbook.run_tables"},
    {"workbook.glance", "workbook.estimates"},
)


def test_the_run_notebooks_modules_import_downwards():
    layer_of = {name: index for index, layer in enumerate(RUN_LAYERS) for name in layer}
    assert set(layer_of) <= set(MODULES), "a layer names a module that is not there"
    edges = graph()
    upwards = sorted(
        f"{name} imports {target}"
        for name, index in layer_of.items()
        for target in edges[name]
        if layer_of.get(target, -1) >= index
    )
    assert upwards == []


def test_the_names_layer_knows_nothing_of_horovod():
    """Its code names no Horovod module, function or table (its docstrings' examples may)."""
    tree = ast.Module(
        body=[
            statement
            for path in sorted((REPO / "grader").glob("names*.py"))
            for statement in ast.parse(path.read_text(encoding="utf-8")).body
        ],
        type_ignores=[],
    )
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    names |= {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert not {"HVD", "HVD_FUNCTIONS", "BROADCASTS", "COLLECTIVES"} & names
    strings = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]
    assert not [text for text in strings if "horovod" in text.lower() or "hvd" in text]


def test_rules_use_only_public_names():
    """No rule or question module reaches into another object's private state (`script._x`);
    its own (`self._x`) is its business."""
    reaching = sorted(
        f"{name}:{node.lineno} .{node.attr}"
        for layer in CHECKER_LAYERS
        for name in layer
        for node in ast.walk(ast.parse(MODULES[name].read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        and name != "grader.reading.budget"  # its forked child ends with os._exit
    )
    assert reaching == []


# The instructor's course and the benchmarks enter the grader through one documented entry,
# grader/api.py, never through its rooms (reading/, running/, the decision).
THROUGH_THE_API = ("instructor", "bench")


@pytest.mark.parametrize("package", THROUGH_THE_API)
def test_the_course_and_the_benchmarks_enter_the_grader_through_its_api(package):
    edges = graph()
    around = sorted(
        f"{name} imports {target}"
        for name in MODULES
        if name.split(".")[0] == package
        for target in edges[name]
        if target.split(".")[0] == "grader" and target != "grader.api"
    )
    assert around == []


# The grader's rooms (grader/README.md, "Layout"): the reading and the run side by side, neither
# importing the other (but for the run's question whether the file can be read at all), and the
# decision above both; what both use is the result vocabulary and the reference chain.
SHARED_BY_BOTH = {"grader.report", "grader.reference"}
ROOMS = {
    "grader.reading": SHARED_BY_BOTH,
    "grader.running": SHARED_BY_BOTH | {"grader.reading.guard"},
}


@pytest.mark.parametrize("room", ROOMS)
def test_the_reading_and_the_run_stand_side_by_side(room):
    edges = graph()
    outside = sorted(
        f"{name} imports {target}"
        for name in MODULES
        if name == room or name.startswith(f"{room}.")
        for target in edges[name]
        if target.startswith("grader")
        and not (target == room or target.startswith(f"{room}."))
        and target not in ROOMS[room]
    )
    assert outside == []


def test_no_two_modules_of_the_grader_share_a_file_name():
    """One name, one module: a step's rule and its invariant (step_NN.py) are the one pair, each
    in the package that finds them by that name."""
    names = {}
    for name in MODULES:
        if name.startswith("grader."):
            last = name.rsplit(".", 1)[-1]
            if not last.startswith("step_") and MODULES[name].name != "__init__.py":
                names.setdefault(last, []).append(name)
    assert {last: found for last, found in names.items() if len(found) > 1} == {}

"""Questions about the training script's model registry, asked by the bonus checks.

The script picks its model by name: `MODELS = {"wide_resnet": wide_resnet, ...}` maps each
`--model` choice to a builder, `builder(args) -> tf.keras.Model`, and the script builds the
model with `MODELS[args.model](args)`. Plain `ast`, like the step rules.
"""

from __future__ import annotations

import ast
from collections import Counter

from grader.reading.syntax import argument, method_name
from grader.reading.verdicts import Failure

REGISTRY = "MODELS"
MAX_HELPER_DEPTH = 4  # how deep builder -> helper -> helper calls are followed

# Layer classes by kind, matched on the last part of the name (tf.keras.layers.Conv2D,
# layers.Conv2D, Conv2D imported from tensorflow.keras.layers...).
LAYER_KINDS = {
    "Conv2D": "conv",
    "Convolution2D": "conv",
    "MaxPooling2D": "max_pool",
    "MaxPool2D": "max_pool",
    "AveragePooling2D": "average_pool",
    "AvgPool2D": "average_pool",
    "Dense": "dense",
    "Flatten": "flatten",
    "GlobalAveragePooling2D": "flatten",
    "GlobalMaxPooling2D": "flatten",
    "GlobalAvgPool2D": "flatten",
    "GlobalMaxPool2D": "flatten",
    "Reshape": "flatten",
}
SOFTMAX_NAMES = ("tensorflow.nn.softmax", "tensorflow.keras.activations.softmax")


def last_name(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def module_functions(script) -> dict:
    """{name: the module-level `def`} (the last one, as Python would see it)."""
    return {
        node.name: node
        for node in script.tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def registry_assignments(script) -> list:
    """The module-level statements that assign MODELS, in source order."""
    return [b.statement for b in script.bindings.get(REGISTRY, []) if b.value is not None]


def registry_entries(script) -> tuple:
    """({name: (value expr, line)} of MODELS, None) or (None, a Failure)."""
    assignments = registry_assignments(script)
    if not assignments:
        return None, Failure(
            f"no {REGISTRY} registry found: keep the script's `{REGISTRY} = {{...}}` dict (after "
            "wide_resnet), which maps every --model name to the function that builds it"
        )
    statement = assignments[-1]
    value = statement.value
    entries = {}
    if isinstance(value, ast.Dict):
        for key, item in zip(value.keys, value.values):
            if key is None:  # {**OTHER}
                continue
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                return None, Failure(
                    f"line {key.lineno}: the grader can only follow string keys in {REGISTRY}, "
                    f'like "alexnet": not `{script.source(key)}`',
                    key.lineno,
                )
            entries[key.value] = (item, key.lineno)
    elif (
        isinstance(value, ast.Call)
        and script.qualified_name(value.func) == "dict"
        and not value.args
    ):
        entries = {kw.arg: (kw.value, kw.value.lineno) for kw in value.keywords if kw.arg}
    else:
        return None, Failure(
            f"line {statement.lineno}: {REGISTRY} is not a dict the grader can follow: write it "
            f'as {REGISTRY} = {{"wide_resnet": wide_resnet, ...}}',
            statement.lineno,
        )
    entries.update(later_additions(script, statement.lineno))
    return entries, None


def later_additions(script, after: int) -> dict:
    """{name: (value expr, line)} added to MODELS at the top level below line `after`:
    MODELS["name"] = builder, MODELS.update(name=builder)."""
    entries = {}
    for node in script.tree.body:
        if node.lineno <= after:
            continue
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == REGISTRY
                    and isinstance(target.slice, ast.Constant)
                    and isinstance(target.slice.value, str)
                ):
                    entries[target.slice.value] = (node.value, node.lineno)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            func = call.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr == "update"
                and isinstance(func.value, ast.Name)
                and func.value.id == REGISTRY
            ):
                for keyword in call.keywords:
                    if keyword.arg:
                        entries[keyword.arg] = (keyword.value, node.lineno)
                if call.args and isinstance(call.args[0], ast.Dict):
                    for key, item in zip(call.args[0].keys, call.args[0].values):
                        if isinstance(key, ast.Constant) and isinstance(key.value, str):
                            entries[key.value] = (item, node.lineno)
    return entries


def registry_line(script) -> int:
    assignments = registry_assignments(script)
    return assignments[-1].lineno if assignments else 0


def builder_function(script, value) -> ast.FunctionDef | None:
    """The module-level function a registry value names (`alexnet`, or `lambda a: alexnet(a)`)."""
    functions = module_functions(script)
    if isinstance(value, ast.Lambda) and isinstance(value.body, ast.Call):
        value = value.body.func
    if isinstance(value, ast.Name):
        return functions.get(value.id)
    return None


def accepts_args(function) -> bool:
    """True if `function(args)` is a valid call: one positional parameter, the rest optional."""
    arguments = function.args
    positional = arguments.posonlyargs + arguments.args
    required = len(positional) - len(arguments.defaults)
    required_keyword_only = [
        arg for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults) if default is None
    ]
    if required_keyword_only or required > 1:
        return False
    return bool(positional) or arguments.vararg is not None


def returns_a_value(function) -> bool:
    return any(
        isinstance(node, ast.Return) and node.value is not None for node in _own_nodes(function)
    )


def _own_nodes(function):
    """The nodes of a function's body, without those of functions defined inside it."""
    pending = list(function.body)
    while pending:
        node = pending.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        pending.extend(ast.iter_child_nodes(node))


def _repeats(script, node, function) -> int:
    """How many times `node` runs per call of `function`: loops over literal sequences count."""
    times = 1
    for parent in script.ancestors(node):
        if parent is function:
            break
        iterables = []
        if isinstance(parent, (ast.For, ast.AsyncFor)) and not _contains(parent.iter, node):
            iterables = [parent.iter]
        elif isinstance(parent, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            iterables = [generator.iter for generator in parent.generators]
        for iterable in iterables:
            times *= _length(script, iterable)
    return times


def _contains(tree, node) -> bool:
    return any(child is node for child in ast.walk(tree))


def _length(script, iterable) -> int:
    """The number of items of a literal tuple/list or range(constants); 1 when unknown."""
    value = script.resolve(iterable)
    if isinstance(value, (ast.List, ast.Tuple)):
        return len(value.elts)
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "range"
    ):
        bounds = [script.constant(arg) for arg in value.args]
        if bounds and all(isinstance(b, int) and not isinstance(b, bool) for b in bounds):
            try:
                return max(len(range(*bounds)), 1)
            except (TypeError, ValueError):
                return 1
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id in ("zip", "enumerate")
        and value.args
    ):
        return _length(script, value.args[0])
    return 1


def layer_census(script, function, depth: int = 0) -> Counter:
    """How many layers of each kind (see LAYER_KINDS) one call of `function` creates.

    Follows calls to helper functions defined inside it or at the top level, and counts a
    layer made in a loop over a literal list once per item.
    """
    census: Counter = Counter()
    if depth > MAX_HELPER_DEPTH:
        return census
    local = {
        node.name: node
        for node in ast.walk(function)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node is not function
    }
    functions = {**module_functions(script), **local}
    for node in _own_nodes(function):
        if not isinstance(node, ast.Call):
            continue
        name = last_name(script.qualified_name(node.func))
        times = _repeats(script, node, function)
        if name in LAYER_KINDS:
            census[LAYER_KINDS[name]] += times
        elif isinstance(node.func, ast.Name) and node.func.id in functions:
            helper = functions[node.func.id]
            if helper is not function:
                for kind, count in layer_census(script, helper, depth + 1).items():
                    census[kind] += count * times
    return census


def dense_calls(script, function, depth: int = 0) -> list:
    """The Dense(...) calls a builder makes (itself and its helpers), in source order."""
    if depth > MAX_HELPER_DEPTH:
        return []
    local = {
        node.name: node
        for node in ast.walk(function)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node is not function
    }
    functions = {**module_functions(script), **local}
    found = []
    for node in sorted(
        (n for n in _own_nodes(function) if isinstance(n, ast.Call)),
        key=lambda n: (n.lineno, n.col_offset),
    ):
        if last_name(script.qualified_name(node.func)) == "Dense":
            found.append(node)
        elif isinstance(node.func, ast.Name) and node.func.id in functions:
            helper = functions[node.func.id]
            if helper is not function:
                found.extend(dense_calls(script, helper, depth + 1))
    return found


def uses_softmax(script, function, after=None) -> bool:
    """True if the builder (or a helper) applies softmax anywhere (after `after`, if given)."""
    for node in ast.walk(function):
        if after is not None and (getattr(node, "lineno", 0), getattr(node, "col_offset", 0)) < (
            after.lineno,
            after.col_offset,
        ):
            continue
        if isinstance(node, ast.Constant) and node.value == "softmax":
            return True
        if isinstance(node, (ast.Attribute, ast.Name)):
            name = script.qualified_name(node)
            if name in SOFTMAX_NAMES or last_name(name) == "Softmax":
                return True
    return False


def units_of(script, dense: ast.Call, function):
    """The number of units of a Dense(...) call: an int, or None if the grader can't tell."""
    units = argument(dense, "units", 0)
    if units is None:
        return None
    value = script.constant(units)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(units, ast.Name):
        default = _parameter_default(function, units.id)
        if default is not None:
            value = script.constant(default)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    if (
        isinstance(units, ast.Call)
        and isinstance(units.func, ast.Name)
        and units.func.id == "len"
        and units.args
    ):
        sequence = script.resolve(units.args[0])
        if isinstance(sequence, (ast.List, ast.Tuple)):
            return len(sequence.elts)
    return None


def _parameter_default(function, name: str):
    arguments = function.args
    positional = arguments.posonlyargs + arguments.args
    for arg, default in zip(
        positional[len(positional) - len(arguments.defaults) :], arguments.defaults
    ):
        if arg.arg == name:
            return default
    for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults):
        if arg.arg == name:
            return default
    return None


def model_calls(script, function) -> list:
    """The tf.keras.Model(...) and Sequential(...) calls in a builder (not in its helpers)."""
    return [
        node
        for node in ast.walk(function)
        if isinstance(node, ast.Call)
        and last_name(script.qualified_name(node.func)) in ("Model", "Sequential")
    ]


def model_name_argument(script, call):
    """The `name` a Model (positional 3rd) or Sequential (positional 2nd) call gets, or None."""
    index = 2 if last_name(script.qualified_name(call.func)) == "Model" else 1
    return argument(call, "name", index)


def model_choices(script) -> tuple:
    """(the --model add_argument call, its choices expression) or (None, None)."""
    for call in script.calls_by_method.get("add_argument", []):
        if any(isinstance(arg, ast.Constant) and arg.value == "--model" for arg in call.args):
            return call, argument(call, "choices")
    return None, None


def builds_through_registry(script) -> bool:
    """True if the script calls `MODELS[...](...)` or `MODELS.get(...)(...)`."""
    for call in script.calls:
        func = call.func
        if isinstance(func, ast.Subscript):
            holder = func.value
        elif isinstance(func, ast.Call) and method_name(func) == "get":
            holder = func.func.value
        else:
            continue
        if isinstance(holder, ast.Name) and holder.id == REGISTRY:
            return True
    return False


def mentions_registry(expr) -> bool:
    return any(isinstance(node, ast.Name) and node.id == REGISTRY for node in ast.walk(expr))

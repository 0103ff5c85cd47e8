"""Bonus "Add a model" (notebook add_a_model): an AlexNet-style model for 28x28 images in the registry.

Static, like the step rules: MODELS has an "alexnet" entry naming a function of the file that
can be called as builder(args); that function builds at least five Conv2D layers, max
pooling, a Flatten (or global pooling), Dense layers and a 10-way softmax output, and names
the model after its entry; --model takes its choices from MODELS, and the script builds its
model through MODELS. Whether it really trains is what `grader.train_bonus` finds out.
"""

from __future__ import annotations

import ast

from grader.bonus import registry
from grader.reading.verdicts import Failure

NAME = "alexnet"
TITLE = "Bonus: an AlexNet in the model registry"
HINT = (
    "Define `def alexnet(args, input_shape=(28, 28, 1), classes=10):` above MODELS, returning "
    'a Keras model named "alexnet": five Conv2D layers (e.g. 32, 96, 192, 128, 128 channels, '
    'padding="same"), MaxPooling2D after the 1st, 2nd and 5th, Flatten, Dropout and two hidden '
    "Dense layers, and "
    'Dense(10, activation="softmax"); then add "alexnet": alexnet to MODELS.'
)
CLASSES = 10
MIN_CONV = 5
MIN_DENSE = 2  # at least one hidden layer before the output


def check(script):
    entries, failure = registry.registry_entries(script)
    if failure:
        return failure
    if NAME not in entries:
        return _missing_entry(entries, registry.registry_line(script))
    value, line = entries[NAME]
    function = registry.builder_function(script, value)
    if function is None:
        return _not_a_function(script, value, line)
    return (
        _order_failure(function, line)
        or _signature_failure(function)
        or _layers_failure(script, function)
        or _output_failure(script, function)
        or _name_failure(script, function)
        or _choices_failure(script)
        or _use_failure(script)
    )


def _missing_entry(entries, line):
    names = ", ".join(f'"{name}"' for name in entries) or "nothing"
    near = [name for name in entries if name.replace("_", "").replace("-", "").lower() == NAME]
    if near:
        return Failure(
            f'line {line}: MODELS has "{near[0]}", but the bonus asks for the name "{NAME}" '
            f"(lowercase, as you type it: --model {NAME})",
            line,
        )
    return Failure(
        f'line {line}: MODELS has no "{NAME}" entry (it has {names}): add "{NAME}": {NAME}, '
        "naming the function that builds your AlexNet",
        line,
    )


def _not_a_function(script, value, line):
    shown = script.source(value)
    if isinstance(value, ast.Name):
        return Failure(
            f'line {line}: MODELS["{NAME}"] is `{shown}`, but this file defines no function '
            f"{shown}: write `def {shown}(args):` (above MODELS) that returns the model",
            line,
        )
    if isinstance(value, ast.Call):
        return Failure(
            f'line {line}: MODELS["{NAME}"] is `{shown}`, a call: the registry holds the '
            f"function itself, without (), so that the model is built only when it is picked",
            line,
        )
    return Failure(
        f'line {line}: MODELS["{NAME}"] is `{shown}`; the grader expects the name of a function '
        "defined in this file",
        line,
    )


def _order_failure(function, line):
    if function.lineno > line:
        return Failure(
            f"line {function.lineno}: {function.name}() is defined after MODELS uses it (line "
            f"{line}), so Python stops with a NameError: move it above MODELS",
            function.lineno,
        )
    return None


def _signature_failure(function):
    if registry.accepts_args(function):
        return None
    return Failure(
        f"line {function.lineno}: {function.name}() must take the parsed options as its only "
        "required argument, like wide_resnet(args): the script calls MODELS[args.model](args)",
        function.lineno,
    )


def _layers_failure(script, function):
    where = f"line {function.lineno}: {function.name}()"
    if not registry.returns_a_value(function):
        return Failure(f"{where} returns nothing: return the Keras model", function.lineno)
    census = registry.layer_census(script, function)
    if census["conv"] < MIN_CONV:
        return Failure(
            f"{where} builds {census['conv']} Conv2D layer(s); AlexNet has five convolutions "
            "(the paper's 64, 192, 384, 256, 256 channels, or half of them)",
            function.lineno,
        )
    if not census["max_pool"]:
        extra = " (average pooling is not what the paper does)" if census["average_pool"] else ""
        return Failure(
            f"{where} has no max pooling{extra}: AlexNet max-pools after convolutions 1, 2 and "
            "5 (tf.keras.layers.MaxPooling2D)",
            function.lineno,
        )
    if not census["flatten"]:
        return Failure(
            f"{where} goes from the convolutions to the Dense layers without Flatten(): Dense "
            "would then classify every pixel on its own",
            function.lineno,
        )
    if census["dense"] < MIN_DENSE:
        return Failure(
            f"{where} has {census['dense']} Dense layer(s); AlexNet ends with hidden Dense "
            "layers (the paper: two of 4096 units) before the output layer",
            function.lineno,
        )
    return None


def _output_failure(script, function):
    dense = registry.dense_calls(script, function)
    output = dense[-1]
    units = registry.units_of(script, output, function)
    if units is not None and units != CLASSES:
        more = " (ImageNet's classes)" if units == 1000 else ""
        return Failure(
            f"line {output.lineno}: the last Dense layer has {units} units{more}; "
            f"Fashion-MNIST has {CLASSES} classes",
            output.lineno,
        )
    if not registry.uses_softmax(script, function, after=output):
        return Failure(
            f"line {output.lineno}: the output layer has no softmax, but the script's loss "
            '(sparse_categorical_crossentropy) expects probabilities: activation="softmax"',
            output.lineno,
        )
    return None


def _name_failure(script, function):
    calls = registry.model_calls(script, function)
    names = [registry.model_name_argument(script, call) for call in calls]
    for name in names:
        if name is not None and NAME in script.source(name).lower():
            return None
    line = calls[-1].lineno if calls else function.lineno
    return Failure(
        f'line {line}: name the model after its registry entry, name="{NAME}", so that the run\'s '
        "RESULT line and the checkpoints say which model trained",
        line,
    )


def _choices_failure(script):
    call, choices = registry.model_choices(script)
    if call is None:
        return Failure(
            'no --model option: keep the script\'s parser.add_argument("--model", '
            "choices=sorted(MODELS), ...), so that the command line can pick the model"
        )
    if choices is None or registry.mentions_registry(choices):
        return None
    return Failure(
        f"line {call.lineno}: --model's choices are `{script.source(choices)}`, a fixed list: "
        f'derive them from the registry, choices=sorted(MODELS), so "{NAME}" is accepted',
        call.lineno,
    )


def _use_failure(script):
    if registry.builds_through_registry(script):
        return None
    return Failure(
        "the script never builds its model through the registry, so --model changes nothing: "
        "keep model = MODELS[args.model](args)"
    )

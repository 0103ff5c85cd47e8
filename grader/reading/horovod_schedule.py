"""Horovod 0.28.1's learning-rate callbacks, as far as the step-11 reading needs them without
working out any rate (a run shows the rate of every batch: grader/running/expected.py).

- `WARMUP` and `SCHEDULE`, the two callbacks' names;
- a LearningRateScheduleCallback given a number m sets `initial_lr * m ** (epoch - start_epoch)`,
  exponential decay, not a constant factor (horovod/_keras/callbacks.py;
  tests/smoke/test_schedule_claims.py, tests/system/test_learning_rate_schedule_runs.py):
  `number_rates`;
- which other callbacks may set the learning rate in their place: `may_warm_up` (at each batch,
  as the warmup does) and `may_set_rate` (at all);
- `other_arguments(call, name)`: what a call of one of the two passes beyond the lesson's
  arguments (momentum_correction, steps_per_epoch, staircase...).
"""

from __future__ import annotations

import ast

from grader.reading.syntax import HVD

WARMUP = f"{HVD}.callbacks.LearningRateWarmupCallback"
SCHEDULE = f"{HVD}.callbacks.LearningRateScheduleCallback"
# Their parameters in Horovod 0.28.1, in order, and those the lesson passes.
PARAMETERS = {
    WARMUP: ("initial_lr", "warmup_epochs", "momentum_correction", "steps_per_epoch", "verbose"),
    SCHEDULE: (
        "initial_lr",
        "multiplier",
        "start_epoch",
        "end_epoch",
        "staircase",
        "momentum_correction",
        "steps_per_epoch",
    ),
}
LESSON = {
    WARMUP: {"initial_lr", "warmup_epochs", "verbose"},
    SCHEDULE: {"initial_lr", "multiplier", "start_epoch", "end_epoch"},
}
KERAS_CALLBACKS = "tensorflow.keras.callbacks."
# Keras callbacks that set the learning rate, at an epoch's start or end only.
KERAS_EPOCH_RATES = {"LearningRateScheduler", "ReduceLROnPlateau"}
# Keras callbacks that may do anything at each batch.
KERAS_ANYTHING = {"LambdaCallback"}
# What a callback of the script's own touches when it sets the learning rate.
RATE_WORDS = {"lr", "learning_rate", "set_value", "assign"}


def number_rates(number: float, start, count: int = 3) -> list:
    """[(epoch or None, multiplier)] for the first `count` epochs of a schedule callback given
    the number `number` and starting at the constant epoch `start` (None: not a constant)."""
    return [(None if start is None else start + k, number**k) for k in range(count)]


def other_arguments(call: ast.Call, name: str) -> list:
    """The arguments of a call of WARMUP or SCHEDULE (`name`) beyond the lesson's, as written
    (`steps_per_epoch`, `*options`, `**options`)."""
    parameters = PARAMETERS[name]
    given = []
    for index, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            given.append("*...")
        else:
            given.append(parameters[index] if index < len(parameters) else f"argument {index + 1}")
    given += [keyword.arg or "**..." for keyword in call.keywords]
    return [arg for arg in given if arg not in LESSON[name]]


def may_warm_up(script, entry) -> bool:
    """True if the callback `entry` (grader.reading.training.CallbackEntry) may set the learning rate
    at each batch, as the warmup does, by a route the reading doesn't follow: a callback of the
    script's own that touches the rate, Keras's LambdaCallback, one it can't name."""
    if not entry.name:
        return True
    if entry.name.startswith(KERAS_CALLBACKS):
        return entry.kind in KERAS_ANYTHING
    return _own_class_sets_rate(script, entry)


def may_set_rate(script, entry) -> bool:
    """True if the callback may set the learning rate at all (Horovod's two excepted)."""
    if entry.name.startswith(KERAS_CALLBACKS) and entry.kind in KERAS_EPOCH_RATES:
        return True
    return may_warm_up(script, entry)


def _own_class_sets_rate(script, entry) -> bool:
    """A class of the script's own whose code touches the learning rate (or derives from a
    class other than Keras's Callback); False for one that doesn't (a Throughput logger) and
    for what is no class of the script's (Horovod's other callbacks)."""
    if entry.call is None or not isinstance(entry.call.func, ast.Name):
        return False
    reaching = script.bindings_before(entry.call.func)
    classes = [b.statement for b in reaching if isinstance(b.statement, ast.ClassDef)]
    if not classes:
        return bool(reaching)  # a name bound otherwise: can't tell what it makes
    for cls in classes:
        if any(script.qualified_name(base) != KERAS_CALLBACKS + "Callback" for base in cls.bases):
            return True
        for node in ast.walk(cls):
            word = getattr(node, "attr", None) or getattr(node, "id", None)
            if word in RATE_WORDS:
                return True
    return False

"""What the rules share about the training call: model.fit and its callbacks, and the
optimizer model.compile gets (seen through hvd.DistributedOptimizer, grader.reading.horovod_optimizer).
Each returns what it found, or the verdict that the grader can't find or follow it."""

from __future__ import annotations

import ast

from grader.reading import training
from grader.reading.horovod_optimizer import optimizer_inside
from grader.reading.syntax import argument
from grader.reading.verdicts import Failure, Note

NO_FIT = "no model.fit(...) call found outside a function: keep the script's model.fit(...)"
NO_COMPILE = "no model.compile(...) call found outside a function"


def callbacks(script, looked_for: str):
    """Returns (the callbacks that reach model.fit, None), or (None, a Failure when there is
    no model.fit, a Note when the grader can't follow them; it looked for `looked_for`)."""
    fit = training.of(script).fit_call()
    if fit is None:
        return None, Failure(NO_FIT)
    entries = training.of(script).callbacks()
    if entries is None:
        return None, Note(
            f"it can't follow the callbacks passed to model.fit on line {fit.lineno}, where it "
            f"looked for {looked_for} (it follows one list, callbacks = [...], with .append, "
            ".insert, .extend, += and loops over a written-out list)",
            fit.lineno,
        )
    return entries, None


def callbacks_named(script, name: str, looked_for: str):
    """Returns (the callbacks that reach model.fit, those made by the class `name`, None), or
    (None, None, the verdict: no model.fit, callbacks it can't follow, none of `name`)."""
    entries, verdict = callbacks(script, looked_for)
    if verdict:
        return None, None, verdict
    ours = [entry for entry in entries if entry.name == name]
    if not ours:
        return None, None, missing_callback(script, entries, name)
    return entries, ours, None


def missing_callback(script, entries, name: str):
    """The Failure for a Horovod callback (the class `name`) that does not reach model.fit."""
    what = name.rsplit(".", 1)[-1]
    unknown = [entry for entry in entries if not entry.name]
    if unknown:
        entry = unknown[0]
        return Note(
            f"line {entry.line}: it can't tell what `{script.source(entry.expr)}` in the callbacks "
            f"of model.fit is; it looked for hvd.callbacks.{what}",
            entry.line,
        )
    made = [call for call in script.calls_to(name) if all(e.call is not call for e in entries)]
    if made:
        return Failure(
            f"line {made[0].lineno}: the {what} is created but never reaches "
            "model.fit(callbacks=...): put it in the callbacks list",
            made[0].lineno,
        )
    return Failure(f"no hvd.callbacks.{name.rsplit('.', 1)[1]} in the callbacks of model.fit")


def optimizer_call(script):
    """Returns (the optimizer constructor passed to model.compile, None), or (None, a Failure,
    or a Note when the grader can't follow it).

    Looks through hvd.DistributedOptimizer(...) to the optimizer it wraps.
    """
    compiles = training.of(script).compile_calls()
    if not compiles:
        return None, missing_compile(script)
    value = optimizer_inside(script, argument(compiles[0], "optimizer", 0))
    if not isinstance(value, ast.Call):
        line = compiles[0].lineno
        return None, Note(
            f"line {line}: it can't follow the optimizer given to model.compile(...); it looked "
            "for one created with its class, opt = tf.keras.optimizers.legacy.SGD(...)",
            line,
        )
    return value, None


def missing_compile(script):
    """No model.compile(...) outside a function: a Failure, or a Note when one is inside a
    function (main(), a builder) that the grader does not follow into."""
    inside = [
        call for call in script.calls_by_method.get("compile", []) if script.in_function(call)
    ]
    if inside:
        line = inside[0].lineno
        return Note(
            f"line {line}: model.compile(...) is inside a function, and the grader does not "
            "follow the training code into functions; it looked for the optimizer given to "
            "model.compile",
            line,
        )
    return Failure(NO_COMPILE)

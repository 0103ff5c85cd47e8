"""Step 11: the learning rate warms up, then Horovod's schedule takes over (no overlap)."""

import ast

from grader.engine import Failure
from grader.rules.common import (
    SCHEDULE,
    WARMUP,
    callbacks,
    every_rank_failure,
    missing_callback,
    scaling_failure,
)
from grader.syntax import argument

STEP = 11
HINT = (
    "Replace the Keras LearningRateScheduler with hvd.callbacks.LearningRateWarmupCallback "
    "(initial_lr: the scaled rate; warmup_epochs: from a --warmup-epochs option that has a "
    "default in every preset) and hvd.callbacks.LearningRateScheduleCallback segments with "
    "the scaled rate, the first starting where the warmup ends."
)


def check(script):
    entries, failure = callbacks(script)
    if failure:
        return failure
    for entry in entries:
        if entry.kind == "LearningRateScheduler" and not entry.name.startswith("horovod"):
            return Failure(
                f"line {entry.line}: the Keras LearningRateScheduler is still there: it sets "
                "the learning rate at the start of every epoch and undoes the warmup; replace "
                "it with LearningRateScheduleCallback",
                entry.line,
            )
    warmups = [entry for entry in entries if entry.name == WARMUP]
    if not warmups:
        return missing_callback(script, entries, WARMUP, "LearningRateWarmupCallback")
    warmup = warmups[0]
    failure = _callback_failure(script, warmup, "LearningRateWarmupCallback")
    if failure:
        return failure
    warmup_epochs = argument(warmup.call, "warmup_epochs", 1)
    if warmup_epochs is None:
        return Failure(
            f"line {warmup.line}: pass warmup_epochs (the --warmup-epochs option); the "
            "default, 5 epochs, is the whole of a CPU run",
            warmup.line,
        )
    schedules = [entry for entry in entries if entry.name == SCHEDULE]
    if not schedules:
        return missing_callback(script, entries, SCHEDULE, "LearningRateScheduleCallback")
    for schedule in schedules:
        failure = _callback_failure(script, schedule, "LearningRateScheduleCallback")
        if failure:
            return failure
    return _overlap_failure(script, warmup_epochs, schedules) or _option_failure(script)


def _callback_failure(script, entry, what):
    failure = every_rank_failure(script, entry, what)
    if failure:
        return failure
    initial_lr = argument(entry.call, "initial_lr", 0)
    if initial_lr is None:
        return Failure(f"line {entry.line}: {what} needs initial_lr, the scaled rate", entry.line)
    failure = scaling_failure(script, initial_lr, f"{what}'s initial_lr", entry.line)
    if failure:
        failure.message += " (initial_lr is the scaled learning rate)"
    return failure


def _overlap_failure(script, warmup_epochs, schedules):
    """The schedules must start where the warmup ends and must not overlap each other."""
    warmup_end = script.constant(warmup_epochs)
    spans = []  # (start, end or None, entry); start -1 stands for "where the warmup ends"
    for entry in schedules:
        start = argument(entry.call, "start_epoch", 2)
        end = argument(entry.call, "end_epoch", 3)
        end_value = None if end is None else script.constant(end)
        if start is not None and script.same_value(start, warmup_epochs):
            spans.append((-1 if warmup_end is None else warmup_end, end_value, entry))
            continue
        start_value = 0 if start is None else script.constant(start)
        if not isinstance(start_value, (int, float)):
            return Failure(
                f"line {entry.line}: start the first LearningRateScheduleCallback where the "
                f"warmup ends, start_epoch={script.source(warmup_epochs)}, and the others at "
                "fixed epochs",
                entry.line,
            )
        if start_value == 0 or (warmup_end is not None and start_value < warmup_end):
            return Failure(
                f"line {entry.line}: this LearningRateScheduleCallback starts at epoch "
                f"{start_value}, during the warmup, so the two fight over the learning rate: "
                f"start_epoch={script.source(warmup_epochs)}",
                entry.line,
            )
        spans.append((start_value, end_value, entry))
    spans.sort(key=lambda span: span[0])
    if spans[0][0] != -1 and warmup_end is None:
        first = spans[0][2]
        return Failure(
            f"line {first.line}: start the first LearningRateScheduleCallback where the warmup "
            f"ends: start_epoch={script.source(warmup_epochs)}",
            first.line,
        )
    for (_, end, entry), (next_start, _, next_entry) in zip(spans, spans[1:]):
        if end is None or (isinstance(end, (int, float)) and end > next_start):
            return Failure(
                f"line {next_entry.line}: this schedule starts at epoch {next_start}, before "
                f"the one on line {entry.line} ends: give each an end_epoch where the next "
                "starts",
                next_entry.line,
            )
    return None


def _option_failure(script):
    """args.warmup_epochs needs its --warmup-epochs option, and every preset a default."""
    if "warmup_epochs" not in script.attributes:
        return None
    options = [
        call
        for call in script.calls
        if getattr(call.func, "attr", "") == "add_argument" and _defines_warmup_epochs(script, call)
    ]
    if not options:
        return Failure(
            "args.warmup_epochs is used, but parse_args() has no --warmup-epochs option: add it"
        )
    default = argument(options[0], "default")
    if isinstance(default, ast.Subscript):
        key = script.constant(default.slice)
        for preset, keys in _presets(script):
            if isinstance(key, str) and key not in keys:
                return Failure(
                    f"the {preset!r} preset has no {key!r}, so --warmup-epochs' default raises "
                    f"KeyError: add {key}=... to every preset",
                    options[0].lineno,
                )
    return None


def _defines_warmup_epochs(script, add_argument):
    """True if this option is stored as args.warmup_epochs (--warmup-epochs, or dest=...)."""
    if script.constant(argument(add_argument, "dest")) == "warmup_epochs":
        return True
    for flag in add_argument.args:
        value = script.constant(flag)
        if isinstance(value, str) and value.startswith("--"):
            return value[2:].replace("-", "_") == "warmup_epochs"
    return False


def _presets(script):
    """(name, keys) of each preset in a module-level table of dicts that have an 'epochs'."""
    for bindings in script.bindings.values():
        for binding in bindings:
            table = binding.value
            if not isinstance(table, ast.Dict):
                continue
            for name, value in zip(table.keys, table.values):
                keys = _dict_keys(script, value)
                if keys is not None and "epochs" in keys:
                    yield script.constant(name), keys


def _dict_keys(script, value):
    if isinstance(value, ast.Dict):
        return {script.constant(key) for key in value.keys if key is not None}
    if isinstance(value, ast.Call) and script.qualified_name(value.func) == "dict":
        return {keyword.arg for keyword in value.keywords if keyword.arg}
    return None

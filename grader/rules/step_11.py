"""Step 11: the learning rate warms up, then Horovod's schedule takes over: x0.1 from each epoch
of the preset's lr_drops on (GPU: 15, 25, 35; CPU: 3).

Beyond the callbacks' arguments, the rule works out the learning rate each epoch gets, as
Horovod 0.28.1 sets it (grader/schedule.py): a LearningRateScheduleCallback sets
`initial_lr * multiplier(epoch)` for a function, but `initial_lr * m ** (epoch - start_epoch)`
for a number m, an exponential decay that Horovod's older examples fall into.

A Keras LearningRateScheduler kept beside the warmup sets the same rates (the warmup sets the
rate at every batch of its epochs, after Keras's at the epoch's start; tests/test_claims.py),
so its rates are checked too and it passes, with a note: Horovod's callbacks also correct SGD's
momentum where they change the rate (momentum x new rate / old rate for that batch), and Keras's
leaves the warmup's correction a wrong "old rate". That fails only where it hurts: a drop inside
the warmup, where the warmup multiplies the momentum by its rate over the dropped one (9.4).
"""

import ast
import math
from dataclasses import dataclass

from grader.engine import Failure, Note, first_verdict
from grader.rules.common import (
    SCHEDULE,
    Advice,
    WARMUP,
    callbacks,
    every_rank_failure,
    missing_callback,
    scaling_failure,
)
from grader.schedule import CantTell, Evaluator, Function
from grader.syntax import argument

STEP = 11
HINT = (
    "Replace the Keras LearningRateScheduler with hvd.callbacks.LearningRateWarmupCallback "
    "(initial_lr: the scaled rate; warmup_epochs: from a --warmup-epochs option that has a "
    "default in every preset) and one hvd.callbacks.LearningRateScheduleCallback with "
    "initial_lr=scaled_lr, start_epoch where the warmup ends, and multiplier=step_decay: a "
    "function, as a number m would decay the rate m ** (epoch - start_epoch) every epoch."
)
# The workbook's schedule (the starting script's step_decay): x0.1 from each epoch of the
# preset's lr_drops on. Scripts from before lr_drops had these epochs in step_decay itself.
DROPS = (15, 25, 35)
DROP_FACTOR = 0.1
EPOCHS = 40  # the longest run, the GPU preset's
SCHEDULE_TEXT = (
    "the workbook's schedule is x1 from the end of the warmup, then x0.1 from each epoch of the "
    "preset's lr_drops on (step_decay)"
)


def intended_multiplier(epoch, drops=DROPS) -> float:
    """The workbook's multiplier of the scaled rate at `epoch` after the warmup."""
    return DROP_FACTOR ** sum(epoch >= drop for drop in drops)


@dataclass(frozen=True)
class Run:
    """What the schedule depends on in one preset's run (preset None: the script has none)."""

    preset: str | None
    warmup_end: float
    drops: tuple

    def schedule_text(self) -> str:
        whose = f"the {self.preset} preset's" if self.preset else "the workbook's"
        if not self.drops:
            return f"{whose} schedule is x1 from the end of the warmup on (no lr_drops)"
        epochs = " and ".join(map(str, self.drops)).replace(" and ", ", ", len(self.drops) - 2)
        drops = f"at each of epochs {epochs}" if len(self.drops) > 1 else f"from epoch {epochs} on"
        return f"{whose} schedule is x1 from the end of the warmup, then x0.1 {drops} (step_decay)"


def check(script):
    entries, verdict = callbacks(script, "the warmup and schedule callbacks")
    if verdict:
        return verdict
    kerases = [
        entry
        for entry in entries
        if entry.kind == "LearningRateScheduler" and not entry.name.startswith("horovod")
    ]
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
    if not schedules and not kerases:
        return missing_callback(script, entries, SCHEDULE, "LearningRateScheduleCallback")
    if not schedules:  # the Keras schedule sets the rate after the warmup: on every rank?
        for keras in kerases:
            failure = every_rank_failure(script, keras, "LearningRateScheduler")
            if failure:
                return failure
    for schedule in schedules:
        failure = _callback_failure(script, schedule, "LearningRateScheduleCallback")
        if failure:
            return failure
        if argument(schedule.call, "multiplier", 1) is None:
            return Failure(
                f"line {schedule.line}: LearningRateScheduleCallback needs a multiplier: "
                "multiplier=step_decay",
                schedule.line,
            )
    overlap = _overlap_failure(script, warmup_epochs, schedules) if schedules else None
    if isinstance(overlap, Failure):
        return overlap
    return first_verdict(
        lambda: _option_failure(script),
        lambda: overlap or _rates_failure(script, warmup, warmup_epochs, schedules, kerases),
    )


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
    """The schedules must start where the warmup ends and must not overlap each other: two
    callbacks that set the rate at one epoch also undo each other's momentum correction."""
    warmup_end = script.constant(warmup_epochs)
    spans = []  # (start, end or None, entry); start -1 stands for "where the warmup ends"
    for entry in schedules:
        start = argument(entry.call, "start_epoch", 2)
        end = argument(entry.call, "end_epoch", 3)
        end_value = None if end is None else script.constant(end)
        unknown = [
            bound
            for bound, value in ((start, script.constant(start)), (end, end_value))
            if bound is not None
            and not script.same_value(bound, warmup_epochs)
            and not isinstance(value, (int, float))
            and not (isinstance(script.resolve(bound), ast.Constant))  # end_epoch=None
        ]
        if unknown:
            return Note(
                f"line {entry.line}: it can't tell which epochs this LearningRateScheduleCallback "
                f"covers (`{script.source(unknown[0])}`); it looked for the first starting where "
                f"the warmup ends, start_epoch={script.source(warmup_epochs)}, and the others at "
                "fixed epochs, none overlapping",
                entry.line,
            )
        if start is not None and script.same_value(start, warmup_epochs):
            spans.append((-1 if warmup_end is None else warmup_end, end_value, entry))
            continue
        start_value = 0 if start is None else script.constant(start)
        if start_value == 0 or (warmup_end is not None and start_value < warmup_end):
            return Failure(
                f"line {entry.line}: this LearningRateScheduleCallback starts at epoch "
                f"{start_value}, during the warmup, so the two fight over the learning rate (it "
                "sets its own at the first batch of each warmup epoch) and spoil SGD's momentum "
                "(each restores the other's corrected value after the batch): "
                f"start_epoch={script.source(warmup_epochs)}",
                entry.line,
            )
        spans.append((start_value, end_value, entry))
    spans.sort(key=lambda span: span[0])
    if spans[0][0] != -1 and warmup_end is None:
        first = spans[0][2]
        return Note(
            f"line {first.line}: it can't tell whether this first LearningRateScheduleCallback "
            f"starts where the warmup ends; it looked for start_epoch="
            f"{script.source(warmup_epochs)}",
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


# ---- the learning rate of every epoch ----------------------------------------------------


class _Stretch:
    """One LearningRateScheduleCallback: the epochs it acts on and what it sets there."""

    def __init__(self, script, evaluator, entry, warmup_epochs, warmup_lr):
        self.entry = entry
        self.line = entry.line
        call = entry.call
        self.multiplier = argument(call, "multiplier", 1)
        self._start = _epoch_bound(script, argument(call, "start_epoch", 2), warmup_epochs, 0)
        self._end = _epoch_bound(script, argument(call, "end_epoch", 3), warmup_epochs, math.inf)
        self.factor = _factor(script, argument(call, "initial_lr", 0), warmup_lr)
        value = evaluator.expr(self.multiplier, {})
        self.function = value if isinstance(value, Function) else None
        self.number = None if self.function else value
        if self.function is None and (
            isinstance(value, bool) or not isinstance(value, (int, float))
        ):
            raise CantTell(self.multiplier)
        self.evaluator = evaluator
        self._called = {}

    def start(self, warmup_end):
        return warmup_end if self._start is None else self._start

    def end(self, warmup_end):
        return warmup_end if self._end is None else self._end

    def covers(self, epoch, warmup_end) -> bool:
        return self.start(warmup_end) <= epoch < self.end(warmup_end)

    def rate(self, epoch, warmup_end) -> float:
        """The multiple of the warmup's initial_lr it sets at `epoch` (Horovod 0.28.1)."""
        if self.function is not None:
            if epoch not in self._called:  # a function of the epoch alone
                self._called[epoch] = self.evaluator.multiplier(self.multiplier, epoch)
            return self.factor * self._called[epoch]
        return self.factor * self.number ** (epoch - self.start(warmup_end))


def _epoch_bound(script, node, warmup_epochs, default):
    """An epoch bound as a number, or None for "where the warmup ends"."""
    if node is None:
        return default
    if script.same_value(node, warmup_epochs):
        return None
    resolved = script.resolve(node)
    if isinstance(resolved, ast.Constant) and resolved.value is None:
        return default  # end_epoch=None: no end
    value = script.constant(node)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CantTell(node)
    return value


def _factor(script, initial_lr, warmup_lr) -> float:
    """initial_lr as a multiple of the warmup's (1 when they are the same expression)."""
    if script.same_value(initial_lr, warmup_lr):
        return 1.0
    value = script.resolve(initial_lr)
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult):
        for same, other in ((value.left, value.right), (value.right, value.left)):
            number = script.constant(other)
            if script.same_value(same, warmup_lr) and isinstance(number, (int, float)):
                return float(number)
    raise CantTell(initial_lr)


class _KerasStretch:
    """A Keras LearningRateScheduler: it sets `schedule(epoch)` at the start of every epoch,
    before any batch, so the warmup (every batch of its epochs) and Horovod's schedules (the
    first batch of theirs) set the rate after it."""

    number = None
    factor = 1.0

    def __init__(self, script, options, entry, warmup_lr):
        self.entry = entry
        self.line = entry.line
        self.multiplier = argument(entry.call, "schedule", 0) if entry.call else None
        if self.multiplier is None:
            raise CantTell(entry.expr)
        self.evaluator = _RateEvaluator(script, options, warmup_lr)
        self.function = self.evaluator.expr(self.multiplier, {})
        spec = getattr(self.function, "node", None)
        if (
            not isinstance(self.function, Function)
            or len(spec.args.posonlyargs + spec.args.args) != 1
        ):
            raise CantTell(self.multiplier)  # Keras passes (epoch, lr) to a two-argument one
        self._called = {}

    def covers(self, epoch, warmup_end) -> bool:
        return True

    def rate(self, epoch, warmup_end) -> float:
        """The multiple of the scaled rate it sets at `epoch`. A rate that doesn't double when
        the scaled rate does is not a multiple of it: _Unscaled."""
        if epoch not in self._called:
            once, twice = (self._value(epoch, unit) for unit in (1.0, 2.0))
            if not math.isclose(twice, 2 * once, rel_tol=1e-9, abs_tol=1e-15):
                raise _Unscaled(self, epoch, once)
            self._called[epoch] = once
        return self._called[epoch]

    def _value(self, epoch, unit):
        self.evaluator.steps = 0
        self.evaluator.unit_value = unit
        value = self.evaluator.call(self.function, [epoch], self.multiplier)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise CantTell(self.multiplier)
        return float(value)


class _Unscaled(Exception):
    """A Keras schedule whose rate is no multiple of the scaled rate (e.g. step_decay alone)."""

    def __init__(self, stretch, epoch, value):
        super().__init__("unscaled")
        self.stretch, self.epoch, self.value = stretch, epoch, value


class _RateEvaluator(Evaluator):
    """Evaluates a Keras schedule, which returns a rate, in units of the scaled rate: the
    warmup's initial_lr (scaled_lr, or the expression it stands for) counts as 1."""

    def __init__(self, script, options, unit):
        super().__init__(script, options)
        self.unit = unit
        self.unit_value = 1.0  # what the scaled rate counts as (1, or 2 to see that it scales)

    def expr(self, node, env: dict):
        if (
            isinstance(node, (ast.Name, ast.Attribute, ast.BinOp))
            and not (isinstance(node, ast.Name) and node.id in env)
            and self.script.same_value(node, self.unit)
        ):
            return self.unit_value
        return super().expr(node, env)


def _rates_failure(script, warmup, warmup_epochs, schedules, kerases=()):
    """A Failure at the first epoch whose learning rate is not the workbook's schedule; with a
    Keras LearningRateScheduler whose rates are right, its note (or failure: _keras_verdict)."""
    warmup_lr = argument(warmup.call, "initial_lr", 0)
    runs = _runs(script, warmup_epochs)
    if not runs:
        return Note(
            f"it can't work out how many epochs the warmup lasts (`{script.source(warmup_epochs)}`"
            f") or when the rate drops (the presets' lr_drops), so it did not check the rate of "
            f"each epoch; it looked for: {SCHEDULE_TEXT}",
            warmup.line,
        )
    verdicts = []
    try:
        for run in runs:
            # One evaluator per run: args.lr_drops holds that preset's epochs.
            evaluator = Evaluator(script, {"lr_drops": run.drops})
            # Keras's first: Horovod's, at an epoch's first batch, set the rate after it.
            stretches = [
                _KerasStretch(script, {"lr_drops": run.drops}, entry, warmup_lr)
                for entry in kerases
            ] + [
                _Stretch(script, evaluator, entry, warmup_epochs, warmup_lr) for entry in schedules
            ]
            failure = _first_wrong_epoch(script, stretches, run, warmup_lr)
            if failure:
                return failure
            if kerases:
                verdicts.append(_keras_verdict(script, stretches[: len(kerases)], run, schedules))
    except _Unscaled as unscaled:
        line = unscaled.stretch.line
        return Failure(
            f"line {line}: at epoch {unscaled.epoch} the Keras LearningRateScheduler sets "
            f"{unscaled.value:g}, not a multiple of the scaled rate {script.source(warmup_lr)}: "
            f"{SCHEDULE_TEXT}, so its rate is {script.source(warmup_lr)} * step_decay(epoch)",
            line,
        )
    except CantTell as unclear:
        line = getattr(unclear.node, "lineno", None)
        return Note(
            f"it can't work out the rate this schedule sets from `{script.source(unclear.node)}`"
            f" (line {line}); it looked for: {SCHEDULE_TEXT}",
            line,
        )
    failures = [verdict for verdict in verdicts if isinstance(verdict, Failure)]
    return (failures or verdicts or [None])[0]


# Measured (tests/test_claims.py), 2 workers, 4 warmup epochs, x0.1 from epoch 3: SGD's momentum
# of 0.9 was 8.4 for the first batch of epoch 3.
MOMENTUM_JUMP = "0.9 became 8.4 in a 2-worker run with 4 warmup epochs and x0.1 from epoch 3"


def _keras_verdict(script, kerases, run, schedules):
    """What a Keras LearningRateScheduler with the right rates does to SGD's momentum."""
    keras = kerases[0]
    for epoch in range(math.ceil(run.warmup_end)):
        if keras.rate(epoch, run.warmup_end) < 1:
            whose = f"with the {run.preset} preset, " if run.preset else ""
            return Failure(
                f"line {keras.line}: {whose}the warmup lasts {run.warmup_end:g} epochs, past the "
                f"drop at epoch {epoch}: the Keras LearningRateScheduler sets the dropped rate at "
                f"that epoch's start, and the warmup, which sets its own rate at the epoch's first "
                "batch, multiplies SGD's momentum by its rate over the dropped one for that batch "
                f"({MOMENTUM_JUMP}). Replace it with "
                "LearningRateScheduleCallback from the end of the warmup",
                keras.line,
            )
    if schedules:
        return Advice(
            f"line {keras.line}: the Keras LearningRateScheduler is still there, beside "
            "LearningRateScheduleCallback. The rates are right (Horovod's sets the rate again "
            "at each epoch's first batch), but Horovod's momentum correction (SGD's momentum x "
            "new rate / old rate for that batch) then compares with the rate Keras has just set, "
            "not with the last epoch's: remove the Keras one",
            keras.line,
        )
    return Advice(
        f"line {keras.line}: the Keras LearningRateScheduler sets the right rates beside the "
        "warmup (the warmup sets the rate at every batch of its epochs, after Keras's at the "
        "epoch's start). The workbook uses hvd.callbacks.LearningRateScheduleCallback instead: "
        "it also corrects SGD's momentum where it changes the rate (x new rate / old rate for "
        "that batch), which Keras's does not, and it leaves the warmup's own correction alone",
        keras.line,
    )


def _first_wrong_epoch(script, stretches, run, warmup_lr):
    rate, base = 1.0, script.source(warmup_lr)  # the warmup ends at initial_lr
    warmup_end = run.warmup_end
    for epoch in range(EPOCHS):
        if epoch < warmup_end:
            continue
        setting = [stretch for stretch in stretches if stretch.covers(epoch, warmup_end)]
        if setting:  # each sets the rate at the epoch's first batch: the last one in the list wins
            rate = setting[-1].rate(epoch, warmup_end)
        wanted = intended_multiplier(epoch, run.drops)
        if math.isclose(rate, wanted, rel_tol=1e-9):
            continue
        if not setting:
            line = stretches[-1].line
            return Failure(
                f"line {line}: no LearningRateScheduleCallback sets the rate at epoch {epoch}, "
                f"so it stays {base} x {rate:g}; {run.schedule_text()}: add one for epoch "
                f"{epoch} on",
                line,
            )
        return _wrong_rate(script, setting[-1], epoch, run, rate, wanted, base)
    return None


def _wrong_rate(script, stretch, epoch, run, rate, wanted, base):
    warmup_end = run.warmup_end
    schedule_text = run.schedule_text()
    line = stretch.line
    # A number: Horovod's m ** (epoch - start_epoch), unless that happens to be the number itself.
    if stretch.number is not None and not math.isclose(
        rate, stretch.factor * stretch.number, rel_tol=1e-9
    ):
        shown = ", ".join(
            f"x {stretch.rate(later, warmup_end):g} at {later}" for later in range(epoch, epoch + 3)
        )
        return Failure(
            f"line {line}: multiplier={script.source(stretch.multiplier)} is a number, and "
            "Horovod 0.28.1 turns a number m into exponential decay, m ** (epoch - "
            f"start_epoch), not a constant factor: this callback sets {base} {shown}, where {schedule_text}. Pass a "
            f"function of the epoch: multiplier=lambda epoch: {stretch.number:g}, or one "
            "callback with multiplier=step_decay",
            line,
        )
    late = script.late_bound.get(id(script.resolve(stretch.multiplier)))
    if late:
        name = late[0]
        return Failure(
            f"line {line}: the lambda reads `{name}` when it is called, after the loop, so every "
            f"callback of the loop gets the last item's {name}: at epoch {epoch} it sets {base} "
            f"x {rate:g}, not x {wanted:g}. Bind it when the lambda is made: "
            f"lambda epoch, {name}={name}: {name}",
            line,
        )
    return Failure(
        f"line {line}: at epoch {epoch} it sets {base} x {rate:g}, not x {wanted:g}: "
        f"{schedule_text}",
        line,
    )


def _runs(script, warmup_epochs) -> list:
    """One Run per preset (or one, without presets): its warmup length and its lr_drops; []
    if the grader can't tell one of them."""
    runs = []
    for preset, items in list(_presets(script)) or [(None, {})]:
        warmup_end = _warmup_length(script, warmup_epochs, items)
        drops = _drops(script, items)
        if warmup_end is None or drops is None:
            return []
        if Run(preset, warmup_end, drops) not in runs:
            runs.append(Run(preset, warmup_end, drops))
    return runs


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _warmup_length(script, warmup_epochs, preset_items):
    """The warmup length of a run with this preset: the constant given, else the preset's default
    of --warmup-epochs (or the option's constant default); None if the grader can't tell."""
    value = script.constant(warmup_epochs)
    if _number(value):
        return value
    resolved = script.resolve(warmup_epochs)
    if not (isinstance(resolved, ast.Attribute) and resolved.attr == "warmup_epochs"):
        return None
    options = [
        call
        for call in script.calls
        if getattr(call.func, "attr", "") == "add_argument" and _defines_warmup_epochs(script, call)
    ]
    default = argument(options[0], "default") if options else None
    value = script.constant(default) if default is not None else None
    if _number(value):
        return value
    if isinstance(default, ast.Subscript):
        item = preset_items.get(script.constant(default.slice))
        value = script.constant(item) if item is not None else None
        if _number(value):
            return value
    return None


def _drops(script, preset_items):
    """The preset's lr_drops as a tuple of epochs; DROPS for a preset without them (an older
    starting script); None if the grader can't tell."""
    node = preset_items.get("lr_drops")
    if node is None:
        return DROPS
    value = script.resolve(node)
    if not isinstance(value, (ast.Tuple, ast.List)):
        return None
    epochs = tuple(script.constant(element) for element in value.elts)
    return epochs if all(_number(epoch) for epoch in epochs) else None


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
    """(name, {key: value node}) of each preset: a module-level table of dicts with 'epochs'."""
    for bindings in script.bindings.values():
        for binding in bindings:
            table = binding.value
            if not isinstance(table, ast.Dict):
                continue
            for name, value in zip(table.keys, table.values):
                items = _dict_items(script, value)
                if items is not None and "epochs" in items:
                    yield script.constant(name), items


def _dict_items(script, value):
    if isinstance(value, ast.Dict):
        return {script.constant(k): v for k, v in zip(value.keys, value.values) if k is not None}
    if isinstance(value, ast.Call) and script.qualified_name(value.func) == "dict":
        return {keyword.arg: keyword.value for keyword in value.keywords if keyword.arg}
    return None

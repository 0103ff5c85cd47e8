"""Step 11: the learning rate warms up, then Horovod's schedule takes over: x0.1 from each epoch
of the preset's lr_drops on (GPU: 15, 25, 35; CPU: 3).

The reading recognises the lesson's form, in the callbacks that reach model.fit on every worker:

    hvd.callbacks.LearningRateWarmupCallback(
        initial_lr=scaled_lr, warmup_epochs=args.warmup_epochs, verbose=verbose),
    hvd.callbacks.LearningRateScheduleCallback(
        initial_lr=scaled_lr, start_epoch=args.warmup_epochs, multiplier=step_decay),

and says for sure only what is wrong whatever the rates: no warmup callback (nor one of the
script's own that could warm up), a callback on rank 0 only, a rate that isn't scaled, no
warmup_epochs (5 epochs, the whole of a CPU run), a schedule from epoch 0 (it fights the warmup),
a number as multiplier (exponential decay in Horovod 0.28.1), a multiplier called instead of
passed. Anything else that sets the rate (a lambda, a function other than the starting script's
step_decay, several schedule callbacks, a Keras scheduler, a callback of the script's own) is
"can't tell", with the reason: what the rate is at each batch, a run shows (grader/running/).
"""

from grader.reading import horovod_schedule, presets, schedule
from grader.reading.horovod_schedule import SCHEDULE, WARMUP
from grader.reading.rules.fit import callbacks, missing_callback
from grader.reading.rules.scaled import scaling_failure
from grader.reading.rules.workers import every_rank_failure
from grader.reading.syntax import argument
from grader.reading.verdicts import Failure, Note

STEP = 11
HINT = (
    "Replace the Keras LearningRateScheduler with hvd.callbacks.LearningRateWarmupCallback "
    "(initial_lr: the scaled rate; warmup_epochs: from a --warmup-epochs option that has a "
    "default in every preset) and one hvd.callbacks.LearningRateScheduleCallback with "
    "initial_lr=scaled_lr, start_epoch where the warmup ends, and multiplier=step_decay: a "
    "function, as a number m would decay the rate m ** (epoch - start_epoch) every epoch."
)
LOOKED_FOR = "the warmup and schedule callbacks"
DOCUMENTED = (
    "LearningRateScheduleCallback(initial_lr=scaled_lr, start_epoch=args.warmup_epochs, "
    "multiplier=step_decay), step_decay as the starting script has it"
)
RUN_SHOWS = "a run shows the rate of every batch"


def check(script):
    entries, verdict = callbacks(script, LOOKED_FOR)
    if verdict:
        return verdict
    warmups = [entry for entry in entries if entry.name == WARMUP]
    if not warmups:
        own = [entry for entry in entries if horovod_schedule.may_warm_up(script, entry)]
        if own and all(entry.name for entry in own):
            return Note(
                f"line {own[0].line}: no hvd.callbacks.LearningRateWarmupCallback, but "
                f"`{script.source(own[0].expr)}` may set the learning rate at each batch; whether "
                "it warms it up as Horovod's does, only a run shows",
                own[0].line,
            )
        return missing_callback(script, entries, WARMUP)
    warmup = warmups[0]
    schedules = [entry for entry in entries if entry.name == SCHEDULE]
    verdicts = [
        _callback_failure(script, warmup, "LearningRateWarmupCallback"),
        _warmup_length(script, warmup),
        presets.option_failure(script),
    ]
    if len(warmups) > 1:
        verdicts.append(
            Note(
                f"line {warmups[1].line}: a second LearningRateWarmupCallback: {RUN_SHOWS}",
                warmups[1].line,
            )
        )
    kerases = [
        entry
        for entry in entries
        if entry.kind == "LearningRateScheduler" and not entry.name.startswith("horovod")
    ]
    if not schedules:
        if not kerases:
            verdicts.append(_no_schedule(script, entries, warmup))
        for keras in kerases:  # the Keras schedule sets the rate after the warmup: everywhere?
            verdicts.append(every_rank_failure(script, keras, "LearningRateScheduler"))
    for keras in kerases:
        verdicts.append(_keras_multiplier_failure(script, keras, warmup))
    warmup_epochs = argument(warmup.call, "warmup_epochs", 1)
    for entry in schedules:
        verdicts += _schedule_verdicts(script, entry, warmup, warmup_epochs, len(schedules))
    if len(schedules) > 1:
        verdicts.append(
            Note(
                f"line {schedules[1].line}: {len(schedules)} LearningRateScheduleCallbacks: which "
                f"epochs each covers and what it sets there, {RUN_SHOWS}; it looked for one, "
                f"{DOCUMENTED}",
                schedules[1].line,
            )
        )
    for keras in kerases:
        verdicts.append(
            Note(
                f"line {keras.line}: a Keras LearningRateScheduler sets the rate at each epoch's "
                "start: what it sets, and what that does to Horovod's momentum correction, only "
                f"a run shows; it looked for {DOCUMENTED}",
                keras.line,
            )
        )
    return _first(verdicts)


def _keras_multiplier_failure(script, keras, warmup):
    """A Keras LearningRateScheduler given step_decay itself sets the multiplier as the rate."""
    given = argument(keras.call, "schedule", 0) if keras.call else None
    form = schedule.multiplier(script, given) if given is not None else None
    if form is None or form.kind != "function" or not schedule.is_step_decay(script, form.function):
        return None
    base = argument(warmup.call, "initial_lr", 0)
    scaled = "scaled_lr" if base is None else script.source(base)
    return Failure(
        f"line {keras.line}: the Keras LearningRateScheduler sets the rate to "
        f"{form.function.name}(epoch) itself, 1 and then 0.1, not a multiple of the scaled rate "
        f"{scaled}: a Keras schedule returns the rate, {scaled} * {form.function.name}(epoch); "
        "the workbook uses LearningRateScheduleCallback(initial_lr=scaled_lr, "
        "start_epoch=args.warmup_epochs, multiplier=step_decay) instead",
        keras.line,
    )


def _first(verdicts):
    """The first Failure, else the first Note, else None."""
    found = [verdict for verdict in verdicts if verdict is not None]
    failures = [verdict for verdict in found if isinstance(verdict, Failure)]
    return (failures or found or [None])[0]


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


def _from_option(script, node) -> bool:
    """True if `node` is args.warmup_epochs (through variables)."""
    resolved = script.resolve(node)
    return getattr(resolved, "attr", None) == "warmup_epochs"


def _warmup_length(script, warmup):
    warmup_epochs = argument(warmup.call, "warmup_epochs", 1)
    if warmup_epochs is None:
        return Failure(
            f"line {warmup.line}: pass warmup_epochs (the --warmup-epochs option); the "
            "default, 5 epochs, is the whole of a CPU run",
            warmup.line,
        )
    if _from_option(script, warmup_epochs):
        return _other_arguments_note(warmup, WARMUP)
    return Note(
        f"line {warmup.line}: the warmup lasts `{script.source(warmup_epochs)}` epochs; "
        "whether that is the preset's, only a run shows; it looked for "
        "warmup_epochs=args.warmup_epochs",
        warmup.line,
    )


def _no_schedule(script, entries, warmup):
    others = [
        entry
        for entry in entries
        if entry is not warmup and entry.name and horovod_schedule.may_set_rate(script, entry)
    ]
    if others:
        return Note(
            f"line {others[0].line}: no LearningRateScheduleCallback, but "
            f"`{script.source(others[0].expr)}` may set the learning rate: {RUN_SHOWS}; it "
            f"looked for {DOCUMENTED}",
            others[0].line,
        )
    return missing_callback(script, entries, SCHEDULE)


def _schedule_verdicts(script, entry, warmup, warmup_epochs, count):
    """What the reading can say of one LearningRateScheduleCallback: failures it is sure of,
    and a note for what it would have to work out; [] for the lesson's form."""
    verdicts = [_callback_failure(script, entry, "LearningRateScheduleCallback")]
    line, call = entry.line, entry.call
    start, end = argument(call, "start_epoch", 2), argument(call, "end_epoch", 3)
    if start is None or script.constant(start) == 0:
        length = None if warmup_epochs is None else script.constant(warmup_epochs)
        if (
            warmup_epochs is None
            or _from_option(script, warmup_epochs)
            or (isinstance(length, int) and length > 0)
        ):
            verdicts.append(
                Failure(
                    f"line {line}: this LearningRateScheduleCallback starts at epoch 0, during "
                    "the warmup, so the two fight over the learning rate (it sets its own at "
                    "the first batch of each warmup epoch) and spoil SGD's momentum (each "
                    "restores the other's corrected value after the batch): start_epoch="
                    + (
                        "args.warmup_epochs"
                        if warmup_epochs is None
                        else script.source(warmup_epochs)
                    ),
                    line,
                )
            )
    multiplier = argument(call, "multiplier", 1)
    if multiplier is None:
        verdicts.append(
            Failure(
                f"line {line}: LearningRateScheduleCallback needs a multiplier: "
                "multiplier=step_decay",
                line,
            )
        )
        return verdicts
    form = schedule.multiplier(script, multiplier)
    shown = script.source(multiplier)
    if form.kind == "number" and (form.number != 1 or count > 1):
        verdicts.append(_number_verdict(script, entry, form.number, start, end))
    elif form.kind == "called" and count == 1 and _no_end(script, end):
        verdicts.append(
            Failure(
                f"line {line}: multiplier={shown} calls {form.function.name} once, here, and "
                "passes its result, a number m, for which Horovod 0.28.1 sets initial_lr * m ** "
                "(epoch - start_epoch) at every epoch, never the drops of the schedule: pass the "
                f"function itself, multiplier={form.function.name}",
                line,
            )
        )
    elif count == 1:
        verdicts.append(_single_schedule_note(script, entry, warmup, form, start, end))
    return verdicts


def _no_end(script, end) -> bool:
    return end is None or script.constant(end, "") is None


def _number_verdict(script, entry, number, start, end):
    """A number m != 1 decays the rate every epoch (Horovod 0.28.1): sure when the callback
    covers at least three epochs, where the workbook's schedule never drops twice in a row."""
    if number == 1:
        return None  # x1 on one stretch of several: what the others set, a run shows
    line = entry.line
    first = 0 if start is None else script.constant(start)
    first = first if isinstance(first, int) and not isinstance(first, bool) else None
    last = script.constant(end) if end is not None else None
    long = _no_end(script, end) or (
        first is not None and isinstance(last, int) and last - first >= 3
    )
    if not long:
        return Note(
            f"line {line}: multiplier={script.source(argument(entry.call, 'multiplier', 1))} is "
            "a number (Horovod 0.28.1: x m ** (epoch - start_epoch)) on a stretch whose length "
            f"it can't tell: {RUN_SHOWS}",
            line,
        )
    base = script.source(argument(entry.call, "initial_lr", 0))
    rates = horovod_schedule.number_rates(number, first)
    shown = ", ".join(
        f"x {rate:g}" + (f" at {epoch}" if epoch is not None else "") for epoch, rate in rates
    )
    when = "" if first is not None else " in its first three epochs"
    return Failure(
        f"line {line}: multiplier={script.source(argument(entry.call, 'multiplier', 1))} is a "
        "number, and Horovod 0.28.1 turns a number m into exponential decay, m ** (epoch - "
        f"start_epoch), not a constant factor: this callback sets {base} {shown}{when}. Pass a "
        f"function of the epoch: multiplier=lambda epoch: {number:g}, or one callback with "
        "multiplier=step_decay",
        line,
    )


def _single_schedule_note(script, entry, warmup, form, start, end):
    """None for the lesson's form; else a Note naming what the reading would have to work out."""
    line = entry.line
    warmup_epochs = argument(warmup.call, "warmup_epochs", 1)
    if form.kind != "function" or not schedule.is_step_decay(script, form.function):
        what = {
            "function": f"what `{form.function.name}` returns at each epoch"
            if form.function
            else "",
            "lambda": "what the lambda returns at each epoch",
            "called": "what the call returns, and the epochs it covers",
            "number": "which drops a constant multiplier leaves out",
        }.get(form.kind) or f"what `{script.source(argument(entry.call, 'multiplier', 1))}` is"
        return Note(
            f"line {line}: it would have to work out {what}, and {RUN_SHOWS}; it looked for "
            f"{DOCUMENTED}",
            line,
        )
    if not presets.option_calls(script, "lr_drops"):
        return Note(
            f"line {line}: step_decay reads args.lr_drops, and it finds no --lr-drops option: "
            f"{RUN_SHOWS}",
            line,
        )
    if start is None or warmup_epochs is None or not script.same_value(start, warmup_epochs):
        return Note(
            f"line {line}: it can't tell whether the schedule starts where the warmup ends "
            f"({'no start_epoch' if start is None else f'`{script.source(start)}`'}): "
            f"{RUN_SHOWS}; it looked for start_epoch=args.warmup_epochs",
            line,
        )
    if not _no_end(script, end):
        return Note(
            f"line {line}: the schedule ends at epoch `{script.source(end)}`: {RUN_SHOWS} "
            "after it; it looked for no end_epoch",
            line,
        )
    initial_lr, warmup_lr = (argument(e.call, "initial_lr", 0) for e in (entry, warmup))
    if initial_lr is None or warmup_lr is None or not script.same_value(initial_lr, warmup_lr):
        return Note(
            f"line {line}: its initial_lr is not the warmup's: {RUN_SHOWS}; it looked for "
            "initial_lr=scaled_lr in both",
            line,
        )
    return _other_arguments_note(entry, SCHEDULE)


def _other_arguments_note(entry, name):
    """A Note for arguments beyond the lesson's (steps_per_epoch, staircase...)."""
    others = horovod_schedule.other_arguments(entry.call, name)
    if not others:
        return None
    return Note(
        f"line {entry.line}: {name.rsplit('.', 1)[-1]} is given {', '.join(others)}, which the "
        f"lesson leaves at Horovod's defaults: {RUN_SHOWS}",
        entry.line,
    )

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

import math

from grader.verdicts import Failure, Note, first_verdict
from grader.rules.common import (
    SCHEDULE,
    Advice,
    WARMUP,
    callbacks,
    every_rank_failure,
    missing_callback,
    scaling_failure,
)
from grader import horovod_schedule, presets
from grader.horovod_schedule import KerasScheduler, ScheduleCallback, Unscaled
from grader.schedule import CantTell, Evaluator
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
    overlap = horovod_schedule.overlap_failure(script, warmup_epochs, schedules) if schedules else None
    if isinstance(overlap, Failure):
        return overlap
    return first_verdict(
        lambda: presets.option_failure(script),
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


# ---- the learning rate of every epoch ----------------------------------------------------


def _rates_failure(script, warmup, warmup_epochs, schedules, kerases=()):
    """A Failure at the first epoch whose learning rate is not the workbook's schedule; with a
    Keras LearningRateScheduler whose rates are right, its note (or failure: _keras_verdict)."""
    warmup_lr = argument(warmup.call, "initial_lr", 0)
    runs = presets.runs(script, warmup_epochs, DROPS)
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
                KerasScheduler(script, {"lr_drops": run.drops}, entry, warmup_lr)
                for entry in kerases
            ] + [
                ScheduleCallback(script, evaluator, entry, warmup_epochs, warmup_lr) for entry in schedules
            ]
            failure = _first_wrong_epoch(script, stretches, run, warmup_lr)
            if failure:
                return failure
            if kerases:
                verdicts.append(_keras_verdict(script, stretches[: len(kerases)], run, schedules))
    except Unscaled as unscaled:
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



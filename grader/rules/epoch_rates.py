"""The learning rate of every epoch (step 11), as Horovod 0.28.1's callbacks set it, against the
workbook's schedule: x1 from the end of the warmup, then x0.1 from each epoch of the preset's
lr_drops on (`intended_multiplier`).

`failure(script, warmup, warmup_epochs, schedules, kerases)` walks the epochs of each preset's
run (grader.presets) and reports the first whose rate is wrong, at the callback that sets it:
a number multiplier's exponential decay, a lambda that reads a loop variable late, a missing
schedule. A Keras LearningRateScheduler with the right rates passes with an Advice, or fails
where it hurts: a drop inside the warmup, where Horovod's momentum correction jumps.
"""

import math

from grader import presets
from grader.horovod_schedule import KerasScheduler, ScheduleCallback, Unscaled
from grader.schedule import CantTell, Evaluator
from grader.syntax import argument
from grader.verdicts import Advice, Failure, Note

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


def failure(script, warmup, warmup_epochs, schedules, kerases=()):
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
                ScheduleCallback(script, evaluator, entry, warmup_epochs, warmup_lr)
                for entry in schedules
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
            f"start_epoch), not a constant factor: this callback sets {base} {shown}, where "
            f"{schedule_text}. Pass a function of the epoch: multiplier=lambda epoch: "
            f"{stretch.number:g}, or one "
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

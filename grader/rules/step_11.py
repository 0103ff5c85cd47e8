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

from grader import horovod_schedule, presets
from grader.horovod_schedule import SCHEDULE, WARMUP
from grader.rules import epoch_rates
from grader.rules.epoch_rates import DROPS, EPOCHS, intended_multiplier  # noqa: F401 (tests)
from grader.rules.fit import callbacks_named, missing_callback
from grader.rules.scaled import scaling_failure
from grader.rules.workers import every_rank_failure
from grader.syntax import argument
from grader.verdicts import Failure, first_verdict

STEP = 11
HINT = (
    "Replace the Keras LearningRateScheduler with hvd.callbacks.LearningRateWarmupCallback "
    "(initial_lr: the scaled rate; warmup_epochs: from a --warmup-epochs option that has a "
    "default in every preset) and one hvd.callbacks.LearningRateScheduleCallback with "
    "initial_lr=scaled_lr, start_epoch where the warmup ends, and multiplier=step_decay: a "
    "function, as a number m would decay the rate m ** (epoch - start_epoch) every epoch."
)
LOOKED_FOR = "the warmup and schedule callbacks"


def check(script):
    entries, warmups, verdict = callbacks_named(script, WARMUP, LOOKED_FOR)
    if verdict:
        return verdict
    kerases = [
        entry
        for entry in entries
        if entry.kind == "LearningRateScheduler" and not entry.name.startswith("horovod")
    ]
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
        return missing_callback(script, entries, SCHEDULE)
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
    overlap = None
    if schedules:  # they must start where the warmup ends, and not overlap
        overlap = horovod_schedule.overlap_failure(script, warmup_epochs, schedules)
    if isinstance(overlap, Failure):
        return overlap
    return first_verdict(
        lambda: presets.option_failure(script),
        lambda: overlap or epoch_rates.failure(script, warmup, warmup_epochs, schedules, kerases),
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

"""Step 11's run invariant: the rate warms up to the scaled rate and then follows the lesson's
schedule."""

from __future__ import annotations

from grader.report import CANT_TELL, FAILED, PASSED, Result
from grader.running.evidence import Evidence
from grader.running.expected import Recipe, corrected_momentum, same
from grader.running.invariants.shared import (
    SAME_RATE,
    Setting,
    epochs_cut,
    finding,
    not_shown,
    parsed,
    rate_list,
    rates_by_epoch,
    recipe,
    schedule_text,
)

STEP = 11
TITLE = "the warmup and schedule"  # the title of its findings


def _steps_per_epoch(evidence: Evidence, run: int = 1) -> int | None:
    """How many training steps an epoch of rank 0 has in launch `run`: what model.fit was
    told, else what its first epoch, finished, had."""
    record = evidence.ranks(run).get(0)
    if record is None:
        return None
    told = (record.fit or {}).get("steps_per_epoch")
    if isinstance(told, int) and told > 0:
        return told
    done = sorted(record.epoch_logs())
    return (record.data.get("steps") or {}).get(str(done[0])) if done else None


def _own_scaled_rate(evidence: Evidence, run: int = 1) -> float | None:
    """The rate the script told Horovod's warmup callback (initial_lr), on rank 0, if any."""
    record = evidence.ranks(run).get(0)
    told = (record.data.get("lr_callbacks") or {}) if record else {}
    return told.get("LearningRateWarmupCallback")


def check(evidence: Evidence, setting: Setting) -> Result:
    epochs = {rank: rates_by_epoch(evidence, rank) for rank in evidence.ranks(1)}
    if not epochs.get(0):
        return not_shown(STEP, "can't tell: rank 0 reported no learning rate")
    schedule = schedule_text(epochs[0])
    ours = {(run, epoch): rates for run, epoch, rates in epochs[0]}
    for rank, seen in sorted(epochs.items()):
        differ = [
            (run, epoch, rates)
            for run, epoch, rates in seen
            if rank and (run, epoch) in ours and ours[run, epoch] != rates
        ]
        if differ:
            run, epoch, rates = differ[0]
            return finding(
                STEP,
                FAILED,
                f"rank {rank} used other learning rates than rank 0 in "
                f"epoch {epoch + 1}: {rate_list(rates)}, and rank 0 "
                f"{rate_list(ours[run, epoch])}",
                "Give every rank the same callbacks for the learning rate.",
            )
    # The schedule's shape against the script's own scaled rate (step 10 judges that rate),
    # each launch against the options it parsed.
    scaled = {
        run: _own_scaled_rate(evidence, run) or _own_scaled_rate(evidence)
        for run in sorted(evidence.runs)
    }
    recipes = {run: recipe(evidence, setting, scaled[run], run) for run in scaled}
    wanted = recipes.get(1)
    if wanted is None:
        return finding(STEP, CANT_TELL, "can't tell: the script has no --base-lr to follow")
    told = _recipe_words(wanted)
    hint = (
        "hvd.callbacks.LearningRateWarmupCallback(initial_lr=scaled_lr, warmup_epochs="
        "args.warmup_epochs), then hvd.callbacks.LearningRateScheduleCallback(initial_lr="
        "scaled_lr, start_epoch=args.warmup_epochs, multiplier=step_decay): the function "
        "itself, not step_decay(...) or a number."
    )
    for run, epoch, rates in epochs[0]:
        steps, launch = _steps_per_epoch(evidence, run), recipes.get(run)
        if launch is None:
            continue  # a launch whose options this check can't read
        if steps is None and epoch not in evidence.ranks(run)[0].epoch_logs():
            continue  # an unfinished epoch of unknown length: its warmup can't be placed
        expected = launch.rates(epoch, steps or len(rates))
        for batch, (got, want) in enumerate(zip(rates, expected)):
            if not same(got, want, SAME_RATE):
                where = f"epoch {epoch + 1}" + (" (after resuming)" if run == 2 else "")
                why = _schedule_mistake(epoch, rates, expected, launch)
                words = told if launch == wanted else _recipe_words(launch) + " (its defaults)"
                return finding(
                    STEP,
                    FAILED,
                    f"in {where}, step {batch + 1}, the learning rate was "
                    f"{got:.4g} where {words} gives {want:.4g}{why} (rank 0: "
                    f"{schedule})",
                    hint,
                )
    seen = {(run, epoch) for run, epoch, _ in rates_by_epoch(evidence, 0, finished=True)}
    # The first launch shows the whole recipe: warmup, full rate, drop. The resumed one adds the
    # schedule after a restart, owed once it trained to its end; one that stopped before (for
    # another step's code: blamed there) takes nothing from what the first showed, and had its
    # rates so far checked above.
    resumed = evidence.ranks(2).get(0)
    wanted_epochs = [(1, epoch) for epoch in range(setting.first_epochs)]
    if resumed is not None and resumed.finished:
        wanted_epochs.append((2, setting.final_epochs - 1))
    missing = [epoch for run, epoch in wanted_epochs if (run, epoch) not in seen]
    if missing:
        return not_shown(
            STEP,
            f"can't tell: the rates so far followed {told}, but rank 0 "
            f"never trained epoch {missing[0] + 1}{epochs_cut(evidence, setting)} ({schedule})",
        )
    if (2, setting.final_epochs - 1) in seen:
        after = ", and after resuming"
    elif resumed is not None:
        after = " in the first run (the resumed run stopped before it finished an epoch)"
    else:
        after = " (there was no resumed run)"
    return finding(
        STEP,
        PASSED,
        f"every step's learning rate followed {told}{after}; on every "
        f"rank alike{_momentum_note(evidence, setting)} ({schedule})",
    )


def _recipe_words(wanted: Recipe) -> str:
    drops = [str(d + 1) for d in wanted.lr_drops]
    return (
        f"the recipe (a warmup over {_count(wanted.warmup_epochs, 'epoch')} from "
        f"{wanted.base_lr:g} towards {wanted.scaled_lr:.4g}"
        + (f", then ×0.1 from epoch {' and '.join(drops)}" if drops else "")
        + ")"
    )


def _count(number: float, word: str) -> str:
    return f"{number:g} {word}" + ("" if number == 1 else "s")


def _schedule_mistake(epoch: int, rates: list, expected: list, wanted: Recipe) -> str:
    """What the difference looks like, when it is one learners make."""
    if epoch < wanted.warmup_epochs and epoch == 0:
        if rates[0] >= 0.75 * wanted.scaled_lr:
            return ": no warmup"
        if len(rates) > 1 and rates[-1] < expected[-1] and rates[-1] > rates[0]:
            return (
                ": the warmup rises too slowly (told more steps per epoch than each worker trains?)"
            )
    return ""


def _momentum_note(evidence: Evidence, setting: Setting) -> str:
    """ ", with Horovod's momentum correction" or "" (no momentum to correct, or none made)."""
    record = evidence.ranks(1).get(0)
    momenta = (record.data.get("momentum") or {}) if record else {}
    base = parsed(evidence, "momentum", setting)
    if not momenta or not base:
        return ""
    previous, corrected = None, True
    for epoch, rates in sorted(record.learning_rates().items()):
        for rate, value in zip(rates, momenta.get(str(epoch), [])):
            if previous is not None and rate != previous:
                corrected &= same(value, corrected_momentum(float(base), rate, previous))
            previous = rate
    return ", with Horovod's momentum correction" if corrected else ""

"""Verdict text: what the run_distributed notebook's comparison of two runs says, in words and
with their numbers.

    verdict(reference, run)     the ratio, the part of the time that made the difference, the
                                time to an accuracy, the time after training, why a run is
                                no faster, and other processes' CPU when it could have changed
                                the verdict
    kind(ratio)                 speed-up, about the same, or slow-down
    fairness(run, ratio, ...)   whether other processes' CPU time could have made the verdict
    contention_note(run)        the same for a figure with no verdict (the images/s of the
                                where_does_the_time_go notebook)

Every figure is workbook.run_times' (the same as the tables'); workbook.glance shows these
sentences folded below its short lines.
"""

from __future__ import annotations

from workbook.facts import notebook_label
from workbook.prose import plural
from workbook.run_times import (
    TARGET,
    RunTimes,
    epoch_split,
    first_epoch_load,
    scaling_efficiency,
    speed_up,
    split_training,
    training_for,
)
from workbook.speed import SAME_SPEED, worst_case_slowdown

# Seconds by which two runs' time after training must differ for the verdict to name it.
AFTER_TRAINING_NOTED_S = 10.0


def _seconds(value: float) -> str:
    """Seconds, as in the table; long ones also in minutes."""
    return f"{value:.1f} s" if abs(value) < 120 else f"{value:.1f} s ({value / 60:.1f} min)"


def kind(ratio: float) -> str:
    """The verdict a speed ratio gives: speed-up, about the same, or slow-down."""
    if ratio >= 1 + SAME_SPEED:
        return "speed-up"
    return "slow-down" if ratio <= 1 - SAME_SPEED else "about the same"


def verdict(reference: RunTimes, run: RunTimes, target: float = TARGET) -> str:
    """What the comparison says, in words and with its numbers: the ratio, the part of the time
    that made the difference, the time to `target`, and other processes' CPU when it could have
    changed the verdict."""
    ratio = speed_up(reference, run)
    epochs = max(reference.epochs_trained, run.epochs_trained)
    mine, theirs = training_for(run, epochs), training_for(reference, epochs)
    lines = []
    for each, seconds in ((run, mine), (reference, theirs)):
        text = f"{each.label} ({each.hardware}): {_seconds(seconds)} of training"
        if each is run:
            text += f" for {plural(epochs, 'epoch')}"
        if each.epochs_trained != epochs:
            text += (
                f" (it trained {plural(each.epochs_trained, 'epoch')}: its first, then its "
                "later epochs' pace for the rest)"
            )
        lines.append(text + ".")
    if kind(ratio) == "speed-up":
        lines.append(f"A speed-up: {run.label} trained {ratio:.2f}x as fast.")
        efficiency = scaling_efficiency(reference, run)
        if efficiency is not None and run.workers > reference.workers:
            lines.append(
                f"Scaling efficiency {efficiency:.2f} (images/s of the steps, "
                f"{run.images_per_second:.0f} against {run.workers / reference.workers:.0f} x "
                f"{reference.images_per_second:.0f}): {run.workers} workers with the same share "
                f"each would be {run.workers / reference.workers:.0f}x at best."
            )
    elif kind(ratio) == "about the same":
        lines.append(
            f"About the same speed: {ratio:.2f}x (differences under {SAME_SPEED:.0%} "
            "are noise between two runs)."
        )
    else:
        lines.append(
            f"A slow-down: {run.label} took {1 / ratio:.2f}x as long as {reference.label} "
            f"({_seconds(mine - theirs)} more), so its speed is {ratio:.2f}x."
        )
    lines.extend(_where(reference, run, epochs))
    lines.extend(_to_target(reference, run, target))
    lines.extend(_after(reference, run, target))
    if kind(ratio) != "speed-up":
        lines.extend(_why_not_faster(reference, run))
    for each in (reference, run):
        lines.extend(fairness(each, ratio, is_run=each is run))
    if not run.finished or not reference.finished:
        unfinished = [each.label for each in (reference, run) if not each.finished]
        lines.append(f"Not finished: {', '.join(unfinished)}; its times cover its finished epochs.")
    return "\n".join(lines)


def _where(reference: RunTimes, run: RunTimes, epochs: int) -> list[str]:
    """Which part of the training time made the difference: the steps, or the rest."""
    mine, theirs = split_training(run, epochs), split_training(reference, epochs)
    if mine is None or theirs is None:
        return _by_epoch(reference, run)
    steps = mine["steps"] - theirs["steps"]
    outside = (mine["between"] + mine["extra"]) - (theirs["between"] + theirs["extra"])
    text = (
        f"Where the time went, over {plural(epochs, 'epoch')}: the training steps took "
        f"{_seconds(mine['steps'])} on {run.label} against {_seconds(theirs['steps'])} "
        f"({run.images_per_second:.0f} against {reference.images_per_second:.0f} images/s); "
        f"between the steps (validation, checkpoints, TensorBoard) {_seconds(mine['between'])} "
        f"against {_seconds(theirs['between'])}; the first epoch's extra (its steps beyond a "
        f"later epoch's) {_seconds(mine['extra'])} against {_seconds(theirs['extra'])}"
        f"{_extra_cause(reference, run, mine['extra'], theirs['extra'])}."
    )
    total = steps + outside
    if abs(total) < 0.5:
        return [text]
    # The part that moved the total most in its own direction.
    in_steps = steps * total > 0 and (abs(steps) >= abs(outside) or outside * total <= 0)
    part, there, rest = (
        ("the training steps", steps, outside)
        if in_steps
        else ("the time outside the steps", outside, steps)
    )
    text += (
        f" What made the difference: {part}, {_seconds(abs(there))} "
        f"{'less' if there < 0 else 'more'} on {run.label} (the other part: "
        f"{_seconds(abs(rest))} {'less' if rest < 0 else 'more'})."
    )
    return [text]


def _extra_cause(reference: RunTimes, run: RunTimes, mine: float, theirs: float) -> str:
    """Why the first epochs took extra, as far as it was measured: other programs' CPU during
    them when they took enough to explain it; the graph and the first broadcast when the CPU
    was measured to be the run's own; nothing when it was not measured."""
    if max(mine, theirs) < 1:
        return ""
    loads = {
        each.label: first_epoch_load(each)
        for each, extra in ((run, mine), (reference, theirs))
        if extra >= 1
    }
    loaded = [
        f"the first epoch of {label}: {load}"
        for label, load in loads.items()
        if load not in (None, "not measured")
    ]
    if loaded:
        return f" ({'; '.join(loaded)}: that, not only the graph, can explain it)"
    if all(load is None for load in loads.values()):
        return " (with the CPU to themselves: building the graph, the first broadcast)"
    return ""


def _to_target(reference: RunTimes, run: RunTimes, target: float) -> list[str]:
    mine, theirs = run.time_to(target), reference.time_to(target)
    if mine is None and theirs is None:
        return []
    text = f"To {target:.0%} validation accuracy, from the launch (start-up included): "
    if mine is not None and theirs is not None:
        ratio = theirs / mine
        text += f"{run.label} {_seconds(mine)}, {reference.label} {_seconds(theirs)}: " + (
            f"{ratio:.2f}x sooner." if ratio >= 1 else f"{1 / ratio:.2f}x later."
        )
    else:
        reached, missed = (run, reference) if mine is not None else (reference, run)
        text += (
            f"{reached.label} {_seconds(reached.time_to(target))}; {missed.label} did not "
            f"reach it in its {plural(missed.epochs_trained, 'epoch')}."
        )
    return [text]


def _after(reference: RunTimes, run: RunTimes, target: float) -> list[str]:
    """The time after training, when it differs by enough to show in the bars: the verdict's
    training times and times to an accuracy leave it out, the learner's wait does not."""
    mine, theirs = run.after_training, reference.after_training
    if mine is None or theirs is None or abs(mine - theirs) < AFTER_TRAINING_NOTED_S:
        return []
    return [
        f"After training (the end of model.fit, the test-set evaluation, the per-class report, "
        f"the exit): {run.label} {_seconds(mine)}, {reference.label} {_seconds(theirs)}, "
        f"{_seconds(abs(mine - theirs))} {'more' if mine > theirs else 'less'}. It is not part "
        f"of the training time or the time to {target:.0%} above, but it is part of your wait: "
        "the bars below show it."
    ]


def _others_took(run: RunTimes) -> tuple[float, str] | None:
    """(the most other processes' CPU time can have slowed the run's training, what they took
    in words); None under a core-second or when not measured."""
    used, seconds = run.others_core_seconds, run.training  # sampled over the training
    if used is None or used < 1 or not seconds:
        return None
    cores = run.cores or 1
    return worst_case_slowdown(used, seconds), (
        f"other processes took {used / (cores * seconds):.0%} of the CPU during the training "
        f"of {run.label} ({plural(round(used), 'core-second')} in {seconds:.0f} s on "
        f"{plural(cores, 'core')})"
    )


def fairness(each: RunTimes, ratio: float, is_run: bool) -> list[str]:
    """A flag when other processes took enough CPU during the run's training to change the
    verdict (each core-second can cost synchronized workers a second: speed's worst case);
    a note when they took some, but too little."""
    if each.others_core_seconds is None:  # no CPU samples (a short run): the runner's findings
        if not each.busy_others:
            return []
        return [
            f"Not a fair measure: during {each.label}, other processes used the CPU: "
            + "; ".join(each.busy_others)
            + ". Run it again when nothing else runs."
        ]
    taken = _others_took(each)
    if taken is None:
        return []
    worst, what = taken
    before = kind(ratio)
    adjusted = (ratio / (1 - worst) if is_run else ratio * (1 - worst)) if worst < 1 else None
    after = kind(adjusted) if adjusted is not None else None
    # Only a clear verdict (a speed-up or a slow-down) that the other processes could have
    # made is not a fair measure. "About the same" already says the runs are too close to
    # call; a few percent could tip it either way, and that is said, not flagged.
    if after is None or (before != "about the same" and after != before):
        names = [b for b in each.busy_others if b.startswith("`")]
        return [
            f"Not a fair measure: {what}; without them it could have been up to "
            f"{worst:.0%} faster, enough to change this verdict"
            + (f" ({'; '.join(names)})" if names else "")
            + ". Run it again when nothing else runs."
        ]
    if after != before:
        return [
            f"{what[0].upper()}{what[1:]}: it could have been up to {worst:.0%} faster, "
            f"which would tip this close call to a {after} of at most "
            f"{max(adjusted, 1 / adjusted):.2f}x."
        ]
    return [
        f"{what[0].upper()}{what[1:]}: it could have been up to {worst:.0%} faster, which "
        "would not change this verdict."
    ]


# A figure with no verdict (the where_does_the_time_go notebook's efficiency) is called not a
# fair measure only when other processes could have slowed its run by this much; less is said as
# what it could cost.
UNFAIR_SLOWDOWN = 0.10


def contention_note(run: RunTimes) -> str | None:
    """What other processes' CPU time during `run` means for its images/s, in one line (None:
    under a core-second, or not measured)."""
    taken = _others_took(run)
    if taken is None:
        return None
    worst, what = taken
    if worst >= UNFAIR_SLOWDOWN:
        return (
            f"Not a fair measure: {what}; without them its images/s could have been up to "
            f"{worst:.0%} higher. Run it again when nothing else runs."
        )
    return f"{what[0].upper()}{what[1:]}: its images/s could have been up to {worst:.0%} higher."


def _by_epoch(reference: RunTimes, run: RunTimes) -> list[str]:
    """For runs whose script logs no step_seconds: the first epoch against the later ones."""
    first, later = epoch_split(run)
    first_ref, later_ref = epoch_split(reference)
    if later is None or later_ref is None:
        return []
    return [
        f"Epoch by epoch: the first took {_seconds(first)} on {run.label}, "
        f"{_seconds(first_ref)} on {reference.label}; each later one {_seconds(later)} "
        f"against {_seconds(later_ref)} ({later_ref / later:.2f}x as fast)."
    ]


def _why_not_faster(reference: RunTimes, run: RunTimes) -> list[str]:
    """Why a run is no faster than its reference, as far as the numbers say."""
    reasons = []
    steps_slower = (
        reference.images_per_second
        and run.images_per_second
        and run.images_per_second < (1 - SAME_SPEED) * reference.images_per_second
    )
    if scaling_efficiency(reference, run) is not None and run.workers > reference.workers:
        per_worker = run.images_per_second / run.workers
        reference_per_worker = reference.images_per_second / reference.workers
        if per_worker < reference_per_worker:
            reasons.append(
                f"Each worker went at {per_worker / reference_per_worker:.0%} of the "
                f"pace of {reference.label} during the steps."
            )
    if reference.cores_per_worker is None and run.cores_per_worker is not None:
        text = (
            f"{reference.label} had all the cores in one process; {run.label} split them "
            f"among {run.workers} workers, {plural(run.cores_per_worker, 'core')} each: the same "
            "cores in total. Data parallelism adds compute only with more devices: GPUs, or "
            "more machines."
        )
        if steps_slower:
            text += (
                " Every step also waits for its allreduce "
                f"({notebook_label('where_does_the_time_go')} measures it)."
            )
        reasons.append(text)
    elif scaling_efficiency(reference, run) is not None and run.workers > reference.workers:
        reasons.append(
            f"With a worker's share each, {run.workers} workers could approach "
            f"{run.workers / reference.workers:.0f}x; the rest goes to the allreduce of every "
            "step, to waiting for the slower worker, to what the workers share besides their "
            "cores (memory bandwidth, caches), and to the time outside the steps. "
            f"{notebook_label('where_does_the_time_go').capitalize()} measures the steps' part."
        )
    return reasons

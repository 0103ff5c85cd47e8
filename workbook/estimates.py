"""How long a run will take, from this machine's own measured speed, never from a constant.

    so_far(run_dir)                     the welcome notebook's peek at the running baseline
    short_runs(logs_dir, images)        the two short runs of the where_does_the_time_go
                                        notebook, from the run_distributed notebook's pace
    expect_like_baseline(baseline)      the run_distributed notebook's distributed run, from the
                                        baseline
    estimate_reference(run, epochs)     the run_distributed notebook's 1-worker reference, from
                                        the workers' pace
    beside_bench(runs, results_dir)     the learner's figures beside `make bench`'s, labelled

    before_baseline(results_dir)        the welcome notebook's baseline, before it starts
    check_run(launches, timeout)        the check's run, before it starts (for grader/running)

A run's pace is read from its own folder (workbook.run_times.read_run: the epochs it has
finished, its start-up) and the number of epochs from its log's Keras progress ("Epoch 2/5").
Before a run has a pace of its own, the time `make bench` measured on its quiet machine is
scaled by what other programs take of this machine's CPU at that moment
(workbook.machine_load), and said as such.
"""

from __future__ import annotations

import re
from pathlib import Path

from workbook import bench_results, machine_load, run_times, speed
from workbook.bench_results import BenchResult
from workbook.facts import notebook_label
from workbook.paths import REPO
from workbook.prose import plural
from workbook.run_times import TARGET, RunTimes
from workbook.runner.command import RAW_LOG_NAME

EPOCH_LINE = re.compile(r"Epoch (\d+)/(\d+)")


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 100 else f"{seconds / 60:.1f} min"


BENCH_RESULTS = REPO / "bench" / "results"


def _bench_seconds(results_dir: Path, benchmark: str, *keys: str) -> tuple | None:
    """(median, min, max) of a wall time `make bench` measured, None when it has none."""
    found = BenchResult.find(results_dir, benchmark)
    summary = found.summary if found else {}
    for key in keys:
        summary = summary.get(key, {}) if isinstance(summary, dict) else {}
    stats = summary.get("wall_seconds") if isinstance(summary, dict) else None
    if not stats or stats.get("median") is None:
        return None
    return stats["median"], stats["min"], stats["max"]


def _now(load: machine_load.Load, quiet_low: float, quiet_high: float) -> str:
    """The quiet machine's range at this load: `about 5.1-5.6 min here` on a quiet machine,
    `...; while they do, about 10.0-11.0 min here (2.0x), up to 12.9 min if they get all
    they want (2.3x)` on a
    busy one: what the others took of the CPU (Load.slowdown_taken, where the walks' real
    times fell nearest), and what they want (Load.slowdown)."""
    if not load.busy:
        return (
            f"this machine is quiet now ({load.describe()}): about "
            f"{_range(quiet_low, quiet_high)} here if it is as fast"
        )
    least, most = load.slowdown_taken, load.slowdown
    worst = (
        f", up to {_minutes(quiet_high * most)} if they get all they want ({most:.1f}x)"
        if most - least >= 0.15
        else ""
    )
    return (
        f"now {load.describe()}; while they do, about "
        f"{_range(quiet_low * least, quiet_high * least)} here ({least:.1f}x){worst}"
    )


def _range(low: float, high: float) -> str:
    if high < 100:
        return f"{low:.0f}-{high:.0f} s" if round(low) != round(high) else f"{low:.0f} s"
    if low < 100:
        return f"{low:.0f} s-{high / 60:.1f} min"
    return f"{low / 60:.1f}-{high / 60:.1f} min"


def before_baseline(
    results_dir: Path = BENCH_RESULTS, load: machine_load.Load | None = None
) -> str:
    """The welcome notebook's baseline, before it starts: `make bench`'s on its quiet 2-core
    machine, scaled by what other programs take of this one's CPU now."""
    measured = _bench_seconds(results_dir, "accuracy", "baseline")
    load = load or machine_load.load_now()
    if measured is None:
        return (
            f"No benchmark of the baseline in {results_dir}; {load.describe()}. The peek "
            "cell estimates it from its own pace once its first epoch has ended."
        )
    _, low, high = measured
    return (
        f"On the README's benchmark machine (a quiet 2-core virtual machine) the baseline "
        f"took {_range(low, high)} from launch to end; {_now(load, low, high)}. Once its "
        "first epoch has ended, the peek cell below estimates the rest from its own pace on "
        "this machine."
    )


def check_run(
    launches: int,
    timeout: float,
    results_dir: Path = BENCH_RESULTS,
    load: machine_load.Load | None = None,
) -> str:
    """How long the check's run of `launches` launches takes, for the line that announces it:
    `make bench`'s run profile (2 launches on its quiet machine; one launch takes less, but
    more than half: its start-up is the same) scaled to this machine's load now; the limit of
    `timeout` s of the machine's time."""
    measured = _bench_seconds(results_dir, "run_profile")
    load = load or machine_load.load_now()
    limit = f"never more than {timeout:g} s of the machine's time"
    if measured is None:
        return f"{load.describe()}; {limit}"
    _, low, high = measured
    quiet = f"{_range(low, high)} on the benchmark's quiet 2-core machine" + (
        "" if launches == 2 else " for 2 launches, less for one"
    )
    if not load.busy:
        return f"{quiet}, and this one is quiet now; {limit}"
    return f"{quiet}; {_now(load, low, high)}; {limit}"


def planned_epochs(run_dir: Path) -> int | None:
    """The epochs the run was started for, from its log's last "Epoch i/n" (None: none yet)."""
    log = Path(run_dir) / RAW_LOG_NAME
    found = EPOCH_LINE.findall(log.read_text(errors="replace")) if log.is_file() else []
    return int(found[-1][1]) if found else None


def so_far(run_dir: str | Path, label: str = "Your baseline") -> str:
    """Where a run is and when it will end, at its own pace so far: its later epochs' mean (its
    first epoch's time while it has only one; the first also builds the graph, so that one is
    on the long side), plus its own start-up and, for the end, the evaluation's time as the
    finished run will show it (unknown until then, so left out and said)."""
    try:
        run = run_times.read_run(run_dir)
    except run_times.NotTimed:
        return (
            f"{label}: no epoch has finished yet, so no estimate from this machine yet; "
            "run this cell again in a minute or two."
        )
    epochs = planned_epochs(run_dir) or run.epochs_trained
    done = run.epochs_trained
    since_launch = run_times.run_seconds(run)
    if run.finished and run.after_training is not None and since_launch is not None:
        return (
            f"{label} has finished: {_minutes(since_launch)} from its launch to its end, "
            f"{_minutes(run.training)} of it training ({done} epochs)."
        )
    first, later = run_times.epoch_split(run)
    pace = later if later is not None else first
    left = pace * (epochs - done)
    start = run.start_up or 0.0
    text = (
        f"{label}: epoch {done} of {epochs} done, {_minutes(start + run.training)} after its "
        f"launch; at its own pace ({pace:.0f} s per epoch"
        + (", its first epoch's, which also built the graph" if later is None else "")
        + f") the training ends in about {_minutes(left)}, about "
        f"{_minutes(start + run.training + left)} after the launch, then the test set's "
        "evaluation."
    )
    return text


def short_runs(logs_dir: Path, images_one: int, images_two: int, batch: int) -> str:
    """The where_does_the_time_go notebook's two short runs, from the run_distributed notebook's
    runs on this machine: their steps at that notebook's images/s (64 images a step; at `batch` a
    step is slower per image, so this is the short side) plus each run's start-up there."""
    pair = run_times.newest_pair(Path(logs_dir))
    if pair is None:
        return (
            f"No runs of {notebook_label('run_distributed')} yet, so no estimate from this "
            "machine: the two runs train for seconds to minutes, each after its start-up."
        )
    reference, workers = pair
    if not reference.images_per_second or not workers.images_per_second:
        return ""
    one = (reference.start_up or 0) + images_one / reference.images_per_second
    two = (workers.start_up or 0) + images_two / workers.images_per_second
    run_distributed = notebook_label("run_distributed")
    return (
        f"Estimate from {run_distributed}'s runs on this machine: about {_minutes(one)} for "
        f"the 1-worker run and {_minutes(two)} for the 2 workers (their steps at "
        f"{run_distributed}'s images/s, {reference.images_per_second:,.0f} and "
        f"{workers.images_per_second:,.0f}, plus its start-up; {batch} images a step "
        "instead of 64 make them slower per image, so expect somewhat more)."
    )


def _in_minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def _fit_end_cause(run: RunTimes) -> str:
    """What the end of model.fit waited for, as far as it was measured: other programs' CPU
    when they took enough to explain it; else that its cause was not measured. tf.data's
    autotuner (issue 31) is named as what a script that leaves it on waits for there, never as
    this run's cause: the walk's baseline, whose script turns it off, was blamed on it."""
    load = run_times.load_in(run.others_after_training, run.after_training)
    if load is None:
        return (
            "with the CPU to itself, so not other programs; its cause was not measured (a "
            "script that leaves tf.data's autotuner on waits there for its thread, up to a "
            "minute; the workbook's turns it off)"
        )
    if load == "not measured":
        return "its cause was not measured"
    return f"{load}: they can explain it"


def at_load_now(run: RunTimes, seconds: float, load: machine_load.Load) -> float:
    """`seconds` of `run`, measured while other programs took what they took of its training
    (its CPU samples), as they would be at `load`: back to a quiet machine, then slowed by now."""
    cores = run.cores or load.cores
    took = run.others_core_seconds or 0.0
    then = machine_load.Load(
        share=min(1.0, took / (cores * run.training)) if run.training else 0,
        cores=cores,
        load_average=None,
    )
    # Then and now by the same measure, the CPU the others took (the samples of a run know no
    # more); the low end of Load's range, which the walks' real times fell nearest.
    return seconds / then.slowdown_taken * load.slowdown_taken


def _load_now_note(run: RunTimes, seconds: float, load: machine_load.Load | None) -> str:
    """` At this moment's load (...), about 9.1 min.` when the load now or then was not quiet."""
    if load is None:
        return ""
    now = at_load_now(run, seconds, load)
    if abs(now - seconds) < 0.1 * seconds:
        return ""
    return f" At this moment's load ({load.describe()}): about {_in_minutes(now)}."


def expect_like_baseline(
    baseline: RunTimes | None, workers: int = 2, load: machine_load.Load | None = None
) -> str:
    """What to expect of the distributed run, from the learner's own baseline and, when it was
    run under another load than now's (`load`: measured now when not given), scaled to now's."""
    if baseline is None or run_times.run_seconds(baseline) is None:
        return (
            "No finished baseline yet, so no estimate from your machine: the run takes "
            f"minutes on a CPU ({notebook_label('welcome')}'s baseline shows how many)."
        )
    wait = run_times.fit_end_wait(baseline)
    end = (
        f"; its end took {baseline.after_training:.0f} s"
        + (
            f", {wait:.0f} s of it at the end of model.fit ({_fit_end_cause(baseline)})"
            if wait is not None and wait >= run_times.FIT_END_NOTED_S
            else ""
        )
        if baseline.after_training is not None
        else ""
    )
    return (
        f"Your baseline ({notebook_label('welcome')}) took "
        f"{_in_minutes(run_times.run_seconds(baseline))} from its launch to its end, "
        f"{_in_minutes(baseline.training)} of it training{end}. Your {workers} workers share "
        "the same cores, so expect about as long for the training: what they gain or lose is "
        "the subject of section 4."
        + _load_now_note(baseline, run_times.run_seconds(baseline), load or machine_load.load_now())
        + " After training, each worker evaluates the test set on its own share of the cores."
    )


def estimate_reference(run: RunTimes, epochs: int, results_dir: Path | None = None) -> str:
    """How long one worker with one worker's share takes for `epochs` epochs, from the pace of
    the run's workers: one worker does the work of N, each epoch at N x a worker's time x the
    scaling efficiency `make bench` measured (one worker alone is faster than each of N that
    share the machine); without a benchmark, at most N x."""
    seconds = run_times.run_seconds(run)
    split = run_times.split_training(run, run.epochs_trained)
    if seconds is None or split is None:
        return ""
    measured = (
        bench_results.figures(results_dir).get(f"scaling efficiency, {run.workers} workers")
        if results_dir is not None
        else None
    )
    efficiency = measured[0] if measured else None  # the median
    factor = run.workers * (efficiency or 1.0)
    worker_epoch = (split["steps"] + split["between"]) / run.epochs_trained
    # The end without model.fit's wait for tf.data's autotuner: that wait is any run's own,
    # from nothing to about a minute, not the workers' to copy.
    wait = run_times.fit_end_wait(run) or 0.0
    total = (
        run.start_up + split["extra"] + factor * worker_epoch * epochs + run.after_training - wait
    )
    work = (
        f"each epoch, one worker does the work of your {run.workers}: {run.workers} x "
        f"{worker_epoch:.0f} s, the time one of them took per epoch"
    )
    how = (
        f"{work}, x {efficiency:.2f}, the scaling efficiency `make bench` measured on the "
        f"README's benchmark machine: one worker alone is faster than each of {run.workers} "
        "sharing the machine"
        if efficiency
        else f"{work}, at most"
    )
    waited = ""
    if wait >= run_times.FIT_END_NOTED_S:
        waited = (
            f" Your workers also waited {wait:.0f} s at the end of model.fit "
            f"({_fit_end_cause(run)}); the estimate leaves it out."
        )
    return (
        f"Estimate from your {run.workers} workers' own pace: about {_in_minutes(total)} for "
        f"{plural(epochs, 'epoch')} ({how}; plus the start-up and the end).{waited}"
    )


def beside_bench(runs: dict, results_dir: Path, target: float = TARGET):
    """A table: the learner's figures (runs: {"reference", "distributed", "baseline"} ->
    RunTimes or None) beside the benchmark's on its quiet machine, each figure as
    workbook.speed defines it."""
    import pandas as pd

    bench = bench_results.figures(results_dir)

    def shown(key):
        if key not in bench:
            return "-"
        median, low, high = bench[key]
        return (
            f"{median:.2f} [{low:.2f}-{high:.2f}]"
            if median < 10
            else f"{median:.0f} [{low:.0f}-{high:.0f}]"
        )

    def yours(value, digits=0):
        """As the bench column writes it: whole images/s and seconds, efficiency to 0.01."""
        return "-" if value is None else f"{value:.{digits}f}"

    reference, distributed, baseline = (
        runs.get(k) for k in ("reference", "distributed", "baseline")
    )
    rows = []
    for run, key in (
        (baseline, "python, 1 process"),
        (reference, "1 worker, 1 core"),
        (distributed, "2 workers, 1 core each"),
    ):
        if run is not None:
            rows.append(
                (f"{run.images_label}: {run.label}", yours(run.images_per_second), shown(key))
            )
    if reference is not None and distributed is not None:
        efficiency = run_times.scaling_efficiency(reference, distributed)
        rows.append(
            (
                f"scaling efficiency ({speed.SCALING_EFFICIENCY})",
                yours(efficiency, 2),
                shown(f"scaling efficiency, {distributed.workers} workers"),
            )
        )
    for run, name in (
        (distributed, "distributed"),
        (baseline, "baseline"),
        (reference, "reference"),
    ):
        if run is not None:
            reached = run.time_to(target)
            rows.append(
                (
                    f"{speed.TIME_TO_ACCURACY.format(target=target)} (s): {run.label}",
                    yours(reached),
                    shown(f"time to 90%, {name}"),
                )
            )
    # The figures' names as the index, unnamed: a named index takes a header row of its own.
    return (
        pd.DataFrame(rows, columns=["figure", "yours", "make bench (median [min-max])"])
        .set_index("figure")
        .rename_axis(None)
    )

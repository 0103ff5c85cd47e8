"""Time to accuracy: the distributed solution against a single worker of the same share, and the
learner's single-process starting point, each trained to the end several times.

Three runs of the CPU preset (GPUs: of the GPU preset), repeated:
- reference: the solution on 1 worker with one worker's share (CPU: one core, pinned, as the
  runner's np="auto" gives each worker; GPU: one GPU): the "1 device" of "1 device against N";
- distributed: the solution under horovodrun on 2 workers (GPUs: all of them), one share each;
- baseline: the learner's starting script, one process on every core (SGD, no Horovod).
On CPUs the reference runs two at a time, each pinned to its own core: the scaling benchmark's
separate processes show that two such runs keep the speed of one alone (its machine_ceiling), and
the other core is as busy as in the distributed run. Their test accuracy after each epoch (the
validation scalars of the TensorBoard logs) is put against the wall-clock time since the launch,
start-up included; the summary gives, per configuration, the median and range of the time to each
target and of the final accuracy.
"""

from __future__ import annotations

from pathlib import Path

from bench import machine, results, settings
from bench.processes import busy_note
from bench.training import SOLUTION, STARTER, Launch, run_script, run_separate
from workbook import speed
from workbook.bench_results import ACCURACY_CONFIGS, accuracy_time_key
from workbook.facts import usable_cores
from workbook.tensorboard_events import epoch_scalars

TARGETS = (0.89, 0.90)


def launches(cores: int, gpus: int) -> dict:
    if gpus:
        return {
            "reference": Launch(1, None, True, gpus=True),
            "distributed": Launch(gpus, None, True, gpus=True),
            "baseline": Launch(1, None, horovodrun=False, gpus=True),
        }
    share = max(1, cores // 2)
    return {
        "reference": Launch(1, share, pinned=True),
        "distributed": Launch(2, share, pinned=True),
        "baseline": Launch(1, None, horovodrun=False),
    }


def curve(run) -> list:
    """[{epoch, seconds, accuracy}]: test accuracy after each epoch, seconds since the launch."""
    points = epoch_scalars(run.log_dir, "validation", "epoch_accuracy")
    return [
        {
            "epoch": epoch + 1,
            "seconds": round(wall - run.timed.started_at, 1),
            "accuracy": round(value, 4),
        }
        for wall, epoch, value in points
    ]


def time_to(points: list, target: float) -> float | None:
    """workbook.speed's time to an accuracy: from the launch, start-up included."""
    return speed.time_to_accuracy([(p["seconds"], p["accuracy"]) for p in points], target)


def schedule(repeats: int, side_by_side: bool) -> list:
    """[(repetition, config)]: the order of the runs. The order turns with each repetition, so
    that a slow spell of the machine does not always hit the same configuration; side by side,
    a pair of reference runs comes every other repetition."""
    order = []
    for repetition in range(repeats):
        names = [
            n
            for n in ACCURACY_CONFIGS
            if n != "reference" or not side_by_side or repetition % 2 == 0
        ]
        turn = repetition % len(names)
        order += [(repetition, name) for name in names[turn:] + names[:turn]]
    return order


def measure(
    name: str, launch: Launch, args: list, folder: Path, tiny: bool, side_by_side: bool
) -> list:
    """Runs one configuration once (the reference side by side: twice); a record per run."""
    script = STARTER if name == "baseline" else SOLUTION
    timeout = settings.run_timeout(tiny)
    if name == "reference" and side_by_side:
        pair = Launch(2, launch.threads, horovodrun=False, pinned=True, separate=True)
        runs = run_separate(pair, args, folder, script, timeout=timeout)
    else:
        runs = [run_script(launch, args, folder, script, timeout=timeout)]
    return [run_record(name, launch, script, run, side_by_side=len(runs) > 1) for run in runs]


def run_record(name: str, launch: Launch, script: Path, run, side_by_side: bool) -> dict:
    points = curve(run)  # reads the run's TensorBoard log
    return {
        "config": name,
        "launch": launch.label,
        "script": script.name,
        "curve": points,
        "wall_seconds": round(run.timed.wall_seconds, 1),
        "final_test_accuracy": run.result["test_accuracy"],
        "side_by_side": side_by_side,
        "neighbours": run.timed.neighbours,
        "others_mean_cores": run.timed.others_mean_share,
        **{accuracy_time_key(t): time_to(points, t) for t in TARGETS},
    }


def run(out_dir: Path, tiny: bool = False, repeats: int = 3, echo=print) -> Path:
    cores, gpus = usable_cores(), len(machine.gpus())
    args = settings.accuracy_args(tiny)
    configs = launches(cores, gpus)
    side_by_side = not gpus and cores >= 2
    measurements = []
    for repetition, name in schedule(repeats, side_by_side):
        folder = out_dir / "runs" / "accuracy" / name
        for record in measure(name, configs[name], args, folder, tiny, side_by_side):
            record["repetition"] = repetition
            measurements.append(record)
            reached = ", ".join(
                f"{round(t * 100)}% at {s:.0f} s"
                if (s := record[accuracy_time_key(t)]) is not None
                else f"{round(t * 100)}% not reached"
                for t in TARGETS
            )
            echo(
                f"  accuracy {repetition + 1}/{repeats}: {name} ({configs[name].label}): "
                f"{reached}; final {record['final_test_accuracy']:.4f}"
                + busy_note(record["neighbours"])
            )
    summary = summarize(configs, measurements)
    return results.write(
        "accuracy",
        out_dir,
        {
            "script_args": args,
            "cores": cores,
            "gpus": gpus,
            "repeats": repeats,
            "reference_side_by_side": side_by_side,
        },
        measurements,
        summary,
    )


def summarize(configs: dict, measurements: list) -> dict:
    """Per configuration: median [min-max] of the time to each target (over the runs that reached
    it; `reached` counts them) and of the final accuracy; the medians' ratios."""
    summary = {"targets": list(TARGETS)}
    for name, launch in configs.items():
        runs = [m for m in measurements if m["config"] == name]
        entry = {
            "config": launch.label,
            "runs": len(runs),
            "final_test_accuracy": results.summarize([m["final_test_accuracy"] for m in runs]),
            "wall_seconds": results.summarize([m["wall_seconds"] for m in runs]),
            "runs_with_busy_neighbours": sum(bool(m["neighbours"]) for m in runs),
        }
        for target in TARGETS:
            key = accuracy_time_key(target)
            times = [m[key] for m in runs if m[key] is not None]
            entry[key] = results.summarize(times)
            entry[key]["reached"] = len(times)
        summary[name] = entry
    for target in TARGETS:
        medians = {name: median_time(summary[name], target) for name in configs}
        for other in ("reference", "baseline"):
            mine, theirs = medians["distributed"], medians[other]
            summary[f"speedup_to_{round(target * 100)}_over_{other}"] = (
                round(theirs / mine, 3) if mine and theirs else None
            )
    return summary


def median_time(entry: dict, target: float) -> float | None:
    """A configuration's median time to the target; None unless most of its runs reached it."""
    stats = entry[accuracy_time_key(target)]
    return stats["median"] if stats["reached"] * 2 > entry["runs"] else None

"""Time to accuracy: the single-process baseline against the distributed solution.

The baseline is the learner's starting script (python, one process, every core); the
distributed run is the solution under horovodrun on 2 workers (GPUs: all of them) sharing the
cores. Both train the CPU preset to the end. Their test accuracy after each epoch (the
validation scalars of their TensorBoard logs) is put against the wall-clock time since the
launch, start-up included: the TensorBoard comparison, as numbers and a plot.
"""

from __future__ import annotations

from pathlib import Path

from bench import machine, results, settings
from bench.training import STARTER, SOLUTION, Launch, epoch_scalars, run_script
from workbook.facts import usable_cores

TARGETS = (0.88, 0.90)


def launches(cores: int, gpus: int) -> dict:
    if gpus:
        return {"baseline": Launch(1, None, horovodrun=False, gpus=True),
                "distributed": Launch(gpus, None, True, gpus=True)}
    workers = 2
    return {"baseline": Launch(1, None, horovodrun=False),
            "distributed": Launch(workers, max(1, cores // workers))}


def curve(run) -> list:
    """[{epoch, seconds, accuracy}]: test accuracy after each epoch, seconds since the launch."""
    points = epoch_scalars(run.log_dir, "validation", "epoch_accuracy")
    return [
        {"epoch": epoch + 1, "seconds": round(wall - run.timed.started_at, 1),
         "accuracy": round(value, 4)}
        for wall, epoch, value in points
    ]


def time_to(points: list, target: float) -> float | None:
    return next((p["seconds"] for p in points if p["accuracy"] >= target), None)


def run(out_dir: Path, tiny: bool = False, echo=print) -> Path:
    cores, gpus = usable_cores(), len(machine.gpus())
    args = settings.accuracy_args(tiny)
    measurements, summary = {}, {"targets": list(TARGETS)}
    for name, launch in launches(cores, gpus).items():
        script = STARTER if name == "baseline" else SOLUTION
        done = run_script(launch, args, out_dir / "runs" / "accuracy" / name, script,
                          timeout=settings.run_timeout(tiny))
        points = curve(done)
        measurements[name] = {
            "config": launch.label, "script": script.name, "curve": points,
            "wall_seconds": round(done.timed.wall_seconds, 1),
            "final_test_accuracy": done.result["test_accuracy"],
        }
        summary[name] = {
            "config": launch.label,
            "final_test_accuracy": done.result["test_accuracy"],
            "wall_seconds": round(done.timed.wall_seconds, 1),
            **{f"seconds_to_{round(t * 100)}": time_to(points, t) for t in TARGETS},
        }
        reached = ", ".join(
            f"{round(t * 100)}% at {s:.0f} s" if (s := time_to(points, t)) is not None
            else f"{round(t * 100)}% not reached" for t in TARGETS
        )
        echo(f"  accuracy: {name} ({launch.label}): {reached}; "
             f"final {done.result['test_accuracy']:.4f}")
    for target in TARGETS:
        key = f"seconds_to_{round(target * 100)}"
        base, dist = summary["baseline"][key], summary["distributed"][key]
        summary[f"speedup_to_{round(target * 100)}"] = (
            round(base / dist, 3) if base and dist else None
        )
    return results.write("accuracy", out_dir, {"script_args": args, "cores": cores,
                                              "gpus": gpus}, measurements, summary)

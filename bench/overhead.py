"""Horovod's overhead: the solution script as one plain process against `horovodrun -np 1`,
and how long a notebook cell that calls the workbook's runner waits for the first step.

Same settings and threads for both single-process runs, so the difference is horovodrun's
launcher plus Horovod's background thread on one worker. The runner is measured the way a
notebook cell uses it (np="auto": 2 CPU workers here), from the call to the first Keras progress
bar it receives: its time includes two workers importing TensorFlow at once and a first step
that waits for both.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from bench import results, settings
from bench.processes import FirstStepConsole, run_timed
from bench.training import SOLUTION, Launch, run_script
from workbook.runner.command import RunOptions, plan_run


def runner_first_step(args: list, run_dir: Path, timeout: float) -> dict:
    """The runner, as `horovodrun(cmd, np="auto")` in a cell runs it: seconds to the first step."""
    # A fresh folder each time: the script would resume from the last repetition's checkpoints.
    shutil.rmtree(run_dir / "runner", ignore_errors=True)
    called = time.monotonic()
    options = RunOptions(
        np="auto",
        run_name="runner",
        logs_root=run_dir,
        env={"TF_CPP_MIN_LOG_LEVEL": "2"},
        timeout=timeout,
    )
    console = FirstStepConsole()
    result = run_timed(plan_run([str(SOLUTION), *args], options=options), console).result
    if console.first_step is None:
        raise RuntimeError(f"the runner's run showed no training step; see {result.log_path}")
    return {
        "first_step_seconds": round(console.first_step - called, 2),
        "wall_seconds": round(result.wall_seconds, 2),
        "layout": result.layout,
    }


def run(out_dir: Path, tiny: bool = False, repeats: int = 3, echo=print) -> Path:
    args = settings.throughput_args(tiny)
    configs = {"python": Launch(1, None, horovodrun=False), "horovodrun -np 1": Launch(1, None)}
    measurements = []
    runs_dir = out_dir / "runs" / "overhead"
    for repetition in range(repeats):
        for name, launch in configs.items():
            done = run_script(
                launch, args, runs_dir / name.replace(" ", "_"), timeout=settings.run_timeout(tiny)
            )
            if done.timed.first_step_seconds is None:
                raise RuntimeError(f"{name} showed no training step; its log: {done.log_dir}")
            row = {
                "repetition": repetition,
                "config": name,
                "wall_seconds": round(done.timed.wall_seconds, 2),
                "first_step_seconds": round(done.timed.first_step_seconds, 2),
                "images_per_second": round(done.throughput(), 2),
            }
            measurements.append(row)
            echo(
                f"  overhead {repetition + 1}/{repeats}: {name}: {row['wall_seconds']:.1f} s, "
                f"first step at {row['first_step_seconds']:.1f} s, "
                f"{row['images_per_second']:.0f} images/s"
            )
        cell = runner_first_step(args, runs_dir / "runner", settings.run_timeout(tiny))
        measurements.append({"repetition": repetition, "config": "runner (np=auto)", **cell})
        echo(
            f"  overhead {repetition + 1}/{repeats}: runner cell ({cell['layout']}): "
            f"first step at {cell['first_step_seconds']} s"
        )
    summary = {}
    for name in [*configs, "runner (np=auto)"]:
        rows = [m for m in measurements if m["config"] == name]
        summary[name] = {
            key: results.summarize([r[key] for r in rows if r.get(key) is not None])
            for key in ("wall_seconds", "first_step_seconds", "images_per_second")
            if any(key in r for r in rows)
        }
    python, launcher = summary["python"], summary["horovodrun -np 1"]
    summary["horovodrun_extra_seconds_to_first_step"] = round(
        launcher["first_step_seconds"]["median"] - python["first_step_seconds"]["median"], 2
    )
    summary["horovodrun_throughput_ratio"] = round(
        launcher["images_per_second"]["median"] / python["images_per_second"]["median"], 3
    )
    return results.write(
        "overhead", out_dir, {"script_args": args, "repeats": repeats}, measurements, summary
    )

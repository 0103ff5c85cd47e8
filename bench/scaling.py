"""Scaling: images/second of the solution script on 1 and N workers, side by side.

On CPUs every worker gets an equal share of the cores: cores / N of them at the largest N (one
each on 2 cores), pinned (bench/pinned.py), with as many intra-op threads; the 1-worker run gets
the same share, so the efficiency throughput(N) / (N x throughput(1)) compares like with like. The single-process
default (python, TensorFlow using every core) is measured too: it is what a learner starts
from. On GPUs: 1, 2, ... all GPUs, one worker each. The configurations alternate within each
repetition, so a slow minute of the machine hits all of them alike.
"""

from __future__ import annotations

import os
from pathlib import Path

from bench import machine, results, settings
from bench.training import Launch, epoch_scalars, run_script


def launches(cores: int, gpus: int, max_workers: int | None = None) -> list:
    if gpus:
        counts = range(1, (max_workers or gpus) + 1)
        return [Launch(n, None, True, gpus=True) for n in counts]
    top = max_workers or max(2, min(cores, 2))
    threads = max(1, cores // top)
    return [Launch(1, None, horovodrun=False), Launch(1, threads, pinned=True),
            Launch(top, threads, pinned=True)]


def measured_throughput(run) -> float:
    """Images/s of the last epoch (the first includes building the graph); else the mean."""
    per_epoch = epoch_scalars(run.log_dir, "train", "epoch_images_per_second")
    return per_epoch[-1][2] if per_epoch else run.images_per_second


def run(out_dir: Path, tiny: bool = False, repeats: int = 3, echo=print) -> Path:
    cores, gpus = os.cpu_count() or 1, len(machine.gpus())
    configs = launches(cores, gpus)
    args = settings.throughput_args(tiny)
    measurements = []
    for repetition in range(repeats):
        for launch in configs:
            done = run_script(launch, args, out_dir / "runs" / "scaling" / f"{launch.workers}")
            rate = measured_throughput(done)
            echo(f"  scaling {repetition + 1}/{repeats}: {launch.label}: {rate:.0f} images/s")
            measurements.append(
                {"repetition": repetition, "config": launch.label, "workers": launch.workers,
                 "threads": launch.threads, "horovodrun": launch.horovodrun,
                 "images_per_second": round(rate, 2),
                 "wall_seconds": round(done.timed.wall_seconds, 2)}
            )
    summary = summarize(configs, measurements)
    return results.write("scaling", out_dir, {"script_args": args, "repeats": repeats,
                                             "cores": cores, "gpus": gpus}, measurements, summary)


def summarize(configs: list, measurements: list) -> dict:
    by_config = {}
    for launch in configs:
        rates = [m["images_per_second"] for m in measurements if m["config"] == launch.label]
        stats = results.summarize(rates)
        by_config[launch.label] = {
            "workers": launch.workers,
            "threads": launch.threads,
            "horovodrun": launch.horovodrun,
            "images_per_second": stats,
            "images_per_second_per_worker": round(stats["median"] / launch.workers, 2),
        }
    horovod = [launch for launch in configs if launch.horovodrun]
    one = horovod[0]
    efficiency = {}
    for launch in horovod[1:]:
        # Per repetition, N workers against the 1-worker run of the same repetition.
        paired = [
            n["images_per_second"] / (launch.workers * o["images_per_second"])
            for n in measurements if n["config"] == launch.label
            for o in measurements
            if o["config"] == one.label and o["repetition"] == n["repetition"]
        ]
        efficiency[str(launch.workers)] = results.summarize(paired)
    summary = {"configs": by_config, "scaling_efficiency": efficiency, "target_efficiency": 0.9}
    default = [launch for launch in configs if not launch.horovodrun]
    if default and len(horovod) > 1:
        top = horovod[-1]
        summary["speedup_over_single_process_default"] = round(
            by_config[top.label]["images_per_second"]["median"]
            / by_config[default[0].label]["images_per_second"]["median"], 3)
    return summary

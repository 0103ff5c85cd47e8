"""Scaling: images/second of the solution script on 1 and N workers, side by side.

On CPUs every worker gets an equal share of the cores: cores / N of them at the largest N (one
each on 2 cores), pinned (the runner's pin_cores.py), with as many intra-op threads; the 1-worker run gets
the same share, so the efficiency throughput(N) / (N x throughput(1)) compares like with like.
Also measured: the single-process default (python, TensorFlow using every core), what a learner
starts from; and N separate plain processes on the same core shares, running at once. Nothing
links those, so their total is the machine's own ceiling (caches, memory bandwidth and clock
are shared), and the efficiency splits into the machine's part and Horovod's part.
On GPUs: 1, 2, ... all GPUs, one worker each. The configurations alternate within each
repetition, so a slow minute of the machine hits all of them alike.
"""

from __future__ import annotations

from pathlib import Path

from bench import machine, results, settings
from bench.processes import busy_note
from bench.training import Launch, run_script, run_separate
from workbook import speed
from workbook.bench_results import (
    SCALING_CONFIGS,
    SCALING_EFFICIENCY,
    SCALING_HOROVOD_SHARE,
    SCALING_IMAGES_PER_SECOND,
    SCALING_MACHINE_CEILING,
)
from workbook.facts import usable_cores


def launches(cores: int, gpus: int, max_workers: int | None = None) -> list:
    if gpus:
        counts = range(1, (max_workers or gpus) + 1)
        return [Launch(n, None, True, gpus=True) for n in counts]
    top = max_workers or max(2, min(cores, 2))
    threads = max(1, cores // top)
    return [
        Launch(1, None, horovodrun=False),
        Launch(1, threads, pinned=True),
        Launch(top, threads, pinned=True),
        Launch(top, threads, horovodrun=False, pinned=True, separate=True),
    ]


def run(out_dir: Path, tiny: bool = False, repeats: int = 3, echo=print) -> Path:
    cores, gpus = usable_cores(), len(machine.gpus())
    configs = launches(cores, gpus)
    args = settings.throughput_args(tiny)
    timeout = settings.run_timeout(tiny)
    measurements = []
    for repetition in range(repeats):
        for launch in configs:
            folder = (
                out_dir
                / "runs"
                / "scaling"
                / (f"{launch.workers}-separate" if launch.separate else f"{launch.workers}")
            )
            if launch.separate:
                runs = run_separate(launch, args, folder, timeout=timeout)
            else:
                runs = [run_script(launch, args, folder, timeout=timeout)]
            rate = sum(one.throughput() for one in runs)
            wall = max(one.timed.wall_seconds for one in runs)
            neighbours = sorted({n for one in runs for n in one.timed.neighbours})
            echo(
                f"  scaling {repetition + 1}/{repeats}: {launch.label}: {rate:.0f} images/s"
                + busy_note(neighbours)
            )
            measurements.append(
                {
                    "repetition": repetition,
                    "config": launch.label,
                    "workers": launch.workers,
                    "threads": launch.threads,
                    "horovodrun": launch.horovodrun,
                    "images_per_second": round(rate, 2),
                    "separate": launch.separate,
                    "wall_seconds": round(wall, 2),
                    "neighbours": neighbours,
                    "others_mean_cores": max(one.timed.others_mean_share for one in runs),
                }
            )
    summary = summarize(configs, measurements)
    return results.write(
        "scaling",
        out_dir,
        {"script_args": args, "repeats": repeats, "cores": cores, "gpus": gpus},
        measurements,
        summary,
    )


def summarize(configs: list, measurements: list) -> dict:
    by_config = {}
    for launch in configs:
        rates = [m["images_per_second"] for m in measurements if m["config"] == launch.label]
        stats = results.summarize(rates)
        by_config[launch.label] = {
            "workers": launch.workers,
            "threads": launch.threads,
            "horovodrun": launch.horovodrun,
            SCALING_IMAGES_PER_SECOND: stats,
            "images_per_second_per_worker": round(stats["median"] / launch.workers, 2),
        }
    horovod = [launch for launch in configs if launch.horovodrun]
    one = horovod[0]
    efficiency, ceiling, horovod_share = {}, {}, {}
    for launch in horovod[1:]:
        n = str(launch.workers)
        # Per repetition, N workers against the 1-worker run of the same repetition.
        efficiency[n] = results.summarize(
            _paired(measurements, launch.label, one.label, speed.scaling_efficiency, launch.workers)
        )
        separate = [c for c in configs if c.separate and c.workers == launch.workers]
        if separate:
            ceiling[n] = results.summarize(
                _paired(
                    measurements,
                    separate[0].label,
                    one.label,
                    speed.scaling_efficiency,
                    launch.workers,
                )
            )
            horovod_share[n] = results.summarize(
                _paired(
                    measurements,
                    launch.label,
                    separate[0].label,
                    lambda a, _, b: speed.ceiling_share(a, b),
                    launch.workers,
                )
            )
    summary = {
        SCALING_CONFIGS: by_config,
        SCALING_EFFICIENCY: efficiency,
        "target_efficiency": 0.9,
        # Figures of a run with a busy neighbour mean little (see bench/processes.py).
        "runs_with_busy_neighbours": sum(bool(m.get("neighbours")) for m in measurements),
    }
    if ceiling:
        # efficiency ~= machine ceiling x Horovod's share of it
        summary[SCALING_MACHINE_CEILING] = ceiling
        summary[SCALING_HOROVOD_SHARE] = horovod_share
    default = [launch for launch in configs if not launch.horovodrun and not launch.separate]
    if default and len(horovod) > 1:
        top = horovod[-1]
        summary["speedup_over_single_process_default"] = round(
            by_config[top.label][SCALING_IMAGES_PER_SECOND]["median"]
            / by_config[default[0].label][SCALING_IMAGES_PER_SECOND]["median"],
            3,
        )
    return summary


def _paired(measurements: list, label: str, base_label: str, ratio, workers: int) -> list:
    """ratio(label's rate, workers, base_label's rate), per repetition."""
    return [
        ratio(m["images_per_second"], workers, b["images_per_second"])
        for m in measurements
        if m["config"] == label
        for b in measurements
        if b["config"] == base_label and b["repetition"] == m["repetition"]
    ]

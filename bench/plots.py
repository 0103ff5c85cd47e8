"""The benchmarks' pictures, one PNG per result file, drawn from the result alone."""

from __future__ import annotations

from pathlib import Path

from bench import accuracy as accuracy_bench
from bench import machine
from workbook.bench_results import (
    SCALING_CONFIGS,
    SCALING_EFFICIENCY,
    SCALING_HOROVOD_SHARE,
    SCALING_IMAGES_PER_SECOND,
    SCALING_MACHINE_CEILING,
    BenchResult,
)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only; no display needed
    import matplotlib.pyplot as plt

    return plt


def _save(fig, document: BenchResult, path: Path) -> Path:
    fig.text(0.01, 0.01, machine.one_line(document.machine), fontsize=7, color="0.4")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return path


def scaling(document: BenchResult, path: Path) -> Path:
    plt = _pyplot()
    configs = document.summary[SCALING_CONFIGS]
    labels = list(configs)
    medians = [configs[c][SCALING_IMAGES_PER_SECOND]["median"] for c in labels]
    low = [m - configs[c][SCALING_IMAGES_PER_SECOND]["min"] for c, m in zip(labels, medians)]
    high = [configs[c][SCALING_IMAGES_PER_SECOND]["max"] - m for c, m in zip(labels, medians)]
    fig, ax = plt.subplots(figsize=(7, 4))
    colors = ["tab:blue" if configs[c]["horovodrun"] else "0.6" for c in labels]
    names = [label.replace(", ", "\n") for label in labels]  # long labels on several lines
    bars = ax.bar(names, medians, yerr=[low, high], capsize=6, color=colors)
    ax.bar_label(bars, labels=[f"{m:.0f}" for m in medians], padding=8)
    ax.set_ylabel("images / second (total, median; bars: min-max)")
    efficiency = document.summary[SCALING_EFFICIENCY]
    notes = ", ".join(f"{n} workers: {e['median']:.2f}" for n, e in efficiency.items())
    notes += " (target 0.90)"
    ceiling = document.summary.get(SCALING_MACHINE_CEILING, {})
    if ceiling:  # what separate processes reach: the machine's own limit
        notes += ";\nmachine ceiling " + ", ".join(f"{e['median']:.2f}" for e in ceiling.values())
        shares = document.summary[SCALING_HOROVOD_SHARE].values()
        notes += ", Horovod's share of it " + ", ".join(f"{e['median']:.2f}" for e in shares)
    ax.set_title(f"Training throughput. Scaling efficiency {notes}", fontsize=10)
    ax.set_ylim(0, max(m + h for m, h in zip(medians, high)) * 1.2)
    return _save(fig, document, path)


def accuracy(document: BenchResult, path: Path) -> Path:
    """Every run's curve, thin, in its configuration's colour; the median time to each target
    as a marker on the target's line."""
    plt = _pyplot()
    summary = document.summary
    colors = {"reference": "tab:gray", "distributed": "tab:blue", "baseline": "tab:orange"}
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    labelled = set()
    for run in document.measurements:
        name, points = run["config"], run["curve"]
        label = None
        if name not in labelled:
            labelled.add(name)
            runs = summary[name]["runs"]
            label = f"{name}: {run['launch']} ({runs} run{'s' if runs != 1 else ''})"
        ax.plot(
            [p["seconds"] / 60 for p in points],
            [100 * p["accuracy"] for p in points],
            marker="o",
            markersize=3,
            linewidth=1,
            alpha=0.75,
            color=colors.get(name),
            label=label,
        )
    for target in summary["targets"]:
        ax.axhline(100 * target, color="0.7", linestyle="--", linewidth=1)
        ax.annotate(
            f"{100 * target:.0f}%",
            (0, 100 * target),
            xycoords=("axes fraction", "data"),
            xytext=(2, 2),
            textcoords="offset points",
            fontsize=8,
            color="0.4",
        )
        for name, color in colors.items():
            seconds = accuracy_bench.median_time(summary[name], target) if name in summary else None
            if seconds is not None:
                ax.plot(
                    seconds / 60,
                    100 * target,
                    marker="D",
                    markersize=7,
                    color=color,
                    markeredgecolor="black",
                )
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=max(ax.get_ylim()[0], 80))
    ax.set_xlabel("minutes since the launch (start-up included)")
    ax.set_ylabel("test accuracy after each epoch (%)")
    ax.set_title(
        "Time to accuracy (diamonds: median time to the line, where most runs reached it)",
        fontsize=10,
    )
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, document, path)


def overhead(document: BenchResult, path: Path) -> Path:
    plt = _pyplot()
    summary = document.summary
    names = [n for n in ("python", "horovodrun -np 1", "runner (np=auto)") if n in summary]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    firsts = [summary[n]["first_step_seconds"]["median"] or 0 for n in names]
    bars = ax.barh(names, firsts, color=["0.6", "tab:blue", "tab:green"][: len(names)])
    ax.bar_label(bars, labels=[f"{f:.1f} s" for f in firsts], padding=4)
    ax.invert_yaxis()
    ax.set_xlabel("seconds from the launch to the first training step (median)")
    ratio = summary["horovodrun_throughput_ratio"]
    ax.set_title(
        f"Start-up. Throughput under horovodrun -np 1: {ratio:.2f} x plain python", fontsize=10
    )
    ax.set_xlim(0, max(firsts) * 1.25 if max(firsts) else 1)
    return _save(fig, document, path)


def grading(document: BenchResult, path: Path) -> Path:
    plt = _pyplot()
    summary = document.summary
    fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.5))
    one = summary["one_file_seconds"]
    names = list(one)
    values = [one[n]["median"] for n in names]
    bars = left.bar(["pass", "fail"][: len(names)], values, color="tab:blue")
    left.bar_label(bars, labels=[f"{v:.2f} s" for v in values], padding=3)
    left.axhline(summary["targets"]["one_file_seconds"], color="tab:red", linestyle="--")
    left.set_ylim(0, max(values) * 1.2)
    left.set_title("one file, every step (target 0.3 s)", fontsize=9)
    left.set_ylabel("seconds, interpreter start included")
    students = summary["students"]
    paths = {
        "checker batch": summary["batch_seconds"]["median"],
        "nbgrader autograde": summary["nbgrader_seconds"]["median"],
    }
    bars = right.bar(list(paths), list(paths.values()), color=["tab:blue", "tab:orange"])
    right.bar_label(bars, labels=[f"{v:.1f} s" for v in paths.values()], padding=3)
    right.set_yscale("log")
    right.set_ylim(top=max(paths.values()) * 3)
    equal = "grades equal" if summary["grades_equal"] else "GRADES DIFFER"
    right.set_title(f"a class of {students} ({equal})", fontsize=9)
    right.set_ylabel("seconds (log scale)")
    return _save(fig, document, path)


def verdicts(document: BenchResult, path: Path) -> Path:
    plt = _pyplot()
    summary = document.summary
    fig, ax = plt.subplots(figsize=(7, 2.6))
    steps = summary["steps"]
    reading = summary["reading"]
    decided = {
        "right": summary["decided_right"],
        "can't tell": 0,
        "wrong": steps - summary["decided_right"],
    }
    colors = {"right": "tab:green", "can't tell": "tab:olive", "wrong": "tab:red"}
    for row, counts in enumerate([decided, reading]):
        left = 0
        for kind, color in colors.items():
            ax.barh(row, counts[kind], left=left, color=color, label=kind if row else None)
            if counts[kind]:
                ax.text(
                    left + counts[kind] / 2,
                    row,
                    str(counts[kind]),
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white",
                )
            left += counts[kind]
    ax.set_yticks([0, 1], ["reading and run", "reading alone"])
    ax.set_xlabel(f"steps of {summary['scripts']} learner-style scripts, against their truth")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=3)
    return _save(fig, document, path)


def run_profile(document: BenchResult, path: Path) -> Path:
    plt = _pyplot()
    parts = document.summary["parts_seconds"]
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(parts) + 1.2))
    names = list(parts)[::-1]
    medians = [parts[name]["median"] for name in names]
    errors = [
        [m - parts[n]["min"] for n, m in zip(names, medians)],
        [parts[n]["max"] - m for n, m in zip(names, medians)],
    ]
    ax.barh(names, medians, xerr=errors, color="tab:blue", capsize=3)
    ax.tick_params(axis="y", labelsize=8)
    ax.set_xlabel("seconds (median, min-max) of one student's run check, both launches")
    return _save(fig, document, path)


PLOTS = {
    "scaling": scaling,
    "accuracy": accuracy,
    "overhead": overhead,
    "grading": grading,
    "verdicts": verdicts,
    "run_profile": run_profile,
}


def plot(json_path: Path) -> Path:
    """Draws <name>.png next to <name>.json."""
    json_path = Path(json_path)
    document = BenchResult.read(json_path)
    return PLOTS[document.benchmark](document, json_path.with_suffix(".png"))

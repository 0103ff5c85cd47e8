"""The README's benchmark section, written from the result files (never typed by hand):

    python -m bench readme      # rewrite the section between the markers in README.md

One writer per benchmark's table (TABLES, in the section's order), each from its result file
as the benchmark writes it today. tests/unit/test_bench.py checks that README.md shows what
bench/results/*.json hold.
"""

from __future__ import annotations

import re
from pathlib import Path

from bench import machine
from workbook import speed
from workbook.bench_results import (
    ACCURACY_CONFIGS,
    RESULTS_DIR,
    SCALING_CONFIGS,
    SCALING_EFFICIENCY,
    SCALING_HOROVOD_SHARE,
    SCALING_IMAGES_PER_SECOND,
    SCALING_MACHINE_CEILING,
    BenchResult,
    accuracy_time_key,
)
from workbook.paths import REPO

README = REPO / "README.md"
IPS = speed.images_per_second_label(2)  # the throughput runs train 2 epochs
START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def _time_to(stats: dict, runs: int) -> str:
    if not stats["reached"]:
        return "not reached"
    text = f"{stats['median'] / 60:.1f} min [{stats['min'] / 60:.1f}-{stats['max'] / 60:.1f}]"
    return text if stats["reached"] == runs else f"{text}, {stats['reached']} of {runs} runs"


def _elsewhere(doc: BenchResult, first: BenchResult) -> list[str]:
    """A line for a benchmark measured on another kind of machine than the section's first."""
    if doc.machine.get("cpu") == first.machine.get("cpu"):
        return []
    return [
        f"Measured on another machine: {machine.one_line(doc.machine)} (commit "
        f"{doc.machine['commit']}).",
        "",
    ]


def _picture(alt: str, name: str) -> list[str]:
    return ["", f"![{alt}](bench/results/{name}.png)", ""]


def _stats_range(stats: dict, spec: str) -> str:
    """'0.84 [0.84-0.87]': a median and its range."""
    return f"{stats['median']:{spec}} [{stats['min']:{spec}}-{stats['max']:{spec}}]"


def scaling_table(scaling: BenchResult, first: BenchResult) -> list[str]:
    """Images/s per launch, the scaling efficiency and, on CPUs, the machine's ceiling."""
    summary = scaling.summary
    lines = [
        "**Scaling** (solution script, full data set, "
        f"{scaling.settings['repeats']} repetitions, median [min-max]):",
        "",
        *_elsewhere(scaling, first),
        f"| launch | {IPS}, all workers | per worker |",
        "|---|---|---|",
    ]
    for label, launch in summary[SCALING_CONFIGS].items():
        lines.append(
            f"| {label} | {_stats_range(launch[SCALING_IMAGES_PER_SECOND], '.0f')} "
            f"| {launch['images_per_second_per_worker']:.0f} |"
        )
    for workers, efficiency in summary[SCALING_EFFICIENCY].items():
        lines += [
            "",
            f"Scaling efficiency at {workers} workers ({speed.SCALING_EFFICIENCY}): "
            f"**{efficiency['median']:.2f}** [{efficiency['min']:.2f}-"
            f"{efficiency['max']:.2f}] (target {summary['target_efficiency']:.2f}).",
        ]
    if "speedup_over_single_process_default" in summary:  # CPUs: the plain process measured
        lines[-1] += (
            " Against one plain process using every core: "
            f"{summary['speedup_over_single_process_default']:.2f}x."
        )
    return lines + _machine_ceiling_lines(summary) + _picture("scaling", "scaling")


def _machine_ceiling_lines(summary: dict) -> list[str]:
    """CPUs: how much of the machine's own ceiling (separate processes) Horovod's workers keep."""
    lines = []
    for workers, ceiling in summary.get(SCALING_MACHINE_CEILING, {}).items():
        share = summary[SCALING_HOROVOD_SHARE][workers]
        lines += [
            "",
            f"Where the rest goes: {workers} separate processes without Horovod reach "
            f"{_stats_range(ceiling, '.2f')} of {workers}x one worker, the most this "
            f"machine allows; Horovod's workers keep **{share['median']:.2f}** "
            f"[{share['min']:.2f}-{share['max']:.2f}] of that (share of the machine's "
            f"ceiling: {speed.CEILING_SHARE}).",
        ]
    return lines


def accuracy_table(accuracy: BenchResult, first: BenchResult) -> list[str]:
    """Per run, the time to each target accuracy and the final test accuracy."""
    summary = accuracy.summary
    targets = summary["targets"]
    lines = [
        "**Time to accuracy** (validation accuracy after each epoch; time from the "
        "launch, start-up included; median [min-max] of the runs that reached the "
        "target):",
        "",
        *_elsewhere(accuracy, first),
        "| run | "
        + " | ".join(f"to {round(t * 100)}%" for t in targets)
        + " | final test accuracy |",
        "|---" * (len(targets) + 2) + "|",
    ]
    for name in ACCURACY_CONFIGS:
        run = summary[name]
        cells = [_time_to(run[accuracy_time_key(t)], run["runs"]) for t in targets]
        lines.append(
            f"| {name}: {run['config']} | "
            + " | ".join(cells)
            + f" | {_stats_range(run['final_test_accuracy'], '.4f')} |"
        )
    lines += _accuracy_speedup_lines(summary)
    busy = sum(summary[name]["runs_with_busy_neighbours"] for name in ACCURACY_CONFIGS)
    if busy:
        lines += [
            "",
            f"{busy} of the runs had a busy neighbour for part of the time (named, "
            "with how long, in `bench/results/accuracy.json`).",
        ]
    if accuracy.settings["reference_side_by_side"]:
        lines += [
            "",
            "The reference runs two at a time, each on its own core (as fast as one "
            "alone: see the machine ceiling above).",
        ]
    return lines + _picture("time to accuracy", "accuracy")


def _accuracy_speedup_lines(summary: dict) -> list[str]:
    """How much sooner 2 workers reach each target than the reference and the baseline (the
    targets that most runs of both reached)."""
    lines = []
    for other, who in (
        ("reference", "the 1-worker reference"),
        ("baseline", "the baseline (the starting script on every core)"),
    ):
        percents = [round(t * 100) for t in summary["targets"]]
        speedups = [
            f"{summary[f'speedup_to_{p}_over_{other}']:.2f}x sooner to {p}%"
            for p in percents
            if summary[f"speedup_to_{p}_over_{other}"]
        ]
        if speedups:
            lines += ["", f"2 workers against {who}: " + ", ".join(speedups) + "."]
    return lines


def overhead_table(overhead: BenchResult, first: BenchResult) -> list[str]:
    """Per launch, the seconds to the first training step and the throughput."""
    summary = overhead.summary
    lines = [
        f"**Horovod overhead** (median of {overhead.settings['repeats']}):",
        "",
        *_elsewhere(overhead, first),
        f"| launch | first training step after | {IPS} |",
        "|---|---|---|",
    ]
    for name in ("python", "horovodrun -np 1", "runner (np=auto)"):
        launch = summary[name]
        # The runner's cell is timed to its first step only.
        ips = (
            f"{launch['images_per_second']['median']:.0f}" if "images_per_second" in launch else "-"
        )
        lines.append(f"| {name} | {launch['first_step_seconds']['median']:.1f} s | {ips} |")
    return lines + _picture("overhead", "overhead")


def grading_table(grading: BenchResult, first: BenchResult) -> list[str]:
    """The grading paths' times against their targets, then the per-student figures."""
    summary = grading.summary
    students = summary["students"]
    lines = [
        "**Grading**:",
        "",
        *_elsewhere(grading, first),
        "| what | time | target |",
        "|---|---|---|",
    ]
    for name, stats in summary["one_file_seconds"].items():
        lines.append(
            f"| `python -m grader check`, one file, {name} | {stats['median']:.2f} s | 0.3 s |"
        )
    lines += [
        f"| `python -m grader batch`, {students} submissions | "
        f"{summary['batch_seconds']['median']:.1f} s "
        f"({summary['batch_ms_per_submission']:.0f} ms each) | 20 s |",
        f"| `python -m instructor autograde --no-run` (reading only, advisory), "
        f"{students} submissions | {_median_range(summary['quick_pass_seconds'], 's', '.0f')}"
        f" ({summary['quick_pass_seconds_per_submission']:.2f} s each) | 300 s |",
        f"| `python -m instructor autograde` (every script run in the sandbox, "
        f"then nbgrader), {students} submissions | "
        f"{_median_range(summary['nbgrader_seconds'], 's', '.0f')} "
        f"({summary['nbgrader_seconds_per_submission']:.2f} s each) | 1200 s |",
        "",
        f"1-minute load average at the end of the autograde runs, the grading's "
        f"own processes included: {_median_range(summary['load_average'], '', '.1f')} on "
        f"{grading.machine['cores']} cores (far above that, other work shared "
        "the machine: the paired ratio holds, the seconds do not).",
        "",
    ]
    return (
        lines
        + _per_student_against_baseline(summary)
        + _seconds_per_student_table(summary["seconds_per_student_breakdown"])
        + _grades_agree_lines(grading)
    )


def _per_student_against_baseline(summary: dict) -> list[str]:
    """The paired, alternating seconds per student: the baseline commit's path against today's
    quick pass and grading with runs (none: the tiny setting has no baseline)."""
    per_student = summary["autograde_seconds_per_student"]
    if "baseline" not in per_student:
        return []
    quick = summary["quick_pass_seconds"]
    quick_each = {
        **quick,
        **{key: quick[key] / summary["students"] for key in ("median", "min", "max")},
    }
    return [
        f"Per student, paired and alternating ({summary['baseline']['students']} "
        f"students): commit {summary['baseline']['ref']}'s `autograde` "
        f"{_median_range(per_student['baseline'], 's', '.2f')}; today's "
        f"quick pass (reading only) {_median_range(quick_each, 's', '.2f')}; "
        "today's grading with runs "
        f"{_median_range(per_student['current'], 's', '.2f')}.",
        "",
    ]


def _seconds_per_student_table(parts: dict) -> list[str]:
    """Where a student's seconds of the autograde with runs go."""
    return [
        "| seconds per student | median [range] |",
        "|---|---|",
        *[f"| {part} | {_median_range(stats, '', '.3f')} |" for part, stats in parts.items()],
        "",
    ]


def _grades_agree_lines(grading: BenchResult) -> list[str]:
    """Whether the runs score each chain script's step, and the reading's two paths agree."""
    summary = grading.summary
    scores = grading.measurements["scores"]
    read_alike = all(v["batch"] == v["quick"] for v in scores.values())
    old = sum("baseline" in v for v in summary["mismatches"].values())
    return [
        f"With runs, every script of the chain scores its step: "
        f"**{summary['runs_score_the_chains_steps']}**. The reading's grades in the "
        f"batch and the quick pass are equal for every student: **{read_alike}**"
        + (
            f"; commit {summary['baseline']['ref']}'s `autograde` (its own rules and runs) "
            f"gives {old} of them another grade than today's reading."
            if old
            else "."
        ),
        *_picture("grading", "grading"),
    ]


def verdicts_table(verdicts: BenchResult, first: BenchResult) -> list[str]:
    """How many verdicts on the learner corpus are right, by the reading alone and decided."""
    summary = verdicts.summary
    reading = summary["reading"]
    unsure = reading["can't tell"]
    return [
        "**Verdicts** on the learner-style corpus (tests/grader_cases/learners: "
        f"{summary['scripts']} scripts, {summary['steps']} steps, truth from runs):",
        "",
        *_elsewhere(verdicts, first),
        "| verdicts | right | can't tell | wrong |",
        "|---|---|---|---|",
        f"| the reading alone | {reading['right']} | {unsure} | {reading['wrong']} |",
        f"| decided (the run where it shows the step) | {summary['decided_right']} | - | "
        f"{summary['steps'] - summary['decided_right']} |",
        *_picture("verdicts", "verdicts"),
    ]


def run_profile_table(profile: BenchResult, first: BenchResult) -> list[str]:
    """Where one student's run check spends its seconds."""
    summary = profile.summary
    return [
        "**One student's run check** (the reference solution, both launches, in the "
        "sandbox; the floor under grading with runs):",
        "",
        *_elsewhere(profile, first),
        "| part | seconds |",
        "|---|---|",
        *[
            f"| {part} | {_median_range(stats, 's', '.1f')} |"
            for part, stats in summary["parts_seconds"].items()
        ],
        f"| **whole check** | {_median_range(summary['wall_seconds'], 's', '.1f')} |",
        *_picture("run profile", "run_profile"),
    ]


# Each benchmark's writer, in the section's order.
TABLES = {
    "scaling": scaling_table,
    "accuracy": accuracy_table,
    "overhead": overhead_table,
    "grading": grading_table,
    "verdicts": verdicts_table,
    "run_profile": run_profile_table,
}


def section(results_dir: Path = RESULTS_DIR) -> str:
    """Markdown: the machine, one table per benchmark, each with its picture."""
    found = {name: result for name in TABLES if (result := BenchResult.find(results_dir, name))}
    if not found:
        return "No benchmark results yet: run `make bench`.\n"
    first = next(iter(found.values()))
    lines = [
        f"Measured on {machine.one_line(first.machine)} (commit "
        f"{first.machine['commit']}); `make bench` measures your machine.",
        "",
    ]
    for name, result in found.items():
        lines += TABLES[name](result, first)
    return "\n".join(lines).rstrip() + "\n"


def _median_range(stats: dict, unit: str, spec: str) -> str:
    """'41 s [38-45], n=3' from bench.results.summarize()'s dict."""
    unit = f" {unit}" if unit else ""
    return (
        f"{stats['median']:{spec}}{unit} [{stats['min']:{spec}}-{stats['max']:{spec}}], "
        f"n={stats['n']}"
    )


def replace_section(text: str, body: str) -> str:
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ValueError(f"README.md has no {START} ... {END} markers")
    return pattern.sub(lambda _: f"{START}\n{body}{END}", text)


def update_readme(readme: Path = README, results_dir: Path = RESULTS_DIR) -> bool:
    """Rewrites the section; returns whether README.md changed."""
    text = readme.read_text(encoding="utf-8")
    new = replace_section(text, section(results_dir))
    if new != text:
        readme.write_text(new, encoding="utf-8")
    return new != text

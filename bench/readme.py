"""The README's benchmark section, written from the result files (never typed by hand):

    python -m bench readme      # rewrite the section between the markers in README.md

tests/unit/test_bench.py checks that README.md shows what bench/results/*.json hold.
"""

from __future__ import annotations

import re
from pathlib import Path

from bench import machine
from workbook import speed
from workbook.bench_results import (ACCURACY_CONFIGS, SCALING_CONFIGS, SCALING_EFFICIENCY,
                                    SCALING_HOROVOD_SHARE, SCALING_IMAGES_PER_SECOND,
                                    RESULTS_DIR, SCALING_MACHINE_CEILING, BenchResult,
                                    accuracy_time_key)
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
    return [f"Measured on another machine: {machine.one_line(doc.machine)} (commit "
            f"{doc.machine['commit']}).", ""]


def section(results_dir: Path = RESULTS_DIR) -> str:
    """Markdown: the machine, one table per benchmark, each with its picture."""
    names = ("scaling", "accuracy", "overhead", "grading", "verdicts", "run_profile")
    docs = {name: BenchResult.find(results_dir, name) for name in names}
    measured = [d for d in docs.values() if d]
    if not measured:
        return "No benchmark results yet: run `make bench`.\n"
    first = measured[0].machine
    lines = [f"Measured on {machine.one_line(first)} (commit {first['commit']}); "
             "`make bench` measures your machine.", ""]
    if scaling := docs["scaling"]:
        s = scaling.summary
        lines += ["**Scaling** (solution script, full data set, "
                  f"{scaling.settings['repeats']} repetitions, median [min-max]):", "",
                  f"| launch | {IPS}, all workers | per worker |", "|---|---|---|"]
        for label, c in s[SCALING_CONFIGS].items():
            ips = c[SCALING_IMAGES_PER_SECOND]
            lines.append(f"| {label} | {ips['median']:.0f} [{ips['min']:.0f}-{ips['max']:.0f}] "
                         f"| {c['images_per_second_per_worker']:.0f} |")
        for n, e in s[SCALING_EFFICIENCY].items():
            lines += ["", f"Scaling efficiency at {n} workers ({speed.SCALING_EFFICIENCY}): "
                      f"**{e['median']:.2f}** [{e['min']:.2f}-{e['max']:.2f}] (target "
                      f"{s['target_efficiency']:.2f})."]
        if "speedup_over_single_process_default" in s:
            lines[-1] += (" Against one plain process using every core: "
                          f"{s['speedup_over_single_process_default']:.2f}x.")
        for n, c in s.get(SCALING_MACHINE_CEILING, {}).items():
            share = s[SCALING_HOROVOD_SHARE][n]
            lines += ["", f"Where the rest goes: {n} separate processes without Horovod reach "
                      f"{c['median']:.2f} [{c['min']:.2f}-{c['max']:.2f}] of {n}x one worker, "
                      "the most this machine allows; Horovod's workers keep "
                      f"**{share['median']:.2f}** [{share['min']:.2f}-{share['max']:.2f}] of "
                      f"that (share of the machine's ceiling: {speed.CEILING_SHARE})."]
        lines += ["", "![scaling](bench/results/scaling.png)", ""]
    if accuracy := docs["accuracy"]:
        s = accuracy.summary
        targets = s["targets"]
        lines += ["**Time to accuracy** (validation accuracy after each epoch; time from the "
                  "launch, start-up included; median [min-max] of the runs that reached the "
                  "target):", "", *_elsewhere(accuracy, measured[0]),
                  "| run | " + " | ".join(f"to {round(t * 100)}%" for t in targets)
                  + " | final test accuracy |", "|---" * (len(targets) + 2) + "|"]
        for name in ACCURACY_CONFIGS:
            r = s[name]
            cells = [_time_to(r[accuracy_time_key(t)], r["runs"]) for t in targets]
            final = r["final_test_accuracy"]
            lines.append(f"| {name}: {r['config']} | " + " | ".join(cells)
                         + f" | {final['median']:.4f} [{final['min']:.4f}-{final['max']:.4f}] |")
        for other, who in (("reference", "the 1-worker reference"),
                           ("baseline", "the baseline (the starting script on every core)")):
            percents = [round(t * 100) for t in targets]
            speedups = [f"{s[f'speedup_to_{t}_over_{other}']:.2f}x sooner to {t}%"
                        for t in percents if s.get(f"speedup_to_{t}_over_{other}")]
            if speedups:
                lines += ["", f"2 workers against {who}: " + ", ".join(speedups) + "."]
        busy = sum(s[name].get("runs_with_busy_neighbours", 0) for name in ACCURACY_CONFIGS)
        if busy:
            lines += ["", f"{busy} of the runs had a busy neighbour for part of the time (named, "
                      "with how long, in `bench/results/accuracy.json`)."]
        if accuracy.settings.get("reference_side_by_side"):
            lines += ["", "The reference runs two at a time, each on its own core (as fast as one "
                      "alone: see the machine ceiling above)."]
        lines += ["", "![time to accuracy](bench/results/accuracy.png)", ""]
    if overhead := docs["overhead"]:
        s = overhead.summary
        lines += ["**Horovod overhead** (median of "
                  f"{overhead.settings['repeats']}):", "", *_elsewhere(overhead, measured[0]),
                  f"| launch | first training step after | {IPS} |", "|---|---|---|"]
        for name in ("python", "horovodrun -np 1", "runner (np=auto)"):
            r = s[name]
            ips = r.get("images_per_second", {}).get("median")
            lines.append(f"| {name} | {r['first_step_seconds']['median']:.1f} s | "
                         f"{'-' if ips is None else f'{ips:.0f}'} |")
        lines += ["", "![overhead](bench/results/overhead.png)", ""]
    if grading := docs["grading"]:
        s = grading.summary
        one = s["one_file_seconds"]
        lines += ["**Grading**:", "", *_elsewhere(grading, measured[0]),
                  "| what | time | target |", "|---|---|---|"]
        for name, stats in one.items():
            lines.append(f"| `python -m grader check`, one file, {name} | "
                         f"{stats['median']:.2f} s | 0.3 s |")
        lines.append(f"| `python -m grader batch`, {s['students']} submissions | "
                     f"{s['batch_seconds']['median']:.1f} s "
                     f"({s['batch_ms_per_submission']:.0f} ms each) | 20 s |")
        if quick := s.get("quick_pass_seconds"):  # results since grading runs the scripts
            lines += [f"| `python -m instructor autograde --no-run` (reading only, advisory), "
                      f"{s['students']} submissions | {_median_range(quick, 's', '.0f')} "
                      f"({s['quick_pass_seconds_per_submission']:.2f} s each) | 300 s |",
                      f"| `python -m instructor autograde` (every script run in the sandbox, "
                      f"then nbgrader), {s['students']} submissions | "
                      f"{_median_range(s['nbgrader_seconds'], 's', '.0f')} "
                      f"({s['nbgrader_seconds_per_submission']:.2f} s each) | 1200 s |", ""]
        else:
            lines += [f"| `python -m instructor autograde` (nbgrader), {s['students']} "
                      f"submissions | {_median_range(s['nbgrader_seconds'], 's', '.0f')} "
                      f"({s['nbgrader_seconds_per_submission']:.2f} s each) | 300 s |", ""]
        if (load := s.get("load_average")) and load.get("n"):
            lines += [f"1-minute load average at the end of the autograde runs, the grading's "
                      f"own processes included: {_median_range(load, '', '.1f')} on "
                      f"{grading.machine['cores']} cores (far above that, other work shared "
                      "the machine: the paired ratio holds, the seconds do not).", ""]
        per_student = s.get("autograde_seconds_per_student", {})
        if "baseline" in per_student and quick:
            quick_each = {**quick, **{key: quick[key] / s["students"]
                                      for key in ("median", "min", "max")}}  # fmt: skip
            lines += [f"Per student, paired and alternating ({s['baseline']['students']} "
                      f"students): commit {s['baseline']['ref']}'s path, which only read the "
                      f"scripts, {_median_range(per_student['baseline'], 's', '.2f')}; today's "
                      f"quick pass (reading only) {_median_range(quick_each, 's', '.2f')}; "
                      "today's grading with runs "
                      f"{_median_range(per_student['current'], 's', '.2f')}.", ""]
        elif "baseline" in per_student:
            lines += [f"Per student, against commit {s['baseline']['ref']}'s path (one shared "
                      f"kernel, one run; {s['baseline']['students']} students, paired, "
                      f"alternating): {_median_range(per_student['baseline'], 's', '.2f')} "
                      f"before, {_median_range(per_student['current'], 's', '.2f')} now "
                      f"({s['speedup_per_student']:.1f}x).", ""]
        if parts := s.get("seconds_per_student_breakdown"):
            lines += ["| seconds per student | median [range] |", "|---|---|"]
            lines += [f"| {part} | {_median_range(stats, '', '.3f')} |"
                      for part, stats in parts.items()]
            lines.append("")
        if "runs_score_the_chains_steps" in s:
            scores = grading.measurements.get("scores", {})
            read_alike = all(v.get("batch") == v.get("quick") for v in scores.values())
            old = sum("baseline" in v for v in s.get("mismatches", {}).values())
            lines += [f"With runs, every script of the chain scores its step: "
                      f"**{s['runs_score_the_chains_steps']}**. The reading's grades in the "
                      f"batch and the quick pass are equal for every student: **{read_alike}**"
                      + (f"; commit {s['baseline']['ref']}'s path, reading today's chain with "
                         f"its old rules, grades {old} students differently." if old else "."),
                      "", "![grading](bench/results/grading.png)", ""]
        else:
            lines += [f"Grades of both paths equal for every student: **{s['grades_equal']}**.",
                      "", "![grading](bench/results/grading.png)", ""]
    if verdicts := docs["verdicts"]:
        s = verdicts.summary
        reading = s["reading"]
        unsure = reading["can't tell"]
        lines += ["**Verdicts** on the learner-style corpus (tests/grader_cases/learners: "
                  f"{s['scripts']} scripts, {s['steps']} steps, truth from runs):", "",
                  *_elsewhere(verdicts, measured[0]),
                  "| verdicts | right | can't tell | wrong |", "|---|---|---|---|",
                  f"| the reading alone | {reading['right']} | {unsure} | "
                  f"{reading['wrong']} |",
                  f"| decided (the run where it shows the step) | {s['decided_right']} | - | "
                  f"{s['steps'] - s['decided_right']} |", "",
                  "![verdicts](bench/results/verdicts.png)", ""]
    if profile := docs["run_profile"]:
        s = profile.summary
        lines += ["**One student's run check** (the reference solution, both launches, in the "
                  "sandbox; the floor under grading with runs):", "",
                  *_elsewhere(profile, measured[0]),
                  "| part | seconds |", "|---|---|",
                  *[f"| {part} | {_median_range(stats, 's', '.1f')} |"
                    for part, stats in s["parts_seconds"].items()],
                  f"| **whole check** | {_median_range(s['wall_seconds'], 's', '.1f')} |", "",
                  "![run profile](bench/results/run_profile.png)", ""]
    return "\n".join(lines).rstrip() + "\n"


def _median_range(stats: dict, unit: str, spec: str) -> str:
    """'41 s [38-45], n=3' from bench.results.summarize()'s dict."""
    unit = f" {unit}" if unit else ""
    return (f"{stats['median']:{spec}}{unit} [{stats['min']:{spec}}-{stats['max']:{spec}}], "
            f"n={stats['n']}")


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

"""python -m bench [all|scaling|accuracy|overhead|grading|verdicts|run_profile ...] [--tiny] [--out DIR]
[--repeats N]"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

# Reading TensorBoard logs imports TensorFlow here: keep its C++ start-up lines out of the report.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from bench import (  # noqa: E402
    accuracy,
    grading,
    machine,
    overhead,
    plots,
    readme,
    run_profile,
    scaling,
    verdicts,
)
from bench.processes import runs_stopped_on_signals  # noqa: E402
from workbook.bench_results import RESULTS_DIR  # noqa: E402

BENCHMARKS = {
    "scaling": lambda out, args: scaling.run(
        out, args.tiny, args.repeats or (1 if args.tiny else 5)
    ),
    "accuracy": lambda out, args: accuracy.run(
        out, args.tiny, args.repeats or (1 if args.tiny else 3)
    ),
    # Tiny overhead runs twice: the second repetition must start afresh, not resume the first.
    "overhead": lambda out, args: overhead.run(
        out, args.tiny, args.repeats or (2 if args.tiny else 3)
    ),
    "grading": lambda out, args: grading.run(
        out,
        args.tiny,
        args.students,
        baseline_ref=args.baseline_ref,
        baseline_students=args.baseline_students,
    ),
    # The learner-style corpus, read and run: how often each verdict is right.
    "verdicts": lambda out, args: verdicts.run(out, args.tiny),
    # Where one student's run check spends its time: the floor under grading with runs.
    "run_profile": lambda out, args: run_profile.run(out, args.tiny, args.repeats or 5),
}


def run_all(which: list, args) -> list:
    """Runs the benchmarks named in `which`, writing their JSON and PNG files; returns the names
    of those that failed (the others still run)."""
    failed = []
    for name in which:
        started = time.monotonic()
        print(f"==> {name}", flush=True)
        try:
            json_path = BENCHMARKS[name](args.out, args)
        except Exception as error:  # noqa: BLE001 (report it; run the other benchmarks)
            print(f"{name}: FAILED: {error}", file=sys.stderr)
            failed.append(name)
            continue
        png = plots.plot(json_path)
        print(f"    {json_path} and {png.name} ({time.monotonic() - started:.0f} s)", flush=True)
    return failed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "which",
        nargs="*",
        default=["all"],
        choices=["all", "readme", *BENCHMARKS],
        help="which benchmarks (default: all); readme: rewrite README.md's "
        "benchmark section from bench/results",
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="seconds-long settings that only check that everything runs",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="where the JSON and PNG files go (default: bench/results, "
        "with --tiny bench/results/tiny)",
    )
    parser.add_argument("--repeats", type=int, help="repetitions of the timed runs")
    parser.add_argument(
        "--students",
        type=int,
        default=200,
        help="size of the synthetic class for the grading benchmark",
    )
    parser.add_argument(
        "--baseline-ref",
        default=grading.BASELINE_REF,
        help="the commit whose autograde the grading benchmark's is timed against "
        f"(default: {grading.BASELINE_REF})",
    )
    parser.add_argument(
        "--baseline-students",
        type=int,
        default=grading.BASELINE_STUDENTS,
        help="how many of the class the baseline grades (0: no baseline; default: "
        f"{grading.BASELINE_STUDENTS})",
    )
    args = parser.parse_args(argv)
    if args.out is None:  # tiny results never replace the real ones
        args.out = RESULTS_DIR / "tiny" if args.tiny else RESULTS_DIR
    if args.which == ["readme"]:
        changed = readme.update_readme(results_dir=args.out)
        print("README.md " + ("updated" if changed else "is up to date"))
        return 0
    which = list(BENCHMARKS) if "all" in args.which else [w for w in args.which if w in BENCHMARKS]
    print(f"Machine: {machine.one_line(machine.describe())}")
    try:
        with runs_stopped_on_signals():
            failed = run_all(which, args)
    except KeyboardInterrupt as stopped:  # the runs' processes are stopped already
        print(f"stopped: {stopped}", file=sys.stderr)
        return 130
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""python -m grader run FILE [--step N] [--json] [--timeout S]: the run-for-real check in a terminal.

Exit status: 0 when the run finished and nothing it showed is wrong (its Result is PASSED, or
CANT_TELL when some step did not show), 1 when it crashed, hung or showed a step undone
(FAILED), 2 for a usage error or a file that can't be read. --json prints the Result: its
findings under "details", how the run ended, its time, log and error under "run".
"""

from __future__ import annotations

import argparse
import sys

from grader.running.invariants import FIRST_STEP, MODULES
from grader.running.run_check import TIMEOUT_S, WORKERS, run_step
from grader.running.run_result import NOT_RUN_SAYS
from workbook.facts import LAST_STEP


def positive_seconds(text: str) -> float:
    """An argparse type for a run's time limit: a finite number of seconds above 0."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):  # nan fails both comparisons
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return seconds


def add_parser(commands) -> None:
    run = commands.add_parser(
        "run",
        help="run a training script for real on 2 workers and check what the ranks do",
        description=(
            f"Run the script on {WORKERS} workers, twice (a few steps from scratch, then a resume, "
            f"on keyed data with the smallest model) and check the invariants of steps "
            f"{FIRST_STEP}..N from what the ranks did: "
            + ", ".join(module.TITLE for module in MODULES.values())
            + "."
        ),
    )
    run.add_argument("file", metavar="FILE", help="the script, e.g. notebooks/fashion_mnist.py")
    run.add_argument(
        "--step",
        type=int,
        default=LAST_STEP,
        metavar="N",
        help=f"the last step done ({FIRST_STEP}..{LAST_STEP}; default {LAST_STEP})",
    )
    run.add_argument(
        "--timeout",
        type=positive_seconds,
        default=TIMEOUT_S,
        metavar="S",
        help=f"stop the run after S seconds (default {TIMEOUT_S:g})",
    )
    run.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args, parser) -> int:
    if not FIRST_STEP <= args.step <= LAST_STEP:
        parser.error(f"--step must be {FIRST_STEP}..{LAST_STEP}, not {args.step}")
    try:
        result = run_step(args.step, args.file, timeout=args.timeout, quiet=args.json)
    except KeyboardInterrupt:
        print("grader: interrupted; every worker of the run was stopped", file=sys.stderr)
        return 130
    if result.unreadable:
        print(f"grader: error: {result.message.removeprefix(NOT_RUN_SAYS)}", file=sys.stderr)
        return 2
    print(result.to_json() if args.json else result)
    return 0 if result.passed else 1

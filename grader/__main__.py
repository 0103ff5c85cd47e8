"""python -m grader check FILE [--step N | --all | --bonus NAME] [--json] [--strict [REFERENCE]]
python -m grader batch PATH... [--csv FILE] [--json]   (a whole class at once: grader/batch.py)
python -m grader run FILE [--step N] [--json]          (run it for real on 2 workers: grader/running/)
(Grading a class with nbgrader: python -m instructor, see instructor/README.md.)

Exit status: 0 when every requested check passes, 1 when one fails, 2 for a usage error or a
file that can't be read (with a one-line message on stderr). A check passes unless its
grader.report.Result is FAILED: PASSED, or CANT_TELL (nothing wrong seen, not confirmed either).
--json prints each Result as it is: status, passed, message, line, hint, expected_diff, ...
"""

from __future__ import annotations

import argparse
import sys

from grader import STEPS, batch, check_all, check_bonus, check_strict
from grader.bonus import BONUSES
from grader.reading.source import FileProblem
from grader.report import Results
from grader.running import cli as running_cli

_USE_STEP_REFERENCE = object()  # --strict without REFERENCE: the reference after --step N


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m grader", description="Check the steps of the Horovod workbook."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="{check,batch,run}")
    check = commands.add_parser(
        "check",
        help="check a training script",
        description="Check which steps of the workbook a training script has done.",
    )
    check.add_argument("file", metavar="FILE", help="the script, e.g. notebooks/fashion_mnist.py")
    which = check.add_mutually_exclusive_group()
    which.add_argument(
        "--step", type=int, metavar="N", help=f"check step N only ({STEPS[0]}..{STEPS[-1]})"
    )
    which.add_argument("--all", action="store_true", help="check every step (the default)")
    which.add_argument(
        "--bonus",
        choices=sorted(BONUSES),
        metavar="NAME",
        help=f"check a bonus exercise instead ({', '.join(sorted(BONUSES))}); no points",
    )
    check.add_argument("--json", action="store_true", help="print the results as JSON")
    check.add_argument(
        "--strict",
        nargs="?",
        const=_USE_STEP_REFERENCE,
        metavar="REFERENCE",
        help="instead, compare the whole file with REFERENCE (default: the reference after "
        "step N, or the solution), ignoring only comments and formatting",
    )
    batch.add_parser(commands)
    running_cli.add_parser(commands)
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "batch":
        return batch.run(args)
    if args.command == "run":
        return running_cli.run(args, parser)
    if args.step is not None and args.step not in STEPS:
        parser.error(f"--step must be {STEPS[0]}..{STEPS[-1]}, not {args.step}")
    try:
        if args.bonus and args.strict is not None:
            parser.error("--bonus and --strict do not go together")
        if args.bonus:
            results = Results([check_bonus(args.bonus, args.file)])
        elif args.strict is not None:
            reference = None if args.strict is _USE_STEP_REFERENCE else args.strict
            results = Results([check_strict(args.file, reference, args.step)])
        else:
            results = check_all(args.file, [args.step] if args.step else STEPS)
    except FileProblem as problem:
        print(f"grader: error: {problem.message}", file=sys.stderr)
        return 2
    unreadable = [result for result in results if result.unreadable]
    if unreadable:
        print(f"grader: error: {unreadable[0].message}", file=sys.stderr)
        return 2
    if args.json:
        print(results.to_json())
    else:
        print(results)
    return 0 if results.passed else 1


if __name__ == "__main__":
    sys.exit(main())

"""python -m instructor SUBCOMMAND DIR ...: grading a class with nbgrader (instructor/README.md).

    init DIR              source/ and nbgrader_config.py from the step notebooks
    generate DIR          the student version in release/
    add-students DIR roster.csv | ID...
    release DIR           release/ into the exchange
    collect DIR           the exchange's submissions into submitted/ (skipped without an exchange)
    zip-collect DIR ZIP   an LMS download into submitted/
    autograde DIR         the class in parallel nbgrader runs; failures alone after
    feedback DIR          HTML feedback in feedback/
    export DIR CSV        the grades as CSV
    report DIR            where the class got stuck: CSV, text and heatmap, and what needs you

Exit status: 0 done, 1 some student could not be graded (autograde), 2 the command could not run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grader.api import RUN_TIMEOUT_S, positive_seconds
from instructor import autograde, class_report, course, ownership
from instructor.course import COURSE_ID, Course, CourseError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m instructor",
        description="Run the Horovod workbook as an nbgrader course (see instructor/README.md).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="SUBCOMMAND")

    def command(name, help_text, force_help=None):
        parser = sub.add_parser(name, help=help_text, description=help_text)
        parser.add_argument("dir", metavar="DIR", help="the course folder")
        if force_help:
            parser.add_argument("--force", action="store_true", help=force_help)
        return parser

    init = command(
        "init",
        "create the course folder from the step notebooks",
        "rewrite source/ and nbgrader_config.py of an existing course",
    )
    init.add_argument("--course-id", default=COURSE_ID, help=f"default: {COURSE_ID}")
    init.add_argument(
        "--exchange", metavar="PATH", help="nbgrader's exchange folder (default: DIR/exchange)"
    )
    init.add_argument(
        "--steps",
        default=course.ALL_STEPS,
        help=f"the steps to grade, e.g. 1-7 or 1,6,9-12 (default: {course.ALL_STEPS})",
    )
    command("generate", "the student version in release/", "regenerate over an existing release")
    students = command("add-students", "add students to the gradebook")
    students.add_argument(
        "students",
        nargs="+",
        metavar="ID_OR_CSV",
        help="student ids, or CSV files with columns id,first_name,last_name,email",
    )
    command("release", "put release/ into the exchange", "release again")
    command("collect", "submissions from the exchange into submitted/")
    zip_collect = command(
        "zip-collect",
        "an LMS download into submitted/",
        "replace earlier extracted files and submissions of the same students",
    )
    zip_collect.add_argument("zip", metavar="ZIP", help="one folder per student id inside")
    grade = command(
        "autograde", "grade the submissions with nbgrader", "grade again students graded before"
    )
    add_autograde_options(grade)
    feedback = command("feedback", "HTML feedback in feedback/ for each autograded student")
    feedback.add_argument(
        "--release", action="store_true", help="also put the feedback into the exchange"
    )
    export = command("export", "the grades as CSV")
    export.add_argument("csv", metavar="CSV", help="where to write it")
    report = command("report", "per student and step: CSV, text and heatmap PNG")
    report.add_argument("--out", metavar="FOLDER", help="default: DIR/reports")
    return parser


def add_autograde_options(grade: argparse.ArgumentParser) -> None:
    """autograde's options: which students, how many at once, how long a run, or no run."""
    grade.add_argument(
        "--student", action="append", metavar="ID", help="only this student (repeatable)"
    )
    grade.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="nbgrader runs at once over disjoint students (default: usable cores + 1)",
    )
    grade.add_argument(
        "--run-jobs",
        type=int,
        metavar="N",
        help="students' scripts run at once, each on 2 workers in a sandbox of its own "
        "(default: usable cores // 2 + 1: on 2 cores, 2 at once grade 1.4x as many students "
        "an hour as 1)",
    )
    grade.add_argument(
        "--run-timeout",
        type=positive_seconds,
        metavar="S",
        help=f"each student's run stops after S seconds (default {RUN_TIMEOUT_S:g}); a step "
        "it did not reach is decided by reading, or said undecided (a run takes 13-26 s on 2 "
        "cores)",
    )
    grade.add_argument(
        "--no-run",
        action="store_true",
        help="a quick pass: decide by reading the scripts only, without running them "
        "(advisory grades; about 1 s per student instead of 10-20)",
    )


def run(args) -> int:
    if args.command == "init":
        steps = course.parse_steps(args.steps)
        made = course.init(args.dir, args.course_id, args.exchange, args.force, steps)
        print(f"course {made.course_id} in {made.root}: {made.folder('source')}")
        return 0
    opened = Course.open(args.dir)
    if args.command == "generate":
        done = course.generate(opened, args.force)
        print(f"{opened.folder('release')}" + ("" if done else ": exists (--force regenerates)"))
    elif args.command == "add-students":
        print(f"{len(course.add_students(opened, args.students))} students in the gradebook")
    elif args.command == "release":
        course.release(opened, args.force)
        print(f"released {opened.assignment} into {opened.exchange_root}")
    elif args.command == "collect":
        print_collected(opened, course.collect(opened))
    elif args.command == "zip-collect":
        new, warnings = course.zip_collect(opened, args.zip, args.force)
        for warning in warnings:
            print(f"nbgrader: {warning}")
        print(
            f"{len(opened.submitted_students())} submissions in {opened.root / 'submitted'} "
            f"({len(new)} new)"
        )
    elif args.command == "autograde":
        outcomes = autograde.autograde(
            opened,
            args.student,
            args.force,
            jobs=args.jobs,
            runs=not args.no_run,
            run_jobs=args.run_jobs,
            run_timeout=args.run_timeout,
        )
        failed = [o for o in outcomes if o.status == "failed"]
        print(f"graded {len(outcomes) - len(failed)} of {len(outcomes)} submissions")
        if failed:
            print(
                f"not graded: {', '.join(o.student for o in failed)} "
                f"(`python -m instructor report {args.dir}` says how to recover them)"
            )
        return 1 if failed else 0
    elif args.command == "feedback":
        students, problems = course.feedback(opened, args.release)
        print(
            f"feedback for {len(students)} students in {opened.root / 'feedback'}"
            + (" (released)" if args.release else "")
            if students or problems
            else "no feedback: nobody is autograded"
        )
        for problem in problems:
            print(f"  left out: {problem}")
    elif args.command == "export":
        print(f"grades: {course.export(opened, args.csv)}")
    elif args.command == "report":
        out = Path(args.out) if args.out else opened.root / "reports"
        written = class_report.write_report(opened, out)
        print(written.summary())
        print(f"\n{written.csv_path}\n{written.text_path}\n{written.png_path}")
    return 0


def print_collected(opened: Course, set_aside) -> None:
    """What collect did: the submissions in submitted/ and those it set aside, or why it was
    skipped (`set_aside` None)."""
    if set_aside is not None:
        print(f"{len(opened.submitted_students())} submissions in {opened.root / 'submitted'}")
        if set_aside:
            print(
                f"SET ASIDE: {len(set_aside)} submissions not collected, never graded as "
                f"the student they name ({opened.root / ownership.NOT_COLLECTED}):"
            )
            for item in set_aside:
                print(f"  {item}")
    else:
        print(
            f"collect skipped: nothing was released or submitted through "
            f"{opened.exchange_root} (zip-collect fills submitted/ instead)"
        )


def give_back_to_owner(folder) -> None:
    """Run as root on someone else's course: what root made there is theirs again."""
    try:
        opened = Course.open(folder)
        exchange = opened.exchange_root / opened.course_id
    except Exception:  # no course (init failed), or an unreadable config: the folder alone
        exchange = None
    changed = ownership.give_back(Path(folder), exchange)
    if changed:
        print(
            f"(run as root: {len(changed)} new files and folders given back to the course's "
            "owner, for their formgrader)"
        )


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except CourseError as problem:
        print(f"instructor: error: {problem}", file=sys.stderr)
        return 2
    finally:
        give_back_to_owner(args.dir)


if __name__ == "__main__":
    sys.exit(main())

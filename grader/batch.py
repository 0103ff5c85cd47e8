"""Grade a whole class's scripts in one process, without notebooks or nbgrader:

    python -m grader batch course/submitted                 # one line per student
    python -m grader batch course/submitted --csv grades.csv
    python -m grader batch alice.py bob/fashion_mnist.py --json

A folder is a class: each folder directly inside it is one student, whose script is the
`fashion_mnist.py` nearest the top of that student's folder (nbgrader's
submitted/<student>/<assignment>/ layout works as it is). A file is one student, named by the
file. The score is the number of steps whose check passes, the same number nbgrader gives the
step notebooks' check cells, because those cells call the same checker on the same file.
A missing, unreadable or broken script scores 0 with its reason and changes nobody else's grade.
A step scores when its grader.report.Result is not FAILED (PASSED, or CANT_TELL: the checker saw
nothing wrong but could not confirm it, listed in the JSON as cant_tell_steps).
Only the student's own files count: a script that is a link to a file outside the student's
folder (or the class folder, for a single file) is not followed; it scores 0 and says so.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from grader import STEPS, check_all
from grader.report import CANT_TELL, FAILED
from workbook.facts import LEARNER_SCRIPT_NAME

SCRIPT_NAME = LEARNER_SCRIPT_NAME


@dataclass
class Submission:
    student: str
    script: Path | None  # None: the student's folder has no fashion_mnist.py
    outside: str = ""  # where the script leads when it is a link out of the student's folder


@dataclass
class Grade:
    student: str
    script: str
    score: int
    max_score: int
    failed_steps: list = field(default_factory=list)  # the steps whose Result is FAILED
    problem: str = ""  # why the file could not be checked at all (missing, syntax error, ...)
    first_failure: str = ""  # the first failing step's message
    cant_tell_steps: list = field(default_factory=list)  # CANT_TELL: scored, not confirmed

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    def __str__(self) -> str:
        text = f"{self.student}: {self.score}/{self.max_score}"
        if self.problem:
            return f"{text}  ({self.problem})"
        if self.failed_steps:
            return f"{text}  (step {self.failed_steps[0]}: {self.first_failure})"
        return text


def find_submissions(paths) -> list:
    """The submissions in `paths` (class folders and single files), sorted by student."""
    submissions = []
    for path in map(Path, paths):
        if path.is_file():
            submissions.append(_inside(Submission(str(path), path), path.absolute().parent))
        elif path.is_dir():
            for student_dir in sorted(p for p in path.iterdir() if p.is_dir()):
                if student_dir.is_symlink():
                    continue  # a link is no student's folder (it may lead anywhere)
                script = script_of(student_dir)
                submissions.append(_inside(Submission(student_dir.name, script), student_dir))
        else:
            raise FileNotFoundError(f"no such file or folder: {path}")
    return submissions


def script_of(student_dir: Path) -> Path | None:
    """The fashion_mnist.py nearest the top of a student's folder (ties: by path). Links to
    folders are not entered."""
    found = [
        Path(folder) / SCRIPT_NAME
        for folder, _, files in os.walk(student_dir)  # does not follow links to folders
        if SCRIPT_NAME in files
    ]
    found.sort(key=lambda p: (len(p.parts), str(p)))
    return next((p for p in found if p.is_file() or p.is_symlink()), None)


def _inside(submission: Submission, root: Path) -> Submission:
    """Marks a script that resolves outside `root` (a link to someone else's file)."""
    if submission.script is not None:
        target = submission.script.resolve()
        if not target.is_relative_to(root.resolve()):
            submission.outside = str(target)
    return submission


def grade(submission: Submission, steps=STEPS) -> Grade:
    if submission.script is None:
        return Grade(submission.student, "", 0, len(steps), list(steps), f"no {SCRIPT_NAME}")
    if submission.outside:
        problem = (
            f"{SCRIPT_NAME} is a link to {submission.outside}, outside the student's "
            "folder: not followed"
        )
        return Grade(
            submission.student, str(submission.script), 0, len(steps), list(steps), problem
        )
    results = check_all(submission.script, steps)
    failed = [result for result in results if result.status == FAILED]
    problems = [result for result in results if result.file_problem or result.unreadable]
    return Grade(
        student=submission.student,
        script=str(submission.script),
        score=len(results) - len(failed),
        max_score=len(results),
        failed_steps=[result.step for result in failed],
        cant_tell_steps=[result.step for result in results if result.status == CANT_TELL],
        problem=problems[0].message if problems else "",
        first_failure=failed[0].message if failed and not problems else "",
    )


def grade_all(paths, steps=STEPS) -> list:
    return [grade(submission, steps) for submission in find_submissions(paths)]


def write_csv(grades: list, path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["student", "score", "max_score", "failed_steps", "problem", "script"])
        for g in grades:
            failed = " ".join(map(str, g.failed_steps))
            writer.writerow([g.student, g.score, g.max_score, failed, g.problem, g.script])


def add_parser(commands) -> None:
    batch = commands.add_parser(
        "batch",
        help="grade many scripts at once (a class folder or files)",
        description="Grade every student's fashion_mnist.py in one process: one line each.",
    )
    batch.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="a class folder (one subfolder per student, e.g. course/submitted) or script files",
    )
    batch.add_argument("--csv", metavar="FILE", help="also write the grades to FILE")
    batch.add_argument("--json", action="store_true", help="print the grades as JSON")


def run(args) -> int:
    try:
        grades = grade_all(args.paths)
    except FileNotFoundError as error:
        print(f"grader batch: error: {error}", file=sys.stderr)
        return 2
    if not grades:
        print(f"grader batch: error: no submissions in {' '.join(args.paths)}", file=sys.stderr)
        return 2
    if args.csv:
        write_csv(grades, args.csv)
    if args.json:
        print(json.dumps([g.to_dict() for g in grades], indent=2))
    else:
        for g in grades:
            print(g)
        full = sum(g.score == g.max_score for g in grades)
        print(f"{len(grades)} students, {full} with every step done")
    return 0

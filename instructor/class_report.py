"""Where the class got stuck, and what needs the instructor: per student and step, from
nbgrader's gradebook and the submitted files.

Writes class_report.csv (one row per student: status, score, step_01..step_12 as 1/0/empty,
and the problems), class_report.txt (the summary below) and class_report.png (the heatmap,
instructor/heatmap.py). The summary gives per step how many passed and how many are stuck
there, then per student: script problems (kept apart from failed steps), tampered check cells,
missing notebooks, and each student not graded, with the commands that recover the submission.
A step's verdict is said in the checker's vocabulary (grader.report): PASSED when nbgrader gave
its check cell full marks, FAILED when not (nbgrader's score has no "can't tell": the check
cell counts it as passed).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

from grader.api import FAILED as STEP_FAILED
from grader.api import NEITHER
from grader.api import PASSED as STEP_PASSED
from instructor import class_verdicts, intake, ownership, submission
from instructor.autograde import load_status
from instructor.course import Course, CourseError
from instructor.heatmap import write_heatmap
from workbook.facts import LEARNER_SCRIPT_NAME, STEP_TITLES

_CHECK_ID = re.compile(r"check_step_(\d+)$")

GRADED = "graded"
AUTOGRADE_FAILED = "autograde failed"  # not grader.report.FAILED (a step's verdict)
NOT_SUBMITTED = "not submitted"
NOT_YET = "not autograded yet"


@dataclass
class StudentRow:
    student: str
    status: str  # GRADED, AUTOGRADE_FAILED, NOT_SUBMITTED or NOT_YET
    steps: dict = field(default_factory=dict)  # {step: True (full marks) | False | None (no grade)}
    script_problem: str = ""  # fashion_mnist.py missing, unreadable, oversized, not Python
    tampered: list = field(default_factory=list)  # "check_step_09 edited", ...
    foreign: list = field(default_factory=list)  # nbgrader metadata and files that were not used
    extra_files: list = field(default_factory=list)  # files the release does not have
    missing_notebooks: list = field(default_factory=list)
    reason: str = ""  # why it is not graded
    bad_notebooks: list = field(default_factory=list)  # the notebooks nbgrader could not grade
    recovery: list = field(default_factory=list)  # shell commands that recover it
    # How the steps were decided (instructor/class_verdicts.py): "step N: both checks' evidence" of
    # each graded step neither could decide, and whether a run decided at all.
    undecided: list = field(default_factory=list)
    advisory: bool = False  # graded by reading only (--no-run)
    # From the run (grader.report.Run): why it was run again alone, what ran that is not the
    # script's own code, and the reference script it is up to formatting.
    reruns: list = field(default_factory=list)
    swapped: str = ""  # the second run after a crash, with the blamed step's line swapped
    not_own: list = field(default_factory=list)
    copy_of: str = ""
    limits: list = field(default_factory=list)  # the limits its run reached ("time", "memory"...)
    twin_of: str = ""  # the student whose identical script's run it shares

    def verdict(self, step: int) -> str | None:
        """The step's verdict: STEP_PASSED, STEP_FAILED, or None when nbgrader gave no grade."""
        ok = self.steps[step]
        return None if ok is None else STEP_PASSED if ok else STEP_FAILED

    @property
    def passed(self) -> int:
        return sum(self.verdict(step) == STEP_PASSED for step in self.steps)

    @property
    def first_not_passed(self) -> int | None:
        """The step this learner is stuck at (the first not passed), for graded rows whose
        script could be checked."""
        if self.status != GRADED or self.script_problem:
            return None
        return next((s for s in sorted(self.steps) if self.verdict(s) != STEP_PASSED), None)

    def cell(self, step: int) -> str:
        """What the map shows at this step: one of heatmap.COLORS."""
        if self.status == AUTOGRADE_FAILED:
            return "not graded"
        if self.status != GRADED or self.verdict(step) is None:
            return "no grade"
        if self.script_problem:
            return "script problem"
        return self.verdict(step)

    @property
    def tampered_steps(self) -> list:
        return [step_of(entry.split()[0], "") for entry in self.tampered]

    def short_problems(self) -> str:
        """Every problem of this student in a few words, for the heatmap."""
        parts = []
        if self.status == AUTOGRADE_FAILED and self.bad_notebooks:
            parts.append(f"NOT GRADED: {', '.join(self.bad_notebooks)} unusable (recovery below)")
        elif self.status == AUTOGRADE_FAILED:
            parts.append(f"NOT GRADED: {self.reason}")
        if self.script_problem:
            parts.append(f"script: {self.script_problem.removeprefix(LEARNER_SCRIPT_NAME + ': ')}")
        if self.tampered:
            parts.append("tampered: " + ", ".join(t.removeprefix("check_") for t in self.tampered))
        if self.foreign:
            parts.append(f"tampering: {len(self.foreign)} not used (see the report)")
        if self.extra_files:
            parts.append(f"extra files: {_listed(self.extra_files, most=2)}")
        if self.missing_notebooks:
            parts.append("missing: " + ", ".join(self.missing_notebooks))
        return "; ".join(parts)


def _listed(names: list, most: int = 8) -> str:
    more = len(names) - most
    return ", ".join(names[:most]) + (f" and {more} more" if more > 0 else "")


def step_of(grade_id: str, notebook_name: str) -> int | None:
    match = _CHECK_ID.match(grade_id) or re.match(r"(\d\d)_", notebook_name)
    return int(match.group(1)) if match else None


def read_class(course: Course) -> tuple:
    """(the assignment's steps, one StudentRow per student in the gradebook or submitted/)."""
    from nbgrader.api import MissingEntry

    status = load_status(course)
    submitted = set(course.submitted_students())
    rows = []
    with course.gradebook() as gradebook:
        try:
            expected = submission.source_cells(gradebook, course.assignment)
        except MissingEntry:
            raise CourseError(f"no {course.assignment} in the gradebook (run `generate`)") from None
        steps = sorted(
            step for cell in expected if (step := step_of(cell.grade_id, cell.notebook)) is not None
        )
        metadata = submission.expected_metadata(gradebook, course.assignment)
        set_aside = course.root / "set_aside"
        screened = {p.name for p in set_aside.iterdir()} if set_aside.is_dir() else set()
        screened = {s for s in screened if intake.recorded(set_aside / s)}
        for student in sorted({s.id for s in gradebook.students} | submitted | screened):
            row = StudentRow(student, GRADED, {step: None for step in steps})
            try:
                graded = gradebook.find_submission(course.assignment, student)
            except MissingEntry:
                graded = None
                last = status.get(student, {})
                if last.get("status") == "failed":
                    row.status = AUTOGRADE_FAILED
                    log = f" (log: {last['log']})" if last.get("log") else ""
                    row.reason = f"{last['reason']}{log}"
                    row.bad_notebooks = last.get("bad_notebooks", [])
                    if row.bad_notebooks:
                        row.recovery = submission.recovery_commands(
                            course.root, course.assignment, student, row.bad_notebooks
                        )
                else:
                    row.status = NOT_YET if student in submitted else NOT_SUBMITTED
                    if student in screened and student not in submitted:
                        row.reason = "the whole submission was set aside (see Tampering)"
            for notebook in graded.notebooks if graded else []:
                for grade in notebook.grades:
                    step = step_of(grade.name, notebook.name)
                    score = grade.auto_score if grade.manual_score is None else grade.manual_score
                    if step in row.steps and score is not None:
                        row.steps[step] = score >= grade.max_score
            row.foreign += [
                f"{entry.get('path')}: {entry.get('why')}, set aside"
                for entry in intake.recorded(course.root / "set_aside" / student)
            ]
            judged = class_verdicts.load(course, student)
            if judged and graded is not None:
                row.advisory = not judged.get("ran")
                row.undecided = [
                    f"step {item['step']}: {item['message']}"
                    for item in judged.get("results") or []
                    if item.get("decided_by") == NEITHER and item.get("step") in row.steps
                ]
                run = judged.get("run") or {}
                row.reruns, row.not_own = run.get("reruns") or [], run.get("foreign") or []
                row.copy_of, row.swapped = run.get("copy_of") or "", run.get("swapped") or ""
                row.limits, row.twin_of = judged.get("limits") or [], judged.get("twin_of") or ""
            if student in submitted:
                folder = course.folder("submitted", student)
                row.script_problem = submission.script_problem(folder)
                row.tampered = submission.tampered_cells(folder, expected)
                row.foreign += submission.metadata_changes(folder, metadata)
                row.extra_files = submission.extra_files(folder, course.folder("release"))
                row.missing_notebooks = submission.missing_notebooks(folder, expected)
            rows.append(row)
    return steps, rows


@dataclass
class ClassReport:
    assignment: str
    steps: list
    rows: list
    csv_path: Path | None = None
    text_path: Path | None = None
    png_path: Path | None = None
    # Submissions collect set aside (instructor/ownership.py): [ownership.NotCollected]
    not_collected: list = field(default_factory=list)

    @property
    def graded(self) -> list:
        return [row for row in self.rows if row.status == GRADED]

    def headline(self) -> str:
        graded = self.graded
        complete = sum(row.passed == len(self.steps) for row in graded)
        return (
            f"{self.assignment}: {len(self.rows)} students, {len(graded)} graded, "
            f"{complete} passed all {len(self.steps)} steps"
        )

    def summary(self) -> str:
        lines = [self.headline(), "", *self.step_table()]
        for title, entries in self.sections():
            if entries:
                lines += ["", title, *(f"  {entry}" for entry in entries)]
        ungraded = [row for row in self.rows if row.status != GRADED]
        if ungraded:
            lines += ["", "Not graded:"]
            for row in ungraded:
                reason = f": {row.reason}" if row.reason else ""
                lines.append(f"  {row.student}: {row.status}{reason}")
                if row.recovery:
                    lines.append("    to grade it with the released notebook in its place:")
                    lines += [f"      {command}" for command in row.recovery]
        return "\n".join(lines)

    def step_table(self) -> list:
        """A line per step: how many graded students passed it, how many stopped there."""
        graded = self.graded
        width = max(6, 2 * len(str(len(graded))) + 1)
        lines = [f"step  {'passed':>{width}}  stuck here  title"]
        for step in self.steps:
            passed = sum(row.verdict(step) == STEP_PASSED for row in graded)
            stuck = sum(row.first_not_passed == step for row in graded)
            fraction = f"{passed}/{len(graded)}"
            lines.append(f"{step:>4}  {fraction:>{width}}  {stuck:>10}  {STEP_TITLES[step]}")
        return lines

    def sections(self) -> list:
        """(title, entries) of each list under the table, in order; an empty one is not shown."""
        return [
            (
                "Set aside at collect: not collected, never graded as the student they name:",
                [f"{item.student}: {item}" for item in self.not_collected],
            ),
            (
                "Script problems (every step fails for this, not for a step's change):",
                [f"{row.student}: {row.script_problem}" for row in self.rows if row.script_problem],
            ),
            (
                "Tampered check cells (nbgrader graded the original checks instead):",
                [f"{row.student}: {', '.join(row.tampered)}" for row in self.rows if row.tampered],
            ),
            (
                "Tampering: what a submission added that grading did not use (kept apart):",
                [f"{row.student}: {entry}" for row in self.rows for entry in row.foreign],
            ),
            (
                "Extra files (not in the release; grading never uses them):",
                [
                    f"{row.student}: {_listed(row.extra_files)}"
                    for row in self.rows
                    if row.extra_files
                ],
            ),
            (
                "Undecided steps: neither the run nor the reading could tell; counted as done "
                "by default (instructor/README.md), please review:",
                [f"{row.student}: {entry}" for row in self.rows for entry in row.undecided],
            ),
            (
                "Code not the student's own: what their script ran (its run earned nothing):",
                [f"{row.student}: {entry}" for row in self.rows for entry in row.not_own],
            ),
            (
                "Scripts that are a reference script up to formatting (shown, graded as run):",
                [f"{row.student}: {row.copy_of}" for row in self.rows if row.copy_of],
            ),
            (
                "Crashes blamed on one step; the steps after it shown by a second run:",
                [f"{row.student}: {row.swapped}" for row in self.rows if row.swapped],
            ),
            (
                "Runs the machine cut (too busy) and that were run again alone:",
                [f"{row.student}: {entry}" for row in self.rows for entry in row.reruns],
            ),
            (
                "Runs that reached a limit of the sandbox (what stopped there earned nothing):",
                [f"{row.student}: {', '.join(row.limits)}" for row in self.rows if row.limits],
            ),
            (
                "Identical scripts judged by one run (twins):",
                [f"{row.student}: shares {row.twin_of}'s run" for row in self.rows if row.twin_of],
            ),
            (
                "Runs that could not be judged (not graded; the reference ran on this machine):",
                [
                    f"{row.student}: {row.reason}"
                    for row in self.rows
                    if row.reason.startswith(class_verdicts.NOT_JUDGED)
                ],
            ),
            (
                "Graded by reading the script only (--no-run): advisory grades:",
                [row.student for row in self.rows if row.advisory],
            ),
            (
                "Missing notebooks (their steps score 0):",
                [
                    f"{row.student}: {', '.join(row.missing_notebooks)}"
                    for row in self.rows
                    if row.missing_notebooks
                ],
            ),
        ]

    def write_csv(self, path: Path) -> Path:
        with open(path, "w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerow(
                [
                    "student_id",
                    "status",
                    "passed",
                    *(f"step_{s:02d}" for s in self.steps),
                    "script_problem",
                    "tampered",
                    "not_used",
                    "missing_notebooks",
                    "note",
                ]
            )
            for row in self.rows:
                verdicts = [row.verdict(s) for s in self.steps]
                cells = ["" if v is None else int(v == STEP_PASSED) for v in verdicts]
                passed = row.passed if row.status == GRADED else ""
                writer.writerow(
                    [
                        row.student,
                        row.status,
                        passed,
                        *cells,
                        row.script_problem,
                        "; ".join(row.tampered),
                        "; ".join(row.foreign),
                        "; ".join(row.missing_notebooks),
                        row.reason,
                    ]
                )
        self.csv_path = path
        return path


def write_report(course: Course, out_dir) -> ClassReport:
    """Reads the class and writes out_dir/class_report.csv, .txt and .png."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = ClassReport(course.assignment, *read_class(course))
    report.not_collected = ownership.not_collected(course.root)
    report.write_csv(out_dir / "class_report.csv")
    report.text_path = out_dir / "class_report.txt"
    report.text_path.write_text(report.summary() + "\n", encoding="utf-8")
    report.png_path = write_heatmap(report, out_dir / "class_report.png")
    return report

"""Where the class got stuck: each student's pass/fail per step, read from nbgrader's gradebook.

Writes class_report.csv (one row per student: status, score, step_01..step_12 as 1/0/empty)
and class_report.png (a heatmap: students x steps, green passed, red failed, grey no grade),
and returns a text summary (per step: how many passed, how many stopped there).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

from grader.course import LEARNER_SCRIPT, Course, CourseError, load_status
from grader.report import FAIL_COLOR, PASS_COLOR
from workbook.step_chain import STEP_TITLES

MISSING_COLOR = "#d0d7de"
_CHECK_ID = re.compile(r"check_step_(\d+)$")


@dataclass
class StudentRow:
    student: str
    status: str  # graded | not submitted | autograde failed | not autograded yet
    steps: dict = field(default_factory=dict)  # {step: True (passed) | False | None (no grade)}
    note: str = ""

    @property
    def passed(self) -> int:
        return sum(1 for ok in self.steps.values() if ok)

    @property
    def first_not_passed(self) -> int | None:
        """The step this learner is stuck at (the first not passed), for graded rows."""
        if self.status != "graded":
            return None
        return next((step for step in sorted(self.steps) if not self.steps[step]), None)


def read_gradebook(course: Course) -> tuple:
    """(the assignment's steps, one StudentRow per student in the gradebook or submitted/)."""
    from nbgrader.api import Gradebook, MissingEntry

    status = load_status(course)
    submitted = set(course.submitted_students())
    rows = []
    with Gradebook(course.db_url, course.course_id) as gradebook:
        try:
            assignment = gradebook.find_assignment(course.assignment)
        except MissingEntry:
            raise CourseError(
                f"no {course.assignment} in the gradebook (run `course generate`)"
            ) from None
        steps = sorted(
            step
            for notebook in assignment.notebooks
            for cell in notebook.grade_cells
            if (step := step_of(cell.name, notebook.name)) is not None
        )
        students = {student.id for student in gradebook.students} | submitted
        for student in sorted(students):
            row = StudentRow(student, "graded", {step: None for step in steps})
            try:
                submission = gradebook.find_submission(course.assignment, student)
            except MissingEntry:
                failed = status.get(student, {}).get("status") == "failed"
                if failed:
                    row.status = "autograde failed"
                    row.note = f"{status[student]['reason']} (log: {status[student]['log']})"
                else:
                    row.status = "not autograded yet" if student in submitted else "not submitted"
                rows.append(row)
                continue
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    step = step_of(grade.name, notebook.name)
                    score = (
                        grade.manual_score if grade.manual_score is not None else grade.auto_score
                    )
                    if step in row.steps and score is not None:
                        row.steps[step] = score >= grade.max_score
            row.note = script_note(course, student, steps[0]) if steps else ""
            rows.append(row)
    return steps, rows


def step_of(grade_id: str, notebook_name: str) -> int | None:
    match = _CHECK_ID.match(grade_id) or re.match(r"(\d\d)_", notebook_name)
    return int(match.group(1)) if match else None


def script_note(course: Course, student: str, step: int) -> str:
    """What is wrong with the submitted script as a whole (missing, syntax error), if anything."""
    from grader import check_step

    folder = course.folder("submitted", student)
    script = folder / LEARNER_SCRIPT
    if not folder.is_dir():
        return ""
    if not script.is_file():
        return f"no {LEARNER_SCRIPT} in the submission"
    result = check_step(step, path=script)
    return (
        f"{LEARNER_SCRIPT}: {result.message.removeprefix(str(script) + ': ')}"
        if result.file_problem
        else ""
    )


@dataclass
class ClassReport:
    assignment: str
    steps: list
    rows: list
    csv_path: Path | None = None
    png_path: Path | None = None

    @property
    def graded(self) -> list:
        return [row for row in self.rows if row.status == "graded"]

    def summary(self) -> str:
        graded = self.graded
        lines = [
            f"{self.assignment}: {len(self.rows)} students, {len(graded)} graded, "
            f"{sum(row.passed == len(self.steps) for row in graded)} passed all "
            f"{len(self.steps)} steps",
            "",
            "step  passed  stuck here  title",
        ]
        for step in self.steps:
            passed = sum(bool(row.steps[step]) for row in graded)
            stuck = sum(row.first_not_passed == step for row in graded)
            fraction = f"{passed}/{len(graded)}"
            lines.append(f"{step:>4}  {fraction:>6}  {stuck:>10}  {STEP_TITLES[step]}")
        ungraded = [row for row in self.rows if row.status != "graded"]
        notes = [row for row in graded if row.note]
        if ungraded:
            lines += ["", "Not graded:"]
            lines += [
                f"  {row.student}: {row.status}" + (f": {row.note}" if row.note else "")
                for row in ungraded
            ]
        if notes:
            lines += ["", "Notes:"] + [f"  {row.student}: {row.note}" for row in notes]
        return "\n".join(lines)

    def write_csv(self, path: Path) -> Path:
        with open(path, "w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerow(
                ["student_id", "status", "passed", *(f"step_{s:02d}" for s in self.steps), "note"]
            )
            for row in self.rows:
                cells = ["" if row.steps[s] is None else int(row.steps[s]) for s in self.steps]
                passed = row.passed if row.status == "graded" else ""
                writer.writerow([row.student, row.status, passed, *cells, row.note])
        self.csv_path = path
        return path

    def write_heatmap(self, path: Path) -> Path:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.colors import ListedColormap
        from matplotlib.patches import Patch

        codes = [
            [{None: 0, False: 1, True: 2}[row.steps[s]] for s in self.steps] for row in self.rows
        ]
        labels = [
            row.student if row.status == "graded" else f"{row.student} ({row.status})"
            for row in self.rows
        ]
        graded = self.graded
        figure, axes = plt.subplots(figsize=(8, 1.6 + 0.32 * max(len(self.rows), 1)))
        axes.imshow(
            codes or [[0] * len(self.steps)],
            cmap=ListedColormap([MISSING_COLOR, FAIL_COLOR, PASS_COLOR]),
            vmin=0,
            vmax=2,
            aspect="auto",
        )
        axes.set_xticks(
            range(len(self.steps)),
            [f"{s}\n{sum(bool(row.steps[s]) for row in graded)}/{len(graded)}" for s in self.steps],
        )
        axes.set_yticks(range(len(labels)), labels)
        axes.set_xticks([x - 0.5 for x in range(1, len(self.steps))], minor=True)
        axes.set_yticks([y - 0.5 for y in range(1, len(labels))], minor=True)
        axes.grid(which="minor", color="white", linewidth=2)
        axes.tick_params(which="minor", length=0)
        axes.set_xlabel("step (passed / graded)")
        all_steps = sum(row.passed == len(self.steps) for row in graded)
        axes.set_title(
            f"{self.assignment}: {len(self.rows)} students, {len(graded)} graded, "
            f"{all_steps} passed all {len(self.steps)} steps"
        )
        axes.legend(
            handles=[
                Patch(color=PASS_COLOR, label="passed"),
                Patch(color=FAIL_COLOR, label="failed"),
                Patch(color=MISSING_COLOR, label="no grade"),
            ],
            loc="upper left",
            bbox_to_anchor=(1.01, 1),
            frameon=False,
        )
        figure.tight_layout()
        figure.savefig(path, dpi=120)
        plt.close(figure)
        self.png_path = path
        return path


def write_report(course: Course, out_dir) -> ClassReport:
    """Reads the gradebook and writes out_dir/class_report.csv and .png."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = ClassReport(course.assignment, *read_gradebook(course))
    report.write_csv(out_dir / "class_report.csv")
    report.write_heatmap(out_dir / "class_report.png")
    return report

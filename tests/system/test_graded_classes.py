"""Grading synthetic classes with the real nbgrader: release, fetch and submit through the
exchange, zip_collect, autograde, feedback, export and the report; and `make grade` on a course
filled by zip_collect alone.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from course_helpers import (
    check_cell,
    edit_notebook,
    instructor,
    place_submission,
    run,
    solution_after,
)
from instructor import class_verdicts
from instructor.class_report import AUTOGRADE_FAILED, GRADED, read_class
from instructor.course import ASSIGNMENT, Course, parse_steps, step_notebooks
from workbook.facts import LAST_STEP, step_notebook
from workbook.paths import REPO

# --- the course folder and its nbgrader_config.py ---------------------------------------------


# Real stderr lines of TensorFlow 2.15, Horovod 0.28.1 and Python's warnings (captured here).


# The notebooks the students' cases need (6, 8, 9 and 10 for aaron, erin and frank): nbgrader
# takes about a second per notebook and student. Every step's notebook is graded with runs by
# the grading benchmark's tiny class (tests/system/test_bench_runs.py); WORKBOOK_COURSE_STEPS
# set to every step (instructor.course.ALL_STEPS) grades them all here too.
COURSE_STEPS = parse_steps(os.environ.get("WORKBOOK_COURSE_STEPS", "1,6-10"))


CORRUPT = step_notebook(6).file_name  # after step 1's, whose grade nbgrader saves before failing


def expected_steps(done_through: int) -> dict:
    return {step: step <= done_through for step in COURSE_STEPS}


EXPECTED = {  # student: the steps that must pass (None: not graded)
    "aaron": None,  # first in nbgrader's order, a notebook that is not JSON
    "adam": expected_steps(LAST_STEP),  # an old nbgrader's metadata: restored, graded, reported
    "alice": expected_steps(LAST_STEP),  # the solution, through the exchange
    "bob": expected_steps(6),  # stopped after step 6, from the LMS zip
    "carol": expected_steps(0),  # a syntax error, from the LMS zip
    "dave": expected_steps(0),  # no fashion_mnist.py
    "erin": expected_steps(6),  # after step 6, with tampered check cells
    "frank": None,  # a notebook that is not JSON
    "gina": None,  # on the roster, submitted nothing
}


FAILED_STUDENTS = ["aaron", "frank"]


def notebook_name(step: int) -> str:
    return next(p.name for p in step_notebooks(steps=[step]))


def tamper(folder: Path) -> None:
    """Erin's notebooks: an edited check cell, a deleted one, and a cell that fakes a pass."""

    def edit(step, change):
        if step in COURSE_STEPS:
            edit_notebook(folder, step, change)

    def fake_pass(notebook, cell):
        notebook.cells.insert(
            notebook.cells.index(cell),
            nbformat.v4.new_code_cell(
                "import grader\n\n"
                "class Passed:\n    passed = True\n\n"
                "grader.check_step = lambda step: Passed()"
            ),
        )

    edit(8, fake_pass)
    edit(9, lambda notebook, cell: setattr(cell, "source", "pass"))
    edit(10, lambda notebook, cell: notebook.cells.remove(cell))


def old_metadata(folder: Path) -> None:
    """Adam's first notebook claims nbgrader's metadata schema 1 (nbgrader 0.9.6 writes 3)."""
    path = sorted(folder.glob("*.ipynb"))[0]
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if "nbgrader" in cell.metadata:
            cell.metadata.nbgrader["schema_version"] = 1
    nbformat.write(notebook, path)


def corrupt(folder: Path) -> None:
    path = folder / CORRUPT
    path.write_text(path.read_text()[:300])


def tree_hashes(root: Path) -> dict:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """The class, graded: {course, autograde, export, report, hashes before/after, ...}."""
    base = tmp_path_factory.mktemp("class")
    root = base / "course"
    steps_arg = ",".join(map(str, COURSE_STEPS))
    done = instructor("init", root, "--steps", steps_arg)
    assert done.returncode == 0, done.stderr
    course = Course.open(root)
    roster = base / "roster.csv"
    roster.write_text(
        "id,first_name,last_name,email\n"
        + "".join(f"{s},{s.title()},Example,{s}@example.org\n" for s in EXPECTED)
    )
    for command in (["generate", root], ["add-students", root, roster], ["release", root]):
        done = instructor(*command)
        assert done.returncode == 0, done.stdout + done.stderr

    # alice: fetch, work, submit through the exchange, as a student would.
    exchange = [
        f"--Exchange.root={root / 'exchange'}",
        f"--Exchange.cache={base / 'cache'}",
        f"--course={course.course_id}",
    ]
    home = base / "alice"
    home.mkdir()
    done = run("-m", "nbgrader", "fetch_assignment", ASSIGNMENT, *exchange, cwd=home)
    assert done.returncode == 0, done.stderr
    shutil.copyfile(solution_after(LAST_STEP), home / ASSIGNMENT / "fashion_mnist.py")
    done = run("-m", "nbgrader", "submit", ASSIGNMENT, "--student=alice", *exchange, cwd=home)
    assert done.returncode == 0, done.stderr
    done = instructor("collect", root)
    assert done.returncode == 0, done.stderr

    # bob and carol: an LMS download, one folder per student (carol's has a subfolder).
    release = course.folder("release")
    archive = base / "lms_download.zip"
    broken = solution_after(LAST_STEP).read_text().replace("def ", "def def ", 1)
    with zipfile.ZipFile(archive, "w") as zipped:
        for notebook in sorted(release.glob("*.ipynb")):
            zipped.write(notebook, f"bob/{notebook.name}")
            zipped.write(notebook, f"carol/{ASSIGNMENT}/{notebook.name}")
        zipped.write(solution_after(6), "bob/fashion_mnist.py")
        zipped.writestr(f"carol/{ASSIGNMENT}/fashion_mnist.py", broken)
    done = instructor("zip-collect", root, archive)
    assert done.returncode == 0, done.stdout + done.stderr

    # aaron, adam, dave, erin, frank: placed in submitted/ as collect would.
    corrupt(place_submission(course, "aaron", solution_after(LAST_STEP)))
    old_metadata(place_submission(course, "adam", solution_after(LAST_STEP)))
    place_submission(course, "dave", None)
    tamper(place_submission(course, "erin", solution_after(6)))
    corrupt(place_submission(course, "frank", solution_after(LAST_STEP)))

    submitted_before = tree_hashes(root / "submitted")
    autograde = instructor("autograde", root, timeout=1800)
    feedback = instructor("feedback", root)
    export_csv = base / "grades.csv"
    export = instructor("export", root, export_csv)
    report = instructor("report", root)
    return {
        "course": course,
        "autograde": autograde,
        "feedback": feedback,
        "export": export,
        "export_csv": export_csv,
        "report": report,
        "submitted_before": submitted_before,
        "submitted_after": tree_hashes(root / "submitted"),
    }


def class_test(test):
    """A test of the graded class; whichever runs first grades it (minutes)."""
    return pytest.mark.timeout(1800)(test)


@class_test
def test_every_submission_arrived_in_submitted(graded_class):
    course = graded_class["course"]
    assert course.submitted_students() == [s for s in EXPECTED if s != "gina"]
    carol = course.folder("submitted", "carol")
    assert (
        (carol / "fashion_mnist.py")
        .read_text()
        .startswith(solution_after(LAST_STEP).read_text()[:20])
    )
    assert len(list(course.folder("submitted", "bob").glob("*.ipynb"))) == len(COURSE_STEPS)


@class_test
def test_autograde_grades_everyone_but_the_unusable_notebooks(graded_class):
    done = graded_class["autograde"]
    assert done.returncode == 1, done.stdout + done.stderr  # 1: someone is not graded
    lines = {line.split(":")[0]: line for line in done.stdout.splitlines() if ": " in line}
    total = len(COURSE_STEPS)
    for student, steps in EXPECTED.items():
        if steps is not None:
            assert lines[student] == f"{student}: {sum(steps.values())}/{total}", done.stdout
    for student in ("aaron", "frank"):
        assert lines[student] == (
            f"{student}: NOT GRADED, unusable notebook {CORRUPT}: NotJSONError: Notebook does not "
            f"appear to be JSON (log: logs/autograde/{student}.log)"
        ), done.stdout
    assert "graded 6 of 8 submissions" in done.stdout, done.stdout
    course = graded_class["course"]
    for student in FAILED_STUDENTS:
        assert not course.folder("autograded", student).exists()


@class_test
def test_one_failure_spreads_to_nobody_else(graded_class):
    """aaron, first in nbgrader's order, fails: nbgrader deletes his autograded/ folder.
    Everyone else is still graded in the parallel runs; only the failures are graded alone."""
    course = graded_class["course"]
    logs = course.root / "logs" / "autograde"
    workers = sorted(p.name for p in logs.glob("worker-*.log"))
    assert workers and sorted(p.name for p in logs.iterdir()) == sorted(
        [
            *workers,
            "judged",
            "phases.json",
            "status.json",
            "timings.jsonl",
            *(f"{s}.log" for s in FAILED_STUDENTS),
        ]
    )
    assert not list(logs.glob("*.db"))  # the workers' gradebooks, merged and gone
    status = json.loads((logs / "status.json").read_text())
    graded = [s for s, steps in EXPECTED.items() if steps is not None]
    assert {
        s for s in graded if re.fullmatch(r"logs/autograde/worker-\d+\.log", status[s]["log"])
    } == set(graded)
    assert sorted(s for s, row in status.items() if row["status"] == "failed") == FAILED_STUDENTS
    for worker in workers:
        assert "FileNotFoundError" not in (logs / worker).read_text()


@class_test
def test_exported_grades_are_exactly_the_expected_ones(graded_class):
    assert graded_class["export"].returncode == 0, graded_class["export"].stderr
    with open(graded_class["export_csv"], newline="") as table:
        rows = {row["student_id"]: row for row in csv.DictReader(table)}
    scores = {student: float(row["score"]) for student, row in rows.items()}
    expected = {s: float(sum(steps.values())) if steps else 0.0 for s, steps in EXPECTED.items()}
    assert scores == expected
    assert all(float(row["max_score"]) == len(COURSE_STEPS) for row in rows.values())
    # The failed students' half-graded submissions are gone: like gina's, no timestamp, no score.
    assert {rows[s]["timestamp"] for s in [*FAILED_STUDENTS, "gina"]} == {""}
    assert rows["alice"]["timestamp"] != ""


@class_test
def test_each_grade_is_what_that_students_own_script_did(graded_class):
    """One bad submission never changes another: each grade is the verdict decided for its
    own script (instructor/class_verdicts.py), from a sandboxed run where the run shows the step."""
    course = graded_class["course"]
    steps, rows = read_class(course)
    assert steps == COURSE_STEPS
    for row in rows:
        expected = EXPECTED[row.student]
        if expected is None:
            assert set(row.steps.values()) == {None}
            continue
        assert row.steps == expected, row.student
        judged = class_verdicts.load(course, row.student)
        assert judged["sha256"] == class_verdicts.fingerprint(
            class_verdicts.script_of(course, row.student)
        )
        decided = {item["step"]: item for item in judged["results"]}
        assert row.steps == {step: decided[step]["passed"] for step in steps}
        if judged["sha256"] and row.student != "carol":  # a script that runs: the run decides
            assert {decided[step]["decided_by"] for step in steps} == {"the run"}, row.student


@class_test
def test_tampered_cells_were_restored_and_graded(graded_class):
    course = graded_class["course"]
    graded = course.folder("autograded", "erin")
    if 10 in COURSE_STEPS:  # the deleted check cell is back, and failed
        cell = check_cell(nbformat.read(graded / notebook_name(10), as_version=4), 10)
        assert "check_step(10, " in cell.source
        assert any(o.output_type == "error" for o in cell.outputs)
    if 9 in COURSE_STEPS:  # "pass" is replaced by the locked source
        cell = check_cell(nbformat.read(graded / notebook_name(9), as_version=4), 9)
        assert "check_step(9, " in cell.source
    if 8 in COURSE_STEPS:  # the cell faking a pass never ran
        cells = nbformat.read(graded / notebook_name(8), as_version=4).cells
        fake = next(c for c in cells if "class Passed" in c.source)
        assert fake.outputs == [] and fake.execution_count is None


@class_test
def test_submitted_files_are_untouched(graded_class):
    assert graded_class["submitted_after"] == graded_class["submitted_before"]


@class_test
def test_feedback_for_each_graded_student(graded_class):
    assert graded_class["feedback"].returncode == 0, graded_class["feedback"].stderr
    course = graded_class["course"]
    for student, steps in EXPECTED.items():
        pages = list(course.folder("feedback", student).glob("*.html"))
        assert len(pages) == (len(COURSE_STEPS) if steps is not None else 0), student


@class_test
def test_report_matches_the_grades(graded_class):
    done = graded_class["report"]
    assert done.returncode == 0, done.stderr
    course = graded_class["course"]
    reports = course.root / "reports"
    with open(reports / "class_report.csv", newline="") as table:
        rows = {row["student_id"]: row for row in csv.DictReader(table)}
    assert set(rows) == set(EXPECTED)
    for student, steps in EXPECTED.items():
        cells = {step: rows[student][f"step_{step:02d}"] for step in COURSE_STEPS}
        if steps is None:
            assert set(cells.values()) == {""}
        else:
            assert cells == {step: str(int(ok)) for step, ok in steps.items()}
    statuses = {s: rows[s]["status"] for s in FAILED_STUDENTS}
    assert statuses == {s: AUTOGRADE_FAILED for s in FAILED_STUDENTS}
    assert rows["gina"]["status"] == "not submitted"
    assert (reports / "class_report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    lines = done.stdout.splitlines()
    total = len(COURSE_STEPS)
    assert lines[0] == f"horovod_steps: 9 students, 6 graded, 2 passed all {total} steps"
    carol_line = next(line for line in lines if line.startswith("  carol: "))
    assert re.fullmatch(r"  carol: fashion_mnist\.py: line \d+: invalid syntax", carol_line)
    assert "  dave: no fashion_mnist.py in the submission" in lines
    tampered = [
        f"check_step_{s:02d} {what}"
        for s, what in ((9, "edited"), (10, "deleted"))
        if s in COURSE_STEPS
    ]
    if tampered:
        assert f"  erin: {', '.join(tampered)}" in lines
    first = notebook_name(COURSE_STEPS[0])
    step = COURSE_STEPS[0]
    assert f"  adam: {first}: nbgrader metadata of check_step_{step:02d} changed, restored" in lines
    for student, notebook in (("aaron", CORRUPT), ("frank", CORRUPT)):
        start = next(i for i, line in enumerate(lines) if line.startswith(f"  {student}: "))
        assert lines[start + 1 : start + 7] == [
            "    to grade it with the released notebook in its place:",
            f"      cd {course.root}",
            f"      mkdir -p set_aside/{student}",
            f"      mv submitted/{student}/horovod_steps/{notebook} set_aside/{student}/",
            f"      cp release/horovod_steps/{notebook} submitted/{student}/horovod_steps/",
            f"      {sys.executable} -m instructor autograde . --student {student} --force",
        ]


@class_test
def test_the_reports_commands_recover_an_ungradable_submission(graded_class):
    """Last of the class's tests: it grades frank. The report's commands, run as printed, give
    him the grade the step checker gives his script."""
    course = graded_class["course"]
    lines = graded_class["report"].stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  frank: "))
    commands = [line.strip() for line in lines[start + 2 : start + 7]]
    done = subprocess.run(
        " && ".join(commands), shell=True, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    total = len(COURSE_STEPS)
    assert done.stdout.splitlines() == [f"frank: {total}/{total}", "graded 1 of 1 submissions"]
    assert (course.root / "set_aside" / "frank" / CORRUPT).is_file()  # the original, kept
    steps, rows = read_class(course)
    frank = next(row for row in rows if row.student == "frank")
    assert frank.status == GRADED and frank.steps == {step: True for step in COURSE_STEPS}


def test_make_grade_on_a_zip_collected_course(tmp_path):
    """No release, no exchange: collect is skipped with a notice, the others run, and make
    fails (autograde's 1) only after the report is written. Two students hand in the same
    script: one run judges both."""
    root = tmp_path / "course"
    for command in (["init", root, "--steps", "1,6"], ["generate", root]):
        done = instructor(*command)
        assert done.returncode == 0, done.stdout + done.stderr
    release = Course.open(root).folder("release")
    archive = tmp_path / "lms.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for student, script in (("abe", 6), ("ann", 6), ("ben", 0)):
            for notebook in sorted(release.glob("*.ipynb")):
                text = notebook.read_text()
                if student == "abe" and notebook.name == CORRUPT:
                    text = text[:300]
                zipped.writestr(f"{student}/{notebook.name}", text)
            zipped.write(solution_after(script), f"{student}/fashion_mnist.py")
    done = instructor("zip-collect", root, archive)
    assert done.returncode == 0, done.stdout + done.stderr

    # -o env: the environment is there already (make grade would check it for half a minute).
    done = subprocess.run(
        # --no-print-directory: under `make test` this make is a sub-make, which would print
        # "make[1]: Entering directory ..." first.
        ["make", "--no-print-directory", "-o", "env", "grade", f"COURSE={root}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 2, done.stdout + done.stderr  # make's "Error 1" of the recipe
    judged = [line for line in done.stdout.splitlines() if ": judged" in line]
    assert [line.split(":")[0] for line in judged] == ["abe", "ann", "ben"]
    assert f"abe: judged, run and read, 6/{LAST_STEP} steps" in judged[0]
    assert judged[1] == f"ann: judged as abe's identical script, 6/{LAST_STEP} steps"
    lines = [line for line in done.stdout.splitlines() if ": judged" not in line]
    assert lines[:6] == [
        f"collect skipped: nothing was released or submitted through {root / 'exchange'} "
        "(zip-collect fills submitted/ instead)",
        f"abe: NOT GRADED, unusable notebook {CORRUPT}: NotJSONError: Notebook does not appear "
        "to be JSON (log: logs/autograde/abe.log)",
        "ann: 2/2",
        "ben: 0/2",
        "graded 2 of 3 submissions",
        f"not graded: abe (`python -m instructor report {root}` says how to recover them)",
    ]
    assert lines[6:9] == [
        f"feedback for 2 students in {root / 'feedback'}",
        f"grades: {root / 'grades.csv'}",
        "horovod_steps: 3 students, 2 graded, 1 passed all 2 steps",
    ]
    assert "Error 1" in done.stderr
    with open(root / "grades.csv", newline="") as table:
        scores = {row["student_id"]: row["score"] for row in csv.DictReader(table)}
    assert scores == {"abe": "0.0", "ann": "2.0", "ben": "0.0"}
    assert (root / "reports" / "class_report.png").is_file()
    text = (root / "reports" / "class_report.txt").read_text()
    assert "  abe: autograde failed: unusable notebook" in text

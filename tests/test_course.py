"""Grading a class with nbgrader: `python -m grader course ...` (grader/course.py).

The fast tests check the nbgrader_config.py the course writes against nbgrader 0.9.6's own
classes, and the class report on a gradebook filled through nbgrader's API. The slow one grades a
synthetic class with the real nbgrader CLI: release, fetch and submit through the exchange,
zip_collect, autograde, feedback, export and the report.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from grader import check_step
from grader.class_report import ClassReport, read_gradebook, write_report
from grader.course import (
    ALL_STEPS,
    ASSIGNMENT,
    CELL_TIMEOUT,
    COURSE_ID,
    IGNORED_STDERR,
    ZIP_REGEXP,
    Course,
    CourseError,
    failure_reason,
    init,
    parse_steps,
    step_notebooks,
)
from workbook import step_chain

SOLUTIONS = step_chain.OUTPUT_DIR


def solution_after(step: int) -> Path:
    if step == step_chain.LAST_STEP:
        return SOLUTIONS / "fashion_mnist_solution.py"
    return SOLUTIONS / step_chain.output_name(step)


def run(*args, cwd=None, timeout=600) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    return done


def grader_course(*args, timeout=900) -> subprocess.CompletedProcess:
    return run("-m", "grader", "course", *args, timeout=timeout)


def load_config(root: Path):
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()


# --- the course folder and its nbgrader_config.py ---------------------------------------------


def test_step_notebooks_are_the_twelve_with_one_check_each():
    notebooks = step_notebooks()
    assert [int(path.name[:2]) for path in notebooks] == list(ALL_STEPS)


def test_parse_steps():
    assert parse_steps("1-12") == list(ALL_STEPS)
    assert parse_steps("1,6,9-10") == [1, 6, 9, 10]
    for bad in ("0-3", "12-13", "a", ""):
        with pytest.raises(CourseError):
            parse_steps(bad)


def test_init_writes_source_and_a_config_nbgrader_understands(tmp_path):
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.converters import Autograde
    from nbgrader.exchange.default import Exchange
    from nbgrader.plugins import FileNameCollectorPlugin
    from nbgrader.preprocessors import Execute, IgnorePattern, OverwriteCells

    from grader.nbgrader_plugins import ExecuteChecksOnly

    course = init(tmp_path / "course", steps=[1, 6])
    source = course.folder("source")
    assert sorted(p.name for p in source.iterdir()) == [
        "01_initialize_horovod.ipynb",
        "06_split_the_work.ipynb",
        "fashion_mnist.py",
    ]
    assert (source / "fashion_mnist.py").read_bytes() == (
        SOLUTIONS / "fashion_mnist.py"
    ).read_bytes()

    # Read back by nbgrader's own classes: a misspelt trait or class would not arrive.
    config = load_config(course.root)
    coursedir = CourseDirectory(config=config)
    assert coursedir.root == str(course.root) and coursedir.course_id == COURSE_ID
    assert "logs" in coursedir.ignore
    assert Exchange(coursedir=coursedir, config=config).root == str(course.root / "exchange")
    autograde = Autograde(coursedir=coursedir, config=config)
    assert autograde.exclude_overwriting == {ASSIGNMENT: ["fashion_mnist.py"]}
    preprocessors = autograde.autograde_preprocessors
    assert ExecuteChecksOnly in preprocessors and Execute not in preprocessors
    assert ExecuteChecksOnly(config=config).timeout == CELL_TIMEOUT
    assert OverwriteCells(config=config).add_missing_cells is True
    ignore = IgnorePattern(config=config)
    assert ignore.enabled and ignore.pattern == IGNORED_STDERR
    collector = FileNameCollectorPlugin(config=config)
    assert collector.named_regexp == ZIP_REGEXP and ".py" in collector.valid_ext

    assert Course.open(course.root).course_id == COURSE_ID
    with pytest.raises(CourseError, match="already"):
        init(course.root)


def test_init_keeps_its_course_id(tmp_path):
    init(tmp_path, course_id="hvd_spring")
    assert Course.open(tmp_path).course_id == "hvd_spring"


def test_commands_on_a_folder_that_is_no_course_fail_cleanly(tmp_path):
    done = grader_course("autograde", tmp_path, timeout=60)
    assert done.returncode == 2 and "no nbgrader_config.py" in done.stderr
    assert "Traceback" not in done.stderr


# Real stderr lines of TensorFlow 2.15, Horovod 0.28.1 and Python's warnings (captured here).
LIBRARY_NOISE = [
    "2026-11-22 01:39:30.150441: I tensorflow/core/util/port.cc:113] oneDNN custom operations on\n",
    "To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild TF\n",
    "W0000 00:00:1731234567.123456   12345 cuda_dnn.cc:8310] Unable to register cuDNN factory\n",
    "WARNING:tensorflow:Callback method `on_train_batch_end` is slow compared to the batch time\n",
    "WARNING:absl:Found untraced functions\n",
    "[2026-11-22 01:39:36.128651: W /tmp/pip-install/horovod/common/operations.cc:107] warning\n",
    "/x/site-packages/tensorflow_addons/__init__.py:12: UserWarning: TensorFlow Addons is EOL\n"
    "  warnings.warn(\n",
]


def test_ignore_pattern_drops_library_noise_and_keeps_the_rest():
    from nbgrader.preprocessors import IgnorePattern
    from nbgrader.utils import determine_grade

    def graded_cell(*stderr):
        cell = nbformat.v4.new_code_cell("pass")
        cell.metadata.nbgrader = {"grade": True, "grade_id": "x", "points": 1, "solution": False}
        cell.outputs = [nbformat.v4.new_output("stream", name="stderr", text=t) for t in stderr]
        return cell

    ignore = IgnorePattern(pattern=IGNORED_STDERR, enabled=True)
    noisy = graded_cell(*LIBRARY_NOISE)
    assert determine_grade(noisy) == (0, 1)  # what nbgrader would do without IgnorePattern
    cleaned, _ = ignore.preprocess_cell(noisy, {}, 0)
    assert cleaned.outputs == [] and determine_grade(cleaned) == (1, 1)
    own, _ = ignore.preprocess_cell(graded_cell("my own message\n"), {}, 0)
    assert len(own.outputs) == 1 and determine_grade(own) == (0, 1)


def test_zip_regexp_reads_student_and_file_from_the_extracted_path():
    import re

    base = "/c/downloaded/horovod_steps/extracted/lms_download"
    for path, student, file_id in [
        (f"{base}/alice/01_initialize_horovod.ipynb", "alice", "01_initialize_horovod.ipynb"),
        (f"{base}/bob/horovod_steps/fashion_mnist.py", "bob", "fashion_mnist.py"),
    ]:
        match = re.match(ZIP_REGEXP, path)
        assert match and match["student_id"] == student and match["file_id"] == file_id


def test_failure_reason_is_the_last_exception_of_the_log():
    log = (
        "[AutogradeApp | ERROR] Traceback (most recent call last):\n"
        "    json.decoder.JSONDecodeError: Unterminated string\n"
        "    nbformat.reader.NotJSONError: Notebook does not appear to be JSON: '{'\n"
        "[AutogradeApp | WARNING] Removing failed assignment: /c/autograded/frank/horovod_steps\n"
    )
    assert failure_reason(log) == "NotJSONError: Notebook does not appear to be JSON: '{'"
    assert "could not grade" in failure_reason("no traceback here")
    log = (
        "[AutogradeApp | WARNING] Removing failed assignment: /c/autograded/adam/horovod_steps\n"
        "[AutogradeApp | ERROR] One or more notebooks in the assignment use an old version \n"
        "    of the nbgrader metadata format.\n"
        "    \n"
        "[AutogradeApp | ERROR] There was an error processing assignment 'x' for student 'adam'\n"
    )
    assert failure_reason(log) == (
        "One or more notebooks in the assignment use an old version of the nbgrader metadata "
        "format."
    )


# --- the class report, on a gradebook filled through nbgrader's API ----------------------------


def test_report_from_the_gradebook(tmp_path):
    from nbgrader.api import Gradebook

    course = init(tmp_path, steps=[1, 2, 3])
    with Gradebook(course.db_url, course.course_id) as gradebook:
        gradebook.add_assignment(ASSIGNMENT)
        for step in (1, 2, 3):
            name = f"{step:02d}_step"
            gradebook.add_notebook(name, ASSIGNMENT)
            gradebook.add_grade_cell(
                f"check_step_{step:02d}", name, ASSIGNMENT, max_score=1, cell_type="code"
            )
        for student, scores in {
            "ann": (1, 1, 1),
            "ben": (1, 0, 0),
            "cid": None,
            "dan": None,
        }.items():
            gradebook.add_student(student)
            if scores is None:
                continue
            gradebook.add_submission(ASSIGNMENT, student)
            for step, score in zip((1, 2, 3), scores):
                grade = gradebook.find_grade(
                    f"check_step_{step:02d}", f"{step:02d}_step", ASSIGNMENT, student
                )
                grade.auto_score = score
            gradebook.db.commit()
    (course.root / "logs" / "autograde").mkdir(parents=True)
    (course.root / "logs" / "autograde" / "status.json").write_text(
        json.dumps(
            {
                "dan": {
                    "status": "failed",
                    "reason": "NotJSONError: x",
                    "log": "logs/autograde/dan.log",
                }
            }
        )
    )
    (course.folder("submitted", "ben")).mkdir(parents=True)  # ben submitted no fashion_mnist.py

    steps, rows = read_gradebook(course)
    assert steps == [1, 2, 3]
    by_student = {row.student: row for row in rows}
    assert by_student["ann"].steps == {1: True, 2: True, 3: True}
    assert by_student["ben"].steps == {1: True, 2: False, 3: False}
    assert (
        by_student["ben"].first_not_passed == 2 and "no fashion_mnist.py" in by_student["ben"].note
    )
    assert by_student["cid"].status == "not submitted" and set(
        by_student["cid"].steps.values()
    ) == {None}
    assert (
        by_student["dan"].status == "autograde failed" and "NotJSONError" in by_student["dan"].note
    )

    report = write_report(course, tmp_path / "reports")
    with open(report.csv_path, newline="") as table:
        written = {row["student_id"]: row for row in csv.DictReader(table)}
    assert [written["ann"][f"step_0{s}"] for s in (1, 2, 3)] == ["1", "1", "1"]
    assert [written["ben"][f"step_0{s}"] for s in (1, 2, 3)] == ["1", "0", "0"]
    assert [written["cid"][f"step_0{s}"] for s in (1, 2, 3)] == ["", "", ""]
    assert written["ann"]["passed"] == "3" and written["dan"]["passed"] == ""
    assert report.png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = report.summary()
    assert "4 students, 2 graded, 1 passed all 3 steps" in summary
    step_2 = next(line for line in summary.splitlines() if line.startswith("   2 "))
    assert step_2.split()[:3] == ["2", "1/2", "1"]  # ann passed step 2, ben is stuck there
    assert "dan: autograde failed: NotJSONError: x" in summary


def test_report_of_an_empty_class(tmp_path):
    report = ClassReport(ASSIGNMENT, [1, 2], [])
    report.write_heatmap(tmp_path / "empty.png")
    assert "0 students, 0 graded" in report.summary()


# --- slow: a synthetic class through the real nbgrader CLI -------------------------------------

# Autograding starts a kernel per notebook and student: 2-3 s each on 2 busy cores, 160 s for this
# class. WORKBOOK_COURSE_STEPS=1,6-10 grades fewer notebooks (it needs 8, 9 and 10 for erin).
COURSE_STEPS = parse_steps(os.environ.get("WORKBOOK_COURSE_STEPS", "1-12"))
CORRUPT = "06_split_the_work.ipynb"  # after 01, whose grade nbgrader saves before failing


def expected_steps(done_through: int) -> dict:
    return {step: step <= done_through for step in COURSE_STEPS}


EXPECTED = {  # student: the steps that must pass (None: not graded)
    "adam": None,  # notebook metadata of an old nbgrader: nbgrader's own batch stops there
    "alice": expected_steps(12),  # the solution, through the exchange
    "bob": expected_steps(6),  # stopped after step 6, from the LMS zip
    "carol": expected_steps(0),  # a syntax error, from the LMS zip
    "dave": expected_steps(0),  # no fashion_mnist.py
    "erin": expected_steps(6),  # after step 6, with tampered check cells
    "frank": None,  # a notebook that is not JSON
    "gina": None,  # on the roster, submitted nothing
}


def notebook_name(step: int) -> str:
    return next(p.name for p in step_notebooks(steps=[step]))


def tamper(folder: Path) -> None:
    """Erin's notebooks: an edited check cell, a deleted one, and a cell that fakes a pass."""

    def edit(step, change):
        if step not in COURSE_STEPS:
            return
        path = folder / notebook_name(step)
        notebook = nbformat.read(path, as_version=4)
        index = next(
            i
            for i, cell in enumerate(notebook.cells)
            if cell.metadata.get("nbgrader", {}).get("grade_id") == f"check_step_{step:02d}"
        )
        change(notebook, index)
        nbformat.write(notebook, path)

    def fake_pass(notebook, index):
        notebook.cells.insert(
            index,
            nbformat.v4.new_code_cell(
                "import grader\n\n"
                "class Passed:\n    passed = True\n\n"
                "grader.check_step = lambda step: Passed()"
            ),
        )

    edit(8, fake_pass)
    edit(9, lambda notebook, index: setattr(notebook.cells[index], "source", "pass"))
    edit(10, lambda notebook, index: notebook.cells.pop(index))


def old_metadata(folder: Path) -> None:
    """Adam's first notebook claims nbgrader's metadata schema 1 (nbgrader 0.9.6 writes 3)."""
    path = sorted(folder.glob("*.ipynb"))[0]
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if "nbgrader" in cell.metadata:
            cell.metadata.nbgrader["schema_version"] = 1
    nbformat.write(notebook, path)


def place_submission(course: Course, student: str, script: Path | None) -> Path:
    """A submission the way `nbgrader collect` leaves it: released notebooks, script, timestamp."""
    folder = course.folder("submitted", student)
    shutil.copytree(
        course.folder("release"), folder, ignore=shutil.ignore_patterns("fashion_mnist.py")
    )
    if script is not None:
        shutil.copyfile(script, folder / "fashion_mnist.py")
    (folder / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC")
    return folder


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
    done = grader_course("init", root, "--steps", steps_arg)
    assert done.returncode == 0, done.stderr
    course = Course.open(root)
    roster = base / "roster.csv"
    roster.write_text(
        "id,first_name,last_name,email\n"
        + "".join(f"{s},{s.title()},Example,{s}@example.org\n" for s in EXPECTED)
    )
    for command in (["generate", root], ["add-students", root, roster], ["release", root]):
        done = grader_course(*command)
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
    shutil.copyfile(solution_after(12), home / ASSIGNMENT / "fashion_mnist.py")
    done = run("-m", "nbgrader", "submit", ASSIGNMENT, "--student=alice", *exchange, cwd=home)
    assert done.returncode == 0, done.stderr
    done = grader_course("collect", root)
    assert done.returncode == 0, done.stderr

    # bob and carol: an LMS download, one folder per student (carol's has a subfolder).
    release = course.folder("release")
    archive = base / "lms_download.zip"
    broken = solution_after(12).read_text().replace("def ", "def def ", 1)
    with zipfile.ZipFile(archive, "w") as zipped:
        for notebook in sorted(release.glob("*.ipynb")):
            zipped.write(notebook, f"bob/{notebook.name}")
            zipped.write(notebook, f"carol/{ASSIGNMENT}/{notebook.name}")
        zipped.write(solution_after(6), "bob/fashion_mnist.py")
        zipped.writestr(f"carol/{ASSIGNMENT}/fashion_mnist.py", broken)
    done = grader_course("zip-collect", root, archive)
    assert done.returncode == 0, done.stdout + done.stderr

    # adam, dave, erin, frank: placed in submitted/ as collect would.
    old_metadata(place_submission(course, "adam", solution_after(12)))
    place_submission(course, "dave", None)
    tamper(place_submission(course, "erin", solution_after(6)))
    corrupt = place_submission(course, "frank", solution_after(12)) / CORRUPT
    corrupt.write_text(corrupt.read_text()[:300])

    submitted_before = tree_hashes(root / "submitted")
    autograde = grader_course("autograde", root, timeout=1800)
    feedback = grader_course("feedback", root)
    export_csv = base / "grades.csv"
    export = grader_course("export", root, export_csv)
    report = grader_course("report", root)
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


@pytest.mark.slow
def test_every_submission_arrived_in_submitted(graded_class):
    course = graded_class["course"]
    assert course.submitted_students() == ["adam", "alice", "bob", "carol", "dave", "erin", "frank"]
    carol = course.folder("submitted", "carol")
    assert (carol / "fashion_mnist.py").read_text().startswith(solution_after(12).read_text()[:20])
    assert len(list(course.folder("submitted", "bob").glob("*.ipynb"))) == len(COURSE_STEPS)


@pytest.mark.slow
def test_autograde_grades_everyone_but_the_corrupt_notebook(graded_class):
    done = graded_class["autograde"]
    assert done.returncode == 1, done.stdout + done.stderr  # 1: someone is not graded
    lines = {line.split(":")[0]: line for line in done.stdout.splitlines() if ": " in line}
    total = len(COURSE_STEPS)
    for student, steps in EXPECTED.items():
        if steps is None:
            continue
        assert lines[student] == f"{student}: {sum(steps.values())}/{total}", done.stdout
    assert "frank: NOT GRADED, invalid notebook " + CORRUPT in lines["frank"]
    assert "NotJSONError" in lines["frank"] and "logs/autograde/frank.log" in lines["frank"]
    assert (
        "adam: NOT GRADED, One or more notebooks in the assignment use an old version"
        in lines["adam"]
    )
    assert "graded 5 of 7 submissions" in done.stdout
    course = graded_class["course"]
    assert not course.folder("autograded", "frank").exists()
    assert not course.folder("autograded", "adam").exists()


@pytest.mark.slow
def test_exported_grades_are_exactly_the_expected_ones(graded_class):
    assert graded_class["export"].returncode == 0, graded_class["export"].stderr
    with open(graded_class["export_csv"], newline="") as table:
        rows = {row["student_id"]: row for row in csv.DictReader(table)}
    scores = {student: float(row["score"]) for student, row in rows.items()}
    expected = {s: float(sum(steps.values())) if steps else 0.0 for s, steps in EXPECTED.items()}
    assert scores == expected
    assert all(float(row["max_score"]) == len(COURSE_STEPS) for row in rows.values())
    # frank's half-graded submission is gone: like gina's, it has no timestamp and no score.
    assert (
        rows["frank"]["timestamp"] == rows["adam"]["timestamp"] == rows["gina"]["timestamp"] == ""
    )
    assert rows["alice"]["timestamp"] != ""


@pytest.mark.slow
def test_each_grade_is_the_step_checker_on_that_students_own_script(graded_class):
    """One bad submission never changes another: each grade equals check_step on its file."""
    course = graded_class["course"]
    steps, rows = read_gradebook(course)
    assert steps == COURSE_STEPS
    for row in rows:
        expected = EXPECTED[row.student]
        if expected is None:
            assert set(row.steps.values()) == {None}
            continue
        assert row.steps == expected, row.student
        script = course.folder("submitted", row.student) / "fashion_mnist.py"
        assert row.steps == {step: check_step(step, path=script).passed for step in steps}


@pytest.mark.slow
def test_tampered_cells_were_restored_and_graded(graded_class):
    course = graded_class["course"]
    graded = course.folder("autograded", "erin")
    if 10 in COURSE_STEPS:  # the deleted check cell is back, and failed
        cells = nbformat.read(graded / notebook_name(10), as_version=4).cells
        check = [
            c for c in cells if c.metadata.get("nbgrader", {}).get("grade_id") == "check_step_10"
        ]
        assert len(check) == 1 and "check_step(10)" in check[0].source
        assert any(o.output_type == "error" for o in check[0].outputs)
    if 9 in COURSE_STEPS:  # "pass" is replaced by the locked source
        cells = nbformat.read(graded / notebook_name(9), as_version=4).cells
        check = next(
            c for c in cells if c.metadata.get("nbgrader", {}).get("grade_id") == "check_step_09"
        )
        assert "check_step(9)" in check.source
    if 8 in COURSE_STEPS:  # the cell faking a pass never ran
        cells = nbformat.read(graded / notebook_name(8), as_version=4).cells
        fake = next(c for c in cells if "class Passed" in c.source)
        assert fake.outputs == [] and fake.execution_count is None


@pytest.mark.slow
def test_submitted_files_are_untouched(graded_class):
    assert graded_class["submitted_after"] == graded_class["submitted_before"]


@pytest.mark.slow
def test_feedback_for_each_graded_student(graded_class):
    assert graded_class["feedback"].returncode == 0, graded_class["feedback"].stderr
    course = graded_class["course"]
    for student in ("alice", "bob", "carol", "dave", "erin"):
        pages = list(course.folder("feedback", student).glob("*.html"))
        assert len(pages) == len(COURSE_STEPS), student
    assert not course.folder("feedback", "frank").exists()
    assert not course.folder("feedback", "adam").exists()


@pytest.mark.slow
def test_report_matches_the_grades(graded_class):
    done = graded_class["report"]
    assert done.returncode == 0, done.stderr
    reports = graded_class["course"].root / "reports"
    with open(reports / "class_report.csv", newline="") as table:
        rows = {row["student_id"]: row for row in csv.DictReader(table)}
    assert set(rows) == set(EXPECTED)
    for student, steps in EXPECTED.items():
        cells = {step: rows[student][f"step_{step:02d}"] for step in COURSE_STEPS}
        if steps is None:
            assert set(cells.values()) == {""}
        else:
            assert cells == {step: str(int(ok)) for step, ok in steps.items()}
    assert rows["frank"]["status"] == "autograde failed" and "NotJSONError" in rows["frank"]["note"]
    assert rows["adam"]["status"] == "autograde failed" and "old version" in rows["adam"]["note"]
    assert rows["gina"]["status"] == "not submitted"
    assert rows["dave"]["note"] == "no fashion_mnist.py in the submission"
    assert "syntax" in rows["carol"]["note"].lower()
    assert (reports / "class_report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    total = len(COURSE_STEPS)
    assert f"8 students, 5 graded, 1 passed all {total} steps" in done.stdout
    assert "frank: autograde failed" in done.stdout

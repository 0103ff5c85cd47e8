"""Grading a class with nbgrader: `python -m instructor ...` (instructor/).

The fast tests check the nbgrader_config.py the course writes against nbgrader 0.9.6's own
classes, what the instructor layer sees in submitted files (tampered check cells, unusable
notebooks and scripts) against a gradebook made by nbgrader, and the class report. The slow ones
grade synthetic classes with the real nbgrader: release, fetch and submit through the exchange,
zip_collect, autograde, feedback, export and the report; and `make grade` on a course filled by
zip_collect alone.
"""

from __future__ import annotations

import ast
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

from instructor import judging
from instructor.autograde import failure_reason
from instructor.config import CELL_TIMEOUT, IGNORED_STDERR, ZIP_REGEXP
from instructor.course import (
    ALL_STEPS,
    ASSIGNMENT,
    COURSE_ID,
    Course,
    CourseError,
    generate,
    init,
    parse_steps,
    step_notebooks,
)
from instructor.heatmap import write_heatmap
from instructor.class_report import (
    AUTOGRADE_FAILED,
    GRADED,
    ClassReport,
    StudentRow,
    read_class,
    write_report,
)
from instructor.submission import (
    expected_metadata,
    metadata_changes,
    notebook_problems,
    script_problem,
    source_cells,
    tampered_cells,
)
from workbook.facts import LAST_STEP, SOLUTION_FILE_NAME, STEPS, chain_file_name, step_notebook
from workbook.paths import REPO, SOLUTIONS_DIR


def solution_after(step: int) -> Path:
    return SOLUTIONS_DIR / (SOLUTION_FILE_NAME if step == LAST_STEP else chain_file_name(step))


def run(*args, cwd=None, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def instructor(*args, timeout=900) -> subprocess.CompletedProcess:
    return run("-m", "instructor", *args, timeout=timeout)


def load_config(root: Path):
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()


def check_cell(notebook, step: int):
    return next(
        cell
        for cell in notebook.cells
        if cell.metadata.get("nbgrader", {}).get("grade_id") == f"check_step_{step:02d}"
    )


# --- the course folder and its nbgrader_config.py ---------------------------------------------


def test_step_notebooks_are_the_manifests_with_one_check_each():
    notebooks = step_notebooks()
    assert [path.name for path in notebooks] == [step_notebook(s).file_name for s in STEPS]


def test_parse_steps():
    assert parse_steps(ALL_STEPS) == list(STEPS)
    assert parse_steps("1,6,9-10") == [1, 6, 9, 10]
    for bad in ("0-3", f"{LAST_STEP}-{LAST_STEP + 1}", "a", ""):
        with pytest.raises(CourseError):
            parse_steps(bad)


def test_init_writes_source_and_a_config_nbgrader_understands(tmp_path):
    from nbgrader.converters import Autograde
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange.default import Exchange
    from nbgrader.plugins import FileNameCollectorPlugin
    from nbgrader.preprocessors import Execute, IgnorePattern, OverwriteCells

    from instructor.plugins import ExecuteChecksOnly

    course = init(tmp_path / "course", steps=[1, 6])
    source = course.folder("source")
    assert sorted(p.name for p in source.iterdir()) == [
        step_notebook(1).file_name,
        step_notebook(6).file_name,
        "fashion_mnist.py",
    ]
    assert (source / "fashion_mnist.py").read_bytes() == solution_after(0).read_bytes()
    config_text = (course.root / "nbgrader_config.py").read_text()
    assert "from instructor.plugins import autograde_preprocessors" in config_text
    assert not re.search(r"\bgrader\.", config_text)  # nothing from the old place

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
    done = instructor("autograde", tmp_path, timeout=60)
    assert done.returncode == 2 and "no nbgrader_config.py" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_course_configured_by_an_older_workbook_is_refused_with_the_fix(tmp_path):
    """Without SanitizeCellMetadata a student's cell metadata could change grades: autograde
    stops before grading and names the command that rewrites the configuration."""
    course = init(tmp_path / "course", steps=[1])
    config = course.root / "nbgrader_config.py"
    text = config.read_text()
    old = text.replace(", sanitize_preprocessors", "").replace(
        "c.Autograde.sanitize_preprocessors = sanitize_preprocessors()\n", "")
    assert old != text and "sanitize_preprocessors" not in old
    config.write_text(old)
    done = instructor("autograde", course.root, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"python -m instructor init --force {course.root}" in done.stderr
    assert "Traceback" not in done.stderr


def test_imports_flow_one_way():
    """grader and workbook never import instructor; instructor's modules import no cycle."""

    def imports(path: Path) -> set:
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
                found |= {f"{node.module}.{alias.name}" for alias in node.names}
        return found

    for package in ("grader", "workbook"):
        for path in (REPO / package).rglob("*.py"):
            assert not any(name.startswith("instructor") for name in imports(path)), path
    modules = {p.stem: p for p in (REPO / "instructor").glob("*.py") if p.stem != "__main__"}
    graph = {
        name: {n.split(".")[1] for n in imports(path) if n.startswith("instructor.")} & set(modules)
        for name, path in modules.items()
    }

    def reaches(start, goal, seen=()):
        return any(
            n == goal or (n not in seen and reaches(n, goal, (*seen, n))) for n in graph[start]
        )

    assert [name for name in graph if reaches(name, name)] == []


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
    base = "/c/downloaded/horovod_steps/extracted/lms_download"
    for path, student, file_id in [
        (f"{base}/alice/{step_notebook(1).file_name}", "alice", step_notebook(1).file_name),
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


# --- what the instructor layer sees in submitted files -----------------------------------------


@pytest.fixture
def generated(tmp_path):
    """A course of steps 1, 6, 9 and 10, generated by nbgrader (its gradebook holds the cells)."""
    course = init(tmp_path / "course", steps=[1, 6, 9, 10])
    generate(course)
    return course


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


def edit_notebook(folder: Path, step: int, change) -> None:
    path = next(folder.glob(f"{step:02d}_*.ipynb"))
    notebook = nbformat.read(path, as_version=4)
    change(notebook, check_cell(notebook, step))
    nbformat.write(notebook, path)


def test_tampered_check_cells_are_named(generated):
    with generated.gradebook() as gradebook:
        expected = source_cells(gradebook, ASSIGNMENT)
    assert sorted(cell.grade_id for cell in expected) == [
        "check_step_01", "check_step_06", "check_step_09", "check_step_10"
    ]
    honest = place_submission(generated, "honest", solution_after(6))
    assert tampered_cells(honest, expected) == []

    folder = place_submission(generated, "erin", solution_after(6))
    edit_notebook(folder, 1, lambda nb, cell: setattr(cell, "source", cell.source + "\n# mine"))
    edit_notebook(folder, 6, lambda nb, cell: cell.metadata.nbgrader.update(points=3))
    edit_notebook(folder, 9, lambda nb, cell: nb.cells.remove(cell))
    edit_notebook(folder, 10, lambda nb, cell: cell.metadata.nbgrader.update(grade=False))
    assert tampered_cells(folder, expected) == [
        "check_step_01 edited",
        "check_step_06 re-weighted (3 points, not 1)",
        "check_step_09 deleted",
        "check_step_10 edited",  # no longer graded: nbgrader restores it, and adds it again
    ]


def test_unusable_notebooks_and_scripts_are_named(generated, tmp_path):
    folder = place_submission(generated, "frank", solution_after(12))
    assert notebook_problems(folder) == [] and script_problem(folder) == ""
    broken = folder / step_notebook(6).file_name
    broken.write_text(broken.read_text()[:300])
    old = folder / step_notebook(1).file_name
    notebook = nbformat.read(old, as_version=4)
    check_cell(notebook, 1).metadata.nbgrader["schema_version"] = 1
    nbformat.write(notebook, old)
    problems = notebook_problems(folder)  # old metadata is no problem: autograde restores it
    assert [str(p) for p in problems] == [
        f"{step_notebook(6).file_name}: NotJSONError: Notebook does not appear to be JSON",
    ]
    with generated.gradebook() as gradebook:
        expected = expected_metadata(gradebook, generated.assignment)
        assert metadata_changes(folder, expected) == [
            f"{step_notebook(1).file_name}: nbgrader metadata of check_step_01 changed, restored"
        ]

    script = folder / "fashion_mnist.py"
    script.unlink()
    assert script_problem(folder) == "no fashion_mnist.py in the submission"
    script.write_bytes(b"\0\1binary")
    assert script_problem(folder) == (
        "fashion_mnist.py is a binary file (it contains NUL bytes), not a Python script"
    )
    script.write_text("#" * 2_000_000)
    assert script_problem(folder).startswith("fashion_mnist.py is 2.0 MB; a training script is")
    script.write_text(solution_after(12).read_text().replace("def ", "def def ", 1))
    assert re.fullmatch(r"fashion_mnist\.py: line \d+: invalid syntax", script_problem(folder))


def test_collect_without_an_exchange_is_skipped_with_a_notice(generated):
    done = instructor("collect", generated.root, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f"collect skipped: nothing was released or submitted through {generated.root / 'exchange'}"
        " (zip-collect fills submitted/ instead)\n"
    )


# --- the class report ----------------------------------------------------------------------------


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
            gradebook.add_source_cell(
                f"check_step_{step:02d}", name, ASSIGNMENT, cell_type="code", checksum="x"
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
                    "reason": "unusable notebook 02_step.ipynb: NotJSONError: x",
                    "log": "logs/autograde/dan.log",
                    "bad_notebooks": ["02_step.ipynb"],
                }
            }
        )
    )
    (course.folder("submitted", "ben")).mkdir(parents=True)  # ben submitted no fashion_mnist.py

    steps, rows = read_class(course)
    assert steps == [1, 2, 3]
    by_student = {row.student: row for row in rows}
    assert by_student["ann"].steps == {1: True, 2: True, 3: True}
    assert by_student["ben"].steps == {1: True, 2: False, 3: False}
    assert by_student["ben"].script_problem == "no fashion_mnist.py in the submission"
    assert by_student["ben"].first_not_passed is None  # a script problem is no step's failure
    assert by_student["ben"].missing_notebooks == [f"0{s}_step.ipynb" for s in (1, 2, 3)]
    assert by_student["cid"].status == "not submitted"
    assert set(by_student["cid"].steps.values()) == {None}
    assert by_student["dan"].status == AUTOGRADE_FAILED
    assert by_student["dan"].bad_notebooks == ["02_step.ipynb"]

    report = write_report(course, tmp_path / "reports")
    with open(report.csv_path, newline="") as table:
        written = {row["student_id"]: row for row in csv.DictReader(table)}
    assert [written["ann"][f"step_0{s}"] for s in (1, 2, 3)] == ["1", "1", "1"]
    assert [written["ben"][f"step_0{s}"] for s in (1, 2, 3)] == ["1", "0", "0"]
    assert [written["cid"][f"step_0{s}"] for s in (1, 2, 3)] == ["", "", ""]
    assert written["ann"]["passed"] == "3" and written["dan"]["passed"] == ""
    assert written["ben"]["script_problem"] == "no fashion_mnist.py in the submission"
    assert report.png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = report.summary()
    assert report.text_path.read_text() == summary + "\n"
    root = course.root
    python = sys.executable
    assert summary.splitlines() == [
        "horovod_steps: 4 students, 2 graded, 1 passed all 3 steps",
        "",
        "step  passed  stuck here  title",
        "   1     2/2           0  Initialize Horovod",
        "   2     1/2           0  Pin one GPU per process",
        "   3     1/2           0  Print only on rank 0",
        "",
        "Script problems (every step fails for this, not for a step's change):",
        "  ben: no fashion_mnist.py in the submission",
        "",
        "Missing notebooks (their steps score 0):",
        "  ben: 01_step.ipynb, 02_step.ipynb, 03_step.ipynb",
        "",
        "Not graded:",
        "  cid: not submitted",
        "  dan: autograde failed: unusable notebook 02_step.ipynb: NotJSONError: x "
        "(log: logs/autograde/dan.log)",
        "    to grade it with the released notebook in its place:",
        f"      cd {root}",
        "      mkdir -p set_aside/dan",
        "      mv submitted/dan/horovod_steps/02_step.ipynb set_aside/dan/",
        "      cp release/horovod_steps/02_step.ipynb submitted/dan/horovod_steps/",
        f"      {python} -m instructor autograde . --student dan --force",
    ]


def test_report_of_an_empty_class(tmp_path):
    report = ClassReport(ASSIGNMENT, [1, 2], [])
    write_heatmap(report, tmp_path / "empty.png")
    assert "0 students, 0 graded" in report.summary()


def test_heatmap_keeps_rows_legible_for_200_students(tmp_path):
    """Each student keeps a row of fixed height, however many (ROW inches at 110 dpi)."""
    from PIL import Image

    from instructor import heatmap

    def rows(n):
        return [
            StudentRow(f"s{i:03d}", GRADED, {s: s <= i % 13 for s in STEPS}) for i in range(n)
        ]

    heights = {}
    for n in (10, 200):
        path = write_heatmap(ClassReport(ASSIGNMENT, list(STEPS), rows(n)), tmp_path / f"{n}.png")
        heights[n] = Image.open(path).size[1]
    per_row = (heights[200] - heights[10]) / 190
    assert per_row == pytest.approx(heatmap.ROW * 110, abs=0.5)


# --- slow: a synthetic class through the real nbgrader -------------------------------------------

# Autograding takes 2-10 s a student on 2 busy cores. WORKBOOK_COURSE_STEPS=1,6-10 grades fewer
# notebooks (it needs 6, 8, 9 and 10 for aaron, erin and frank).
COURSE_STEPS = parse_steps(os.environ.get("WORKBOOK_COURSE_STEPS", ALL_STEPS))
CORRUPT = step_notebook(6).file_name  # after step 1's, whose grade nbgrader saves before failing


def expected_steps(done_through: int) -> dict:
    return {step: step <= done_through for step in COURSE_STEPS}


EXPECTED = {  # student: the steps that must pass (None: not graded)
    "aaron": None,  # first in nbgrader's order, a notebook that is not JSON
    "adam": expected_steps(12),  # an old nbgrader's metadata: restored, graded, reported
    "alice": expected_steps(12),  # the solution, through the exchange
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
    shutil.copyfile(solution_after(12), home / ASSIGNMENT / "fashion_mnist.py")
    done = run("-m", "nbgrader", "submit", ASSIGNMENT, "--student=alice", *exchange, cwd=home)
    assert done.returncode == 0, done.stderr
    done = instructor("collect", root)
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
    done = instructor("zip-collect", root, archive)
    assert done.returncode == 0, done.stdout + done.stderr

    # aaron, adam, dave, erin, frank: placed in submitted/ as collect would.
    corrupt(place_submission(course, "aaron", solution_after(12)))
    old_metadata(place_submission(course, "adam", solution_after(12)))
    place_submission(course, "dave", None)
    tamper(place_submission(course, "erin", solution_after(6)))
    corrupt(place_submission(course, "frank", solution_after(12)))

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
    return pytest.mark.slow(pytest.mark.timeout(1800)(test))


@class_test
def test_every_submission_arrived_in_submitted(graded_class):
    course = graded_class["course"]
    assert course.submitted_students() == [s for s in EXPECTED if s != "gina"]
    carol = course.folder("submitted", "carol")
    assert (carol / "fashion_mnist.py").read_text().startswith(solution_after(12).read_text()[:20])
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
        [*workers, "judged", "phases.json", "status.json", "timings.jsonl",
         *(f"{s}.log" for s in FAILED_STUDENTS)]
    )
    assert not list(logs.glob("*.db"))  # the workers' gradebooks, merged and gone
    status = json.loads((logs / "status.json").read_text())
    graded = [s for s, steps in EXPECTED.items() if steps is not None]
    assert {s for s in graded if re.fullmatch(r"logs/autograde/worker-\d+\.log",
                                              status[s]["log"])} == set(graded)
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
    own script (instructor/judging.py), from a sandboxed run where the run shows the step."""
    course = graded_class["course"]
    steps, rows = read_class(course)
    assert steps == COURSE_STEPS
    for row in rows:
        expected = EXPECTED[row.student]
        if expected is None:
            assert set(row.steps.values()) == {None}
            continue
        assert row.steps == expected, row.student
        judged = judging.load(course, row.student)
        assert judged["sha256"] == judging.fingerprint(judging.script_of(course, row.student))
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
    tampered = [f"check_step_{s:02d} {what}" for s, what in ((9, "edited"), (10, "deleted"))
                if s in COURSE_STEPS]
    if tampered:
        assert f"  erin: {', '.join(tampered)}" in lines
    first = notebook_name(COURSE_STEPS[0])
    step = COURSE_STEPS[0]
    assert (f"  adam: {first}: nbgrader metadata of check_step_{step:02d} changed, restored"
            in lines)
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


# --- slow: `make grade` on a course that only zip_collect filled ---------------------------------


@pytest.mark.slow
def test_make_grade_on_a_zip_collected_course(tmp_path):
    """No release, no exchange: collect is skipped with a notice, the others run, and make
    fails (autograde's 1) only after the report is written."""
    root = tmp_path / "course"
    for command in (["init", root, "--steps", "1,6"], ["generate", root]):
        done = instructor(*command)
        assert done.returncode == 0, done.stdout + done.stderr
    release = Course.open(root).folder("release")
    archive = tmp_path / "lms.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for student, script in (("abe", 12), ("ann", 6), ("ben", 0)):
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
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 2, done.stdout + done.stderr  # make's "Error 1" of the recipe
    judged = [line for line in done.stdout.splitlines() if ": judged, " in line]
    assert [line.split(":")[0] for line in judged] == ["abe", "ann", "ben"]
    assert "ann: judged, run and read, 6/12 steps" in judged[1]
    lines = [line for line in done.stdout.splitlines() if ": judged, " not in line]
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

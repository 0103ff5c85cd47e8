"""Grading a class with nbgrader: `python -m instructor ...` (instructor/), without nbgrader
running: the nbgrader_config.py the course writes against nbgrader 0.9.6's own classes, the step
notebooks, parsing steps, and the class report. Against a gradebook made by nbgrader, and the
command line: tests/smoke/test_course_processes.py; real classes graded:
tests/system/test_graded_classes.py.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

from instructor.autograde import failure_reason
from instructor.class_report import GRADED, ClassReport, StudentRow
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
from workbook.facts import LAST_STEP, SOLUTION_FILE_NAME, STEPS, chain_file_name, step_notebook
from workbook.paths import REPO, SOLUTIONS_DIR


def solution_after(step: int) -> Path:
    return SOLUTIONS_DIR / (SOLUTION_FILE_NAME if step == LAST_STEP else chain_file_name(step))


def load_config(root: Path):
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()


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


@pytest.fixture
def generated(tmp_path):
    """A course of steps 1, 6, 9 and 10, generated by nbgrader (its gradebook holds the cells)."""
    course = init(tmp_path / "course", steps=[1, 6, 9, 10])
    generate(course)
    return course


def test_report_of_an_empty_class(tmp_path):
    report = ClassReport(ASSIGNMENT, [1, 2], [])
    write_heatmap(report, tmp_path / "empty.png")
    assert "0 students, 0 graded" in report.summary()


def test_heatmap_keeps_rows_legible_for_200_students(tmp_path):
    """Each student keeps a row of fixed height, however many (ROW inches at 110 dpi)."""
    from PIL import Image

    from instructor import heatmap

    def rows(n):
        return [StudentRow(f"s{i:03d}", GRADED, {s: s <= i % 13 for s in STEPS}) for i in range(n)]

    heights = {}
    for n in (10, 200):
        path = write_heatmap(ClassReport(ASSIGNMENT, list(STEPS), rows(n)), tmp_path / f"{n}.png")
        heights[n] = Image.open(path).size[1]
    per_row = (heights[200] - heights[10]) / 190
    assert per_row == pytest.approx(heatmap.ROW * 110, abs=0.5)


# Autograding takes 2-10 s a student on 2 busy cores. WORKBOOK_COURSE_STEPS=1,6-10 grades fewer
# notebooks (it needs 6, 8, 9 and 10 for aaron, erin and frank).

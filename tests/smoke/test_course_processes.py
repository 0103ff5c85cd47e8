"""Grading with nbgrader's gradebook (which nbgrader creates with `alembic`) and instructor's
command line: what the instructor layer sees in submitted files (tampered check cells, unusable
notebooks and scripts), collect without an exchange, the report from the gradebook, and
commands on a folder that is no course or an older workbook's course fail cleanly.
"""

from __future__ import annotations

import csv
import json
import os
import pwd
import re
import shutil
import stat
import sys

import nbformat
import pytest

from course_helpers import (  # noqa: F401
    check_cell,
    edit_notebook,
    generated,
    instructor,
    place_submission,
    solution_after,
)
from instructor.class_report import AUTOGRADE_FAILED, read_class, write_report
from instructor.course import ASSIGNMENT, init, release
from instructor.ownership import not_collected
from instructor.submission import (
    expected_metadata,
    metadata_changes,
    notebook_problems,
    script_problem,
    source_cells,
    tampered_cells,
)
from workbook.facts import LAST_STEP, STEPS, step_notebook

# --- the course folder and its nbgrader_config.py ---------------------------------------------


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
        "c.Autograde.sanitize_preprocessors = sanitize_preprocessors()\n", ""
    )
    assert old != text and "sanitize_preprocessors" not in old
    config.write_text(old)
    done = instructor("autograde", course.root, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"python -m instructor init --force {course.root}" in done.stderr
    assert "Traceback" not in done.stderr


# Real stderr lines of TensorFlow 2.15, Horovod 0.28.1 and Python's warnings (captured here).


def test_tampered_check_cells_are_named(generated):
    with generated.gradebook() as gradebook:
        expected = source_cells(gradebook, ASSIGNMENT)
    assert sorted(cell.grade_id for cell in expected) == [
        "check_step_01",
        "check_step_06",
        "check_step_09",
        "check_step_10",
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
    folder = place_submission(generated, "frank", solution_after(LAST_STEP))
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
    script.write_text(solution_after(LAST_STEP).read_text().replace("def ", "def def ", 1))
    assert re.fullmatch(r"fashion_mnist\.py: line \d+: invalid syntax", script_problem(folder))


def test_collect_without_an_exchange_is_skipped_with_a_notice(generated):
    done = instructor("collect", generated.root, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f"collect skipped: nothing was released or submitted through {generated.root / 'exchange'}"
        " (zip-collect fills submitted/ instead)\n"
    )


def test_collect_takes_each_students_own_submission_and_names_the_rest(generated):
    """Issue 38's attack through the real collect (as root: chown): daemon makes a submission
    in bin's name, newer than bin's own, and one with a name nbgrader cannot read. bin's own is
    collected, daemon's too; the forged one and the unreadable name are named, never graded."""
    if os.geteuid() != 0:
        pytest.skip("submissions made by other accounts need root (chown)")
    release(generated)
    inbound = generated.exchange_root / generated.course_id / "inbound"
    assert stat.S_IMODE(inbound.stat().st_mode) == 0o3733  # nbgrader's 2733, plus sticky
    made = {
        "daemon+horovod_steps+2026-11-28 10:00:00.000000 UTC+a": "daemon",
        "bin+horovod_steps+2026-11-28 09:00:00.000000 UTC+b": "bin",
        "bin+horovod_steps+2026-11-28 11:00:00.000000 UTC+c": "daemon",  # forged, newer
        "eve+horovod_steps+no time": "daemon",
    }
    for name, maker in made.items():
        folder = inbound / name
        folder.mkdir()
        (folder / "fashion_mnist.py").write_text(f"# {maker}'s\n")
        (folder / "timestamp.txt").write_text(name.split("+")[2])
        uid = pwd.getpwnam(maker).pw_uid
        for path in (folder, *folder.iterdir()):
            os.chown(path, uid, uid)
    done = instructor("collect", generated.root, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 submissions in" in done.stdout, done.stdout
    assert (
        "SET ASIDE: 2 submissions not collected, never graded as the student they name"
        in done.stdout
    )
    assert (
        "bin+horovod_steps+2026-11-28 11:00:00.000000 UTC+c: in bin's name, but the folder "
        "is daemon's; set aside, never graded as bin"
    ) in done.stdout
    assert "eve+horovod_steps+no time: its name is not STUDENT+ASSIGNMENT+TIMESTAMP" in done.stdout
    script = generated.folder("submitted", "bin") / "fashion_mnist.py"
    assert script.read_text() == "# bin's\n"
    assert [item.student for item in not_collected(generated.root)] == ["bin", "eve"]


def test_an_attendees_submit_sends_their_workbook_privately_and_says_what(generated, tmp_path):
    """On the hub (issue 38): submit takes the released files from the attendee's notebooks/
    (where they edited and checked), never a second fetched copy; the submission is private
    (0770/0660); the receipt names the script's last change and the steps the reading sees."""
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    from instructor.exchange import RECEIPT, WorkbookSubmit

    release(generated)
    work = tmp_path / "copy" / "notebooks"
    shutil.copytree(generated.folder("release"), work)
    shutil.copyfile(solution_after(3), work / "fashion_mnist.py")
    (work / "00_welcome.ipynb").write_text("{}")  # not the assignment's: not sent
    config = Config()
    config.CourseDirectory.course_id = generated.course_id
    config.CourseDirectory.assignment_id = ASSIGNMENT
    config.Exchange.root = str(generated.exchange_root)
    config.Exchange.assignment_dir = str(tmp_path / "copy")
    config.Exchange.cache = str(tmp_path / "cache")
    config.WorkbookFolder.folder = "notebooks"
    WorkbookSubmit(
        coursedir=CourseDirectory(config=config),
        authenticator=Authenticator(config=config),
        config=config,
    ).start()
    [sent] = (generated.exchange_root / generated.course_id / "inbound").iterdir()
    released = sorted(p.name for p in generated.folder("release").iterdir())
    assert sorted(p.name for p in sent.iterdir()) == sorted(
        released + ["timestamp.txt", "submission_secret.txt"]
    )
    assert (sent / "fashion_mnist.py").read_text() == solution_after(3).read_text()
    assert {stat.S_IMODE(p.stat().st_mode) for p in sent.iterdir()} == {0o660}
    assert stat.S_IMODE(sent.stat().st_mode) == 0o770
    receipt = (work / RECEIPT).read_text()
    assert f"{work / 'fashion_mnist.py'} last changed " in receipt, receipt
    assert (
        f"the reading sees 3 of {len(STEPS)} steps done, the first not done: step 4" in receipt
    ), receipt


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


# Autograding takes 2-10 s a student on 2 busy cores. WORKBOOK_COURSE_STEPS=1,6-10 grades fewer
# notebooks (it needs 6, 8, 9 and 10 for aaron, erin and frank).

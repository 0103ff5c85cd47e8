"""A class with attackers, graded by `make grade`: no submission bends its own grade or anyone
else's (instructor/README.md, "What a submission can never do").

Every attacker hands in something that Python, IPython, Jupyter or nbgrader might pick up, or
that makes the checker work forever. Attackers come first in nbgrader's order and again last.
Every file an attacker adds that would run code writes a marker when it runs; none may run.
Each attacker gets exactly the step checker's grade of their real script (0 when it is a link
out of the submission), each honest student exactly what their script earns (a script stopped
after step N passes the steps up to N), the report names every attempt, and grading writes
nothing outside its own folders. Each run stops after RUN_TIMEOUT_S (`make grade`'s
GRADE_ARGS), so the attacks that never end cost a minute, not the default two.

The checker alone is attacked in tests/unit/test_hostile_scripts.py and, through its command
line, in tests/smoke/test_hostile_scripts_cli.py.
"""

from __future__ import annotations

import csv
import hashlib
import html
import os
import re
import shutil
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import nbformat
import pytest

from grader.running.run_check import STALL_S, WALL_CAP
from hostile_scripts import DEEP, HUGE_POWER, LEAVES_BEHIND, LONG_LOOP, reaching_out, script_after
from instructor import class_verdicts
from instructor.course import ASSIGNMENT, Course
from workbook.facts import LAST_STEP, LEARNER_SCRIPT_NAME, SOLUTION_FILE_NAME
from workbook.paths import REPO, SOLUTIONS_DIR

STEPS = [1, 6, 11]  # a course of three notebooks keeps the class quick
# An honest run here takes 17-28 s (two at once, 2 cores): 60 s leaves room for a slow machine.
RUN_TIMEOUT_S = 60
# What no run may read or show (issue 36): files of the checkout beside the workbook's own (a
# roster, an older course's gradebook) and the instructor's environment.
MARKER = uuid.uuid4().hex[:8]
ROSTER = REPO / f"roster-{MARKER}.csv"
OLDER_GRADEBOOK = REPO / f"older-course-{MARKER}" / "gradebook.db"
NOT_THEIRS = {ROSTER: f"ann,ann-{MARKER}@example.org", OLDER_GRADEBOOK: f"ann: 12/12 {MARKER}"}
SECRETS = {
    "DATABASE_URL": f"postgres://grader:pw-{MARKER}@db.example/course",
    "AWS_ACCESS_KEY_ID": f"AKIA{MARKER.upper()}",
}


# --- attackers: the class, through `make grade` ---------------------------------------------------


def marker_code(markers: Path, name: str) -> str:
    """Python that leaves a marker when it runs, then fakes a pass where it can."""
    return (
        f"import pathlib as _p\n_p.Path({str(markers)!r}, {name!r}).write_text('ran')\n"
        "class _Passed:\n    passed = True\n    message = 'done'\n"
        "def check_step(*args, **kwargs):\n    return _Passed()\n"
        "class StepNotDone(Exception):\n    pass\n"
    )


def fake_packages(folder: Path, markers: Path) -> None:
    """A checker, the workbook's facts, and the modules the checker and kernel use."""
    for package in ("grader", "workbook"):
        (folder / package).mkdir()
        (folder / package / "__init__.py").write_text(marker_code(markers, package))
        (folder / package / "report.py").write_text(marker_code(markers, f"{package}.report"))


def shadow_modules(folder: Path, markers: Path) -> None:
    for name in (
        "ast",
        "json",
        "tokenize",
        "pickle",
        "nbformat",
        "zmq",
        "numpy",
        "jupyter_client",
        "ipykernel",
        "IPython",
        "traitlets",
        "pathlib",
    ):
        (folder / f"{name}.py").write_text(marker_code(markers, name))


def startup_files(folder: Path, markers: Path) -> None:
    code = marker_code(markers, "startup")
    for name in (
        "sitecustomize.py",
        "usercustomize.py",
        "ipython_config.py",
        "ipython_kernel_config.py",
        "jupyter_config.py",
        "nbgrader_config.py",
    ):
        (folder / name).write_text(code.replace("'startup'", repr(name)))
    (folder / "evil.pth").write_text(
        f"import pathlib; pathlib.Path({str(markers)!r}, 'pth').write_text('ran')\n"
    )
    startup = folder / ".ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-evil.py").write_text(marker_code(markers, "ipython-startup"))
    (folder / "matplotlibrc").write_text("backend: module://evil_backend\n")


def edit_notebooks(folder: Path, markers: Path) -> None:
    """Cells with nbgrader metadata of the student's own, in every form nbgrader reads."""

    def grade_meta(**fields):
        return {
            "nbgrader": {
                "grade": True,
                "solution": False,
                "locked": False,
                "schema_version": 3,
                **fields,
            }
        }

    notebooks = sorted(folder.glob("*.ipynb"))
    first = nbformat.read(notebooks[0], as_version=4)
    check = next(c for c in first.cells if c.metadata.get("nbgrader", {}).get("grade"))
    grade_id = check.metadata.nbgrader["grade_id"]
    fake = marker_code(markers, "added-cell") + "print('all done')\n"
    first.cells.insert(
        0, nbformat.v4.new_code_cell(fake, metadata=grade_meta(grade_id="bonus_points", points=100))
    )
    first.cells.insert(0, nbformat.v4.new_code_cell(fake, metadata=grade_meta(points=5)))
    first.cells.insert(
        0, nbformat.v4.new_code_cell(fake, metadata=grade_meta(grade_id=grade_id, points=1))
    )  # a second cell, same id
    check.metadata.nbgrader["schema_version"] = 1  # an old nbgrader: would stop the run
    first.metadata["kernelspec"] = {"name": "evil", "display_name": "Evil", "language": "python"}
    nbformat.write(first, notebooks[0])
    second = nbformat.read(notebooks[1], as_version=4)
    check = next(c for c in second.cells if c.metadata.get("nbgrader", {}).get("grade"))
    second.cells[second.cells.index(check)] = nbformat.v4.new_markdown_cell(
        "passed", metadata={"nbgrader": dict(check.metadata.nbgrader)}
    )
    nbformat.write(second, notebooks[1])


def link_to_solution(folder: Path, markers: Path) -> None:
    (folder / LEARNER_SCRIPT_NAME).unlink()
    (folder / LEARNER_SCRIPT_NAME).symlink_to(SOLUTIONS_DIR / SOLUTION_FILE_NAME)


def special_files(folder: Path, markers: Path) -> None:
    (folder / "data.bin").symlink_to("/dev/zero")
    os.mkfifo(folder / "pipe")
    (folder / "notes").symlink_to(REPO / "solutions")  # a folder outside
    with open(folder / "big.bin", "wb") as big:  # sparse: 60 MB on paper, nothing on disk
        big.truncate(60 * 1000 * 1000)


ATTACKS = {  # name: (script, what else the submission holds)
    "fake_grader": (script_after(0), fake_packages),
    "shadow_modules": (script_after(6), shadow_modules),
    "startup_files": (script_after(6), startup_files),
    "added_cells": (script_after(1), edit_notebooks),
    "huge_power": (HUGE_POWER, None),
    "long_loop": (LONG_LOOP, None),
    "deep_nesting": (DEEP, None),
    "link_to_solution": (script_after(0), link_to_solution),
    "special_files": (script_after(6), special_files),
    "leaves_behind": (LEAVES_BEHIND, None),  # what the grader takes from a run
    "reaching_out": (reaching_out(ROSTER, OLDER_GRADEBOOK), None),
}
FIRST, LAST = ["fake_grader", "added_cells", "startup_files"], ["fake_grader", "added_cells"]
BAD_ID = "ad_evil,honest_bob"  # a student id nbgrader would read as a list of two
HONEST = {"honest_bob": 6, "honest_carol": 12, "honest_dave": 1}  # the step each stopped after


def attackers() -> dict:
    """{student: attack}: every attack near the start of nbgrader's order, some again last."""
    found = {f"aa{i}_{name}": name for i, name in enumerate(FIRST)}
    found.update({f"ab_{name}": name for name in ATTACKS if name not in FIRST})
    found.update({f"zz{i}_{name}": name for i, name in enumerate(LAST)})
    return found


def make(*args, timeout=1500, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def new_course(base: Path, students) -> Course:
    root = base / "course"
    roster = base / "roster.csv"
    roster.write_text(
        "id,first_name,last_name,email\n"
        + "".join(f"{s},{s},Example,{s}@example.org\n" for s in students)
    )
    for args in (
        ["init", root, "--steps", ",".join(map(str, STEPS))],
        ["generate", root],
        ["add-students", root, roster],
        ["release", root],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "instructor", *map(str, args)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    return Course.open(root)


def hand_in(course: Course, student: str, script: str) -> Path:
    folder = course.folder("submitted", student)
    shutil.copytree(course.folder("release"), folder)
    (folder / LEARNER_SCRIPT_NAME).write_text(script)
    (folder / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC")
    return folder


def grades(course: Course) -> dict:
    with open(course.root / "grades.csv", newline="") as table:
        return {row["student_id"]: float(row["score"] or 0) for row in csv.DictReader(table)}


def judged(attacked_class, attack: str) -> dict:
    """The saved judgement of the first student who made `attack`."""
    student = next(s for s, a in attacked_class["students"].items() if a == attack)
    return class_verdicts.load(attacked_class["course"], student)


def snapshot(root: Path, skip: set) -> dict:
    found = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if relative.parts[0] in skip or path.is_dir() or not (path.is_file() or path.is_symlink()):
            continue
        found[str(relative)] = (
            os.readlink(path)
            if path.is_symlink()
            else hashlib.sha256(path.read_bytes()).hexdigest()
        )
    return found


@pytest.fixture(scope="module")
def attacked_class(tmp_path_factory):
    base = tmp_path_factory.mktemp("redteam")
    markers = base / "markers"
    markers.mkdir()
    students = {**attackers(), **{s: None for s in HONEST}}
    course = new_course(base, students)
    scripts = {}
    for student, attack in students.items():
        script, extra = ATTACKS[attack] if attack else (script_after(HONEST[student]), None)
        folder = hand_in(course, student, script)
        scripts[student] = folder / LEARNER_SCRIPT_NAME
        if extra:
            extra(folder, markers)
    # Through the exchange: a submission whose script became a link in the inbound folder.
    inbound = course.exchange_root / course.course_id / "inbound"
    sneaky = inbound / f"ac_inbound_link+{ASSIGNMENT}+2026-11-20 10:00:00.000000 UTC+abc"
    shutil.copytree(course.folder("release"), sneaky)
    (sneaky / LEARNER_SCRIPT_NAME).unlink(missing_ok=True)
    (sneaky / LEARNER_SCRIPT_NAME).symlink_to(SOLUTIONS_DIR / SOLUTION_FILE_NAME)
    (sneaky / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC")
    hand_in(course, BAD_ID, script_after(LAST_STEP))
    add = subprocess.run(
        [sys.executable, "-m", "instructor", "add-students", course.root, "ac_inbound_link"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert add.returncode == 0, add.stderr

    repo_before = snapshot(REPO / "solutions", set())
    course_before = snapshot(
        course.root,
        {"autograded", "feedback", "reports", "logs", "set_aside", "submitted", "gradebook.db"},
    )
    submitted_before = snapshot(course.root / "submitted", set())
    temporary = base / "tmp"  # the runs' folders (tempfile's), this class's alone
    temporary.mkdir()
    try:
        for path, text in NOT_THEIRS.items():
            path.parent.mkdir(exist_ok=True)
            path.write_text(text)
        # As on an instructor's machine: a database password and a cloud key in the environment.
        done = make(
            "grade",
            f"COURSE={course.root}",
            f"GRADE_ARGS=--run-timeout {RUN_TIMEOUT_S}",
            env={**os.environ, **SECRETS, "TMPDIR": str(temporary)},
        )
    finally:
        for path in NOT_THEIRS:
            path.unlink(missing_ok=True)
        OLDER_GRADEBOOK.parent.rmdir()
    return {
        "temporary": temporary,
        "course": course,
        "done": done,
        "markers": markers,
        "scripts": scripts,
        "students": students,
        "repo_before": repo_before,
        "course_before": course_before,
        "submitted_before": submitted_before,
    }


def class_test(test):
    return pytest.mark.timeout(1800)(test)


@class_test
def test_make_grade_grades_everyone(attacked_class):
    done = attacked_class["done"]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # The time limit reached the runs: the endless script stopped at the run's own limits, not
    # at the default's (counted in the machine's time: on the wall clock at most WALL_CAP times
    # it). Which of them comes first depends on when the loop starts: STALL_S without progress
    # (59.9 s seen, the loop after a 5-epoch model.fit) or the time limit.
    endless = judged(attacked_class, "long_loop")
    assert endless["run_timeout"] == RUN_TIMEOUT_S and endless["limits"] == ["time"]
    assert STALL_S <= endless["seconds"] < RUN_TIMEOUT_S * WALL_CAP + 30


@class_test
def test_no_attackers_code_ever_ran(attacked_class):
    assert sorted(p.name for p in attacked_class["markers"].iterdir()) == []


@class_test
def test_each_attacker_gets_the_grade_of_their_real_script(attacked_class):
    course = attacked_class["course"]
    scores = grades(course)
    for student, attack in attacked_class["students"].items():
        if attack is None:
            continue
        if attack == "link_to_solution":
            expected = 0.0
        else:  # the verdicts decided for the script it handed in (instructor/class_verdicts.py)
            judged = class_verdicts.load(course, student)
            expected = float(
                sum(item["passed"] for item in judged["results"] if item["step"] in STEPS)
            )
        assert scores[student] == expected, (student, attack)
    assert scores["ac_inbound_link"] == 0.0
    # The attacks did not cost the attackers what their script earns, either.
    assert (
        scores[next(s for s, a in attacked_class["students"].items() if a == "shadow_modules")]
        == 2.0
    )  # steps 1 and 6 of 1, 6, 11


@class_test
def test_honest_students_get_what_their_script_earns(attacked_class):
    """A script stopped after step N passes the course's steps up to N, attackers or not."""
    earned = {
        student: float(sum(step <= done for step in STEPS)) for student, done in HONEST.items()
    }
    assert {s: grades(attacked_class["course"])[s] for s in HONEST} == earned
    assert earned == {"honest_bob": 2.0, "honest_carol": 3.0, "honest_dave": 1.0}


@class_test
def test_grading_writes_only_its_own_folders(attacked_class):
    course = attacked_class["course"]
    assert snapshot(REPO / "solutions", set()) == attacked_class["repo_before"]
    after = snapshot(
        course.root,
        {"autograded", "feedback", "reports", "logs", "set_aside", "submitted", "gradebook.db"},
    )
    after.pop("grades.csv")
    assert after == attacked_class["course_before"]  # source, release, exchange, config
    # submitted/ lost exactly what was set aside (kept in set_aside/), and gained one collected.
    before, now = attacked_class["submitted_before"], snapshot(course.root / "submitted", set())
    gone = set(before) - set(now)
    for path in gone:
        student, _, rest = path.partition("/")
        whole = student == BAD_ID  # set aside whole, under submission/
        kept = course.root / "set_aside" / student / ("submission" if whole else "") / rest
        assert kept.is_symlink() or kept.exists(), path
    assert {p.partition("/")[0] for p in gone} == {BAD_ID} | {
        s
        for s, a in attacked_class["students"].items()
        if a in ("link_to_solution", "special_files")
    }


@class_test
def test_the_report_names_every_attempt(attacked_class):
    course = attacked_class["course"]
    text = (course.root / "reports" / "class_report.txt").read_text()
    for student, attack in attacked_class["students"].items():
        if attack in ("huge_power", "long_loop", "deep_nesting", "leaves_behind"):
            continue  # scripts, not tampering: their steps fail with the reason
        if attack is not None:
            assert f"  {student}: " in text, (student, text)
    # Honest students are named nowhere a submission's tampering or problems are.
    tampering = [
        text.split(title)[1].split("\n\n")[0]
        for title in (
            "Script problems",
            "Tampered check cells",
            "Tampering:",
            "Extra files",
            "Code not the",
        )
        if title in text
    ]
    for honest in HONEST:
        assert not [part for part in tampering if f"  {honest}: " in part], text
    assert "ac_inbound_link: horovod_steps/fashion_mnist.py: a link to" in text
    assert f"  {BAD_ID}: .: the student id '{BAD_ID}' has characters" in text
    assert "(grade_id 'bonus_points') ignored" in text
    not_graded = text.split("Not graded:")[1].strip().splitlines()
    assert not_graded == [
        f"{BAD_ID}: not submitted: the whole submission was set aside (see Tampering)"
    ], text


@class_test
def test_a_step_the_run_never_showed_says_why_in_the_feedback_and_the_report(attacked_class):
    """A step_decay that never returns: the run stops at its limit before the rate drops; the
    feedback says the run did not show step 11 and what stopped it (no credit), and the class
    report lists the run among those that reached a limit."""
    course = attacked_class["course"]
    student = next(s for s, a in attacked_class["students"].items() if a == "huge_power")
    page = next(course.folder("feedback", student).glob("11_*.html")).read_text()
    assert "the run did not show this step" in page, page[-3000:]
    assert "CellTimeoutError" not in page and "KeyboardInterrupt" not in page
    report = (course.root / "reports" / "class_report.txt").read_text()
    assert f"  {student}: time" in report.split("reached a limit of the sandbox")[1]


@class_test
def test_nothing_a_run_reached_for_or_left_behind_escaped_its_box(attacked_class):
    """Issue 36's attacks on what the grader takes from a run: no secret of the grader's
    environment and nothing of the checkout's other files in any feedback, judgement or log;
    no setuid or world-writable file, no mount and no process of a run left on the host."""
    course = attacked_class["course"]
    shown = [
        *course.folder("feedback", "x").parent.rglob("*"),
        *(course.root / "logs").rglob("*"),
        *(course.root / "reports").rglob("*"),
    ]
    leaks = [*SECRETS.values(), *NOT_THEIRS.values()]
    for path in shown:
        if path.is_file():
            text = path.read_text(errors="replace")
            # As read, and as a browser shows it: markup can't split a leak into pieces.
            shown_text = html.unescape(re.sub(r"<[^>]*>", "", text))
            assert not [leak for leak in leaks if leak in text or leak in shown_text], path
    reaching = judged(attacked_class, "reaching_out")
    assert reaching["ran"] and "output" in reaching["limits"], reaching  # cut at the box's limit
    import psutil

    temporary = attacked_class["temporary"]  # where the class's runs were (TMPDIR)
    for path in temporary.rglob("*"):
        mode = path.lstat().st_mode
        assert not mode & (stat.S_ISUID | stat.S_ISGID), path
        assert not (mode & stat.S_IWOTH and not stat.S_ISLNK(mode)), path
    for kept in temporary.iterdir():  # a failed run's folder, kept: bounded
        assert sum(p.lstat().st_size for p in kept.rglob("*")) < 4 << 20, kept
    assert str(temporary) not in Path("/proc/mounts").read_text()
    assert not [
        p
        for p in psutil.process_iter(["cmdline"])
        if str(temporary) in " ".join(p.info["cmdline"] or [])
    ]


@class_test
def test_the_report_names_runs_at_a_limit_and_twins(attacked_class):
    course = attacked_class["course"]
    text = (course.root / "reports" / "class_report.txt").read_text()
    reaching = next(s for s, a in attacked_class["students"].items() if a == "reaching_out")
    assert f"  {reaching}: " in text.split("reached a limit of the sandbox")[1].split("\n\n")[0]
    endless = next(s for s, a in attacked_class["students"].items() if a == "long_loop")
    assert f"  {endless}: time" in text, text
    # aa0_fake_grader and zz0_fake_grader hand in the same script: one run judges both.
    assert "zz0_fake_grader: shares aa0_fake_grader's run" in text, text

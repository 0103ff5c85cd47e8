"""The instructor's tools as the workshop hub uses them (issue 29): run as root on the
instructor's course without taking it from them, and nbgrader's own files in a submission never
reported as extra. From the environment's interpreter alone:
tests/system/test_hub_instructor_commands.py."""

from __future__ import annotations

import os

import pytest

from instructor import ownership, submission


def test_nbgraders_own_files_in_a_submission_are_not_extra(tmp_path):
    release, submitted = tmp_path / "release", tmp_path / "submitted"
    for folder in (release, submitted):
        folder.mkdir()
        (folder / "01_initialize_horovod.ipynb").write_text("{}")
    for name in ("timestamp.txt", "submission_secret.txt", "sitecustomize.py"):
        (submitted / name).write_text("x")
    assert submission.extra_files(submitted, release) == ["sitecustomize.py"]


def test_what_root_makes_in_someone_elses_course_goes_back_to_them(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("chown needs root")
    nobody = 65534
    course, exchange = tmp_path / "course", tmp_path / "exchange" / "c"
    for folder in (course, exchange):
        folder.mkdir(parents=True)
        os.chown(folder, nobody, nobody)
    made = [course / "feedback" / "alice" / "a.html", exchange / "feedback" / "x.html"]
    for path in made:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("root's")
    students = exchange / "inbound" / "alice+a"
    students.mkdir(parents=True)
    os.chown(students, 1234, 1234)  # a student's submission stays theirs
    changed = ownership.give_back(course, exchange)
    assert set(made) <= set(changed)
    for path in made + [path.parent for path in made]:
        assert (path.stat().st_uid, path.stat().st_gid) == (nobody, nobody), path
    assert students.stat().st_uid == 1234
    root_course = tmp_path / "mine"
    root_course.mkdir()
    assert ownership.give_back(root_course) == []  # root's own course: nothing changes

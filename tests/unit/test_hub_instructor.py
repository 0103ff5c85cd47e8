"""The instructor's tools as the workshop hub uses them (issues 29, 38): run as root on the
instructor's course without taking it from them; a submission taken only from the student it
names, private from its first byte; one student's feedback that cannot be released never stops
the others'; the attendee's workbook shown as the assignment; nbgrader's own files in a
submission never reported as extra. A real collect: tests/smoke/test_course_processes.py; from
the environment's interpreter alone: tests/system/test_hub_instructor_commands.py; attendees
attacking each other on a real hub: tests/system/test_hub_attacks.py."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory
from nbgrader.exchange import ExchangeError
from traitlets.config import Config

from instructor import exchange, ownership, submission

NOBODY = 65534  # an account every Linux has: "nobody"
STRANGER = 64999  # a uid no account has


def needs_root():
    if os.geteuid() != 0:
        pytest.skip("chown needs root")


def test_nbgraders_own_files_in_a_submission_are_not_extra(tmp_path):
    release, submitted = tmp_path / "release", tmp_path / "submitted"
    for folder in (release, submitted):
        folder.mkdir()
        (folder / "01_initialize_horovod.ipynb").write_text("{}")
    for name in ("timestamp.txt", "submission_secret.txt", "sitecustomize.py"):
        (submitted / name).write_text("x")
    assert submission.extra_files(submitted, release) == ["sitecustomize.py"]


def test_what_root_makes_in_someone_elses_course_goes_back_to_them(tmp_path):
    needs_root()
    course, exchange_course = tmp_path / "course", tmp_path / "exchange" / "c"
    for folder in (course, exchange_course):
        folder.mkdir(parents=True)
        os.chown(folder, NOBODY, NOBODY)
    made = [course / "feedback" / "alice" / "a.html", exchange_course / "feedback" / "x.html"]
    for path in made:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("root's")
    students = exchange_course / "inbound" / "alice+a"
    students.mkdir(parents=True)
    os.chown(students, 1234, 1234)  # a student's submission stays theirs
    changed = ownership.give_back(course, exchange_course)
    assert set(made) <= set(changed)
    for path in made + [path.parent for path in made]:
        assert (path.stat().st_uid, path.stat().st_gid) == (NOBODY, NOBODY), path
    assert students.stat().st_uid == 1234
    root_course = tmp_path / "mine"
    root_course.mkdir()
    assert ownership.give_back(root_course) == []  # root's own course: nothing changes


def submission_of(folder: Path, uid: int, files: dict) -> Path:
    folder.mkdir()
    for name, owner in files.items():
        (folder / name).write_text("x")
        os.lchown(folder / name, owner, owner)
    os.chown(folder, uid, uid)
    return folder


def test_a_submission_is_the_students_only_when_their_account_made_all_of_it(tmp_path):
    """The attack of issue 38: ana makes inbound/ben+horovod_steps+TIME+x with her files; or
    puts her file into ben's own submission; or names a student no account has."""
    needs_root()
    nobody = ownership.account_name(NOBODY)
    own = submission_of(tmp_path / "own", NOBODY, {"fashion_mnist.py": NOBODY})
    assert ownership.not_their_own(own, nobody, trusted=set()) == ""
    forged = submission_of(tmp_path / "forged", STRANGER, {"fashion_mnist.py": STRANGER})
    assert ownership.not_their_own(forged, nobody, trusted=set()) == (
        f"in {nobody}'s name, but the folder is uid {STRANGER}'s"
    )
    planted = submission_of(
        tmp_path / "planted", NOBODY, {"a.ipynb": NOBODY, "fashion_mnist.py": STRANGER}
    )
    assert ownership.not_their_own(planted, nobody, trusted=set()) == (
        f"in {nobody}'s name, but fashion_mnist.py is uid {STRANGER}'s"
    )
    link = tmp_path / "planted" / "link"
    link.symlink_to("/etc/passwd")  # root's link: the link counts, not what it points to
    assert "link is root's" in ownership.not_their_own(planted, nobody, trusted={STRANGER})
    assert ownership.not_their_own(forged, "no-such-student-x", trusted=set()) == (
        f"no account is named 'no-such-student-x'; the folder is uid {STRANGER}'s"
    )
    # Root and the instructor who collects may have made any submission (tests, LMS uploads).
    assert ownership.not_their_own(forged, nobody, trusted={STRANGER}) == ""
    assert os.geteuid() in ownership.trusted_uids() and 0 in ownership.trusted_uids()


def test_what_collect_set_aside_is_recorded_for_the_report(tmp_path):
    first = ownership.NotCollected("ben+a+t1+x", "ben", "in ben's name, but the folder is ana's")
    second = ownership.NotCollected("zed+a+t2", "zed", "no account is named 'zed'")
    assert ownership.not_collected(tmp_path) == []
    ownership.record(tmp_path, [first], replace=True)
    ownership.record(tmp_path, [second], replace=False)  # one student's collect adds
    assert ownership.not_collected(tmp_path) == [first, second]
    ownership.record(tmp_path, [second], replace=True)  # everyone's: what is there now
    assert ownership.not_collected(tmp_path) == [second]
    assert str(second) == ("zed+a+t2: no account is named 'zed'; set aside, never graded as zed")


def test_a_submission_is_private_from_its_first_byte(tmp_path):
    """Folders 0770 and files 0660 in the inbound's group (not nbgrader's 0777 and 0644):
    another attendee can neither read nor change it, even knowing its name. Only the released
    names are taken from the workbook; links stay links."""
    work = tmp_path / "notebooks"
    (work / "logs").mkdir(parents=True)
    for name in ("01_a.ipynb", "fashion_mnist.py", "00_welcome.ipynb", "logs/run.log"):
        (work / name).write_text(name)
    (work / "fashion_mnist.py").chmod(0o644)
    inbound = tmp_path / "inbound"
    inbound.mkdir()
    inbound.chmod(0o2733)  # as nbgrader's release makes it
    dest = inbound / "ana+a+t+x"
    exchange.copy_private(
        work, dest, ["01_a.ipynb", "fashion_mnist.py"], None, {"submission_secret.txt": "s"}
    )
    assert sorted(p.name for p in dest.iterdir()) == [
        "01_a.ipynb",
        "fashion_mnist.py",
        "submission_secret.txt",
    ]
    assert (dest / "fashion_mnist.py").read_text() == "fashion_mnist.py"
    for path in [dest, *dest.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode) & 0o777
        assert mode == (0o770 if path.is_dir() else 0o660), (path, oct(mode))
        assert path.stat().st_gid == inbound.stat().st_gid
    (work / "sub").mkdir()
    (work / "sub" / "to_script").symlink_to("../fashion_mnist.py")
    exchange.copy_private(work, tmp_path / "all", None, None, {})
    assert os.readlink(tmp_path / "all" / "sub" / "to_script") == "../fashion_mnist.py"
    assert stat.S_IMODE((tmp_path / "all" / "logs").stat().st_mode) == 0o770


def course_config(tmp_path: Path, **more) -> Config:
    config = Config()
    config.CourseDirectory.root = str(tmp_path / "course")
    config.CourseDirectory.course_id = "c"
    config.CourseDirectory.assignment_id = "a"
    config.Exchange.root = str(tmp_path / "exchange")
    for section, values in more.items():
        for key, value in values.items():
            setattr(getattr(config, section), key, value)
    (tmp_path / "exchange").mkdir(exist_ok=True)
    return config


def test_feedback_that_cannot_be_released_is_named_and_the_others_are_released(tmp_path):
    """Issue 38: a forged submission without submission_secret.txt made Release Feedback fail
    for the whole class with a bare FileNotFoundError."""
    config = course_config(tmp_path, CourseDirectory={"student_id": "*"})
    for student in ("alice", "ben", "cleo"):
        folder = tmp_path / "course" / "feedback" / student / "a"
        folder.mkdir(parents=True)
        (folder / "01_a.html").write_text(f"{student}'s feedback")
        (folder / "timestamp.txt").write_text("2026-11-28 10:00:00.000000 UTC")
        if student != "ben":
            (folder / "submission_secret.txt").write_text(f"{student}'s secret")
    release = exchange.ReleaseFeedbackPerStudent(
        coursedir=CourseDirectory(config=config), config=config
    )
    with pytest.raises(ExchangeError) as failed:
        release.start()
    assert "ben: no submission_secret.txt in their feedback folder" in str(failed.value)
    assert "alice" not in str(failed.value) and "cleo" not in str(failed.value)
    released = sorted(p.read_text() for p in (tmp_path / "exchange" / "c" / "feedback").iterdir())
    assert released == ["alice's feedback", "cleo's feedback"]


def test_the_assignments_list_shows_the_workbook_as_the_fetched_assignment(tmp_path):
    """One copy of each notebook: the Assignments list's notebooks are the workbook's own
    (the same paths as the attendee's tabs), and there is nothing to fetch."""
    config = course_config(
        tmp_path,
        WorkbookFolder={"folder": "notebooks"},
        Exchange={"assignment_dir": str(tmp_path / "copy")},
    )
    release = tmp_path / "exchange" / "c" / "outbound" / "a"
    release.mkdir(parents=True)
    work = tmp_path / "copy" / "notebooks"
    work.mkdir(parents=True)
    for name in ("01_a.ipynb", "02_b.ipynb", "fashion_mnist.py"):
        (release / name).write_text("{}")
        (work / name).write_text("{}")
    (work / "00_welcome.ipynb").write_text("{}")
    config.CourseDirectory.assignment_id = ""
    lister = exchange.WorkbookList(
        coursedir=CourseDirectory(config=config),
        authenticator=Authenticator(config=config),
        config=config,
    )
    [listed] = lister.start()
    assert listed["status"] == "fetched" and listed["path"] == str(work)
    assert [nb["path"] for nb in listed["notebooks"]] == [
        str(work / "01_a.ipynb"),
        str(work / "02_b.ipynb"),
    ]
    config.CourseDirectory.assignment_id = "a"
    fetch = exchange.WorkbookFetch(
        coursedir=CourseDirectory(config=config),
        authenticator=Authenticator(config=config),
        config=config,
    )
    with pytest.raises(ExchangeError, match="Nothing to fetch: your workbook"):
        fetch.start()
    assert not (tmp_path / "copy" / "a").exists()

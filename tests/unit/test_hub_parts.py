"""The workshop hub's parts that need no root: sizing the CPU sets, reading the roster, keeping
the settings (and passwords), an attendee's copy, nbgrader's per-role settings. With processes
(the authenticator, a login shell, openssl): tests/smoke/test_hub_parts_processes.py. The hub
itself, for real, is tests/system/test_hub.py (root)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hub import classroom, cores, roster, settings, workbook_copy
from workbook.facts import LEARNER_SCRIPT_NAME, step_notebook
from workbook.paths import REPO


@pytest.mark.parametrize("machine, attendees, expected", [
    ([0, 1], ["a", "b"], {"a": [0], "b": [1]}),
    ([0, 1], ["a", "b", "c"], {"a": [0], "b": [1], "c": [0]}),   # oversubscribed
    ([0, 1, 2, 3, 4, 5, 6, 7], ["a", "b", "c"], {"a": [0, 1], "b": [2, 3], "c": [4, 5]}),
    ([0, 1, 2, 3], ["a"], {"a": [0, 1, 2, 3]}),
])
def test_cores_are_shared_out_in_equal_blocks(machine, attendees, expected):
    planned = cores.plan(attendees, machine)
    assert planned == expected
    assert cores.oversubscribed(planned) == (len(attendees) > len(machine))


def test_the_roster_is_the_instructors_csv_and_names_a_bad_id(tmp_path):
    good = tmp_path / "roster.csv"
    good.write_text("id,first_name,last_name,email\nalice,A,L,a@x\nbob_2,B,O,b@x\n")
    assert roster.attendees(good) == ["alice", "bob_2"]
    bad = tmp_path / "bad.csv"
    bad.write_text("id,first_name\nalice,A\nBob Smith,B\n")
    with pytest.raises(roster.RosterError, match=r"line 3: id 'Bob Smith' cannot be a Unix"):
        roster.attendees(bad)
    twice = tmp_path / "twice.csv"
    twice.write_text("id\nalice\nalice\n")
    with pytest.raises(roster.RosterError, match="line 3: id 'alice' twice"):
        roster.attendees(twice)
    with pytest.raises(roster.RosterError, match="no id column"):
        (tmp_path / "x.csv").write_text("name\nalice\n")
        roster.attendees(tmp_path / "x.csv")


def test_settings_keep_their_passwords_and_stay_private(tmp_path):
    first = settings.load_or_new(tmp_path / "state", roster="r.csv", port=8100)
    first.attendees = ["alice", "bob"]
    assert first.ensure_passwords() == ["alice", "bob"]
    first.save()
    assert oct((tmp_path / "state").stat().st_mode & 0o777) == "0o700"
    assert oct(first.path.stat().st_mode & 0o777) == "0o600"
    assert len(first.admin_password) >= 32
    alice, bob = first.passwords["alice"], first.passwords["bob"]
    assert alice != bob and len(alice) == 14 and set(alice) <= set(
        settings.PASSWORD_ALPHABET + "-")
    again = settings.load_or_new(tmp_path / "state", roster=None, port=None, ip="10.0.0.5")
    again.attendees = ["alice", "bob", "carol"]
    assert again.ensure_passwords() == ["carol"]  # a new attendee; the others keep theirs
    assert (again.passwords["alice"], again.admin_password) == (alice, first.admin_password)
    assert (again.roster, again.port, again.url) == ("r.csv", 8100, "http://10.0.0.5:8100/")


@pytest.mark.parametrize("attendees, total, expected", [
    (2, 8192, 3584), (3, 24105, 7680), (16, 65536, 4032), (64, 131072, 2032 // 64 * 64)])
def test_each_attendee_gets_an_equal_share_of_the_memory(attendees, total, expected):
    from hub import limits

    assert limits.memory_each(attendees, total) == expected
    assert limits.parse_size("3G") == 3072 and limits.parse_size("2560M") == 2560
    assert limits.parse_size("2.5GiB") == 2560 and limits.parse_size("3072") == 3072


def test_an_attendees_copy_is_made_once_and_never_overwritten(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    copy, made = workbook_copy.make(REPO, home, os.getuid(), os.getgid())
    assert made and copy == home / "horovod-workbook"
    script = copy / "notebooks" / LEARNER_SCRIPT_NAME
    assert script.read_text() == (REPO / "solutions" / LEARNER_SCRIPT_NAME).read_text()
    assert (copy / "notebooks" / step_notebook(1).file_name).is_file()
    assert (copy / "workbook" / "paths.py").is_file() and (copy / "grader").is_dir()
    assert not (copy / "notebooks" / "logs").exists()
    for link in ("data/sample", "data/fashion_mnist", "solutions"):
        assert (copy / link).is_symlink() and (copy / link).resolve() == REPO / link
    script.write_text("# my work\n")
    again, made = workbook_copy.make(REPO, home, os.getuid(), os.getgid())
    assert not made and script.read_text() == "# my work\n"


def test_attendees_get_the_assignments_list_and_the_instructor_the_formgrader(tmp_path):
    s = settings.HubSettings(state_dir=str(tmp_path / "state"), roster="r.csv",
                             exchange="/srv/x/exchange", course=str(tmp_path / "course"))
    s.save()
    classroom.write_role_configs(s)
    student, instructor = (classroom.config_dir(s, role) for role in classroom.ROLES)
    for folder in (student, instructor):
        text = (folder / "nbgrader_config.py").read_text()
        assert "c.Exchange.root = '/srv/x/exchange'" in text
        assert "c.CourseDirectory.course_id = 'horovod_workbook'" in text
    assert f"c.CourseDirectory.root = {str(tmp_path / 'course')!r}" in \
        (instructor / "nbgrader_config.py").read_text()
    hidden = json.loads((student / "labconfig" / "page_config.json").read_text())
    assert hidden["disabledExtensions"]["@jupyter/nbgrader:formgrader"] is True
    assert "@jupyter/nbgrader:assignment-list" not in hidden["disabledExtensions"]
    server = json.loads((student / "jupyter_server_config.json").read_text())
    assert server["ServerApp"]["jpserver_extensions"] == {
        "nbgrader.server_extensions.formgrader": False,
        "nbgrader.server_extensions.course_list": False}
    assert not (instructor / "labconfig").exists()
    # The servers read their role's settings beside the state folder, which stays root only.
    assert oct(Path(s.state_dir).stat().st_mode & 0o777) == "0o700"
    assert student.parent == Path(f"{s.state_dir}-jupyter")
    assert oct(student.stat().st_mode & 0o777) == "0o755"


def test_a_course_made_for_another_exchange_is_made_again(tmp_path):
    """Re-running `make hub --exchange NEW` re-inits the course (init --force) for NEW."""
    course = tmp_path / "course"
    assert classroom.course_exchange(course) is None
    course.mkdir()
    (course / "nbgrader_config.py").write_text(
        "c = get_config()\nc.Exchange.root = '/srv/old/exchange'\nc.Exchange.other = 1\n")
    assert classroom.course_exchange(course) == "/srv/old/exchange"


def test_the_kubernetes_chart_starts_jupyterlab_with_the_workbooks_options():
    """The chart's YAML can't import LAB_ARGS, so it repeats them (`make lab` and the hub's
    spawner use them directly: tests/system/test_lab.py and tests/system/test_hub.py read the page)."""
    import yaml

    from workbook.facts import LAB_ARGS

    chart = yaml.safe_load((REPO / "hub" / "k8s" / "values.yaml").read_text())
    image_repo = chart["singleuser"]["extraEnv"]["PYTHONPATH"]  # the workbook in the image
    here = tuple(arg.replace(str(REPO), image_repo) for arg in LAB_ARGS)
    assert tuple(chart["singleuser"]["cmd"][1:]) == here



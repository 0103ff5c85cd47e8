"""The workshop hub's parts that need no root: sizing the CPU sets, reading the roster, keeping
the settings (and passwords), an attendee's copy, nbgrader's per-role settings. The hub itself,
for real, is tests/test_hub.py (slow, root)."""

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


def authenticate(authenticator, name: str, password: str):
    """The authenticator's answer, in a thread of its own: in the same session as the browser
    tests, Playwright's event loop runs in this one."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    data = {"username": name, "password": password}
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, authenticator.authenticate(None, data)).result()


def test_each_password_opens_its_own_account_only(tmp_path):
    from hub import auth

    s = settings.HubSettings(state_dir=str(tmp_path / "state"), roster="r.csv",
                             attendees=["alice", "bob"], instructor="teach")
    s.ensure_passwords()
    s.save()
    authenticator = auth.RosterAuthenticator(settings_file=str(s.path))

    def log_in(name, password):
        return authenticate(authenticator, name, password)

    assert log_in("alice", s.passwords["alice"]) == "alice"
    assert log_in("teach", s.admin_password) == "teach"
    for name in ("alice", "Alice", "ALICE", "teach", "carol", ""):
        assert log_in(name, s.passwords["bob"]) is None, name
    assert log_in("bob", s.admin_password) is None and log_in("bob", "") is None
    sheet = auth.write_sheet(s, [{"id": "alice", "first_name": "Alice", "last_name": "L"}])
    assert oct(sheet.stat().st_mode & 0o777) == "0o600"
    assert f"alice,Alice,L,{s.passwords['alice']}" in sheet.read_text()


@pytest.mark.parametrize("attendees, total, expected", [
    (2, 8192, 3584), (3, 24105, 7680), (16, 65536, 4032), (64, 131072, 2032 // 64 * 64)])
def test_each_attendee_gets_an_equal_share_of_the_memory(attendees, total, expected):
    from hub import limits

    assert limits.memory_each(attendees, total) == expected
    assert limits.parse_size("3G") == 3072 and limits.parse_size("2560M") == 2560
    assert limits.parse_size("2.5GiB") == 2560 and limits.parse_size("3072") == 3072


def test_an_attendees_login_shell_gets_the_environment_first(tmp_path):
    import subprocess

    from hub import isolation

    s = settings.HubSettings(state_dir=str(tmp_path / "state"), roster="r.csv",
                             venv=str(tmp_path / "venv"))
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    profile = isolation.write_profile(s, tmp_path / "profile.sh")
    script = f". {profile}; echo $PATH"
    inside = subprocess.run(["sh", "-c", script], env={"PATH": "/usr/bin:/bin",
                            "JUPYTERHUB_USER": "alice"}, capture_output=True, text=True)
    assert inside.stdout.strip() == f"{tmp_path}/venv/bin:/usr/bin:/bin"
    outside = subprocess.run(["sh", "-c", script], env={"PATH": "/usr/bin:/bin"},
                             capture_output=True, text=True)
    assert outside.stdout.strip() == "/usr/bin:/bin"


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
    spawner use them directly: tests/test_lab.py and tests/test_hub.py read the page)."""
    import yaml

    from workbook.facts import LAB_ARGS

    chart = yaml.safe_load((REPO / "hub" / "k8s" / "values.yaml").read_text())
    image_repo = chart["singleuser"]["extraEnv"]["PYTHONPATH"]  # the workbook in the image
    here = tuple(arg.replace(str(REPO), image_repo) for arg in LAB_ARGS)
    assert tuple(chart["singleuser"]["cmd"][1:]) == here


def test_https_makes_a_self_signed_certificate_once_and_the_banner_says_how(tmp_path):
    import subprocess

    from hub import __main__ as hub_main, tls

    cert, key, made = tls.self_signed(tmp_path)
    assert made and oct(key.stat().st_mode & 0o777) == "0o600"
    assert tls.self_signed(tmp_path)[2] is False  # kept: the attendees accepted this one
    text = subprocess.run(["openssl", "x509", "-in", str(cert), "-noout", "-text"],
                          capture_output=True, text=True, check=True).stdout
    assert "DNS:localhost" in text and "IP Address:127.0.0.1" in text
    s = settings.HubSettings(state_dir=str(tmp_path / "state"), roster="r.csv",
                             attendees=["alice"], ssl_cert=str(cert), ssl_key=str(key),
                             self_signed=True, memory_mib=3072, pids_max=1024,
                             course=str(tmp_path / "course"))
    shown = hub_main.banner(s, {"alice": [0]})
    assert s.url.startswith("https://") and tls.fingerprint(cert) in shown
    assert "in clear" not in shown and "memory 3.0 GiB, 1024 processes" in shown
    plain = hub_main.banner(settings.HubSettings(state_dir=str(tmp_path / "s2"), roster="r.csv",
                                                 attendees=["alice"], course="c"),
                            {"alice": [0]})
    assert "passwords cross the room's network in clear" in plain


def test_a_new_password_for_one_attendee_replaces_theirs_at_once(tmp_path, capsys):
    import argparse

    from hub import __main__ as hub_main, auth

    s = settings.HubSettings(state_dir=str(tmp_path / "state"), roster=str(tmp_path / "r.csv"),
                             attendees=["alice", "bob"])
    s.ensure_passwords()
    s.save()
    old, bobs = s.passwords["alice"], s.passwords["bob"]
    args = argparse.Namespace(state_dir=s.state_dir, name="alice")
    assert hub_main.password(args) == 0
    new = settings.load(s.path).passwords["alice"]
    assert new != old and new in capsys.readouterr().out
    assert settings.load(s.path).passwords["bob"] == bobs
    assert new in s.passwords_path.read_text() and old not in s.passwords_path.read_text()
    authenticator = auth.RosterAuthenticator(settings_file=str(s.path))
    for password, expected in ((old, None), (new, "alice")):
        assert authenticate(authenticator, "alice", password) == expected
    assert hub_main.password(argparse.Namespace(state_dir=s.state_dir, name="mallory")) == 1

"""The workshop hub's parts that need no root: sizing the CPU sets, reading the roster, keeping
the settings (and passwords), an attendee's copy, nbgrader's per-role settings. With processes
(the authenticator, a login shell, openssl): tests/smoke/test_hub_parts_processes.py. The hub
itself, for real, is tests/system/test_hub.py (root)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from hub import classroom, cores, roster, settings, workbook_copy
from workbook.facts import LEARNER_SCRIPT_NAME, step_notebook
from workbook.paths import REPO


@pytest.mark.parametrize(
    "machine, attendees, expected",
    [
        ([0, 1], ["a", "b"], {"a": [0], "b": [1]}),
        ([0, 1], ["a", "b", "c"], {"a": [0], "b": [1], "c": [0]}),  # oversubscribed
        ([0, 1, 2, 3, 4, 5, 6, 7], ["a", "b", "c"], {"a": [0, 1], "b": [2, 3], "c": [4, 5]}),
        ([0, 1, 2, 3], ["a"], {"a": [0, 1, 2, 3]}),
    ],
)
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
    assert alice != bob and len(alice) == 14 and set(alice) <= set(settings.PASSWORD_ALPHABET + "-")
    again = settings.load_or_new(tmp_path / "state", roster=None, port=None, ip="10.0.0.5")
    again.attendees = ["alice", "bob", "carol"]
    assert again.ensure_passwords() == ["carol"]  # a new attendee; the others keep theirs
    assert (again.passwords["alice"], again.admin_password) == (alice, first.admin_password)
    assert (again.roster, again.port, again.url) == ("r.csv", 8100, "http://10.0.0.5:8100/")


def test_a_taken_hub_port_moves_the_hub_unless_it_was_asked_for(tmp_path):
    """Issue 39 (2): another program on one of the hub's ports (here its API's, the usual
    port + 1) is no error: the hub takes the next free block and says where and why; a port
    asked for with --port is kept, and the error names the holder and the way out."""
    import socket

    from hub import server

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1] - 1
        hub = settings.HubSettings(state_dir=str(tmp_path), roster="r.csv", port=port)
        with pytest.raises(SystemExit) as refused:
            server.take_free_ports(hub, asked=True)
        said = str(refused.value)
        assert said.startswith(f"error: port {port + 1} was taken by PID {os.getpid()} (")
        suggested = int(re.search(r'make hub HUB_ARGS="--port (\d+)"$', said).group(1))
        assert hub.port == port
        moved = server.take_free_ports(hub, asked=False)
        assert moved.startswith(f"port {port + 1} was taken by PID {os.getpid()} (")
        # The next block of the hub's ports that is free (the one after, unless taken too).
        assert hub.port == suggested and (hub.port - port) % server.HUB_PORTS == 0
        assert moved.endswith(f", so the hub is on {hub.port}") and hub.port > port
        assert hub.url.endswith(f":{hub.port}/")
        assert server.take_free_ports(hub, asked=False) is None  # free there: stays


@pytest.mark.parametrize(
    "attendees, total, expected",
    [(2, 8192, 3584), (3, 24105, 7680), (16, 65536, 4032), (64, 131072, 2032 // 64 * 64)],
)
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
    s = settings.HubSettings(
        state_dir=str(tmp_path / "state"),
        roster="r.csv",
        exchange="/srv/x/exchange",
        course=str(tmp_path / "course"),
    )
    s.save()
    classroom.write_role_configs(s)
    student, instructor = (classroom.config_dir(s, role) for role in classroom.ROLES)
    for folder in (student, instructor):
        text = (folder / "nbgrader_config.py").read_text()
        assert "c.Exchange.root = '/srv/x/exchange'" in text
        assert "c.CourseDirectory.course_id = 'horovod_workbook'" in text
    assert (
        f"c.CourseDirectory.root = {str(tmp_path / 'course')!r}"
        in (instructor / "nbgrader_config.py").read_text()
    )
    hidden = json.loads((student / "labconfig" / "page_config.json").read_text())
    assert hidden["disabledExtensions"]["@jupyter/nbgrader:formgrader"] is True
    assert "@jupyter/nbgrader:assignment-list" not in hidden["disabledExtensions"]
    server = json.loads((student / "jupyter_server_config.json").read_text())
    assert server["ServerApp"]["jpserver_extensions"] == {
        "nbgrader.server_extensions.formgrader": False,
        "nbgrader.server_extensions.course_list": False,
    }
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
        "c = get_config()\nc.Exchange.root = '/srv/old/exchange'\nc.Exchange.other = 1\n"
    )
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


# --- the class view (issue 38.6) ---------------------------------------------------------------


def test_a_check_record_is_one_line_in_one_format(tmp_path):
    from grader.report import STATUSES
    from workbook import class_progress
    from workbook.class_progress import Record, parse

    assert class_progress.STATUSES == STATUSES  # the grader's vocabulary, which it cannot import
    record = Record(4, "failed", 1764320000.5)
    assert parse(record.line()) == record and record.line().endswith("\n")
    for bad in (
        '{"step": 13, "status": "passed", "time": 1}',
        '{"step": 4, "status": "ok", "time": 1}',
        '{"step": "4", "status": "passed", "time": 1}',
        '{"step": 4}',
        '{"step": 4, "status": "passed", "time": NaN}',
        "not json",
        "x" * 300,
        "",
    ):
        assert parse(bad) is None, bad


def test_a_check_is_noted_only_in_the_file_the_hub_made(tmp_path):
    from workbook import class_progress

    target = tmp_path / "alice.jsonl"
    env = {class_progress.PROGRESS_VARIABLE: str(target)}
    assert not class_progress.note(1, "passed", environ={})  # no hub: nothing
    assert not class_progress.note(1, "passed", environ=env) and not target.exists()  # never made
    target.touch()
    assert class_progress.note(1, "passed", now=100.0, environ=env)
    assert class_progress.note(2, "failed", now=160.0, environ=env)
    assert not class_progress.note(99, "passed", environ=env)
    assert class_progress.read(target) == [
        class_progress.Record(1, "passed", 100.0),
        class_progress.Record(2, "failed", 160.0),
    ]
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    assert not class_progress.note(
        3, "passed", environ={class_progress.PROGRESS_VARIABLE: str(link)}
    )
    with pytest.raises(OSError):
        class_progress.read(link)  # the view never follows a link
    assert class_progress.read(tmp_path) == []  # no regular file: no records


def test_the_view_reads_only_a_files_last_part(tmp_path):
    from workbook import class_progress

    target = tmp_path / "bob.jsonl"
    lines = [class_progress.Record(1 + i % 12, "failed", 1000.0 + i).line() for i in range(3000)]
    target.write_text("garbage, then\n" + "".join(lines))
    records = class_progress.read(target, max_bytes=4096)
    assert 0 < len(records) < 100 and records[-1].time == 3999.0
    assert all(r.time >= 3900 for r in records)  # the cut first line and the old ones: dropped


def test_who_is_stuck_longest_and_since_when():
    from hub import class_view
    from workbook.class_progress import Record as R

    now = 10_000.0
    records = {
        "ana": [
            R(1, "passed", 100),
            R(2, "passed", 200),
            R(3, "failed", 300),
            R(2, "passed", 400),
            R(3, "failed", 500),
        ],  # other checks: still stuck
        "ben": [
            R(3, "failed", 100),
            R(3, "passed", 1000),
            R(4, "failed", 2000),
            R(4, "failed", 2500),
        ],
        "cleo": [R(1, "passed", 50), R(2, "can't tell", 9000)],  # counts as done
        "dan": [],
        "eve": "Permission denied",
    }
    standings = class_view.class_standings(records, now)
    assert [s.attendee for s in standings] == ["ana", "ben", "cleo", "dan", "eve"]
    ana, ben, cleo, dan, eve = standings
    assert (ana.last.step, ana.stuck_since, ana.failed_checks) == (3, 300, 2)
    assert (ben.last.step, ben.stuck_since, ben.failed_checks) == (4, 2000, 2)
    assert cleo.stuck_since is None and cleo.last.status == "can't tell"
    assert dan.last is None and eve.unreadable == "Permission denied"
    assert class_view.stuck_longest(standings) is ana
    assert class_view.headline(standings, now).startswith(
        "Stuck longest: ana, on step 3 (Print only on rank 0) for 2 h 41 min, 2 failed checks"
    )
    # A pass of the step ends it; a failure after it starts again.
    assert class_view.standing("x", [R(5, "failed", 1), R(5, "passed", 2)]).stuck_since is None
    assert (
        class_view.standing(
            "x", [R(5, "failed", 1), R(5, "passed", 2), R(5, "failed", 3)]
        ).stuck_since
        == 3
    )
    page = class_view.table_html(standings, now)
    assert page.count("<tr") == 6 and "no check yet" in page and "Permission denied" in page
    assert "step 4: Wrap the optimizer" in page and "2 h 13 min (2 failed)" in page
    assert class_view.headline(class_view.class_standings({"dan": []}, now), now).startswith(
        "Nobody is stuck"
    )


def test_an_attendee_name_is_escaped_in_the_view():
    from hub import class_view
    from workbook.class_progress import Record

    page = class_view.table_html(
        class_view.class_standings({"<script>": [Record(1, "failed", 1.0)]}, 2.0), 2.0
    )
    assert "<script>" not in page and "&lt;script&gt;" in page


# --- ports (issue 38.4) ------------------------------------------------------------------------


def test_each_account_has_a_range_of_ports_of_its_own():
    from hub import isolation
    from workbook.ports import PORTS_TRIED

    s = settings.HubSettings(
        state_dir="/x", roster="r.csv", instructor="root", attendees=["daemon", "bin", "sys"]
    )
    ranges = [isolation.port_range(s, user) for user in isolation.accounts(s)]
    assert all(len(r) == PORTS_TRIED for r in ranges)  # a TensorBoard's move stays in its range
    ports = [port for r in ranges for port in r]
    assert len(set(ports)) == len(ports) and set(ports) == set(isolation.port_block(s))
    assert isolation.port_block(s).start > 6006 + PORTS_TRIED  # make lab's own TensorBoard
    assert isolation.port_block(s)[-1] < 32768  # below the ephemeral ports
    assert isolation.tensorboard_port(s, "bin") == isolation.port_range(s, "bin").start
    rules = isolation.port_rules(s)
    daemon = isolation.port_range(s, "daemon")
    assert f"{daemon.start}:{daemon[-1]}" in rules[2] and "1" in rules[2]  # daemon's uid 1


def test_the_port_guards_program_is_ten_instructions():
    from hub import port_guard

    code = port_guard.program(range(6100, 6180), range(6120, 6140))
    assert len(code) == 10 * 8 and code[-8] == 0x95  # ends with exit
    assert port_guard.cgroup2_root("cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n") == Path(
        "/sys/fs/cgroup/unified"
    )
    assert port_guard.cgroup2_root("cgroup /sys/fs/cgroup/pids cgroup rw,pids 0 0\n") is None


# --- limits that say their name, banner commands (issue 38.5) ----------------------------------


def test_a_limit_that_stopped_something_is_named_with_what_was_used(tmp_path):
    from hub import kernel_limits

    mounts = (
        "cgroup /cg/memory cgroup rw,memory 0 0\ncgroup /cg/pids cgroup rw,pids 0 0\n"
        "cgroup /cg/cpu cgroup rw,cpu 0 0\n"
    )
    groups = kernel_limits.own_groups(
        "8:pids:/horovod-workbook/alice\n4:memory:/horovod-workbook/alice\n1:cpu:/\n", mounts
    )
    assert groups == {
        "memory": Path("/cg/memory/horovod-workbook/alice"),
        "pids": Path("/cg/pids/horovod-workbook/alice"),
    }
    assert kernel_limits.own_groups("4:memory:/\n", mounts) == {}  # the root group: no limit
    memory, pids = tmp_path / "memory", tmp_path / "pids"
    memory.mkdir()
    pids.mkdir()
    (memory / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    (memory / "memory.limit_in_bytes").write_text(str(3 * 2**30))
    (memory / "memory.max_usage_in_bytes").write_text(str(3 * 2**30 - 2**20))
    (pids / "pids.events").write_text("max 7\n")
    (pids / "pids.max").write_text("1024\n")
    (pids / "pids.current").write_text("1019\n")
    groups = {"memory": memory, "pids": pids}
    now = kernel_limits.counts(groups)
    assert now == {"oom_kill": 3, "pids_max": 7}
    said = kernel_limits.messages({"oom_kill": 2, "pids_max": 0}, now, groups, "during this cell")
    assert said[0].startswith(
        "Memory limit: during this cell, 1 of your processes was killed "
        "for going over your memory limit of 3.0 GiB (your peak: 3.0 GiB"
    )
    assert "the kernel died, this was it" in said[0]
    assert said[1].startswith(
        "Process limit: during this cell, 7 new processes or threads could "
        "not start: you reached your limit of 1024 processes and threads "
        "(1019 running now)"
    )
    assert kernel_limits.messages(now, now, groups, "x") == []
    assert "module.install(get_ipython())" in kernel_limits.startup_text()

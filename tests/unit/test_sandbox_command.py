"""The sandbox's command (grader/running/sandbox.py) as it is built, without running it: namespaces,
what is bound writable, hidden folders, secrets taken out, root or not, bwrap missing, cgroups.
The attacks on the real sandbox: tests/system/test_sandbox.py.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from grader.running import sandbox as sandbox_module
from grader.running.sandbox import Limits, Sandbox, SandboxUnavailable
from workbook.paths import REPO

# --- running a hostile script ----------------------------------------------------------------


@pytest.fixture
def box():
    """A sandbox with small limits, closed (cgroups and mounts released) after the test."""
    with Sandbox(
        Limits(
            memory_bytes=512 << 20,
            processes=64,
            cpu_seconds=20,
            disk_bytes=32 << 20,
            tmp_bytes=16 << 20,
        )
    ) as sandbox:
        yield sandbox
    assert not sandbox._held["cgroups"] and not sandbox._held["mounts"]


# --- the command (no root, no bwrap needed) ---------------------------------------------------


def not_root(monkeypatch):
    monkeypatch.setattr(Sandbox, "as_root", property(lambda self: False))
    monkeypatch.setattr(sandbox_module, "user_namespaces_work", lambda bwrap: True)
    monkeypatch.setattr(sandbox_module.shutil, "which", lambda name: f"/usr/bin/{name}")


def test_the_command_runs_the_argv_last_in_new_namespaces(monkeypatch, tmp_path):
    not_root(monkeypatch)
    argv = Sandbox().wrap(["horovodrun", "-np", "2", "python", "x.py"], {}, cwd=tmp_path)
    assert argv[-5:] == ["horovodrun", "-np", "2", "python", "x.py"]
    assert argv[0] == "prlimit" and "--cpu=300" in argv
    bwrap = argv.index("/usr/bin/bwrap")
    for flag in ("--unshare-net", "--unshare-pid", "--die-with-parent", "--new-session"):
        assert flag in argv[bwrap:]
    assert "--share-net" not in argv


def test_only_the_writable_folders_are_bound_writable_after_the_private_tmp(monkeypatch, tmp_path):
    not_root(monkeypatch)
    runs, student = tmp_path / "runs", tmp_path / "student"
    student.mkdir()
    argv = Sandbox().wrap(["true"], {}, cwd=student, writable=[runs])
    binds = [argv[i + 1] for i, word in enumerate(argv) if word == "--bind"]
    assert binds == [str(runs)]
    assert runs.is_dir()  # made for the run
    assert argv.index("/tmp") < argv.index(str(runs))  # the private /tmp first, then the folder
    ro = [argv[i + 1] for i, word in enumerate(argv) if word == "--ro-bind"]
    assert str(student) in ro and "/home" not in ro and "/" not in ro
    # Of the checkout, the runner's package and the probe and keeper files: no solutions, no
    # roster, no course, no notebooks (the box sees what the run needs).
    assert str(REPO) not in ro and str(REPO / "workbook") in ro
    assert {p for p in ro if p.startswith(str(REPO / "grader"))} == {
        str(REPO / "grader" / "running" / "probe.py"),
        str(REPO / "grader" / "running" / "probe_callbacks.py"),
        str(REPO / "grader" / "running" / "box_keeper.py"),
    }
    sizes = [argv[i + 1] for i, word in enumerate(argv) if word == "--size"]
    assert str(Limits().tmp_bytes) in sizes


def test_a_writable_folder_inside_another_is_bound_with_it(monkeypatch, tmp_path):
    not_root(monkeypatch)
    run = tmp_path / "run"
    sandbox = Sandbox().with_folders(writable=[run])
    argv = sandbox.wrap(["true"], {}, writable=[run / "logs"])
    assert [argv[i + 1] for i, word in enumerate(argv) if word == "--bind"] == [str(run)]
    assert (run / "logs").is_dir()
    assert sandbox.with_folders(readable=[tmp_path]).writable == (run,)  # added, not replaced


def test_the_probe_folder_of_the_environment_is_writable(monkeypatch, tmp_path):
    not_root(monkeypatch)
    records = tmp_path / "records"
    argv = Sandbox().wrap(["true"], {"WORKBOOK_PROBE_DIR": str(records)})
    assert ["--bind", str(records), str(records)] == argv[argv.index("--bind") :][:3]


def test_hidden_folders_get_an_empty_tmpfs_before_the_learners_folder(monkeypatch, tmp_path):
    not_root(monkeypatch)
    course = tmp_path / "course"
    alice = course / "submitted" / "alice"
    alice.mkdir(parents=True)
    argv = Sandbox(hidden=(course,), readable=(tmp_path,)).wrap(["true"], {}, cwd=alice)
    text = " ".join(argv)
    assert f"--perms 0555 --size {1 << 20} --tmpfs {course}" in text
    assert text.index(f"--tmpfs {course}") < text.index(f"--ro-bind {alice}")
    assert f"--perms 0755 --dir {course / 'submitted'}" in text  # open to the sandbox user


def test_only_allowed_variables_reach_the_box_and_home_is_the_private_tmp(monkeypatch):
    """An allow-list, of the run's environment and of the grader's own: a variable no pattern
    of secrets would catch (DATABASE_URL, OLDPWD) is taken out too."""
    not_root(monkeypatch)
    monkeypatch.setenv("DATABASE_URL", "postgres://grader:hunter2@db/course")
    monkeypatch.setenv("OLDPWD", "/root/secret-project")
    env = {
        "JUPYTERHUB_API_TOKEN": "x",
        "AWS_ACCESS_KEY_ID": "y",
        "PATH": "/root/bin:/usr/bin",
        "WORKBOOK_RUN_ID": "z",
        "HOROVOD_RANK": "0",
        "OMP_NUM_THREADS": "1",
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "SOMETHING": "else",
    }
    argv = Sandbox().wrap(["true"], env)
    unset = {argv[i + 1] for i, word in enumerate(argv) if word == "--unsetenv"}
    assert {
        "JUPYTERHUB_API_TOKEN",
        "AWS_ACCESS_KEY_ID",
        "SOMETHING",
        "DATABASE_URL",
        "OLDPWD",
    } <= unset
    assert not unset & {
        "WORKBOOK_RUN_ID",
        "HOROVOD_RANK",
        "OMP_NUM_THREADS",
        "LANG",
        "PYTHONUNBUFFERED",
    }
    box = {argv[i + 1]: argv[i + 2] for i, word in enumerate(argv) if word == "--setenv"}
    assert box["HOME"] == box["TMPDIR"] == "/tmp"
    path = box["PATH"]
    assert "/root/bin" not in path and path.endswith("/usr/local/bin:/usr/bin:/bin")


def test_the_keeper_starts_the_command_with_the_output_limit(monkeypatch):
    not_root(monkeypatch)
    argv = Sandbox(Limits(output_bytes=1234)).wrap(["horovodrun", "x"], {})
    keeper = len(argv) - 1 - argv[::-1].index(str(sandbox_module.KEEPER))  # run, after bound
    assert argv[keeper - 2 : keeper] == ["-I", "-S"] and argv[keeper + 1 :] == [
        "1234",
        "horovodrun",
        "x",
    ]


def test_not_root_is_said_to_be_weaker_and_limits_by_rlimits(monkeypatch):
    not_root(monkeypatch)
    argv = Sandbox().wrap(["true"], {})
    assert "--unshare-user" in argv and "setpriv" not in argv
    assert f"--nproc={Limits().processes}" in argv and f"--data={Limits().memory_bytes}" in argv
    assert "rlimits" in Sandbox().weaker


def test_without_bwrap_it_refuses_to_run_at_all(monkeypatch):
    monkeypatch.setattr(sandbox_module.shutil, "which", lambda name: None)
    with pytest.raises(SandboxUnavailable, match="no bubblewrap.*apt-get install bubblewrap"):
        Sandbox().wrap(["true"], {})


def test_not_root_without_user_namespaces_it_refuses(monkeypatch):
    not_root(monkeypatch)
    monkeypatch.setattr(sandbox_module, "user_namespaces_work", lambda bwrap: False)
    with pytest.raises(SandboxUnavailable, match="not root and no user namespaces"):
        Sandbox().wrap(["true"], {})


def test_as_root_it_joins_the_cgroups_and_drops_to_the_account(monkeypatch, tmp_path):
    monkeypatch.setattr(Sandbox, "as_root", property(lambda self: True))
    monkeypatch.setattr(sandbox_module.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(sandbox_module, "ensure_user", lambda name: (990, 991))
    mounted = []
    monkeypatch.setattr(
        sandbox_module,
        "mount_tmpfs",
        lambda folder, size, inodes, uid, gid: mounted.append((folder, size, inodes)) or folder,
    )
    procs = [tmp_path / "memory" / "cgroup.procs", tmp_path / "pids" / "cgroup.procs"]
    monkeypatch.setattr(sandbox_module, "make_cgroups", lambda limits: procs)
    sandbox = Sandbox()
    argv = sandbox.wrap(["true"], {}, writable=[tmp_path / "logs"])
    assert argv[:2] == ["/bin/sh", "-c"] and argv[4] == " ".join(map(str, procs))
    drop = argv.index("setpriv")
    assert argv[drop : drop + 3] == ["setpriv", "--reuid=990", "--regid=991"]
    assert "--no-new-privs" in argv[drop:] and argv.index("/usr/bin/bwrap") < drop
    limits = Limits()
    # The writable folder's tmpfs, then the launch's own /tmp and /dev/shm (one tmpfs for both,
    # with an inode limit: bwrap's --tmpfs has none), bound into the box.
    scratch = sandbox._held["scratch"][0]
    assert mounted == [
        (tmp_path / "logs", limits.disk_bytes, limits.inodes),
        (scratch, limits.tmp_bytes, limits.inodes),
    ]
    at = argv.index(str(scratch / "tmp"))
    assert argv[at - 1 : at + 2] == ["--bind", str(scratch / "tmp"), "/tmp"]
    assert argv[at + 2 : at + 5] == ["--bind", str(scratch / "shm"), "/dev/shm"]
    assert sandbox._held["cgroups"] == [procs]  # close() removes them
    # A second launch into the same folder keeps its tmpfs (the first launch's checkpoint), and
    # gets a /tmp of its own.
    sandbox.wrap(["true"], {}, writable=[tmp_path / "logs"])
    assert [m[0] for m in mounted].count(tmp_path / "logs") == 1
    assert sandbox._held["mounts"] == [tmp_path / "logs"] and len(sandbox._held["scratch"]) == 2
    assert sandbox.fresh()._held["mounts"] == []
    for folder in sandbox._held["scratch"]:  # nothing was mounted on them here
        shutil.rmtree(folder)
    for kind in ("cgroups", "mounts", "scratch"):
        sandbox._held[kind].clear()


def test_the_runner_wraps_the_launcher_and_keeps_what_it_shows(tmp_path):
    from workbook.runner import RunOptions, plan_run

    class Recorder:
        def wrap(self, argv, env, *, cwd, writable):
            self.seen = (list(argv), dict(env), cwd, list(writable))
            return ["boxed", *argv]

    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    recorder = Recorder()
    plain = plan_run([str(script)], options=RunOptions(np=2, logs_root=tmp_path, run_name="r"))
    boxed = plan_run(
        [str(script)], options=RunOptions(np=2, logs_root=tmp_path, run_name="r", sandbox=recorder)
    )
    assert boxed.argv == ["boxed", *plain.argv]
    assert boxed.display_command == plain.display_command
    argv, env, cwd, writable = recorder.seen
    assert env == boxed.env and cwd == boxed.cwd and writable == [boxed.run_dir]


# --- what a grader killed with SIGKILL left ---------------------------------------------------

DEAD_TAG = "999999999-1"  # no such pid (above pid_max)


def _mountinfo_line(where: str, source: str, kind: str = "tmpfs") -> str:
    return f"612 30 0:95 / {where} rw,nosuid,nodev - {kind} {source} rw,size=262144k"


def test_only_the_mounts_of_a_grader_that_is_gone_are_orphans():
    alive = sandbox_module.holder_tag()
    mountinfo = "\n".join(
        [
            _mountinfo_line("/tmp/run-a/box", f"{sandbox_module.HELD_BY}{DEAD_TAG}"),
            _mountinfo_line("/tmp/run\\040b/box", f"{sandbox_module.HELD_BY}{DEAD_TAG}"),
            _mountinfo_line("/tmp/run-c/box", f"{sandbox_module.HELD_BY}{alive}"),  # this grader's
            _mountinfo_line("/tmp/run-d/box", "tmpfs"),  # not the sandbox's
            _mountinfo_line("/tmp/run-e/box", f"{sandbox_module.HELD_BY}{DEAD_TAG}", kind="ext4"),
        ]
    )
    assert sandbox_module.orphaned_mounts(mountinfo) == [
        Path("/tmp/run-a/box"),
        Path("/tmp/run b/box"),
    ]


def test_a_holder_is_one_process_even_when_its_pid_is_reused():
    pid = os.getpid()
    assert sandbox_module.holder_alive(sandbox_module.holder_tag())
    assert not sandbox_module.holder_alive(f"{pid}-0")  # same pid, another start time
    assert not sandbox_module.holder_alive(DEAD_TAG)
    assert not sandbox_module.holder_alive("not-a-tag")


def test_the_run_cgroups_are_named_after_their_grader(monkeypatch, tmp_path):
    for controller in sandbox_module.CONTROLLERS:
        (tmp_path / controller).mkdir()
    monkeypatch.setattr(sandbox_module, "own_cgroup", lambda controller: tmp_path / controller)
    made = sandbox_module.make_cgroups(Limits())
    assert all(
        p.parent.name.startswith(sandbox_module.HELD_BY + sandbox_module.holder_tag()) for p in made
    )
    dead = tmp_path / "memory" / f"{sandbox_module.HELD_BY}{DEAD_TAG}-0123456789ab"
    dead.mkdir()
    assert sandbox_module.orphaned_cgroups() == [dead / "cgroup.procs"]

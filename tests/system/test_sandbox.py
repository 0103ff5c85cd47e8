"""The sandbox of a graded run (grader/running/sandbox.py), attacked.

Each attack is a hostile script run through the runner (plan_run + execute, with a time limit,
every process stopped afterwards), once in the real sandbox (bubblewrap, as root) where it must
fail, and, where that means something, once without it, where it must succeed: so each test
can fail. The last one runs the reference solution on 2 horovodrun workers inside the box.

The attacks need root (the sandbox account, tmpfs mounts, cgroups): not root, they are skipped;
as root (CI) they run, and a missing bwrap fails them (tests/setup_sandbox.sh installs it).
The command's construction, which needs neither: tests/unit/test_sandbox_command.py.
"""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest

from grader.running import sandbox as sandbox_module
from grader.running.sandbox import Limits, Sandbox
from workbook.facts import LAST_STEP
from workbook.paths import REPO

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="the sandbox's attacks need root (its account, mounts, cgroups)"
)
REFERENCE = REPO / "solutions" / "fashion_mnist_solution.py"
RESULT = "RESULT "


# --- running a hostile script ----------------------------------------------------------------


def run_hostile(
    code: str,
    folder: Path,
    *args,
    sandbox: Sandbox | None,
    timeout: float = 30,
    env: dict | None = None,
):
    """Runs `code` as a learner's script (one plain process, through the runner) from its own
    folder; returns (the runner's result, the script's RESULT dict or None, the plan)."""
    from workbook.runner import RunOptions, plan_run
    from workbook.runner.display import SilentConsole
    from workbook.runner.execute import execute

    student = folder / "student"
    student.mkdir(parents=True, exist_ok=True)
    script = student / "hostile.py"
    script.write_text(textwrap.dedent(code))
    plan = plan_run(
        [str(script), *map(str, args)],
        options=RunOptions(
            np=1,
            launcher="python",
            log_dir=False,
            logs_root=folder / "runs",
            run_name="run",
            timeout=timeout,
            cwd=student,
            env=env,
            sandbox=sandbox,
        ),
    )
    result, _ = execute(plan, SilentConsole())
    found = [line[len(RESULT) :] for line in result.output.splitlines() if line.startswith(RESULT)]
    return result, (json.loads(found[-1]) if found else None), plan


def processes_with(text: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter():
        try:
            if any(text in part for part in process.cmdline()):
                found.append(process)
        except psutil.Error:
            pass
    return found


def kill_all(processes: list[psutil.Process]) -> None:
    for process in processes:
        try:
            process.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(processes, timeout=10)


def no_mount_under(folder: Path) -> bool:
    return str(folder) not in Path("/proc/mounts").read_text()


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


READ_AND_WRITE = """
    import json, os, sys
    course = sys.argv[1]
    out = {}
    try:
        out["gradebook"] = open(os.path.join(course, "gradebook.db")).read()
    except OSError as error:
        out["gradebook"] = "error: " + error.strerror
    for name, path in (("bob", "submitted/bob/fashion_mnist.py"),
                       ("own", "submitted/alice/student/fashion_mnist.py")):
        try:
            with open(os.path.join(course, path), "a") as file:
                file.write("# changed by alice\\n")
            out[name] = "written"
        except OSError as error:
            out[name] = "error: " + error.strerror
    out["home"] = os.path.exists("/home/instructor") or os.path.exists("/srv/nbgrader")
    out["uid"] = os.getuid()
    print("RESULT " + json.dumps(out))
"""


@pytest.fixture
def course(tmp_path):
    """A fake course outside /tmp (so /tmp's privacy is not why it can't be seen): its
    gradebook, Bob's submission, and Alice's folder, from which her script runs."""
    root = Path("/var/tmp") / f"workbook-sandbox-test-{uuid.uuid4().hex[:8]}"
    course = root / "course"
    (course / "submitted" / "bob").mkdir(parents=True)
    (course / "submitted" / "alice").mkdir(parents=True)
    (course / "gradebook.db").write_text("bob: 12/12")
    (course / "submitted" / "bob" / "fashion_mnist.py").write_text("# bob's\n")
    yield course
    subprocess.run(["rm", "-rf", str(root)], timeout=60)


@needs_root
def test_reading_the_gradebook_and_writing_into_another_students_folder(course):
    alice = course / "submitted" / "alice"
    # Her folder is inside the course: the course's own folder shown, the course hidden.
    box = Sandbox(hidden=(course,), readable=(course.parent,))
    with box:
        result, boxed, _ = run_hostile(READ_AND_WRITE, alice, course, sandbox=box)
    assert boxed is not None, result.output
    assert boxed["gradebook"].startswith("error"), boxed
    assert boxed["bob"].startswith("error") and boxed["own"].startswith("error"), boxed
    assert boxed["uid"] != 0 and not boxed["home"]
    assert (course / "submitted" / "bob" / "fashion_mnist.py").read_text() == "# bob's\n"

    result, plain, _ = run_hostile(READ_AND_WRITE, alice, course, sandbox=None)
    assert plain["gradebook"] == "bob: 12/12" and plain["bob"] == "written", plain


FORKS = """
    import json, os, sys, time
    made = 0
    for _ in range(int(sys.argv[1])):
        try:
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
            made += 1
        except OSError:
            break
    print("RESULT " + json.dumps({"made": made}), flush=True)
    os.kill(0, 9)
"""


FORK_BOMB = """
    import os
    while True:
        try:
            os.fork()
        except OSError:
            pass
"""


@needs_root
def test_a_fork_bomb_ends_within_the_process_limit(box, tmp_path):
    wanted = box.limits.processes + 36
    _, boxed, _ = run_hostile(FORKS, tmp_path / "a", wanted, sandbox=box)
    assert boxed["made"] < box.limits.processes, boxed
    _, plain, _ = run_hostile(FORKS, tmp_path / "b", wanted, sandbox=None)
    assert plain["made"] == wanted, plain

    seen, stop = [0], threading.Event()

    def watch():  # the most tasks the run's cgroup held, and this machine can still fork
        while not stop.is_set():
            for procs in list(box._held["cgroups"]):
                try:
                    current = procs[1].with_name("pids.current").read_text()
                    seen[0] = max(seen[0], int(current))
                except OSError:
                    pass
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    started = time.monotonic()
    try:
        result, _, plan = run_hostile(FORK_BOMB, tmp_path / "c", sandbox=box, timeout=8)
        assert subprocess.run(["true"], timeout=10).returncode == 0  # the machine is fine
    finally:
        stop.set()
        watcher.join()
    assert result.timed_out and time.monotonic() - started < 60
    assert 0 < seen[0] <= box.limits.processes
    assert not result.leftover_pids
    assert not processes_with(str(plan.argv[-1]))  # not one copy of the bomb is left


FILL = """
    import json, os, sys
    out = {}
    chunk = b"x" * (1 << 20)
    for name, folder, most in (("run", sys.argv[1], int(sys.argv[2])),
                               ("tmp", "/tmp", int(sys.argv[2])),
                               ("repo", sys.argv[3], 1)):
        path, written = os.path.join(folder, "fill.bin"), 0
        try:
            with open(path, "wb") as file:
                while written < most:
                    file.write(chunk)
                    file.flush()
                    written += len(chunk)
            out[name] = [written, "ok"]
        except OSError as error:
            out[name] = [written, error.strerror]
        try:
            os.remove(path)
        except OSError:
            pass
    print("RESULT " + json.dumps(out))
"""


@needs_root
def test_filling_the_disk_stops_at_the_limit(box, tmp_path):
    most = box.limits.disk_bytes + (16 << 20)  # unsandboxed, it stops here by itself
    runs = tmp_path / "a" / "runs" / "run"
    _, boxed, _ = run_hostile(FILL, tmp_path / "a", runs, most, REPO / "workbook", sandbox=box)
    assert boxed is not None
    written, error = boxed["run"]
    assert written <= box.limits.disk_bytes and error == "No space left on device", boxed
    assert boxed["tmp"][0] <= box.limits.tmp_bytes and boxed["tmp"][1] != "ok", boxed
    assert boxed["repo"] == [0, "Read-only file system"], boxed

    runs = tmp_path / "b" / "runs" / "run"
    _, plain, _ = run_hostile(FILL, tmp_path / "b", runs, most, tmp_path / "b", sandbox=None)
    assert plain["run"] == [most, "ok"], plain


MANY_TMP_FILES = """
    import json, os, sys
    out = {"left": sorted(os.listdir("/tmp")) + sorted(os.listdir("/dev/shm"))}
    for folder in ("/tmp", "/dev/shm"):
        made = 0
        try:
            for made in range(int(sys.argv[1])):
                open(os.path.join(folder, f"f{made}"), "w").close()
            out[folder] = [made + 1, "ok"]
        except OSError as error:
            out[folder] = [made, error.strerror]
    print("RESULT " + json.dumps(out))
"""


@needs_root
def test_files_in_tmp_and_shm_stop_at_the_inode_limit_and_go_with_the_launch(tmp_path):
    """/tmp and /dev/shm share one tmpfs with an inode limit (bwrap's own --tmpfs has none), and
    each launch gets a fresh one: a second launch does not find the first's files."""
    limits = Limits(memory_bytes=512 << 20, processes=64, cpu_seconds=20, inodes=256)
    with Sandbox(limits) as box:
        for launch in (1, 2):
            _, boxed, _ = run_hostile(MANY_TMP_FILES, tmp_path / f"{launch}", 5000, sandbox=box)
            box.end_launch()
            # (bwrap makes the folders above the run's inside /tmp: no file of a launch before)
            assert boxed is not None, boxed
            assert not [name for name in boxed["left"] if re.fullmatch(r"f\d+", name)], boxed
            made_tmp, error_tmp = boxed["/tmp"]
            assert error_tmp == "No space left on device" and made_tmp < limits.inodes, boxed
            assert boxed["/dev/shm"] == [0, "No space left on device"], boxed  # one budget
        assert "files" in box.hit()
    assert not [m for m in Path("/proc/self/mountinfo").read_text().splitlines() if "box-tmp" in m]


MEMORY = """
    import json, sys
    blocks = []
    for _ in range(int(sys.argv[1])):
        blocks.append(bytearray(64 << 20))  # touched: bytearray zero-fills its memory
    print("RESULT " + json.dumps({"MiB": 64 * len(blocks)}))
"""


@needs_root
def test_taking_more_memory_than_the_limit_is_killed(box, tmp_path):
    blocks = box.limits.memory_bytes // (64 << 20) + 4  # 256 MiB over the limit
    result, boxed, _ = run_hostile(MEMORY, tmp_path / "a", blocks, sandbox=box)
    assert boxed is None and result.exit_code != 0, result.output  # the cgroup's OOM kill
    _, plain, _ = run_hostile(MEMORY, tmp_path / "b", blocks, sandbox=None)
    assert plain == {"MiB": 64 * blocks}


SPIN = """
    import json, sys, time
    started = time.process_time()
    while time.process_time() - started < float(sys.argv[1]):
        pass
    print("RESULT " + json.dumps({"cpu": time.process_time() - started}))
"""


@needs_root
def test_cpu_time_beyond_the_limit_is_stopped(tmp_path):
    with Sandbox(Limits(cpu_seconds=2)) as box:
        result, boxed, _ = run_hostile(SPIN, tmp_path / "a", 4, sandbox=box)
    assert boxed is None and result.exit_code != 0, result.output  # SIGXCPU at 2 s
    _, plain, _ = run_hostile(SPIN, tmp_path / "b", 4, sandbox=None)
    assert plain["cpu"] >= 4


CONNECT = """
    import json, socket, sys
    out = {}
    for name, host in (("outside", sys.argv[1]), ("host_loopback", "127.0.0.1")):
        try:
            socket.create_connection((host, int(sys.argv[2])), timeout=3).close()
            out[name] = "connected"
        except OSError as error:
            out[name] = "error: " + str(error)
    server = socket.create_server(("127.0.0.1", 0))
    socket.create_connection(server.getsockname(), timeout=3).close()
    out["own_loopback"] = "connected"
    print("RESULT " + json.dumps(out))
"""


def outside_address() -> str | None:
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family == socket.AF_INET and not address.address.startswith("127."):
                return address.address
    return None


@needs_root
def test_connecting_outwards_fails_and_loopback_inside_works(box, tmp_path):
    address = outside_address()
    if address is None:
        pytest.skip("this machine has no address but loopback")
    servers = [socket.create_server((address, 0)), socket.create_server(("127.0.0.1", 0))]
    port = servers[0].getsockname()[1]
    servers[1].close()
    servers[1] = socket.create_server(("127.0.0.1", port))  # the same port on both
    try:
        _, boxed, _ = run_hostile(CONNECT, tmp_path / "a", address, port, sandbox=box)
        assert boxed["outside"].startswith("error") and "unreachable" in boxed["outside"], boxed
        assert boxed["host_loopback"].startswith("error"), boxed
        assert boxed["own_loopback"] == "connected"
        _, plain, _ = run_hostile(CONNECT, tmp_path / "b", address, port, sandbox=None)
        assert plain["outside"] == plain["host_loopback"] == "connected", plain
    finally:
        for server in servers:
            server.close()


KILL = """
    import json, os, signal, sys
    out = {}
    targets = [("grader", int(sys.argv[1])), ("other_box", int(sys.argv[2]))]
    if sys.argv[3] == "all":
        targets += [("parent", os.getppid()), ("everyone", -1)]
    for name, pid in targets:
        try:
            if name == "everyone":
                print("RESULT " + json.dumps(out), flush=True)
            os.kill(pid, signal.SIGKILL)
            out[name] = "killed"
        except OSError as error:
            out[name] = "error: " + error.strerror
    print("RESULT " + json.dumps(out), flush=True)
"""


@needs_root
def test_killing_the_grader_its_parent_and_everyone(box, tmp_path):
    grader = subprocess.Popen(["sleep", "120"])  # stands in for the grading process
    # Another sandboxed run, as the same sandbox account: kill -9 -1 must not reach it either.
    with Sandbox() as other:
        neighbour = subprocess.Popen(other.wrap(["sleep", "120"], {}), start_new_session=True)
        try:
            time.sleep(1)
            inner = [
                p
                for p in psutil.Process(neighbour.pid).children(recursive=True)
                if p.name() == "sleep"
            ]
            assert inner and inner[0].uids().real != 0
            result, boxed, _ = run_hostile(
                KILL, tmp_path / "a", grader.pid, inner[0].pid, "all", sandbox=box
            )
            assert boxed is not None, result.output
            assert boxed["grader"].startswith("error") and boxed["other_box"].startswith("error")
            assert boxed["parent"].startswith("error"), boxed  # the box's keeper, root's
            assert grader.poll() is None and inner[0].is_running() and neighbour.poll() is None
            # kill -9 -1 reached nobody: init and the keeper (root's) are spared, and nothing
            # else is in view; the script lived on to say so (Linux says 0 when all were EPERM).
            assert "everyone" in boxed and result.exit_code == 0, result.output

            # Without the box, the grader's process dies (the others are not tried here).
            _, plain, _ = run_hostile(
                KILL, tmp_path / "b", grader.pid, inner[0].pid, "one", sandbox=None
            )
            assert plain["grader"] == plain["other_box"] == "killed"
            grader.wait(timeout=10)
        finally:
            for process in (grader, neighbour):
                process.kill()
                process.wait(timeout=10)


DAEMON = """
    import os, sys, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2) if sys.argv[2] == "closed" else (0,):  # or holds the output
                os.dup2(null, fd)
            os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(120)",
                                       sys.argv[1]], {})  # no marker in its environment
        os._exit(0)
    time.sleep(1)
    print("RESULT {}")
"""


@needs_root
@pytest.mark.parametrize("output", ["closed", "held"])
def test_a_daemon_left_behind_does_not_survive_the_run(box, tmp_path, output):
    """A double-forked daemon, its output closed or held open (which kept horovodrun's output
    and so the launch open until the time limit): the box's keeper kills it as it detaches."""
    token = f"daemon-{uuid.uuid4().hex}"
    try:
        started = time.monotonic()
        result, boxed, _ = run_hostile(DAEMON, tmp_path / "a", token, output, sandbox=box)
        assert boxed == {} and not result.timed_out and time.monotonic() - started < 15
        assert not processes_with(token)

        _, plain, _ = run_hostile(DAEMON, tmp_path / "b", token, output, sandbox=None)
        assert plain == {} and processes_with(token), "unsandboxed, the daemon should survive"
    finally:
        kill_all(processes_with(token))


SLEEP = """
    import signal, time
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("RESULT {}", flush=True)
    time.sleep(10 ** 6)
"""


@needs_root
def test_sleeping_forever_is_stopped_at_the_wall_time(box, tmp_path):
    started = time.monotonic()
    result, boxed, plan = run_hostile(SLEEP, tmp_path, sandbox=box, timeout=5)
    assert boxed == {} and result.timed_out
    assert time.monotonic() - started < 5 + 3 * 3 + 10  # the timeout and the stop's stages
    assert not result.leftover_pids
    for procs in box._held["cgroups"][0]:  # the memory and the pids cgroup
        assert procs.read_text().split() == [], "nothing is left in the run's cgroup"
    assert not processes_with(str(plan.argv[-1]))


@needs_root
def test_the_reference_passes_on_two_workers_inside_the_sandbox(tmp_path):
    from grader.running.run_check import run_step

    work = tmp_path / "work"
    with Sandbox() as sandbox:
        result = run_step(LAST_STEP, REFERENCE, work_dir=work, quiet=True, sandbox=sandbox)
        assert result.passed, result
        # Each launch (the run, then its resume) releases its mounts and cgroups at its end.
        assert not sandbox._held["cgroups"] and not sandbox._held["mounts"]
        assert no_mount_under(work)
    assert no_mount_under(work)
    assert not any(work.iterdir()), "a passed run's folder is deleted"


LEAVE_BEHIND = """
    import json, os, shutil, sys
    folder, records = sys.argv[1], os.path.join(sys.argv[1], "records")
    os.makedirs(records)
    out = {}
    deep = folder
    for _ in range(700):  # 700 nested folders: copytree's RecursionError, once
        deep = os.path.join(deep, "d")
        os.mkdir(deep)
    with open(os.path.join(records, "run1-rank0.json"), "w") as record:
        record.write(json.dumps({"run": 1, "rank": 0, "pid": 1, "finished": True}))
    setuid = os.path.join(records, "run1-rank0-first-update.npy")
    shutil.copyfile("/usr/bin/true", setuid)
    os.chmod(setuid, 0o6777)  # a setuid, world-writable copy
    os.symlink("/etc/shadow", os.path.join(records, "run1-rank1.json"))
    open(os.path.join(folder, "notes"), "w").write("{}")
    os.link(os.path.join(folder, "notes"), os.path.join(records, "run2-rank0.json"))
    os.mkfifo(os.path.join(records, "run2-rank1.json"))
    open(os.path.join(folder, "name\\nwith\\x1b[31mcontrol"), "w").close()
    made = 0
    try:
        for made in range(200_000):  # many files: the tmpfs's inodes end it
            open(os.path.join(folder, f"f{made}"), "w").close()
    except OSError as error:
        out["files"] = [made, error.strerror]
    try:
        with open(os.path.join(folder, "big.bin"), "wb") as big:
            for _ in range(int(sys.argv[2])):
                big.write(b"x" * (1 << 20))
        out["big"] = "written"
    except OSError as error:
        out["big"] = error.strerror
    print("RESULT " + json.dumps(out), flush=True)
    chunk = "y" * 65535 + "\\n"
    for _ in range(int(sys.argv[3]) * 16):  # MiB of output, in 64 KiB lines
        sys.stdout.write(chunk)
"""


@needs_root
def test_what_a_run_leaves_stays_in_its_box_and_only_records_come_back(tmp_path):
    """The attacks of issue 36 on what the grader takes from a run, through a real box: only
    the records the grader reads, as its own 0600 files, come back; the rest (700 nested
    folders, a setuid copy, links, a pipe, thousands of files, a big file, a flood of output)
    goes with the box, within its limits, and the grader's memory does not grow with it."""
    from grader.running.box_keeper import OUTPUT_CUT
    from grader.running.kept import keep_log, keep_run

    limits = Limits(
        memory_bytes=512 << 20,
        processes=64,
        cpu_seconds=60,
        disk_bytes=32 << 20,
        tmp_bytes=16 << 20,
        inodes=1024,
        output_bytes=1 << 20,
    )
    box_folder, kept = tmp_path / "runs" / "run", tmp_path / "kept"
    kept.mkdir()
    memory_before = psutil.Process().memory_info().rss
    with Sandbox(limits) as box:
        result, boxed, plan = run_hostile(
            LEAVE_BEHIND, tmp_path, box_folder, 64, 40, sandbox=box, timeout=60
        )
        assert boxed is not None and result.exit_code == 0, result.output[-2000:]
        keep_run(box_folder, kept, "logs")
        keep_log(plan.log_path, kept / "launch-1.log")
        box.end_launch()
    assert psutil.Process().memory_info().rss - memory_before < 30 << 20
    assert boxed["files"][1] == "No space left on device" and boxed["files"][0] < 1024
    assert boxed["big"] == "No space left on device"  # 64 MiB into 32
    assert OUTPUT_CUT in result.output and len(result.output) < 2 << 20
    assert OUTPUT_CUT in (kept / "launch-1.log").read_text()  # run.py notes "output" from it
    assert "files" in box.hit()
    assert no_mount_under(tmp_path) and not box_folder.exists()
    assert sorted(p.name for p in (kept / "records").iterdir()) == [
        "run1-rank0-first-update.npy",
        "run1-rank0.json",
    ]  # no link, hard link or pipe
    for path in kept.rglob("*"):
        info = path.lstat()
        assert info.st_uid == 0 and stat.S_IMODE(info.st_mode) in (0o600, 0o700), path
    everything = [p for p in tmp_path.rglob("*")]
    assert not [p for p in everything if p.lstat().st_mode & (stat.S_ISUID | stat.S_ISGID)]
    assert sum(p.lstat().st_size for p in everything) < 4 << 20


READ_EVERYTHING = """
    import json, os, sys
    skip = {"/proc", "/sys", "/dev", *sys.argv[1:]}  # pseudo files; the system, listed alone
    readable = []
    for top, folders, files in os.walk("/"):
        folders[:] = [f for f in folders if os.path.join(top, f) not in skip]
        for name in files:
            path = os.path.join(top, name)
            if os.access(path, os.R_OK):
                readable.append(path)
    error = os.environ.copy()
    print("RESULT " + json.dumps({"readable": readable, "env": error}), flush=True)
    raise RuntimeError(f"the grader's environment: {os.environ}")
"""


@needs_root
def test_a_run_reads_only_what_it_needs_and_sees_no_variable_of_the_grader(tmp_path, monkeypatch):
    """Every file a run can read, listed from inside it: the system, this Python's environment,
    the runner's package, the probe, the keeper, its own folder; not the checkout's other files
    (a roster, another course's gradebook, the solutions), nor the instructor's home. Its
    environment is an allow-list: the grader's secrets and root's PATH do not reach it."""
    from grader.running.sandbox import CODE, SYSTEM, python_folders

    secrets = {
        "DATABASE_URL": "postgres://grader:hunter2@db.example/course",
        "AWS_ACCESS_KEY_ID": "AKIAEXAMPLESECRET",
        "OLDPWD": "/root/private",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    marker = uuid.uuid4().hex[:8]
    roster, older = REPO / f"roster-{marker}.csv", REPO / f"old-course-{marker}"
    try:
        roster.write_text("id,email\nann,ann@example.org\n")
        older.mkdir()
        (older / "gradebook.db").write_text("grades")
        skip = [*SYSTEM, *map(str, python_folders())]
        with Sandbox() as box:
            result, boxed, plan = run_hostile(
                READ_EVERYTHING, tmp_path, *skip, sandbox=box, env={"WORKBOOK_PROBE_GPUS": "1"}
            )
    finally:
        roster.unlink()
        (older / "gradebook.db").unlink()
        older.rmdir()
    assert boxed is not None, result.output[-2000:]
    allowed = (*map(str, CODE), str(plan.cwd), str(plan.run_dir), "/tmp", "/dev/shm")
    outside = [p for p in boxed["readable"] if not p.startswith(allowed)]
    assert outside == [], outside[:20]
    assert not [p for p in boxed["readable"] if marker in p or "/solutions/" in p]
    for value in secrets.values():
        assert value not in result.output and value not in json.dumps(boxed["env"])
    assert boxed["env"]["HOME"] == "/tmp" and "/root" not in boxed["env"]["PATH"]
    assert boxed["env"]["WORKBOOK_PROBE_GPUS"] == "1"  # the run's own settings do


FIFO = """
    import os, sys
    os.mkfifo(os.path.join(sys.argv[1], "run9-rank0.json"))  # a record the grader will read
    print("RESULT {}")
"""


@needs_root
def test_a_named_pipe_among_the_records_does_not_hang_the_grader(box, tmp_path):
    from grader.running.evidence import Evidence

    records = tmp_path / "runs" / "run"
    _, boxed, _ = run_hostile(FIFO, tmp_path, records, sandbox=box)
    assert boxed == {} and (records / "run9-rank0.json").is_fifo()
    read = threading.Thread(target=Evidence.read, args=(records, 2), daemon=True)
    read.start()
    read.join(5)
    hung = read.is_alive()
    if hung:  # let it go: a writer that closes at once gives it an empty record
        os.close(os.open(records / "run9-rank0.json", os.O_WRONLY | os.O_NONBLOCK))
        read.join(5)
    assert not hung, "the grader waited on the pipe"


@needs_root
def test_what_a_grader_killed_with_sigkill_held_is_released_by_the_next(tmp_path):
    """A grader killed mid-run (SIGKILL: no atexit, no finally) leaves its box's tmpfs and
    cgroups; the next box released them, and never a live grader's."""
    folder = tmp_path / "box"
    child = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from grader.running import sandbox
        sandbox.mount_tmpfs(Path({str(folder)!r}), 1 << 20, 64, 0, 0)
        print(" ".join(str(p) for p in sandbox.make_cgroups(sandbox.Limits())), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    done = subprocess.run(
        [sys.executable, "-c", child], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == -9, done.stderr
    cgroups = [Path(p) for p in done.stdout.split()]
    assert os.path.ismount(folder) and all(p.exists() for p in cgroups)
    with Sandbox() as live:  # this grader's own box is not an orphan
        live._held["mounts"].append(
            sandbox_module.mount_tmpfs(tmp_path / "live", 1 << 20, 64, 0, 0)
        )
        sandbox_module.release_orphans()
        assert not os.path.ismount(folder) and not any(p.exists() for p in cgroups)
        assert os.path.ismount(tmp_path / "live")
    assert not os.path.ismount(tmp_path / "live")


@needs_root
@pytest.mark.timeout(400)
def test_rank_0s_own_csv_log_is_written_and_another_ranks_file_anywhere_fails_step_9(tmp_path):
    """Issue 37 (6): the script starts in a writable folder of the box (rank 0's CSVLogger by a
    relative name is not refused), and a file any other rank opens for writing, wherever, makes
    it a second writer."""
    from grader.running.outcome import FINISHED
    from grader.running.run_check import run_step

    rank0 = "if hvd.rank() == 0:\n"
    text = REFERENCE.read_text(encoding="utf-8")
    assert text.count(rank0) == 1
    text = text.replace(
        rank0, rank0 + "    callbacks.append(tf.keras.callbacks.CSVLogger('training.csv'))\n"
    )
    text += "\nopen(f'notes-{hvd.rank()}.txt', 'w').write('done')\n"
    script = tmp_path / "student" / "fashion_mnist.py"
    script.parent.mkdir()
    script.write_text(text)
    with Sandbox() as sandbox:
        result = run_step(12, script, work_dir=tmp_path / "work", quiet=True, sandbox=sandbox)
    assert result.run.outcome == FINISHED, result.message
    nine = next(finding for finding in result.details if finding.step == 9)
    assert nine.status == "failed", nine.message
    assert "rank 1 wrote 1 file outside its --log-dir (notes-1.txt) too" in nine.message
    assert all(f.status == "passed" for f in result.details if f.step != 9), result.details

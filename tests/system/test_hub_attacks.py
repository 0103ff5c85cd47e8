"""One attendee against another on the workshop hub (issue 29), each attack from the attacker's
browser or Unix account (their kernels and terminals run as it): log in as someone else, use
up the machine, read another's TensorBoard, the hub's log or processes, and the terminal a
notebook tells the learner to use. The hub is the session's (tests/hub_helpers.py).

Root only; slow (about 2 minutes on 2 cores).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect

from grader.reference import reference_path
from hub import isolation, limits, workbook_copy
from hub.classroom import COURSE_ID
from hub_helpers import (
    ARTIFACTS,
    ASSIGNMENT,
    ATTENDEES,
    INSTRUCTOR,
    MEMORY_MIB,
    STEP_ONE,
    as_user,
    cell_index,
    formgrader,
    give,
    home,
    log_in,
    notebook,
    open_notebook,
    password_of,
    run_cell,
    student_nbgrader,
    submit_log_in,
)
from workbook.facts import LAST_STEP, LEARNER_SCRIPT_NAME
from workbook.paths import REPO

pytestmark = [pytest.mark.timeout(900)]
pytest_plugins = ["hub_helpers"]  # the session's hub and browser: one for both files

SETUP = (
    "import sys\nfrom pathlib import Path\n\n"
    "sys.path.insert(0, str(Path.cwd().parent))  # the attendee's copy of the workbook"
)
FORK_LOOP = """\
import os, signal, time
children = []
try:
    while True:
        pid = os.fork()
        if pid == 0:
            time.sleep(120)
            os._exit(0)
        children.append(pid)
except OSError as error:
    print(f"fork loop stopped after {len(children)} processes: {error}", flush=True)
    time.sleep(15)  # at the limit a while: the others work meanwhile
finally:
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    for pid in children:
        os.waitpid(pid, 0)
print("children gone")
"""
RUNAWAY = """\
blocks = []
while True:
    blocks.append(b"\\x01" * (128 * 2**20))  # written, so really resident
"""


def oom_kills(user: str) -> int:
    """How many of the attendee's processes the kernel killed at their memory limit."""
    try:
        text = (limits.group("memory", user) / "memory.oom_control").read_text()
    except OSError:
        return 0
    values = dict(line.split() for line in text.splitlines() if line.strip())
    return int(values.get("oom_kill", 0))


def hub_answers(s) -> bool:
    with urllib.request.urlopen(s.url + "hub/api/", timeout=10) as reply:
        return reply.status == 200


def test_no_attendee_logs_in_as_another(hub, browser):
    """Every credential bob was given (his password), and the instructor's, under alice's
    name however it is written: refused. Before issue 29 one shared password opened all."""
    s, _ = hub
    alice, bob = ATTENDEES[:2]
    tries = [
        (name, password_of(s, bob))
        for name in (alice, alice.title(), f"{alice} ", f" {alice.upper()}", INSTRUCTOR)
    ]
    tries.append((alice, s.admin_password))
    for name, password in tries:
        page = submit_log_in(browser, s, name, password)
        expect(page.locator(".alert-danger, #login_error, .login_error").first).to_be_visible()
        assert "/hub/login" in page.url, (name, page.url)
        assert not any(
            cookie["name"] == "jupyterhub-hub-login" for cookie in page.context.cookies(s.url)
        ), name
        page.context.close()


def test_a_runaway_and_a_fork_loop_end_inside_the_attendees_limits(hub, browser):
    """alice's fork loop stops at her process limit and her runaway allocation is killed at
    her memory limit; meanwhile the hub answers and bob's step 1 check passes."""
    s, banner = hub
    alice, bob = ATTENDEES[:2]
    assert f"memory {MEMORY_MIB / 1024:.1f} GiB" in banner
    assert f"{limits.DEFAULT_PIDS} processes" in banner
    folder = workbook_copy.copy_dir(home(alice)) / "notebooks"
    attacker = log_in(browser, s, alice)
    give(alice, notebook(FORK_LOOP, RUNAWAY), folder / "runaway.ipynb")
    victim = log_in(browser, s, bob)
    theirs = workbook_copy.copy_dir(home(bob)) / "notebooks"
    give(bob, reference_path(1).read_text(), theirs / LEARNER_SCRIPT_NAME)
    check = open_notebook(victim, s, bob, f"notebooks/{STEP_ONE}").locator(".jp-Cell")
    run_cell(check.nth(cell_index(theirs / STEP_ONE, "setup")))

    cells = open_notebook(attacker, s, alice, "notebooks/runaway.ipynb").locator(".jp-Cell")
    pids = limits.group("pids", alice) / "pids.current"
    run_cell(cells.nth(0))
    expect(cells.nth(0)).to_contain_text("fork loop stopped after", timeout=60_000)
    expect(cells.nth(0)).to_contain_text("Resource temporarily unavailable")
    at_limit = int(pids.read_text())
    assert at_limit >= limits.DEFAULT_PIDS - 5, at_limit
    assert hub_answers(s)
    run_cell(check.nth(cell_index(theirs / STEP_ONE, "check")))  # while alice is at her limit
    expect(check.nth(cell_index(theirs / STEP_ONE, "check"))).to_contain_text("\u2714 passed")
    expect(cells.nth(0)).to_contain_text("children gone", timeout=60_000)
    attacker.screenshot(path=ARTIFACTS / "hub-alice-fork-loop.png", full_page=True)

    killed = oom_kills(alice)
    started = time.monotonic()
    run_cell(cells.nth(1))
    expect(attacker.get_by_text("appears to have died")).to_be_visible(timeout=120_000)
    print(
        f"runaway allocation killed after {time.monotonic() - started:.1f} s; "
        f"{at_limit} processes at the fork loop's end"
    )
    assert oom_kills(alice) > killed
    memory = limits.group("memory", alice)
    peak = int((memory / "memory.max_usage_in_bytes").read_text())
    assert peak <= MEMORY_MIB * 2**20
    attacker.screenshot(path=ARTIFACTS / "hub-alice-runaway.png", full_page=True)
    assert hub_answers(s)
    run_cell(check.nth(cell_index(theirs / STEP_ONE, "check")))
    expect(check.nth(cell_index(theirs / STEP_ONE, "check"))).to_contain_text("\u2714 passed")
    for page in (attacker, victim):
        page.context.close()


def test_nothing_of_the_hub_or_of_another_attendee_is_readable(hub, browser):
    """From bob's account: the hub's state folder, log, password sheet and settings are closed;
    alice's processes are invisible (hidepid); alice's TensorBoard port refuses him and he
    cannot answer on carol's; the exchange's course folder cannot be moved away."""
    s, banner = hub
    alice, bob, carol = ATTENDEES
    page = log_in(browser, s, alice)  # her server runs meanwhile
    state = Path(s.state_dir)
    for target in (
        state / "jupyterhub.log",
        s.passwords_path,
        state / "hub.json",
        state / "jupyterhub.sqlite",
    ):
        assert target.exists(), target
        reply = as_user(bob, "cat", str(target))
        assert reply.returncode != 0 and "Permission denied" in reply.stderr, (target, reply)
    assert as_user(bob, "ls", str(state)).returncode != 0
    assert oct(state.stat().st_mode & 0o777) == "0o700"

    if "cannot be remounted with hidepid" not in banner:  # where the kernel allows it
        assert isolation.hidepid_of(isolation.proc_options()) in ("2", "invisible")
        seen = as_user(bob, "ps", "-eo", "user:32,args").stdout
        assert alice not in seen and bob in seen, seen[-2000:]

    # A listener as alice on her TensorBoard port (TensorBoard itself: test_hub.py).
    port = isolation.tensorboard_port(s, alice)
    python = str(Path(s.venv) / "bin" / "python")
    server = subprocess.Popen(
        [
            "runuser",
            "-u",
            alice,
            "--",
            "timeout",
            "60",
            python,
            "-m",
            "http.server",
            "--bind",
            "127.0.0.1",
            str(port),
        ],
        cwd="/",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 30
        while (
            time.monotonic() < deadline and as_user(alice, "curl", "-s", "-m", "5", url).returncode
        ):
            time.sleep(0.5)
        assert as_user(alice, "curl", "-sS", "-m", "5", url).returncode == 0
        refused = as_user(bob, "curl", "-sS", "-m", "5", url)
        assert refused.returncode != 0, refused
    finally:
        server.kill()
        server.wait(timeout=30)
    # bob listening first on carol's port gets nothing from carol.
    carols = isolation.tensorboard_port(s, carol)
    squat = subprocess.Popen(
        [
            "runuser",
            "-u",
            bob,
            "--",
            "timeout",
            "60",
            python,
            "-m",
            "http.server",
            "--bind",
            "127.0.0.1",
            str(carols),
        ],
        cwd="/",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(3)
        reply = as_user(carol, "curl", "-sS", "-m", "5", f"http://127.0.0.1:{carols}/")
        assert reply.returncode != 0, reply
    finally:
        squat.kill()
        squat.wait(timeout=30)

    course = Path(s.exchange) / "horovod_workbook"
    moved = as_user(bob, "mv", str(course), f"{course}.gone")
    assert moved.returncode != 0 and course.is_dir(), moved
    page.context.close()


def test_an_attendees_terminal_has_the_workbooks_commands(hub, browser):
    """A JupyterLab terminal (a login shell) finds python, horovodrun, mpirun and jupyter of
    the workbook's environment, as notebooks 13, 16 and 17 tell the learner to type them."""
    s, _ = hub
    alice = ATTENDEES[0]
    page = log_in(browser, s, alice)
    output = page.evaluate("""async () => {
        const terminals = window.jupyterapp.serviceManager.terminals;
        const session = await terminals.startNew();
        let text = '';
        session.messageReceived.connect((_, message) => {
            if (message.type === 'stdout') { text += message.content[0]; }
        });
        while (session.connectionStatus !== 'connected') {
            await new Promise(done => setTimeout(done, 100));
        }
        session.send({type: 'stdin', content: [
            'for c in python horovodrun mpirun jupyter; do echo "$c=$(command -v $c)"; done; '
            + 'python -c "import horovod.tensorflow, tensorflow; print(\\'imports\\', \\'ok\\')";'
            + ' echo "END""MARK"\\r']});
        const deadline = Date.now() + 90000;
        while (!text.includes('ENDMARK') && Date.now() < deadline) {
            await new Promise(done => setTimeout(done, 200));
        }
        await session.shutdown();
        return text;
    }""")
    venv_bin = f"{Path(s.venv) / 'bin'}"
    for command in ("python", "horovodrun", "jupyter"):
        assert f"{command}={venv_bin}/{command}" in output, output[-2000:]
    assert "mpirun=/" in output, output[-2000:]
    assert "imports ok" in output, output[-2000:]
    page.context.close()


def test_a_submission_is_its_authors_alone(hub, browser):
    """Issue 38. bob submits: alice can neither read, change, rename nor delete it, knowing its
    name (before: a 0777 folder of 0644 files). alice makes a submission in carol's name with
    the solution (before: carol got 12/12 from alice's file and nothing said so): root's collect
    (make grade's first command), the formgrader's Collect and the class report name it, and
    carol's submitted folder never holds it; bob's is collected by the instructor's own account."""
    s, _ = hub
    alice, bob, carol = ATTENDEES
    course = Path(s.course or home(INSTRUCTOR) / "course")
    inbound = Path(s.exchange) / COURSE_ID / "inbound"
    log_in(browser, s, bob).context.close()  # his copy of the workbook, made at first login
    sent = student_nbgrader(s, bob, "submit", ASSIGNMENT)
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert "Sending: " in sent.stderr and "the reading sees" in sent.stderr, sent.stderr
    [theirs] = sorted(inbound.glob(f"{bob}+{ASSIGNMENT}+*"), key=lambda p: p.stat().st_mtime)[-1:]
    for command in (
        ["cat", f"{theirs}/{LEARNER_SCRIPT_NAME}"],
        ["cat", f"{theirs}/submission_secret.txt"],
        ["ls", str(theirs)],
        ["touch", f"{theirs}/x"],
        ["rm", "-rf", str(theirs)],
        ["mv", str(theirs), f"{theirs}-mine"],
        ["ls", str(inbound)],
    ):
        reply = as_user(alice, *command)
        assert reply.returncode != 0, (command, reply)
    assert theirs.is_dir() and not (theirs / "x").exists()

    forged = inbound / f"{carol}+{ASSIGNMENT}+2099-01-01 00:00:00.000000 UTC+forged"
    solution = reference_path(LAST_STEP)
    made = as_user(
        alice, "sh", "-c", f'mkdir "{forged}" && cp "{solution}" "{forged}/{LEARNER_SCRIPT_NAME}"'
    )
    assert made.returncode == 0, made  # every attendee may write into the inbound
    line = (
        f"{forged.name}: in {carol}'s name, but the folder is {alice}'s; set aside, never "
        f"graded as {carol}"
    )
    try:
        teacher = log_in(browser, s, INSTRUCTOR)  # the instructor's own account reads bob's
        reply = formgrader(teacher, "collect")
        assert reply["success"] and f"NOT COLLECTED: {line}" in reply["log"], reply
        assert f"submission: {bob} {ASSIGNMENT}" in reply["log"], reply["log"]
        teacher.context.close()
        collected = subprocess.run(
            [sys.executable, "-m", "instructor", "collect", str(course)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert collected.returncode == 0, collected.stdout + collected.stderr
        assert line in collected.stdout, collected.stdout
        script = course / "submitted" / carol / ASSIGNMENT / LEARNER_SCRIPT_NAME
        assert not script.exists() or script.read_text() != solution.read_text()
        report = subprocess.run(
            [sys.executable, "-m", "instructor", "report", str(course)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert report.returncode == 0, report.stdout + report.stderr
        assert "Set aside at collect" in report.stdout and line in report.stdout, report.stdout
    finally:
        shutil.rmtree(forged)

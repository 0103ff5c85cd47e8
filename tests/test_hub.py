"""The workshop hub (`make hub`, hub/): a real JupyterHub with the real configurable-http-proxy
and real Unix accounts, driven in headless Chromium (Debian's; Playwright only drives it).

One hub for the module, started by `python -m hub up` with a roster of three attendees and an
instructor (accounts named after this run, so nothing that was there is touched), stopped by
`python -m hub down --remove-accounts`, which deletes the accounts, their homes and their CPU
sets; the exchange and the settings are in a temporary folder. Screenshots in test-artifacts/.

Root only (accounts, cgroups); slow (about 4 minutes on 2 cores).
"""

from __future__ import annotations

import csv
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil
import pytest
from playwright.sync_api import expect, sync_playwright

from grader import check_all
from grader.reference import reference_path
from hub import accounts, cores, settings as hub_settings, workbook_copy
from workbook.facts import LEARNER_SCRIPT_NAME
from workbook.paths import REPO

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
ARTIFACTS = REPO / "test-artifacts"
WAIT_MS = 120_000  # a server's first start, a kernel, nbgrader's fetch and submit
TAG = uuid.uuid4().hex[:4]
ATTENDEES = [f"hubt{TAG}{name}" for name in ("alice", "bob", "carol")]
INSTRUCTOR = f"hubt{TAG}teach"
# What each attendee's script is when they submit: steps 1, 1-2 and 1-3 done.
SCRIPTS = dict(zip(ATTENDEES, (1, 2, 3)))
ASSIGNMENT, STEP_ONE = "horovod_steps", "01_initialize_horovod.ipynb"


def needs(condition: bool, reason: str):
    if not condition:
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(reason)
        pytest.skip(reason)


def free_ports(count: int = 3) -> int:
    """A port p with p, p+1, ..., p+count-1 free (the proxy, the hub's API, the proxy's API)."""
    for _ in range(100):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            base = sock.getsockname()[1]
        if base + count < 65536 and all(port_free(base + i) for i in range(count)):
            return base
    raise RuntimeError("no free ports")


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is not "taken"
        try:
            sock.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False


def hub_command(state: Path, command: str, *args: str,
                timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hub", command, "--state-dir", str(state), *args],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def hub():
    needs(os.geteuid() == 0, "the hub makes Unix accounts and CPU sets: run the tests as root")
    needs(os.access(CHROMIUM, os.X_OK), f"Chromium not found at {CHROMIUM}: make browser")
    ARTIFACTS.mkdir(exist_ok=True)
    # Not under pytest's own (private) temporary folder: the attendees' servers read the
    # hub's settings folder, so the hub makes the folders above it passable.
    folder = Path(tempfile.mkdtemp(prefix="workbook-hub-test-"))
    roster = folder / "roster.csv"
    roster.write_text("id,first_name,last_name,email\n" + "".join(
        f"{name},{name[8:].title()},Test,{name}@example.org\n" for name in ATTENDEES))
    state, port = folder / "state", free_ports()
    started = time.monotonic()
    try:
        up = hub_command(state, "up", "--roster", str(roster), "--port", str(port),
                         "--instructor", INSTRUCTOR, "--exchange", str(folder / "exchange"))
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        print(up.stdout)
        print(f"hub up in {time.monotonic() - started:.0f} s")
        yield hub_settings.load(state / hub_settings.SETTINGS_NAME), up.stdout
    finally:
        try:
            down = hub_command(state, "down", "--remove-accounts", timeout=300)
            print(down.stdout, down.stderr)
            left = [name for name in [INSTRUCTOR, *ATTENDEES] if accounts.exists(name)]
            assert not left, f"accounts left behind: {left}"
            assert not any(p.info["username"] in (INSTRUCTOR, *ATTENDEES)
                           for p in psutil.process_iter(["username"]))
            assert port_free(port), f"port {port} still taken after hub down"
        finally:
            shutil.rmtree(folder)


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def log_in(browser, s, user: str, password: str):
    """A browser of the user's own (cookies), logged in, on their JupyterLab."""
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    expect.set_options(timeout=WAIT_MS)
    page.goto(s.url + "hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", password)
    page.click("#login_submit")
    if user == INSTRUCTOR:  # the formgrader first
        page.wait_for_url(f"**/user/{user}/formgrader/**", timeout=WAIT_MS * 2)
        return page
    page.wait_for_url(f"**/user/{user}/lab/**", timeout=WAIT_MS * 2)
    expect(page.locator(".jp-NotebookPanel:visible")).to_have_count(1)  # 00_welcome
    return page


def home(user: str) -> Path:
    return Path(pwd.getpwnam(user).pw_dir)


def give(user: str, text: str, target: Path) -> None:
    """Put a file in the user's folder, as theirs (what their editor would have saved)."""
    target.write_text(text)
    entry = pwd.getpwnam(user)
    os.chown(target, entry.pw_uid, entry.pw_gid)


def assignment_list(page):
    page.evaluate("() => window.jupyterapp.commands.execute('nbgrader:open-assignment-list')")
    expect(page.locator("#released_assignments_list, #fetched_assignments_list").first
           ).to_be_visible()
    return page.locator("#assignments")


def kernel_ready(panel):
    expect(panel.locator(".jp-Toolbar-kernelName")).to_have_text("Python 3 (ipykernel)")
    expect(panel.locator(".jp-Notebook-ExecutionIndicator")).to_have_attribute(
        "data-status", "idle")


def run_cell(cell):
    cell.locator(".jp-InputPrompt").click()
    cell.page.keyboard.press("Shift+Enter")


def cell_index(notebook: Path, tag: str) -> int:
    cells = json.loads(notebook.read_text())["cells"]
    return next(i for i, cell in enumerate(cells) if tag in cell["metadata"].get("tags", []))


def open_notebook(page, s, user: str, path: str):
    page.goto(f"{s.url}user/{user}/lab/tree/{path}")
    panel = page.locator(".jp-NotebookPanel:visible")
    expect(page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")).to_have_text(
        Path(path).name)
    kernel_ready(panel)
    # The attendee's JupyterLab got LAB_ARGS from the spawner: no news pop-up over the notebook.
    config = page.evaluate(
        "JSON.parse(document.getElementById('jupyter-config-data').textContent)")
    assert config["news"] == {"disabled": True} and config["exposeAppInBrowser"] is True
    # Through JupyterLab's own client: the hub's servers want an XSRF token on API requests.
    fetch_news = page.evaluate(
        "window.jupyterapp.serviceManager.settings"
        ".fetch('@jupyterlab/apputils-extension:notification')"
        ".then(plugin => plugin.schema.properties.fetchNews.default)")
    assert fetch_news == "false"
    return panel


def test_a_class_logs_in_checks_step_1_submits_and_is_graded(hub, browser):
    """Three attendees and the instructor log in; each attendee has their own copy, fetches
    the assignment from the Assignments list, passes step 1's check there and submits; the
    instructor's formgrader shows the course; `make grade` grades exactly what was submitted."""
    s, banner = hub
    assert s.user_password in banner and s.admin_password in banner and s.url in banner
    pages = {}
    for user in ATTENDEES:
        page = pages[user] = log_in(browser, s, user, s.user_password)
        copy = workbook_copy.copy_dir(home(user))
        assert (copy / "notebooks" / LEARNER_SCRIPT_NAME).read_text() == \
            (REPO / "solutions" / LEARNER_SCRIPT_NAME).read_text()
        assert pwd.getpwuid((copy / "notebooks" / STEP_ONE).stat().st_uid).pw_name == user
        assert oct(home(user).stat().st_mode & 0o777) == "0o700"

        listing = assignment_list(page)
        released = listing.locator("#released_assignments_list .list_item", has_text=ASSIGNMENT)
        released.get_by_role("button", name="Fetch").click()
        fetched = listing.locator("#fetched_assignments_list")
        expect(fetched).to_contain_text(ASSIGNMENT)
        folder = copy / ASSIGNMENT
        assert (folder / STEP_ONE).is_file() and (folder / LEARNER_SCRIPT_NAME).is_file()
        give(user, reference_path(SCRIPTS[user]).read_text(), folder / LEARNER_SCRIPT_NAME)

        panel = open_notebook(page, s, user, f"{ASSIGNMENT}/{STEP_ONE}")
        cells = panel.locator(".jp-Cell")
        for tag in ("setup", "check"):
            run_cell(cells.nth(cell_index(folder / STEP_ONE, tag)))
        expect(cells.nth(cell_index(folder / STEP_ONE, "check"))).to_contain_text(
            "\u2714 passed")
        page.screenshot(path=ARTIFACTS / f"hub-{user[8:]}-step01.png", full_page=True)

        listing = assignment_list(page)
        listing.locator("#fetched_assignments_list").get_by_role(
            "button", name="Submit").first.click()
        expect(listing.locator("#submitted_assignments_list")).to_contain_text(ASSIGNMENT)
        page.screenshot(path=ARTIFACTS / f"hub-{user[8:]}-submitted.png", full_page=True)

    teacher = log_in(browser, s, INSTRUCTOR, s.admin_password)
    expect(teacher.locator("body")).to_contain_text("Manage Assignments")
    expect(teacher.get_by_role("link", name=ASSIGNMENT)).to_be_visible()
    teacher.screenshot(path=ARTIFACTS / "hub-formgrader.png", full_page=True)
    for page in [*pages.values(), teacher]:
        page.context.close()

    course = Path(s.course or home(INSTRUCTOR) / "course")
    graded = subprocess.run(["make", "--no-print-directory", "grade", f"COURSE={course}",
                             f"VENV={sys.prefix}"], cwd=REPO, capture_output=True, text=True,
                            timeout=600)
    assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-3000:]
    with open(course / "grades.csv", newline="") as table:
        rows = {row["student_id"]: row for row in csv.DictReader(table)}
    expected = {user: float(sum(r.passed for r in check_all(reference_path(step))))
                for user, step in SCRIPTS.items()}
    assert {user: float(rows[user]["score"]) for user in ATTENDEES} == expected
    assert all(rows[user]["timestamp"] for user in ATTENDEES)


def test_an_attendee_cannot_open_another_attendees_files(hub, browser):
    s, _ = hub
    alice, bob = ATTENDEES[:2]
    page = log_in(browser, s, alice, s.user_password)
    theirs = page.request.get(f"{s.url}user/{bob}/api/contents/notebooks/{LEARNER_SCRIPT_NAME}",
                              max_redirects=0)
    assert theirs.status in (302, 403), theirs.status
    own = page.request.get(f"{s.url}user/{alice}/api/contents/notebooks/{LEARNER_SCRIPT_NAME}")
    assert own.status == 200, own.status
    page.context.close()
    # And as alice's Unix account, which her kernels and terminals run as.
    bobs = workbook_copy.copy_dir(home(bob)) / "notebooks" / LEARNER_SCRIPT_NAME
    reply = subprocess.run(["runuser", "-u", alice, "--", "cat", str(bobs)],
                           capture_output=True, text=True, timeout=30)
    assert reply.returncode != 0 and "Permission denied" in reply.stderr, reply
    # The shared environment and data: read, never written.
    for shared in (REPO / "data" / "sample", Path(sys.prefix) / "lib"):
        reply = subprocess.run(["runuser", "-u", alice, "--", "touch", str(shared / "x")],
                               capture_output=True, text=True, timeout=30)
        assert reply.returncode != 0 and "Permission denied" in reply.stderr, reply
    reply = subprocess.run(["runuser", "-u", alice, "--", str(Path(sys.prefix) / "bin" / "python"),
                            "-c", "import horovod.tensorflow"], capture_output=True, text=True,
                           timeout=120)
    assert reply.returncode == 0, reply.stderr[-2000:]


PROBE = """\
import os
import time

import horovod.tensorflow as hvd

hvd.init()
print(f"rank {hvd.rank()} of {hvd.size()} on cores {sorted(os.sched_getaffinity(0))}",
      flush=True)
time.sleep(20)  # long enough for the test to see both attendees' workers at once
"""


def probe_notebook() -> dict:
    setup = json.loads((REPO / "notebooks" / STEP_ONE).read_text())["cells"]
    setup_cell = next(c for c in setup if "setup" in c["metadata"].get("tags", []))
    run = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
           "source": "from workbook.runner import horovodrun\n\n"
                     "horovodrun('cores_probe.py', np=2, run_name='cores')"}
    return {"cells": [setup_cell, run], "metadata": {"kernelspec": {
        "name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}},
        "nbformat": 4, "nbformat_minor": 5}


def workers_of(users) -> dict:
    """user -> {pid: cores} of their running Horovod workers (their HOROVOD_RANK says so)."""
    found = {user: {} for user in users}
    for process in psutil.process_iter(["username", "cmdline"]):
        try:
            if (process.info["username"] in found
                    and "cores_probe.py" in " ".join(process.info["cmdline"] or [])
                    and "HOROVOD_RANK" in process.environ()):
                found[process.info["username"]][process.pid] = set(process.cpu_affinity())
        except psutil.Error:
            pass
    return found


def test_two_attendees_2_worker_runs_at_once_get_disjoint_cores(hub, browser):
    s, _ = hub
    alice, bob = ATTENDEES[:2]
    planned = {user: set(s.cores[user]) for user in (alice, bob)}
    assert planned[alice] and planned[bob] and not planned[alice] & planned[bob]
    assert s.cores == cores.plan(ATTENDEES, cores.machine_cores())
    pages = {}
    for user in (alice, bob):
        page = pages[user] = log_in(browser, s, user, s.user_password)  # makes their copy
        folder = workbook_copy.copy_dir(home(user)) / "notebooks"
        for name, text in (("cores_probe.py", PROBE),
                           ("cores.ipynb", json.dumps(probe_notebook()))):
            give(user, text, folder / name)
        open_notebook(page, s, user, "notebooks/cores.ipynb")
    for user, page in pages.items():
        cells = page.locator(".jp-NotebookPanel:visible .jp-Cell")
        run_cell(cells.nth(0))
        run_cell(cells.nth(1))

    seen, deadline = {}, time.monotonic() + 240
    while time.monotonic() < deadline:
        now = workers_of(planned)
        if all(len(workers) == 2 for workers in now.values()):
            seen = now
            break
        time.sleep(0.5)
    assert seen, f"never saw both attendees' 2 workers at once: {workers_of(planned)}"
    print({user: sorted(map(sorted, w.values())) for user, w in seen.items()})
    for user, workers in seen.items():
        assert all(cores_ <= planned[user] for cores_ in workers.values()), (user, workers)
    used = [set().union(*seen[user].values()) for user in (alice, bob)]
    assert not used[0] & used[1]
    for user, page in pages.items():
        output = page.locator(".jp-NotebookPanel:visible .jp-Cell").nth(1)
        expect(output).to_contain_text("rank 1 of 2", timeout=WAIT_MS)
        expect(output).to_contain_text(f"on cores {sorted(planned[user])}")
        page.screenshot(path=ARTIFACTS / f"hub-{user[8:]}-cores.png", full_page=True)
        page.context.close()


def test_tensorboard_is_reached_through_the_attendees_own_server(hub, browser):
    """Each attendee's TensorBoard listens on a port of their own and the notebooks link to it
    through their JupyterLab (jupyter-server-proxy), which another attendee cannot open."""
    s, _ = hub
    alice, bob = ATTENDEES[:2]
    page = log_in(browser, s, alice, s.user_password)
    folder = workbook_copy.copy_dir(home(alice)) / "notebooks"
    setup = probe_notebook()["cells"][0]
    start = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
             "source": "from workbook.tensorboard import ensure_tensorboard\n\n"
                       "print('TensorBoard at', ensure_tensorboard().url)"}
    give(alice, json.dumps({**probe_notebook(), "cells": [setup, start]}), folder / "tb.ipynb")
    panel = open_notebook(page, s, alice, "notebooks/tb.ipynb")
    cells = panel.locator(".jp-CodeCell")
    run_cell(cells.nth(0))
    run_cell(cells.nth(1))
    port = 6006 + 1 + [s.instructor, *s.attendees].index(alice)
    link = f"/user/{alice}/proxy/{port}/"
    expect(cells.nth(1)).to_contain_text(f"TensorBoard at {link}")
    page.goto(s.url.rstrip("/") + link)
    expect(page).to_have_title("TensorBoard")
    logdir = page.request.get(s.url.rstrip("/") + link + "data/logdir").json()["logdir"]
    assert Path(logdir) == folder / "logs"
    page.screenshot(path=ARTIFACTS / "hub-alice-tensorboard.png", full_page=True)
    page.context.close()
    other = log_in(browser, s, bob, s.user_password)
    theirs = other.request.get(s.url.rstrip("/") + link + "data/logdir", max_redirects=0)
    assert theirs.status in (302, 403), theirs.status
    other.context.close()

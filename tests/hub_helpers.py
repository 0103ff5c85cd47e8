"""The workshop hub for real, shared by tests/system/test_hub.py and
tests/system/test_hub_attacks.py: one hub for the session, started by `python -m hub up` with a
roster of three attendees and an instructor (accounts named after this run, so nothing that was
there is touched), stopped by `python -m hub down --remove-accounts`, which deletes the accounts,
their homes, their cgroups and the hub's firewall rules, and puts /proc back; the exchange and the
settings are in a temporary folder."""

from __future__ import annotations

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

from hub import accounts, isolation
from hub import settings as hub_settings
from workbook.facts import step_notebook
from workbook.paths import REPO

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = REPO / "test-artifacts"
WAIT_MS = 120_000  # a server's first start, a kernel, nbgrader's fetch and submit
TAG = uuid.uuid4().hex[:4]
ATTENDEES = [f"hubt{TAG}{name}" for name in ("alice", "bob", "carol")]
INSTRUCTOR = f"hubt{TAG}teach"
# What each attendee's script is when they submit: steps 1, 1-2 and 1-3 done.
SCRIPTS = dict(zip(ATTENDEES, (1, 2, 3)))
MEMORY_MIB = 3072  # each attendee's limit here: a runaway allocation reaches it in seconds
ASSIGNMENT, STEP_ONE = "horovod_steps", step_notebook(1).file_name


def needs(condition: bool, reason: str):
    if not condition:
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(reason)
        pytest.skip(reason)


def free_ports(count: int = 4) -> int:
    """A port p with p, p+1, ..., p+count-1 free (the proxy, the hub's API, the proxy's API,
    the class view)."""
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


def hub_command(
    state: Path, command: str, *args: str, timeout: float = 600
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hub", command, "--state-dir", str(state), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="session")
def hub():
    needs(os.geteuid() == 0, "the hub makes Unix accounts and CPU sets: run the tests as root")
    needs(os.access(CHROMIUM, os.X_OK), f"Chromium not found at {CHROMIUM}: make browser")
    ARTIFACTS.mkdir(exist_ok=True)
    # Not under pytest's own (private) temporary folder: the attendees' servers read the
    # hub's settings folder, so the hub makes the folders above it passable.
    folder = Path(tempfile.mkdtemp(prefix="workbook-hub-test-"))
    roster = folder / "roster.csv"
    roster.write_text(
        "id,first_name,last_name,email\n"
        + "".join(f"{name},{name[8:].title()},Test,{name}@example.org\n" for name in ATTENDEES)
    )
    state, port = folder / "state", free_ports()
    proc_before = isolation.hidepid_of(isolation.proc_options())
    started = time.monotonic()
    try:
        up = hub_command(
            state,
            "up",
            "--roster",
            str(roster),
            "--port",
            str(port),
            "--instructor",
            INSTRUCTOR,
            "--exchange",
            str(folder / "exchange"),
            "--memory-per-attendee",
            f"{MEMORY_MIB}M",
        )
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
            assert not any(
                p.info["username"] in (INSTRUCTOR, *ATTENDEES)
                for p in psutil.process_iter(["username"])
            )
            assert port_free(port), f"port {port} still taken after hub down"
            assert isolation.hidepid_of(isolation.proc_options()) == proc_before
            assert not isolation.PROFILE.exists()
            assert not Path(f"{state}-progress").exists(), "the class view's records are left"
            if shutil.which("iptables"):
                chain = subprocess.run(
                    ["iptables", "-w", "10", "-S", isolation.CHAIN], capture_output=True, timeout=60
                )
                assert chain.returncode != 0, "the hub's firewall chain is still there"
        finally:
            shutil.rmtree(folder)
            shutil.rmtree(f"{state}-jupyter", ignore_errors=True)
            shutil.rmtree(f"{state}-progress", ignore_errors=True)


@pytest.fixture(scope="session")
def browser():
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def password_of(s, user: str) -> str:
    """The password the user was given: the sheet's line, or the instructor's."""
    return s.admin_password if user == INSTRUCTOR else s.passwords[user]


def submit_log_in(browser, s, user: str, password: str):
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    expect.set_options(timeout=WAIT_MS)
    page.goto(s.url + "hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", password)
    page.click("#login_submit")
    return page


def log_in(browser, s, user: str, password: str | None = None):
    """A browser of the user's own (cookies), logged in with their own password, on their
    JupyterLab (the instructor: on the formgrader)."""
    page = submit_log_in(browser, s, user, password or password_of(s, user))
    if user == INSTRUCTOR:  # the formgrader first
        page.wait_for_url(f"**/user/{user}/formgrader/**", timeout=WAIT_MS * 2)
        return page
    page.wait_for_url(f"**/user/{user}/lab/**", timeout=WAIT_MS * 2)
    expect(page.locator(".jp-NotebookPanel:visible")).to_have_count(1)  # the welcome notebook
    return page


def home(user: str) -> Path:
    return Path(pwd.getpwnam(user).pw_dir)


def give(user: str, text: str, target: Path) -> None:
    """Put a file in the user's folder, as theirs (what their editor would have saved)."""
    target.write_text(text)
    entry = pwd.getpwnam(user)
    os.chown(target, entry.pw_uid, entry.pw_gid)


def formgrader(page, action: str) -> dict:
    """A formgrader button's request (Collect, Generate / Release Feedback), as its page sends
    it: nbgrader's reply, {"success", "log", "error"}."""
    reply = page.evaluate(
        "url => new Promise((done, failed) => $.post(base_url + url).done(done)"
        ".fail(xhr => failed(new Error(xhr.status + ' ' + xhr.responseText))))",
        f"/formgrader/api/assignment/{ASSIGNMENT}/{action}",
    )
    return json.loads(reply) if isinstance(reply, str) else reply


def student_nbgrader(s, user: str, *args: str, timeout: float = 120):
    """nbgrader's command line as the attendee's account, with the hub's student settings, in
    their copy of the workbook (where their server runs it)."""
    from hub import classroom

    folder = workbook_copy_dir(user)
    return as_user(
        user,
        "env",
        f"HOME={home(user)}",
        f"JUPYTER_CONFIG_PATH={classroom.config_dir(s, 'student')}",
        f"PYTHONPATH={folder}",
        "sh",
        "-c",
        f"cd {folder} && {Path(s.venv) / 'bin' / 'nbgrader'} " + " ".join(args),
        timeout=timeout,
    )


def workbook_copy_dir(user: str) -> Path:
    from hub import workbook_copy

    return workbook_copy.copy_dir(home(user))


def assignment_list(page):
    page.evaluate("() => window.jupyterapp.commands.execute('nbgrader:open-assignment-list')")
    expect(
        page.locator("#released_assignments_list, #fetched_assignments_list").first
    ).to_be_visible()
    return page.locator("#assignments")


def kernel_ready(panel):
    expect(panel.locator(".jp-Toolbar-kernelName")).to_have_text("Python 3 (ipykernel)")
    expect(panel.locator(".jp-Notebook-ExecutionIndicator")).to_have_attribute(
        "data-status", "idle"
    )


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
        Path(path).name
    )
    kernel_ready(panel)
    # The attendee's JupyterLab got LAB_ARGS from the spawner: no news pop-up over the notebook.
    config = page.evaluate("JSON.parse(document.getElementById('jupyter-config-data').textContent)")
    assert config["news"] == {"disabled": True} and config["exposeAppInBrowser"] is True
    # Through JupyterLab's own client: the hub's servers want an XSRF token on API requests.
    fetch_news = page.evaluate(
        "window.jupyterapp.serviceManager.settings"
        ".fetch('@jupyterlab/apputils-extension:notification')"
        ".then(plugin => plugin.schema.properties.fetchNews.default)"
    )
    assert fetch_news == "false"
    return panel


def notebook(*sources: str) -> str:
    """A notebook of code cells (the first usually the step notebooks' set-up cell)."""
    cells = [
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": source,
        }
        for source in sources
    ]
    return json.dumps(
        {
            "cells": cells,
            "metadata": {
                "kernelspec": {
                    "name": "python3",
                    "display_name": "Python 3 (ipykernel)",
                    "language": "python",
                }
            },
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


def as_user(user: str, *command: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """A command run by the user's Unix account, as their terminal would (a login shell's
    environment is not needed for these)."""
    return subprocess.run(
        ["runuser", "-u", user, "--", *command], capture_output=True, text=True, timeout=timeout
    )

"""Limits that say their name on the workshop hub (issue 38.5), for real: an attendee's kernel
killed at the memory limit, and processes refused at the process limit, are named in their
notebook with the limit and what was used; another attendee's cgroup files are closed; a new
password ends the attendee's open sessions. The hub is the session's (tests/hub_helpers.py).

Root only; slow (about 3 minutes on 2 cores).
"""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from hub import cores, limits, workbook_copy
from hub import settings as hub_settings
from hub_helpers import (
    ARTIFACTS,
    ATTENDEES,
    MEMORY_MIB,
    as_user,
    give,
    home,
    hub_command,
    log_in,
    notebook,
    open_notebook,
    run_cell,
    submit_log_in,
)

pytestmark = [pytest.mark.timeout(900)]
pytest_plugins = ["hub_helpers"]  # the session's hub and browser

FORK_LOOP = """\
import os, signal, time
children = []
try:
    while True:
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        children.append(pid)
except OSError as error:
    print(f"fork loop stopped after {len(children)} processes: {error}", flush=True)
finally:
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    for pid in children:
        os.waitpid(pid, 0)
"""
RUNAWAY = """\
blocks = []
while True:
    blocks.append(b"\\x01" * (128 * 2**20))  # written, so really resident
"""


def test_another_attendees_cgroup_files_are_closed(hub):
    s, _ = hub
    alice, bob = ATTENDEES[:2]
    theirs = [
        limits.group("memory", alice) / "memory.usage_in_bytes",
        limits.group("memory", alice) / "tasks",
        limits.group("pids", alice) / "tasks",
    ]
    if cores.cpuset_available():
        theirs.append(cores.cpuset_dir(alice) / "tasks")
    theirs = [path for path in theirs if path.exists()]
    assert theirs, "no cgroup of alice's to read"
    for path in theirs:
        reply = as_user(bob, "cat", str(path))
        assert reply.returncode != 0 and "Permission denied" in reply.stderr, (path, reply)
        assert as_user(alice, "cat", str(path)).returncode == 0, path  # her own
    listing = as_user(bob, "ls", str(limits.group("memory", alice).parent))
    assert listing.returncode != 0, listing


def test_the_memory_and_process_limits_are_named_in_the_attendees_notebook(hub, browser):
    s, _ = hub
    alice = ATTENDEES[0]
    page = log_in(browser, s, alice)  # makes her copy
    folder = workbook_copy.copy_dir(home(alice)) / "notebooks"
    give(alice, notebook(FORK_LOOP, RUNAWAY, "print('after the runaway')"), folder / "limits.ipynb")
    panel = open_notebook(page, s, alice, "notebooks/limits.ipynb")
    cells = panel.locator(".jp-CodeCell")
    run_cell(cells.nth(0))
    expect(cells.nth(0)).to_contain_text("fork loop stopped after", timeout=60_000)
    # After the cell: ending ~1,000 children takes a while on a busy machine.
    expect(cells.nth(0)).to_contain_text(
        f"you reached your limit of {limits.DEFAULT_PIDS} processes and threads", timeout=240_000
    )
    expect(cells.nth(0)).to_contain_text("Process limit: during this cell,")

    started = time.monotonic()
    run_cell(cells.nth(1))
    expect(page.get_by_text("appears to have died")).to_be_visible(timeout=120_000)
    print(f"runaway allocation killed after {time.monotonic() - started:.1f} s")
    page.locator(".jp-Dialog-button.jp-mod-accept").click()
    # The restarted kernel, in a fresh page (a busy machine can leave the old one disconnected).
    cells = open_notebook(page, s, alice, "notebooks/limits.ipynb").locator(".jp-CodeCell")
    run_cell(cells.nth(2))
    output = cells.nth(2).locator(".jp-OutputArea")
    expect(output).to_contain_text("after the runaway", timeout=120_000)
    said = output.inner_text()
    assert (
        "Memory limit: before this kernel started, 1 of your processes was killed for going "
        f"over your memory limit of {MEMORY_MIB / 1024:.1f} GiB (your peak: " in said
    ), said
    assert "If JupyterLab said the kernel died, this was it" in said
    page.screenshot(path=ARTIFACTS / "hub-alice-limits-named.png", full_page=True)
    page.context.close()


def test_a_new_password_ends_the_attendees_open_sessions(hub, browser):
    s, _ = hub
    carol = ATTENDEES[2]
    old = s.passwords[carol]
    page = log_in(browser, s, carol)
    assert page.request.get(f"{s.url}hub/api/user").status == 200
    try:
        reset = hub_command(s.state_dir, "password", carol, timeout=300)
        assert reset.returncode == 0, reset.stdout + reset.stderr
        assert "their open sessions ended" in reset.stdout, reset.stdout
        new = hub_settings.load(s.path).passwords[carol]
        assert new != old
        assert page.request.get(f"{s.url}hub/api/user").status == 403  # the old cookie: gone
        page.goto(f"{s.url}user/{carol}/lab")
        page.wait_for_url("**/hub/login**")
        page.context.close()
        refused = submit_log_in(browser, s, carol, old)
        expect(refused.locator(".login_error, .alert-danger").first).to_be_visible()
        refused.context.close()
        log_in(browser, s, carol, new).context.close()
    finally:  # the session's other tests log in with the sheet's first password
        kept = hub_settings.load(s.path)
        kept.passwords[carol] = old
        kept.save()

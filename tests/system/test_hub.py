"""The workshop hub (`make hub`, hub/): a real JupyterHub with the real configurable-http-proxy
and real Unix accounts, driven in headless Chromium (Debian's; Playwright only drives it).

The hub (one for the session: tests/hub_helpers.py) serves three attendees and an instructor;
the attacks of one attendee on another are tests/system/test_hub_attacks.py. Screenshots in
test-artifacts/.

Root only (accounts, cgroups); slow (about 5 minutes on 2 cores).
"""

from __future__ import annotations

import csv
import json
import pwd
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from playwright.sync_api import expect

from grader import check_all
from grader.reference import reference_path
from hub import cores, isolation, workbook_copy
from hub.classroom import COURSE_ID
from hub_helpers import (
    ARTIFACTS,
    ASSIGNMENT,
    ATTENDEES,
    INSTRUCTOR,
    SCRIPTS,
    STEP_ONE,
    WAIT_MS,
    as_user,
    assignment_list,
    cell_index,
    formgrader,
    give,
    home,
    log_in,
    open_notebook,
    run_cell,
)
from instructor.exchange import RECEIPT
from workbook.facts import LEARNER_SCRIPT_NAME, STEPS
from workbook.paths import REPO

pytestmark = [pytest.mark.timeout(900)]
STEP_ONE_FEEDBACK = Path(STEP_ONE).with_suffix(".html").name
pytest_plugins = ["hub_helpers"]  # the session's hub and browser: one for both files


def test_a_class_logs_in_checks_step_1_submits_and_is_graded(hub, browser):
    """Three attendees and the instructor log in; each attendee has their own copy, edits
    notebooks/fashion_mnist.py as the welcome notebook says, passes step 1's check there and
    submits from the Assignments list, which shows that folder as the assignment (issue 38: one
    place to work, nothing to fetch, one tab per notebook); the instructor's formgrader shows the
    course; `make grade` grades exactly what each attendee edited."""
    s, banner = hub
    assert s.admin_password in banner and s.url in banner and str(s.passwords_path) in banner
    assert "passwords cross the room's network in clear" in banner
    assert not any(s.passwords[user] in banner for user in ATTENDEES)  # on the sheet only
    pages = {}
    for user in ATTENDEES:
        started = time.monotonic()
        page = pages[user] = log_in(browser, s, user)
        copy = workbook_copy.copy_dir(home(user))
        folder = copy / "notebooks"
        assert (folder / LEARNER_SCRIPT_NAME).read_text() == (
            REPO / "solutions" / LEARNER_SCRIPT_NAME
        ).read_text()
        assert pwd.getpwuid((folder / STEP_ONE).stat().st_uid).pw_name == user
        assert oct(home(user).stat().st_mode & 0o777) == "0o700"

        listing = assignment_list(page)
        expect(listing.locator("#fetched_assignments_list")).to_contain_text(ASSIGNMENT)
        expect(listing.get_by_role("button", name="Fetch", exact=True)).to_have_count(0)
        listed = page.request.get(f"{s.url}user/{user}/assignments?course_id={COURSE_ID}").json()
        [assignment] = [a for a in listed["value"] if a["status"] == "fetched"]
        assert assignment["path"] == "notebooks"
        assert f"notebooks/{STEP_ONE}" in [nb["path"] for nb in assignment["notebooks"]]
        give(user, reference_path(SCRIPTS[user]).read_text(), folder / LEARNER_SCRIPT_NAME)

        panel = open_notebook(page, s, user, f"notebooks/{STEP_ONE}")
        cells = panel.locator(".jp-Cell")
        for tag in ("setup", "check"):
            run_cell(cells.nth(cell_index(folder / STEP_ONE, tag)))
        expect(cells.nth(cell_index(folder / STEP_ONE, "check"))).to_contain_text("\u2714 passed")
        page.screenshot(path=ARTIFACTS / f"hub-{user[8:]}-step01.png", full_page=True)
        # The Assignments list's step one is the same file: the same tab, not a second one.
        page.evaluate(
            "path => window.jupyterapp.commands.execute('docmanager:open', {path})",
            f"notebooks/{STEP_ONE}",
        )
        expect(
            page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=STEP_ONE)
        ).to_have_count(1)

        listing = assignment_list(page)
        earlier = (folder / RECEIPT).read_text() if (folder / RECEIPT).exists() else ""
        listing.locator("#fetched_assignments_list").get_by_role(
            "button", name="Submit"
        ).first.click()
        expect(listing.locator("#submitted_assignments_list")).to_contain_text(ASSIGNMENT)
        deadline = time.monotonic() + WAIT_MS / 1000  # an earlier submission's list and receipt
        while time.monotonic() < deadline and (folder / RECEIPT).read_text() == earlier:
            time.sleep(0.5)
        receipt = (folder / RECEIPT).read_text()  # the exact count: test_course_processes
        print(receipt)
        assert re.search(rf"the reading sees \d+ of {len(STEPS)} steps done", receipt), receipt
        assert f"{folder / LEARNER_SCRIPT_NAME} last changed" in receipt, receipt
        assert not (copy / ASSIGNMENT).exists()  # no second copy
        page.screenshot(path=ARTIFACTS / f"hub-{user[8:]}-submitted.png", full_page=True)
        print(
            f"{user}: logged in, edited, checked step 1 and submitted in "
            f"{time.monotonic() - started:.0f} s"
        )

    teacher = log_in(browser, s, INSTRUCTOR)
    expect(teacher.locator("body")).to_contain_text("Manage Assignments")
    expect(teacher.get_by_role("link", name=ASSIGNMENT)).to_be_visible()
    teacher.screenshot(path=ARTIFACTS / "hub-formgrader.png", full_page=True)
    teacher.context.close()

    # As documented: `make grade` and the feedback's release, run as root.
    course = Path(s.course or home(INSTRUCTOR) / "course")
    graded = subprocess.run(
        ["make", "--no-print-directory", "grade", f"COURSE={course}", f"VENV={sys.prefix}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-3000:]
    with open(course / "grades.csv", newline="") as table:
        rows = {row["student_id"]: row for row in csv.DictReader(table)}
    expected = {
        user: float(sum(r.passed for r in check_all(reference_path(step))))
        for user, step in SCRIPTS.items()
    }
    assert {user: float(rows[user]["score"]) for user in ATTENDEES} == expected
    assert all(rows[user]["timestamp"] for user in ATTENDEES)
    report = (course / "reports").glob("*.txt")
    assert not any("submission_secret.txt" in path.read_text() for path in report)
    released = subprocess.run(
        [sys.executable, "-m", "instructor", "feedback", str(course), "--release"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert released.returncode == 0, released.stdout[-3000:] + released.stderr[-3000:]
    exchange_course = Path(s.exchange) / "horovod_workbook"
    for top in (course, exchange_course):  # nothing of root's left where the formgrader writes
        rooted = [p for p in [top, *top.rglob("*")] if p.lstat().st_uid == 0]
        assert not rooted, rooted[:5]

    # The instructor's formgrader after them: feedback generated and released again.
    teacher = log_in(browser, s, INSTRUCTOR)
    for action in ("generate_feedback", "release_feedback"):
        reply = formgrader(teacher, action)
        assert reply.get("success"), (action, reply)
    teacher.context.close()
    # And an attendee fetches it from their Assignments list.
    alice = ATTENDEES[0]
    listing = assignment_list(pages[alice])
    listing.locator("#submitted_assignments_list").get_by_role(
        "button", name="Fetch Feedback"
    ).first.click()
    feedback = workbook_copy.copy_dir(home(alice)) / ASSIGNMENT / "feedback"
    deadline = time.monotonic() + 60
    # The fetch copies one page at a time, in no set order: wait for step one's own.
    while time.monotonic() < deadline and not list(feedback.rglob(STEP_ONE_FEEDBACK)):
        time.sleep(0.5)
    assert list(feedback.rglob(STEP_ONE_FEEDBACK)), list(feedback.rglob("*"))
    for page in pages.values():
        page.context.close()


def test_an_attendee_cannot_open_another_attendees_files(hub, browser):
    s, _ = hub
    alice, bob = ATTENDEES[:2]
    page = log_in(browser, s, alice)
    theirs = page.request.get(
        f"{s.url}user/{bob}/api/contents/notebooks/{LEARNER_SCRIPT_NAME}", max_redirects=0
    )
    assert theirs.status in (302, 403), theirs.status
    own = page.request.get(f"{s.url}user/{alice}/api/contents/notebooks/{LEARNER_SCRIPT_NAME}")
    assert own.status == 200, own.status
    page.context.close()
    # And as alice's Unix account, which her kernels and terminals run as.
    bobs = workbook_copy.copy_dir(home(bob)) / "notebooks" / LEARNER_SCRIPT_NAME
    reply = subprocess.run(
        ["runuser", "-u", alice, "--", "cat", str(bobs)], capture_output=True, text=True, timeout=30
    )
    assert reply.returncode != 0 and "Permission denied" in reply.stderr, reply
    # The shared environment and data: read, never written.
    for shared in (REPO / "data" / "sample", Path(sys.prefix) / "lib"):
        reply = subprocess.run(
            ["runuser", "-u", alice, "--", "touch", str(shared / "x")],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert reply.returncode != 0 and "Permission denied" in reply.stderr, reply
    reply = subprocess.run(
        [
            "runuser",
            "-u",
            alice,
            "--",
            str(Path(sys.prefix) / "bin" / "python"),
            "-c",
            "import horovod.tensorflow",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
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
    run = {
        "cell_type": "code",
        "metadata": {},
        "outputs": [],
        "execution_count": None,
        "source": "from workbook.runner import horovodrun\n\n"
        "horovodrun('cores_probe.py', np=2, run_name='cores')",
    }
    return {
        "cells": [setup_cell, run],
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


def workers_of(users) -> dict:
    """user -> {pid: cores} of their running Horovod workers (their HOROVOD_RANK says so)."""
    found = {user: {} for user in users}
    for process in psutil.process_iter(["username", "cmdline"]):
        try:
            if (
                process.info["username"] in found
                and "cores_probe.py" in " ".join(process.info["cmdline"] or [])
                and "HOROVOD_RANK" in process.environ()
            ):
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
        page = pages[user] = log_in(browser, s, user)  # makes their copy
        folder = workbook_copy.copy_dir(home(user)) / "notebooks"
        for name, text in (
            ("cores_probe.py", PROBE),
            ("cores.ipynb", json.dumps(probe_notebook())),
        ):
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
    page = log_in(browser, s, alice)
    folder = workbook_copy.copy_dir(home(alice)) / "notebooks"
    setup = probe_notebook()["cells"][0]
    start = {
        "cell_type": "code",
        "metadata": {},
        "outputs": [],
        "execution_count": None,
        "source": "from workbook.tensorboard import ensure_tensorboard\n\n"
        "print('TensorBoard at', ensure_tensorboard().url)",
    }
    give(alice, json.dumps({**probe_notebook(), "cells": [setup, start]}), folder / "tb.ipynb")
    panel = open_notebook(page, s, alice, "notebooks/tb.ipynb")
    cells = panel.locator(".jp-CodeCell")
    run_cell(cells.nth(0))
    run_cell(cells.nth(1))
    port = isolation.tensorboard_port(s, alice)
    link = f"/user/{alice}/proxy/{port}/"
    expect(cells.nth(1)).to_contain_text(f"TensorBoard at {link}")
    page.goto(s.url.rstrip("/") + link)
    expect(page).to_have_title("TensorBoard")
    logdir = page.request.get(s.url.rstrip("/") + link + "data/logdir").json()["logdir"]
    assert Path(logdir) == folder / "logs"
    page.screenshot(path=ARTIFACTS / "hub-alice-tensorboard.png", full_page=True)
    page.context.close()
    other = log_in(browser, s, bob)
    theirs = other.request.get(s.url.rstrip("/") + link + "data/logdir", max_redirects=0)
    assert theirs.status in (302, 403), theirs.status
    # Nor through bob's own server's proxy, nor from bob's terminal: only alice's account may
    # connect to her TensorBoard's port.
    mine = other.request.get(f"{s.url}user/{bob}/proxy/{port}/data/logdir")
    assert mine.status >= 400, (mine.status, mine.text()[:200])
    curl = as_user(bob, "curl", "-sS", "-m", "10", f"http://127.0.0.1:{port}/data/logdir")
    assert curl.returncode != 0 and "logdir" not in curl.stdout, curl
    own = as_user(alice, "curl", "-sS", "-m", "10", f"http://127.0.0.1:{port}/data/logdir")
    assert own.returncode == 0 and "logdir" in own.stdout, own
    other.context.close()

"""The instructor's class view on the workshop hub (issue 38.6), for real: the attendees' own
check cells in their JupyterLab leave their verdicts, the instructor's page at
/services/class-view/ shows each attendee's step and who is stuck, and updates itself while
they work; no attendee opens it, reads or writes another's records. The hub is the session's
(tests/hub_helpers.py). A screenshot with three attendees on different steps (records written
for it, after the real ones are checked): test-artifacts/hub-class-view.png.

Root only; slow (about 3 minutes on 2 cores).
"""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from grader.reference import reference_path
from hub import progress_drop, workbook_copy
from hub_helpers import (
    ARTIFACTS,
    ATTENDEES,
    INSTRUCTOR,
    STEP_ONE,
    WAIT_MS,
    as_user,
    cell_index,
    give,
    home,
    log_in,
    open_notebook,
    run_cell,
)
from workbook import class_progress
from workbook.facts import LEARNER_SCRIPT_NAME

pytestmark = [pytest.mark.timeout(900)]
pytest_plugins = ["hub_helpers"]  # the session's hub and browser


def records_of(s, user: str) -> list:
    try:
        return class_progress.read(progress_drop.path_of(s.progress_dir, user))
    except OSError:
        return []


def wait_for_records(s, user: str, count: int) -> list:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(records_of(s, user)) < count:
        time.sleep(0.5)
    return records_of(s, user)


def check_step_one(page, s, user: str):
    """Run step one's set-up and check cells in the attendee's own notebook; the panel."""
    folder = workbook_copy.copy_dir(home(user)) / "notebooks"
    panel = open_notebook(page, s, user, f"notebooks/{STEP_ONE}")
    cells = panel.locator(".jp-Cell")
    for tag in ("setup", "check"):
        run_cell(cells.nth(cell_index(folder / STEP_ONE, tag)))
    return cells.nth(cell_index(folder / STEP_ONE, "check"))


def row(view, user: str):
    return view.locator("#class tbody tr", has_text=user)


def test_the_instructor_sees_each_attendees_step_and_who_is_stuck(hub, browser):
    s, banner = hub
    alice, bob, carol = ATTENDEES
    assert f"{s.url}services/class-view/" in banner
    before = {user: len(records_of(s, user)) for user in ATTENDEES}
    # alice has done step one, bob not: each checks it in their own JupyterLab.
    pages = {user: log_in(browser, s, user) for user in (alice, bob)}  # makes their copies
    give(
        alice,
        reference_path(1).read_text(),
        workbook_copy.copy_dir(home(alice)) / "notebooks" / LEARNER_SCRIPT_NAME,
    )
    give(
        bob,
        reference_path(1).with_name(LEARNER_SCRIPT_NAME).read_text(),
        workbook_copy.copy_dir(home(bob)) / "notebooks" / LEARNER_SCRIPT_NAME,
    )
    checks = {user: check_step_one(pages[user], s, user) for user in (alice, bob)}
    expect(checks[alice]).to_contain_text("\u2714 passed")
    for user, status in ((alice, "passed"), (bob, "failed")):
        records = wait_for_records(s, user, before[user] + 1)
        assert records and (records[-1].step, records[-1].status) == (1, status), records
        assert time.time() - records[-1].time < 300

    teacher = log_in(browser, s, INSTRUCTOR)
    teacher.goto(f"{s.url}services/class-view/")
    expect(teacher.locator("h1")).to_have_text("Class view")
    expect(row(teacher, alice)).to_contain_text("step 1")
    expect(row(teacher, alice)).to_contain_text("passed")
    expect(row(teacher, bob)).to_contain_text("failed")
    if not records_of(s, carol):  # no other test of the session made her check
        expect(row(teacher, carol)).to_contain_text("no check yet")
    expect(teacher.locator("#headline")).to_contain_text(f"Stuck longest: {bob}, on step 1")

    # bob finishes step one and checks again: the open page shows it without a reload.
    give(
        bob,
        reference_path(1).read_text(),
        workbook_copy.copy_dir(home(bob)) / "notebooks" / LEARNER_SCRIPT_NAME,
    )
    run_cell(checks[bob])
    expect(checks[bob]).to_contain_text("\u2714 passed")
    url = teacher.url
    expect(row(teacher, bob)).to_contain_text("passed", timeout=30_000)
    assert teacher.url == url
    expect(teacher.locator("#headline")).not_to_contain_text(bob)

    # Only the instructor: an attendee's browser is refused, and their account reads or writes
    # no one else's records.
    denied = pages[bob].request.get(f"{s.url}services/class-view/table", max_redirects=5)
    assert denied.status == 403 or "Class view" not in denied.text(), denied.status
    pages[bob].goto(f"{s.url}services/class-view/")
    expect(pages[bob].locator("body")).not_to_contain_text(alice, timeout=WAIT_MS)
    alices = progress_drop.path_of(s.progress_dir, alice)
    for command in (
        ["cat", str(alices)],
        ["sh", "-c", f"echo forged >> {alices}"],
        ["ls", str(s.progress_dir)],
    ):
        reply = as_user(bob, *command)
        assert reply.returncode != 0 and "Permission denied" in reply.stderr, (command, reply)
    assert as_user(alice, "sh", "-c", f": >> {alices}").returncode == 0  # her own: appended

    # Three attendees on different steps, for the screenshot (records written here).
    now = time.time()
    fake = {
        alice: [
            (1, "passed", 3000),
            (2, "passed", 2600),
            (3, "passed", 2100),
            (4, "passed", 1500),
            (5, "failed", 1260),
            (5, "failed", 700),
            (5, "failed", 240),
        ],
        bob: [
            (1, "passed", 2900),
            (2, "passed", 2000),
            (3, "failed", 1700),
            (3, "passed", 1100),
            (4, "passed", 800),
            (5, "passed", 500),
            (6, "passed", 300),
            (7, "can't tell", 90),
        ],
        carol: [
            (1, "failed", 2500),
            (1, "passed", 2300),
            (2, "failed", 1900),
            (2, "failed", 1000),
            (2, "failed", 400),
            (2, "failed", 30),
        ],
    }
    for user, records in fake.items():
        with progress_drop.path_of(s.progress_dir, user).open("a") as out:
            out.writelines(
                class_progress.Record(step, status, now - ago).line()
                for step, status, ago in records
            )
    expect(row(teacher, carol)).to_contain_text("step 2", timeout=30_000)
    expect(teacher.locator("#headline")).to_contain_text(f"Stuck longest: {carol}, on step 2")
    expect(row(teacher, alice)).to_contain_text("21 min (3 failed)")
    teacher.screenshot(path=ARTIFACTS / "hub-class-view.png", full_page=True)
    for page in (*pages.values(), teacher):
        page.context.close()

"""What a learner sees, in a real browser: `make lab`, a step notebook opened in headless Chromium,
its set-up and check cells run with Shift+Enter: the grader's red feedback with one line under
it (no traceback), then, once the step is done, one green line. And a walk from the welcome
notebook to the run_distributed one by the Next cells, which leaves two kernels running, not one
per notebook.

Chromium is Debian's (`make browser`, run by `make test`, installs it); Playwright only drives
it. The screenshots are kept in test-artifacts/ (browser-step01-check.png, the failed check;
browser-step01-passed.png, the end), whether the test passes or not.
"""

import json
import os
import re
import shutil
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit
from urllib.request import urlopen

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect, sync_playwright

from grader import check_step
from grader.reference import reference_path
from grader.report import FAIL_COLOR, PASS_COLOR
from lab_helpers import START_TIMEOUT_S, free_port, make_lab, read_until_url, stop_lab
from workbook.facts import LAST_STEP, LESSON, NOTEBOOKS, RUN, STEP, notebook_of_kind, step_notebook
from workbook.paths import LEARNER_SCRIPT, NOTEBOOKS_DIR, REPO, STARTER_SCRIPT

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
# Root needs --no-sandbox; the rest keep an offline machine's Chromium from calling home.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
NOTEBOOK = NOTEBOOKS_DIR / step_notebook(1).file_name
ARTIFACTS = REPO / "test-artifacts"
SCREENSHOT = ARTIFACTS / "browser-step01-check.png"
PASSED_SCREENSHOT = ARTIFACTS / "browser-step01-passed.png"
WALK_SCREENSHOT = ARTIFACTS / (
    f"browser-walk-{NOTEBOOKS[0].number:02d}-{notebook_of_kind(RUN).number:02d}.png"
)
STEP_TIMEOUT_MS = 60_000  # one wait in the page: the notebook, the kernel, a cell's output


def in_ci():
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


@pytest.fixture
def chromium():
    if not os.access(CHROMIUM, os.X_OK):
        reason = (
            f"Chromium not found at {CHROMIUM}: `make browser` installs it (Debian "
            "packages chromium, chromium-driver), or set CHROMIUM to its path"
        )
        if in_ci():
            pytest.fail(reason)
        pytest.skip(reason)
    # launch() gives the browser a fresh profile (user data dir) of its own, removed on close.
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def step_folder():
    """The step notebook next to a fresh copy of the starting script, as `make lab` sets up
    notebooks/, but in a folder of its own: the learner's fashion_mnist.py and the committed
    notebook stay untouched, and the starter makes the check fail. JupyterLab serves only the
    repository, so the folder is in it, under test-artifacts/ (ignored by git)."""
    folder = ARTIFACTS / "browser"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    shutil.copy(NOTEBOOK, folder / NOTEBOOK.name)
    shutil.copy(STARTER_SCRIPT, folder / LEARNER_SCRIPT.name)
    return folder


def cell_index(tag, notebook=NOTEBOOK):
    cells = json.loads(notebook.read_text())["cells"]
    return next(i for i, cell in enumerate(cells) if tag in cell["metadata"].get("tags", []))


def screenshot(page, cell, path):
    """The whole page, scrolled to the cell, whether or not the test got that far."""
    try:
        cell.scroll_into_view_if_needed(timeout=5_000)
    except PlaywrightError:
        pass  # the screenshot shows whatever there is
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=path, full_page=True)


def run_cell(cell):
    """Select the cell by its prompt, as a learner clicks it, and press Shift+Enter."""
    cell.locator(".jp-InputPrompt").click()
    cell.page.keyboard.press("Shift+Enter")


def test_check_cell_shows_red_feedback_then_green_in_chromium(lab_env, chromium, step_folder):
    expected = check_step(1, step_folder / LEARNER_SCRIPT.name)
    assert not expected.passed and expected.message and expected.hint

    started = time.monotonic()
    lab = make_lab(lab_env, free_port(), free_port())
    try:
        url, _ = read_until_url(lab, time.monotonic() + START_TIMEOUT_S)
        parts = urlsplit(url)
        token = parse_qs(parts.query)["token"][0]
        notebook_url = (
            f"{parts.scheme}://{parts.netloc}/lab/tree/"
            f"{(step_folder / NOTEBOOK.name).relative_to(REPO).as_posix()}"
            f"?token={token}"
        )
        page = chromium.new_page(viewport={"width": 1280, "height": 1000})
        page.set_default_timeout(STEP_TIMEOUT_MS)
        expect.set_options(timeout=STEP_TIMEOUT_MS)
        cells = page.locator(".jp-NotebookPanel-notebook .jp-Cell")
        setup, check = cells.nth(cell_index("setup")), cells.nth(cell_index("check"))
        try:
            page.goto(notebook_url)
            expect(check).to_contain_text("check_step(1, run_if_unsure=True)")
            # The kernel is ready when the toolbar names it (before that it says "No Kernel",
            # and its status indicator starts out "idle" too) and the indicator is idle.
            kernel = json.loads(NOTEBOOK.read_text())["metadata"]["kernelspec"]["display_name"]
            expect(page.locator(".jp-Toolbar-kernelName")).to_have_text(kernel)
            expect(page.locator(".jp-Notebook-ExecutionIndicator")).to_have_attribute(
                "data-status", "idle"
            )

            run_cell(setup)
            expect(setup.locator(".jp-InputPrompt")).to_contain_text("[1]")
            run_cell(check)
            expect(check.locator(".jp-InputPrompt")).to_contain_text("[2]")

            feedback = check.locator('.jp-OutputArea-output[data-mime-type="text/html"]')
            expect(feedback).to_be_visible()
            for text in (
                "\u2718 not yet",
                expected.label,
                expected.message,
                "Hint:",
                expected.hint,
                "Expected change",
            ):
                expect(feedback).to_contain_text(text)
            expect(feedback.get_by_text("\u2718 not yet")).to_have_css(
                "color", "rgb({}, {}, {})".format(*bytes.fromhex(FAIL_COLOR[1:]))
            )
            # The diff is folded away until the learner opens it.
            expect(feedback.locator("details pre")).to_be_hidden()

            # The cell raised (nbgrader scores it 0), and that shows as one line, no traceback.
            error = check.locator(
                '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
            )
            expect(error).to_have_count(1)
            expect(error).to_have_text("Step 1 is not done yet; see the message above.")
            expect(check.locator(".jp-OutputArea-output")).to_have_count(2)
            screenshot(page, check, SCREENSHOT)

            # Done: the same cell shows one green line, and nothing else.
            shutil.copy(reference_path(1), step_folder / LEARNER_SCRIPT.name)
            run_cell(check)
            expect(check.locator(".jp-InputPrompt")).to_contain_text("[3]")
            passed = check.locator(".jp-OutputArea-output")
            expect(passed).to_have_count(1)
            expect(passed).to_have_text(f"\u2714 passed \u2014 {expected.label}: done")
            expect(passed.get_by_text("\u2714 passed")).to_have_css(
                "color", "rgb({}, {}, {})".format(*bytes.fromhex(PASS_COLOR[1:]))
            )
        finally:
            screenshot(page, check, PASSED_SCREENSHOT)
    finally:
        stop_lab(lab)
    print(
        f"browser test: {time.monotonic() - started:.0f} s; screenshots {SCREENSHOT}, "
        f"{PASSED_SCREENSHOT}"
    )


# --- the Next cells: one notebook, one kernel at a time -----------------------------------------

# The welcome, the step notebooks and the run, in the manifest's order.
WALK = [NOTEBOOKS_DIR / entry.file_name for entry in NOTEBOOKS[: notebook_of_kind(RUN).number + 1]]


@pytest.fixture
def walk_folder():
    """The walk's notebooks (the welcome to the run) next to the solution, so every check
    passes, in a folder of their own under test-artifacts/ (JupyterLab serves only the
    repository)."""
    folder = ARTIFACTS / "walk"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for notebook in WALK:
        shutil.copy(notebook, folder / notebook.name)
    shutil.copy(reference_path(LAST_STEP), folder / LEARNER_SCRIPT.name)
    return folder


def sources(notebook: dict) -> list[str]:
    return ["".join(cell["source"]) for cell in notebook["cells"]]


def test_a_notebook_opens_saved_and_its_next_cell_leaves_it_as_git_has_it(
    lab_env, chromium, walk_folder
):
    """Issue 39: the welcome notebook showed as unsaved as soon as it opened (JupyterLab set the
    kernel's language_info), and Shift+Enter in a step's Next cell, its last, added an empty
    cell that was saved with it (git status: modified, 6 of 7 notebooks)."""
    started = time.monotonic()
    lab = make_lab(lab_env, free_port(), free_port())
    page = None
    try:
        url, _ = read_until_url(lab, time.monotonic() + START_TIMEOUT_S)
        parts = urlsplit(url)
        token = parse_qs(parts.query)["token"][0]
        page = chromium.new_page(viewport={"width": 1280, "height": 1000})
        page.set_default_timeout(STEP_TIMEOUT_MS)
        expect.set_options(timeout=STEP_TIMEOUT_MS)
        where = walk_folder.relative_to(REPO).as_posix()
        panel = page.locator(".jp-NotebookPanel:visible")
        current_tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")
        page.goto(f"{parts.scheme}://{parts.netloc}/lab/tree/{where}/{WALK[0].name}?token={token}")
        expect(panel.locator(".jp-Notebook-ExecutionIndicator")).to_have_attribute(
            "data-status", "idle"
        )
        time.sleep(2)  # what the kernel reports has been set in the notebook by now
        expect(current_tab).not_to_have_class(re.compile("jp-mod-dirty"))
        panel.locator(f'a[href*="/{WALK[1].name}"]').last.click()
        expect(current_tab).to_have_text(WALK[1].name)
        expect(panel.locator(".jp-Notebook-ExecutionIndicator")).to_have_attribute(
            "data-status", "idle"
        )
        expect(current_tab).not_to_have_class(re.compile("jp-mod-dirty"))
        cells = panel.locator(".jp-Cell")
        run_cell(cells.nth(cell_index("setup", WALK[1])))
        run_cell(cells.nth(cell_index("next", WALK[1])))  # the last cell, as the welcome teaches
        expect(current_tab).to_have_text(WALK[2].name)
        saved = json.loads((walk_folder / WALK[1].name).read_text(encoding="utf-8"))
        assert sources(saved) == sources(json.loads(WALK[1].read_text()))
        expect(page.locator(".jp-Dialog")).to_have_count(0)  # no "File Changed"
    finally:
        if page is not None:
            page.screenshot(path=ARTIFACTS / "browser-next-saved.png", full_page=True)
        stop_lab(lab)
    print(f"open and Next: {time.monotonic() - started:.0f} s")


def test_next_cells_leave_two_kernels_by_the_run_notebook(lab_env, chromium, walk_folder):
    """A learner goes from the welcome notebook to the run_distributed one by the welcome's Next
    link, then the Next cell of every step (after its set-up and check cells): each step's
    notebook closes, saved, with its kernel, and by the run JupyterLab holds the welcome's kernel
    (the baseline's) and the run's, and their two tabs."""
    assert [notebook.name for notebook in WALK] == [
        entry.file_name for entry in NOTEBOOKS if entry.kind in (LESSON, STEP, RUN)
    ]
    started = time.monotonic()
    lab = make_lab(lab_env, free_port(), free_port())
    page = None
    try:
        url, _ = read_until_url(lab, time.monotonic() + START_TIMEOUT_S)
        parts = urlsplit(url)
        token = parse_qs(parts.query)["token"][0]
        base = f"{parts.scheme}://{parts.netloc}"

        def api(path):
            with urlopen(f"{base}/api/{path}?token={token}", timeout=30) as response:
                return json.load(response)

        page = chromium.new_page(viewport={"width": 1280, "height": 1000})
        page.set_default_timeout(STEP_TIMEOUT_MS)
        expect.set_options(timeout=STEP_TIMEOUT_MS)
        where = walk_folder.relative_to(REPO).as_posix()
        panel = page.locator(".jp-NotebookPanel:visible")
        tabs = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab")  # the main area's
        current_tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")

        def kernel_ready():
            expect(panel.locator(".jp-Toolbar-kernelName")).to_have_text("Python 3 (ipykernel)")
            expect(panel.locator(".jp-Notebook-ExecutionIndicator")).to_have_attribute(
                "data-status", "idle"
            )

        page.goto(f"{base}/lab/tree/{where}/{WALK[0].name}?token={token}")
        kernel_ready()
        panel.locator(f'a[href*="/{WALK[1].name}"]').last.click()  # 00 keeps its kernel
        for notebook, following in zip(WALK[1:], WALK[2:]):
            expect(current_tab).to_have_text(notebook.name)
            kernel_ready()
            cells = panel.locator(".jp-Cell")
            for tag in ("setup", "check"):
                run_cell(cells.nth(cell_index(tag, notebook)))
            expect(cells.nth(cell_index("check", notebook))).to_contain_text("\u2714 passed")
            run_cell(cells.nth(cell_index("next", notebook)))
            expect(current_tab).to_have_text(following.name)
            expect(tabs.filter(has_text=notebook.name)).to_have_count(0)
            # Saved on the way out, with the check's result, and the cells git has.
            saved = json.loads((walk_folder / notebook.name).read_text(encoding="utf-8"))
            check = saved["cells"][cell_index("check", notebook)]
            assert "&#10004; passed" in json.dumps(check["outputs"]), notebook.name
            assert sources(saved) == sources(json.loads(notebook.read_text())), notebook.name
        kernel_ready()
        sessions = {
            Path(session["path"]).name: session["kernel"]["id"] for session in api("sessions")
        }
        kernels = [kernel["id"] for kernel in api("kernels")]
        print(
            f"by {WALK[-1].name}: {tabs.count()} tabs, {len(kernels)} kernels: {sorted(sessions)}"
        )
        assert sorted(sessions) == [WALK[0].name, WALK[-1].name]
        assert sorted(kernels) == sorted(sessions.values())
        expect(tabs).to_have_count(2)

        # A finished step opened again stays open: its saved Next output came from a kernel
        # that is gone, so it shows the link and does nothing.
        page.evaluate(
            "path => window.jupyterapp.commands.execute('docmanager:open', {path})",
            f"{where}/{WALK[1].name}",
        )
        expect(current_tab).to_have_text(WALK[1].name)
        kernel_ready()
        next_output = panel.locator(".jp-Cell").nth(cell_index("next", WALK[1]))
        expect(next_output.locator(f'a[href*="/{WALK[2].name}"]')).to_be_visible()
        time.sleep(3)
        expect(current_tab).to_have_text(WALK[1].name)
        expect(tabs).to_have_count(3)
    finally:
        if page is not None:
            page.screenshot(path=WALK_SCREENSHOT, full_page=True)
        stop_lab(lab)
    print(f"walk: {time.monotonic() - started:.0f} s; screenshot {WALK_SCREENSHOT}")

"""Every notebook executed top to bottom with a real kernel (this environment's Python), in a
throw-away copy of the workbook, with WORKBOOK_QUICK=1 so every training run is seconds long.

Once with the reference solution as the learner's script: no cell may fail, and the notebooks'
figures are read from that one pass (the run_distributed notebook's table, plot and estimates,
the timeline of where_does_the_time_go), so no notebook is executed twice. Once with the
starting script, the cells that read the learner's script (each step notebook's set-up and check
cells, the first of the optional run-check cells, which the first pass leaves out, and the run
notebook's cells but the ones tagged `experiment`, which run reference and demo scripts): only the
check cells may fail, with their own message. The first pass has run every other cell as it is.
"""

from __future__ import annotations

import json
import re

import nbformat
import pytest

from notebook_runs import execute, kernel_name, stop_tensorboards_under, workbook_copy  # noqa: F401
from workbook.facts import NOTEBOOKS, RUN, STEP, notebook, notebook_label, notebook_of_kind
from workbook.paths import REPO

# The last notebook of the course: the distributed run. Bonus lessons come after it.
FINAL_NOTEBOOK = notebook_of_kind(RUN).file_name
# The second pass's notebooks: the course's, which check or run the learner's script as it is
# at each step. The welcome notebook runs the reference; the bonus lessons come after the course
# and run their own scripts or the finished one (several_hosts), as the first pass did
# (check_bonus's reading of the starting script: tests/unit/test_grader_bonus.py).
READ_THE_SCRIPT = [entry for entry in NOTEBOOKS if entry.kind in (STEP, RUN)]
# Appended to the run notebook: what its plot shows, read from the figure it drew, and what
# the runs and the table say.
FIGURES_PROBE = (
    "import json\n"
    "print('PLOTTED', json.dumps([[float(x) for x in l.get_xdata()] for l in "
    "curves.lines if len(l.get_xdata()) and l.get_linestyle() != ':']))\n"
    "print('LAUNCH ENDS', json.dumps([[e / 60 for e in r.launch_ends] for r in runs]))\n"
    "print('TABLE RATIO', run_tables.table(runs, one_worker).iloc[1, -1])"
)


def errors(executed) -> list:
    """(cell index, the cell, its error output) of every cell that raised."""
    return [
        (index, cell, output)
        for index, cell in enumerate(executed.cells)
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "error"
    ]


def outputs_of(executed) -> list:
    return [
        output
        for cell in executed.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
    ]


def shown_text(outputs) -> str:
    """What the learner reads: printed text and the plain-text form of displayed values."""
    shown = "\n".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    return shown + "\n".join(o.get("data", {}).get("text/plain", "") for o in outputs)


@pytest.fixture(scope="module")
def solution_pass(tmp_path_factory, kernel_name):
    """Every notebook in turn with the solution as the learner's script (about 8 minutes on a
    quiet 2-core machine): {file name: the executed notebook}. A cell that raises fails it."""
    root = tmp_path_factory.mktemp("solution_pass")
    notebooks = workbook_copy(root, REPO / "solutions" / "fashion_mnist_solution.py")
    final = nbformat.read(notebooks / FINAL_NOTEBOOK, as_version=4)
    final.cells.append(nbformat.v4.new_code_cell(FIGURES_PROBE))
    nbformat.write(final, notebooks / FINAL_NOTEBOOK)
    executed = {}
    try:
        for entry in NOTEBOOKS:
            # The optional run-for-real cells train 9 more times: system/test_run_check.py has them.
            executed[entry.file_name] = execute(
                notebooks / entry.file_name, kernel_name, skip_tags=("run-check",)
            )  # raises on errors
    finally:
        stop_tensorboards_under(root)
    return {"notebooks": notebooks, "executed": executed}


@pytest.mark.timeout(1800)
def test_notebooks_run_with_the_solution(solution_pass):
    assert [name for name, done in solution_pass["executed"].items() if errors(done)] == []
    # The welcome notebook's baseline finished, and the last notebook found it.
    shown = json.dumps(outputs_of(solution_pass["executed"][FINAL_NOTEBOOK]))
    assert "No baseline has finished yet" not in shown
    assert list((solution_pass["notebooks"] / "logs").glob("baseline-*/horovodrun.log"))


@pytest.mark.timeout(1800)
def test_the_run_notebook_shows_one_set_of_figures(solution_pass):
    """The ratio printed is the table's, the plot's times are each run's times since its
    launch (speed's time to an accuracy), a bar per run of the time's parts, and the figures
    beside make bench's."""
    outputs = outputs_of(solution_pass["executed"][FINAL_NOTEBOOK])
    shown = shown_text(outputs)
    # The verdict first: its first lines are the comparisons, the detail folded below them.
    glance = next(
        o["data"]["text/html"]
        for o in outputs
        if "workbook-glance" in o.get("data", {}).get("text/html", "")
    )
    first = glance.split("<details>")[0]
    assert first.count("<p ") in (2, 3) and "Against 1 worker (reference)" in first
    assert "Where the time went, over" in glance.split("<details>")[1]
    printed = float(
        re.search(
            r"Speed-up, training time of the reference / yours "
            r"\(over \d+ epochs?\): ([\d.]+)",
            shown,
        ).group(1)
    )
    assert float(re.search(r"TABLE RATIO ([\d.]+)", shown).group(1)) == pytest.approx(
        printed, abs=0.006
    )
    plotted = json.loads(re.search(r"PLOTTED (\[.*\])", shown).group(1))
    launch_ends = json.loads(re.search(r"LAUNCH ENDS (\[.*\])", shown).group(1))
    assert len(plotted) == 3, "reference, your workers and the baseline"
    assert plotted == [pytest.approx(ends) for ends in launch_ends]
    assert re.search(r"A (slow-down|speed-up)|About the same speed", shown)
    assert "Images/s of the steps:" in shown  # how to read the bars, in the runs' numbers
    assert "Where the time went, over" in shown  # the parts, from the script's step_seconds
    assert "1 worker (reference) (1 worker pinned to" in shown  # each run's hardware is named
    # Estimates from the learner's runs.
    assert f"Your baseline ({notebook_label('welcome')}) took" in shown
    assert "Estimate from your 2 workers' own pace" in shown
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 2, "the bars of the time's parts and the accuracy curves"
    assert any(
        "make bench (median [min-max])" in o.get("data", {}).get("text/plain", "") for o in outputs
    )


@pytest.mark.timeout(1800)
def test_the_time_notebook_draws_the_timeline(solution_pass):
    executed = solution_pass["executed"][notebook("where_does_the_time_go").file_name]
    outputs = outputs_of(executed)
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 1, "the timeline's plot"
    shown = "\n".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "Scaling efficiency, this short run (" in shown and "- Communication: " in shown
    assert "--timeline-filename logs/" in shown  # the command shows the runner's option


def test_notebooks_with_the_starting_script_fail_only_their_checks(tmp_path, kernel_name):
    notebooks = workbook_copy(tmp_path, REPO / "solutions" / "fashion_mnist.py")
    # A step notebook's cells that read the script: its set-up's, its check's, its run-check's.
    reading = ("setup", "check", "run-check")
    try:
        for entry in READ_THE_SCRIPT:
            name, step = entry.file_name, entry.step
            executed = execute(
                notebooks / name,
                kernel_name,
                True,
                skip_tags=("experiment",),
                only_tags=reading if step else (),
            )
            if any("run-check" in cell.metadata.get("tags", []) for cell in executed.cells):
                # Every run-check cell calls run_step the same way: the first stands for all
                # (4-9 s each; their verdicts: tests/system/test_run_check.py).
                reading = ("setup", "check")
            failed = errors(executed)
            if step is None:
                assert not failed, f"{name}: {[(i, o.ename, o.evalue) for i, _, o in failed]}"
                continue
            assert len(failed) == 1, f"{name}: {[(i, o.ename, o.evalue) for i, _, o in failed]}"
            _, cell, output = failed[0]
            assert cell.metadata.nbgrader.grade_id == f"check_step_{step:02d}"
            assert output.ename == "StepNotDone"
            assert output.evalue == f"Step {step} is not done yet; see the message above."
            # One line under the verdict, no traceback (nbgrader scores the error 0).
            assert output.traceback == [output.evalue]
            shown = json.dumps(cell.outputs)
            assert "not yet" in shown  # the grader's verdict was displayed before the error
    finally:
        stop_tensorboards_under(tmp_path)

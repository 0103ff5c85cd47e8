"""The run_distributed notebook's figures (workbook.run_tables) for real: the welcome notebook (the
baseline) and the run_distributed one run headless, with the solution as the learner's script,
and its figures agree with each other."""

from __future__ import annotations

import json
import re

import pytest

from notebook_runs import kernel_name  # noqa: F401 (the notebooks' test kernel, a fixture)
from workbook.facts import notebook, notebook_label

# --- one ratio everywhere ---------------------------------------------------------------------


@pytest.mark.timeout(1500)
def test_the_run_notebook_shows_one_set_of_figures(tmp_path, kernel_name):
    """The welcome and run_distributed notebooks headless, the solution as the learner's
    script: the ratio printed is the table's, the plot's times are each run's times since its
    launch (speed's time to an accuracy), a bar per run of the time's parts, and the figures
    beside make bench's."""
    from notebook_runs import execute, stop_tensorboards_under, workbook_copy
    from workbook.paths import REPO

    notebooks = workbook_copy(tmp_path, REPO / "solutions" / "fashion_mnist_solution.py")
    final = notebook("run_distributed").file_name
    import nbformat

    cells = nbformat.read(notebooks / final, as_version=4)
    # What the plot shows, read from the figure the notebook drew, and what the runs say.
    cells.cells.append(nbformat.v4.new_code_cell(
        "import json\n"
        "print('PLOTTED', json.dumps([[float(x) for x in l.get_xdata()] for l in "
        "curves.lines if len(l.get_xdata()) and l.get_linestyle() != ':']))\n"
        "print('LAUNCH ENDS', json.dumps([[e / 60 for e in r.launch_ends] for r in runs]))\n"
        "print('TABLE RATIO', run_tables.table(runs, one_worker).iloc[1, -1])"
    ))
    nbformat.write(cells, notebooks / final)
    try:
        execute(notebooks / notebook("welcome").file_name, kernel_name)
        executed = execute(notebooks / final, kernel_name)
    finally:
        stop_tensorboards_under(tmp_path)
    outputs = [output for cell in executed.cells if cell.cell_type == "code"
               for output in cell.get("outputs", [])]
    shown = "\n".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    shown += "\n".join(o.get("data", {}).get("text/plain", "") for o in outputs)
    # The verdict first: its first lines are the comparisons, the detail folded below them.
    glance = next(o["data"]["text/html"] for o in outputs
                  if "workbook-glance" in o.get("data", {}).get("text/html", ""))
    first = glance.split("<details>")[0]
    assert first.count("<p ") in (2, 3) and "Against 1 worker (reference)" in first
    assert "Where the time went, over" in glance.split("<details>")[1]
    printed = float(re.search(r"Speed-up, training time of the reference / yours "
                              r"\(over \d+ epochs?\): ([\d.]+)", shown).group(1))
    assert float(re.search(r"TABLE RATIO ([\d.]+)", shown).group(1)) == pytest.approx(
        printed, abs=0.006)
    plotted = json.loads(re.search(r"PLOTTED (\[.*\])", shown).group(1))
    launch_ends = json.loads(re.search(r"LAUNCH ENDS (\[.*\])", shown).group(1))
    assert len(plotted) == 3, "reference, your workers and the baseline"
    assert plotted == [pytest.approx(ends) for ends in launch_ends]
    assert "No baseline has finished yet" not in shown
    assert re.search(r"A (slow-down|speed-up)|About the same speed", shown)
    assert "Images/s of the steps:" in shown  # how to read the bars, in the runs' numbers
    assert "Where the time went, over" in shown  # the parts, from the script's step_seconds
    assert "1 worker (reference) (1 worker pinned to" in shown  # each run's hardware is named
    # Estimates from the learner's runs.
    assert f"Your baseline ({notebook_label('welcome')}) took" in shown
    assert "Estimate from your 2 workers' own pace" in shown
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 2, "the bars of the time's parts and the accuracy curves"
    assert any("make bench (median [min-max])" in o.get("data", {}).get("text/plain", "")
               for o in outputs)

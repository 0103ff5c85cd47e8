"""Every notebook executed top to bottom with a real kernel (this environment's Python), in a
throw-away copy of the workbook, with WORKBOOK_QUICK=1 so every training run is seconds long:
once with the reference solution as the learner's script (no cell may fail), once with the
starting script (only the check cells may fail, with their own message). The second pass leaves
out the cells tagged `experiment`: they run reference scripts from solutions/ and demo scripts,
never the learner's, so the first pass has already run them as they are, and they are the
slowest cells.
"""

from __future__ import annotations

import json

import nbformat
import pytest

from notebook_runs import execute, kernel_name, stop_tensorboards_under, workbook_copy  # noqa: F401

from workbook.paths import REPO
from workbook.facts import NOTEBOOKS, RUN, notebook_of_kind

NOTEBOOK_NAMES = [entry.file_name for entry in NOTEBOOKS]
# The last notebook of the course: the distributed run. Bonus lessons come after it.
FINAL_NOTEBOOK = notebook_of_kind(RUN).file_name


def errors(notebook) -> list:
    """(cell index, the cell, its error output) of every cell that raised."""
    return [
        (index, cell, output)
        for index, cell in enumerate(notebook.cells)
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "error"
    ]


@pytest.mark.timeout(1800)  # every notebook in turn: about 8 minutes on a quiet 2-core machine
def test_notebooks_run_with_the_solution(tmp_path, kernel_name):
    notebooks = workbook_copy(tmp_path, REPO / "solutions" / "fashion_mnist_solution.py")
    try:
        for name in NOTEBOOK_NAMES:
            # The optional run-for-real cells train 9 more times: system/test_run_check.py has them.
            execute(notebooks / name, kernel_name, skip_tag="run-check")  # raises on an error
    finally:
        stop_tensorboards_under(tmp_path)
    # The welcome notebook's baseline finished, and the last notebook found it.
    final = nbformat.read(notebooks / FINAL_NOTEBOOK, as_version=4)
    shown = json.dumps([cell.get("outputs", []) for cell in final.cells])
    assert "No baseline has finished yet" not in shown
    assert list((notebooks / "logs").glob("baseline-*/horovodrun.log"))


def test_notebooks_with_the_starting_script_fail_only_their_checks(tmp_path, kernel_name):
    notebooks = workbook_copy(tmp_path, REPO / "solutions" / "fashion_mnist.py")
    try:
        for entry in NOTEBOOKS[1:]:  # the welcome notebook does not read the script
            name, step = entry.file_name, entry.step
            notebook = execute(notebooks / name, kernel_name, True, skip_tag="experiment")
            failed = errors(notebook)
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



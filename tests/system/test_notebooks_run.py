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
import shutil
import sys
import time
from pathlib import Path

import nbformat
import pytest

from lab_helpers import free_port

from authoring import notebooks as builder
from workbook.paths import NOTEBOOKS_DIR, REPO
from authoring.chain import STEP_TITLES
from workbook.facts import (
    BONUS, LESSON, NOTEBOOKS, RUN, SAFE_PROCESS_ENV, STEP, Notebook, notebook_of_kind,
)
from workbook.tensorboard import PORT_VARIABLE

NOTEBOOK_NAMES = [entry.file_name for entry in NOTEBOOKS]
# The last notebook of the course: the distributed run. Bonus lessons come after it.
FINAL_NOTEBOOK = notebook_of_kind(RUN).file_name


# --- fast: the committed notebooks are what the builder makes ---------------------------------


def write_source(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


# A manifest of its own for the builder's tests: an intro, steps 1, 2 and 4, a run, a bonus.
INTRO, FIRST, SECOND, FOURTH, FINAL, EXTRA = (
    Notebook(0, "intro", LESSON), Notebook(1, "first", STEP, 1, STEP_TITLES[1]),
    Notebook(2, "second", STEP, 2, STEP_TITLES[2]), Notebook(3, "fourth", STEP, 4, STEP_TITLES[4]),
    Notebook(4, "final", RUN), Notebook(5, "extra", BONUS),
)


MANIFEST = (INTRO, FIRST, SECOND, FOURTH, FINAL, EXTRA)


def build(tmp_path: Path, entry: Notebook, text: str):
    write_source(tmp_path, entry.source_name, text)
    return builder.build_notebook(entry, MANIFEST, source_dir=tmp_path)


# Small enough to copy; data/ is linked, notebooks/ gets its .ipynb files and a learner's script.
COPIED = ("workbook", "grader", "solutions")


def workbook_copy(root: Path, learner_script: Path) -> Path:
    """A throw-away copy of the workbook in root; returns its notebooks folder."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in COPIED:
        shutil.copytree(REPO / name, root / name, ignore=ignore)
    (root / "data").mkdir()
    for prepared in ("sample", "fashion_mnist"):
        if (REPO / "data" / prepared).is_dir():
            (root / "data" / prepared).symlink_to(REPO / "data" / prepared)
    notebooks = root / "notebooks"
    notebooks.mkdir()
    for name in NOTEBOOK_NAMES:
        shutil.copyfile(NOTEBOOKS_DIR / name, notebooks / name)
    shutil.copyfile(learner_script, notebooks / "fashion_mnist.py")
    return notebooks


@pytest.fixture(scope="module")
def kernel_name(tmp_path_factory):
    """A kernel that runs this Python with WORKBOOK_QUICK=1, found through JUPYTER_PATH."""
    jupyter = tmp_path_factory.mktemp("jupyter")
    spec = jupyter / "kernels" / "workbook-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "workbook test",
                "language": "python",
                # A TensorBoard of its own, so that it never meets the one `make lab` runs;
                # and what `make lab` gives its kernels, so hvd.init() never waits on hwloc.
                "env": {"WORKBOOK_QUICK": "1", "PYTHONPATH": "",
                        PORT_VARIABLE: str(free_port()), **SAFE_PROCESS_ENV},
            }
        )
    )
    patch = pytest.MonkeyPatch()
    patch.setenv("JUPYTER_PATH", str(jupyter))
    yield "workbook-test"
    patch.undo()


def stop_tensorboards_under(root: Path) -> None:
    """TensorBoard outlives the kernel that started it (on purpose): stop the tests' ones."""
    import psutil

    for process in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if "tensorboard" in cmdline and str(root) in cmdline:
            try:
                process.terminate()
                process.wait(10)
            except psutil.Error:
                pass


def execute(path: Path, kernel: str, allow_errors: bool = False, skip_tag: str | None = None):
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    if skip_tag:
        notebook.cells = [c for c in notebook.cells if skip_tag not in c.metadata.get("tags", [])]
    client = NotebookClient(
        notebook,
        kernel_name=kernel,
        timeout=600,
        allow_errors=allow_errors,
        resources={"metadata": {"path": str(path.parent)}},
    )
    started = time.monotonic()
    client.execute()
    nbformat.write(notebook, path)  # executed copies stay in the temp folder, for debugging
    print(f"{path.name}: {time.monotonic() - started:.0f} s")
    return notebook


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
        for name in NOTEBOOK_NAMES[1:]:  # the welcome notebook does not read the script
            notebook = execute(notebooks / name, kernel_name, True, skip_tag="experiment")
            step = builder.step_of(Path(name).stem)
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


def git(repo, *args):
    import subprocess

    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout

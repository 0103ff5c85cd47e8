"""Notebooks executed for real, as a learner's JupyterLab would: a throw-away copy of the
workbook, a kernel of this Python with WORKBOOK_QUICK=1 (the `kernel_name` fixture), and the
TensorBoards the notebooks start stopped afterwards. Used by tests/system/test_notebooks_run.py.
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
from workbook.facts import NOTEBOOKS, SAFE_PROCESS_ENV
from workbook.paths import NOTEBOOKS_DIR, REPO
from workbook.tensorboard import PORT_VARIABLE

NOTEBOOK_NAMES = [entry.file_name for entry in NOTEBOOKS]

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
                "env": {
                    "WORKBOOK_QUICK": "1",
                    "PYTHONPATH": "",
                    PORT_VARIABLE: str(free_port()),
                    **SAFE_PROCESS_ENV,
                },
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


def execute(
    path: Path,
    kernel: str,
    allow_errors: bool = False,
    skip_tags: tuple = (),
    only_tags: tuple = (),
):
    """The notebook at `path` executed, without its code cells tagged with one of `skip_tags`
    (and, given `only_tags`, with only the code cells tagged with one of those)."""
    from nbclient import NotebookClient

    def kept(cell) -> bool:
        tags = set(cell.metadata.get("tags", []))
        return cell.cell_type != "code" or (
            not tags & set(skip_tags) and (not only_tags or bool(tags & set(only_tags)))
        )

    notebook = nbformat.read(path, as_version=4)
    notebook.cells = [cell for cell in notebook.cells if kept(cell)]
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

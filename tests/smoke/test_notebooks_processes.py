"""The notebooks with short processes: the committed notebooks are up to date (pandoc), the Next
cell names the kernel that ran it (a real kernel), and git sees a notebook the learner only ran
as unmodified (nbstripout as a git filter, the post-save hook waiting for a busy index).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import nbformat

from authoring import notebooks as builder
from workbook.facts import NOTEBOOKS, RUN, notebook_of_kind
from workbook.paths import NOTEBOOKS_DIR, REPO

BUILD_COMMAND = "python -m authoring build"
NOTEBOOK_NAMES = [entry.file_name for entry in NOTEBOOKS]
# The last notebook of the course: the distributed run. Bonus lessons come after it.
FINAL_NOTEBOOK = notebook_of_kind(RUN).file_name


# --- fast: the committed notebooks are what the builder makes ---------------------------------


def test_committed_notebooks_are_up_to_date():
    stale = builder.stale_notebooks()
    assert not stale, f"stale notebooks {stale}: regenerate them with `{BUILD_COMMAND}`"
    committed = sorted(path.name for path in NOTEBOOKS_DIR.glob("*.ipynb"))
    assert committed == NOTEBOOK_NAMES, (
        f"notebooks without a source in notebooks/src: {sorted(set(committed) - set(NOTEBOOK_NAMES))}"
    )


def test_next_cell_names_the_kernel_that_ran_it(tmp_path):
    """Its script acts only in the kernel that ran it: JupyterLab's kernels are known by the
    id in their connection file's name (kernel-<id>.json), as MultiKernelManager names it."""
    from jupyter_client.multikernelmanager import MultiKernelManager
    from nbclient import NotebookClient

    code = builder.NEXT_CELL.format(notebook='"02_pin_gpu.ipynb"', title='"Step 2"')
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    kernels = MultiKernelManager(connection_dir=str(tmp_path))
    kernel_id = kernels.start_kernel(kernel_name="python3")
    try:
        NotebookClient(notebook, km=kernels.get_kernel(kernel_id), timeout=120).execute()
    finally:
        kernels.shutdown_all(now=True)
    link, script = (output.data for output in notebook.cells[0].outputs)
    assert '<a href="02_pin_gpu.ipynb">Step 2</a>' in link["text/html"]
    assert f'kernel.id !== "{kernel_id}"' in script["application/javascript"]


# A manifest of its own for the builder's tests: an intro, steps 1, 2 and 4, a run, a bonus.


# Small enough to copy; data/ is linked, notebooks/ gets its .ipynb files and a learner's script.


def ran_and_saved(notebook):
    """The notebook as JupyterLab saves it after Run All: outputs, counts, the kernel's metadata."""
    notebook.metadata.language_info = {
        "codemirror_mode": {"name": "ipython", "version": 3},
        "file_extension": ".py",
        "mimetype": "text/x-python",
        "name": "python",
        "nbconvert_exporter": "python",
        "pygments_lexer": "ipython3",
        "version": "3.11.9",
    }
    notebook.metadata.widgets = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    for count, cell in enumerate(c for c in notebook.cells if c.cell_type == "code"):
        cell.execution_count = count + 1
        cell.metadata.execution = {"iopub.status.busy": "2025-01-01T00:00:00.000000Z"}
        cell.metadata.scrolled = True
        cell.metadata.jupyter = {"outputs_hidden": False}
        cell.outputs = [
            nbformat.v4.new_output("stream", name="stdout", text="Speed-up: 1.53x\n"),
            nbformat.v4.new_output(
                "display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}
            ),
            nbformat.v4.new_output(
                "execute_result", data={"text/html": "<table></table>"}, execution_count=count + 1
            ),
        ]
    return notebook


def git(repo, *args):
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


def test_a_learners_runs_leave_the_notebooks_unmodified_for_git(tmp_path):
    from workbook.lab import forget_outputs, strip_outputs_in_git

    # An upstream workbook and the learner's clone of it, set up by make lab.
    upstream, clone = tmp_path / "upstream", tmp_path / "learner"
    git(tmp_path, "clone", "-q", "--no-hardlinks", str(REPO), str(upstream))
    git(tmp_path, "clone", "-q", str(upstream), str(clone))
    time.sleep(1.1)  # make lab comes after the clone (strip_outputs_in_git refreshes the index)
    assert "kept out of git" in strip_outputs_in_git(clone)
    assert "kept out of git" in strip_outputs_in_git(clone)  # a second make lab: the same
    # The learner's first git status filters no notebook (it took 20-30 s when it filtered all).
    traced = subprocess.run(
        ["git", "-C", str(clone), "status", "--porcelain"],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_TRACE": "1"},
    )
    assert traced.stdout == "" and "nbstripout" not in traced.stderr
    assert "-m nbstripout --keep-id" in git(clone, "config", "--local", "filter.nbstripout.clean")

    # Run All and save (the notebooks whose outputs stay longest); JupyterLab's post-save hook
    # runs forget_outputs. Each notebook is the builder's, so one stands for all (nbstripout
    # gives back every committed notebook unchanged: test_stripping_gives_back_the_notebooks).
    for path in [clone / "notebooks" / name for name in (NOTEBOOK_NAMES[0], FINAL_NOTEBOOK)]:
        nbformat.write(ran_and_saved(nbformat.read(path, as_version=4)), path)
        assert forget_outputs(path), path.name
    assert git(clone, "status", "--porcelain") == ""
    assert git(clone, "diff", "--cached") == ""  # nothing staged either
    saved = nbformat.read(clone / "notebooks" / FINAL_NOTEBOOK, as_version=4)
    assert any(cell.get("outputs") for cell in saved.cells)  # the learner still sees them

    # A change of the learner's own (not an output) is still theirs to see.
    edited = clone / "notebooks" / NOTEBOOK_NAMES[1]
    notebook = nbformat.read(edited, as_version=4)
    notebook.cells[-1].source += "\n# my note"
    nbformat.write(notebook, edited)
    assert not forget_outputs(edited)
    assert git(clone, "status", "--porcelain").split() == ["M", f"notebooks/{NOTEBOOK_NAMES[1]}"]

    # The workbook is updated upstream (the final notebook): the learner's pull just works.
    final = upstream / "notebooks" / FINAL_NOTEBOOK
    final.write_text(final.read_text().replace("Run your script", "Run the script", 1))
    git(upstream, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "update")
    git(clone, "-c", "user.name=t", "-c", "user.email=t@t", "pull", "-q", "--no-rebase")
    assert "Run the script" in (clone / "notebooks" / FINAL_NOTEBOOK).read_text()
    assert git(clone, "status", "--porcelain").split() == ["M", f"notebooks/{NOTEBOOK_NAMES[1]}"]


def test_stripping_gives_back_the_notebooks(tmp_path):
    """make lab's filter (nbstripout with its options) leaves every committed notebook as it is,
    with JupyterLab's outputs and metadata or without them."""
    from workbook.lab import STRIPPED_KEYS

    files = {}
    for name in NOTEBOOK_NAMES:
        committed = (NOTEBOOKS_DIR / name).read_text(encoding="utf-8")
        files[tmp_path / f"as-built-{name}"] = committed
        ran = ran_and_saved(nbformat.reads(committed, as_version=4))
        nbformat.write(ran, tmp_path / f"ran-{name}")
        files[tmp_path / f"ran-{name}"] = committed
        (tmp_path / f"as-built-{name}").write_text(committed, encoding="utf-8")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "nbstripout",
            "--keep-id",
            "--extra-keys",
            STRIPPED_KEYS,
            *map(str, files),
        ],
        check=True,
    )
    for path, committed in files.items():
        assert path.read_text(encoding="utf-8") == committed, path.name
    # The post-save hook's own stripping, in its process, gives the filter's bytes.
    from workbook.lab import stripped_text

    for name in NOTEBOOK_NAMES:
        committed = (NOTEBOOKS_DIR / name).read_text(encoding="utf-8")
        ran = nbformat.writes(ran_and_saved(nbformat.reads(committed, as_version=4)))
        assert stripped_text(ran) == committed, name


def test_the_post_save_hook_waits_for_a_busy_index(tmp_path):
    """Seen in a walk: the hook's `git add` met another git command's index.lock and the
    notebook stayed listed as modified until the next save. It tries again."""
    import threading

    from workbook.lab import forget_outputs, strip_outputs_in_git

    clone = tmp_path / "learner"
    git(tmp_path, "clone", "-q", "--no-hardlinks", str(REPO), str(clone))
    time.sleep(1.1)  # make lab comes after the clone (strip_outputs_in_git refreshes the index)
    strip_outputs_in_git(clone)
    path = clone / "notebooks" / NOTEBOOK_NAMES[0]
    nbformat.write(ran_and_saved(nbformat.read(path, as_version=4)), path)
    lock = clone / ".git" / "index.lock"
    lock.write_text("")
    threading.Timer(1.5, lock.unlink).start()  # another command, done in 1.5 s
    assert forget_outputs(path)
    assert git(clone, "status", "--porcelain") == ""


def test_the_post_save_hook_starts_no_interpreter(tmp_path):
    """Issue 39 (4): the hook ran nbstripout twice through git, and `git status` listed a
    notebook the learner only ran as modified for 5-45 s on a busy machine. It strips in its
    own process now: with git's filter made to fail loudly, a ran notebook is still forgotten,
    and a notebook the learner edited is still theirs (the filter decides, and fails here)."""
    from workbook.lab import forget_outputs, strip_outputs_in_git

    clone = tmp_path / "learner"
    git(tmp_path, "clone", "-q", "--no-hardlinks", str(REPO), str(clone))
    time.sleep(1.1)
    strip_outputs_in_git(clone)
    real_filter = git(clone, "config", "--local", "filter.nbstripout.clean").strip()
    git(clone, "config", "--local", "filter.nbstripout.clean", "echo the filter ran >&2; false")
    path = clone / "notebooks" / NOTEBOOK_NAMES[1]
    nbformat.write(ran_and_saved(nbformat.read(path, as_version=4)), path)
    assert forget_outputs(path)  # with the filter failing: stripped here
    edited = clone / "notebooks" / NOTEBOOK_NAMES[2]
    notebook = nbformat.read(edited, as_version=4)
    notebook.cells[0].source += "\n# my note"
    nbformat.write(notebook, edited)
    assert not forget_outputs(edited)  # not git's: the filter decides, and fails here
    # git status may filter an entry it wrote within the second (git's "racily clean" ones):
    # with the filter back, the ran notebook is unchanged and the edited one the learner's.
    git(clone, "config", "--local", "filter.nbstripout.clean", real_filter)
    assert git(clone, "status", "--porcelain").split() == ["M", f"notebooks/{NOTEBOOK_NAMES[2]}"]
    assert git(clone, "diff", "--cached") == ""  # nothing of the learner's was staged

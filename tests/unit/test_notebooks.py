"""The notebooks: built from notebooks/src, graded where they should be, and they run.

Here, in this process: the committed .ipynb against the builder and against the chain of
scripts. With processes (pandoc, a kernel, git, nbstripout):
tests/smoke/test_notebooks_processes.py; every notebook executed top to bottom:
tests/system/test_notebooks_run.py.
"""

from __future__ import annotations

import ast
import difflib
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from authoring import notebooks as builder
from authoring.chain import BONUSES, LAST_STEP, SOURCE, output_name, render
from workbook.facts import (
    BONUS,
    LESSON,
    NOTEBOOKS,
    RUN,
    STEP,
    STEP_TITLES,
    Notebook,
    notebook_of_kind,
)
from workbook.paths import NOTEBOOKS_DIR, REPO

NOTEBOOK_NAMES = [entry.file_name for entry in NOTEBOOKS]
STEP_NOTEBOOKS = {entry.step: entry.file_name for entry in NOTEBOOKS if entry.kind == STEP}
# The last notebook of the course: the distributed run. Bonus lessons come after it.
FINAL_NOTEBOOK = notebook_of_kind(RUN).file_name
NBGRADER_KEYS = {"grade", "grade_id", "locked", "points", "schema_version", "solution", "task"}


def read_notebook(name: str):
    return nbformat.read(NOTEBOOKS_DIR / name, as_version=4)


def chain_scripts() -> list:
    text = SOURCE.read_text(encoding="utf-8")
    return [render(text, step) for step in range(LAST_STEP + 1)]


def markdown_of(notebook) -> str:
    return "\n\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")


def graded_cells(notebook) -> list:
    return [cell for cell in notebook.cells if "nbgrader" in cell.metadata]


# --- fast: the committed notebooks are what the builder makes ---------------------------------


def test_there_is_a_notebook_for_every_step_plus_welcome_and_final():
    assert sorted(STEP_NOTEBOOKS) == list(range(1, LAST_STEP + 1))
    assert NOTEBOOK_NAMES[0] == notebook_of_kind(LESSON).file_name
    assert NOTEBOOK_NAMES.index(FINAL_NOTEBOOK) == LAST_STEP + 1


def test_every_source_is_a_notebook_of_the_manifest():
    assert [path.name for path in builder.source_files()] == sorted(
        entry.source_name for entry in NOTEBOOKS
    )


def test_build_is_deterministic(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    assert len(builder.build(output_dir=first)) == len(NOTEBOOKS)
    assert len(builder.build(output_dir=second)) == len(NOTEBOOKS)
    for name in NOTEBOOK_NAMES:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    assert builder.build(output_dir=first) == []  # nothing changed: nothing written
    assert builder.stale_notebooks(output_dir=first) == []


def test_check_lists_a_stale_notebook(tmp_path):
    builder.build(output_dir=tmp_path)
    edited = tmp_path / NOTEBOOK_NAMES[3]
    edited.write_text(edited.read_text().replace("Step", "Stage", 1))
    (tmp_path / NOTEBOOK_NAMES[5]).unlink()
    # A notebook a new entry of the manifest renumbered leaves its old file behind.
    shutil.copy(tmp_path / NOTEBOOK_NAMES[6], tmp_path / "99_renumbered.ipynb")
    (tmp_path / "99_yours.ipynb").write_text("{}")  # not made by the builder: left alone
    stale = [NOTEBOOK_NAMES[3], NOTEBOOK_NAMES[5], "99_renumbered.ipynb"]
    assert builder.stale_notebooks(output_dir=tmp_path) == stale
    assert builder.build(output_dir=tmp_path) == [*stale[:2], "99_renumbered.ipynb (removed)"]
    assert builder.stale_notebooks(output_dir=tmp_path) == []
    assert (tmp_path / "99_yours.ipynb").is_file()


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_notebook_is_clean_and_valid(name):
    notebook = read_notebook(name)
    nbformat.validate(notebook)
    assert notebook.metadata.kernelspec.name == "python3"
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
        assert "{{" not in cell.source, f"a placeholder was left unfilled in {name}"
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code[0].source == builder.SETUP_CELL, "the first code cell must be the set-up cell"
    assert len({cell.id for cell in notebook.cells}) == len(notebook.cells)


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_links_to_notebooks_point_to_notebooks(name):
    for target in re.findall(r"\]\(([^)]+\.ipynb)\)", markdown_of(read_notebook(name))):
        assert (NOTEBOOKS_DIR / target).is_file(), f"{name} links to a missing {target}"


def stale_project_imports(code: str) -> list[str]:
    """`from <project module> import name` where the name does not exist there, or where that
    module only imports it from another (a package's __init__ and __all__ are its API): the
    learner's cell should name the name's home, which outlives a module's own imports."""
    import importlib.util

    source = "\n".join(
        line
        for line in code.splitlines()  # IPython's own syntax left out
        if not line.strip().startswith(("%", "!", "?")) and not line.endswith("?")
    )
    stale = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom) or not node.module:
            continue
        if node.module.split(".")[0] not in ("workbook", "grader", "instructor"):
            continue
        module = importlib.import_module(node.module)
        package = Path(module.__file__).name == "__init__.py"
        borrowed = set()
        if not package:
            path = Path(module.__file__)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            borrowed = {
                alias.asname or alias.name.split(".")[0]
                for statement in tree.body
                if isinstance(statement, (ast.Import, ast.ImportFrom))
                for alias in statement.names
            } - set(getattr(module, "__all__", ()))
        for alias in node.names:
            if package and importlib.util.find_spec(f"{node.module}.{alias.name}"):
                continue  # a module of the package
            if not hasattr(module, alias.name) or alias.name in borrowed:
                stale.append(f"from {node.module} import {alias.name}")
    return stale


def test_stale_project_imports_are_found():
    # hosts_of_hostfile's home is workbook.runner.hosts; command.py only imports it.
    assert stale_project_imports(
        "%load_ext workbook.runner\n"
        "from workbook.runner.command import plan_run, hosts_of_hostfile\n"
        "from workbook.runner import horovodrun\nfrom workbook import fashion_data\n"
        "from workbook.paths import nowhere\n?plan_run\n"
    ) == [
        "from workbook.runner.command import hosts_of_hostfile",
        "from workbook.paths import nowhere",
    ]


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_notebooks_import_names_from_their_home(name):
    for cell in read_notebook(name).cells:
        if cell.cell_type == "code":
            assert not stale_project_imports(cell.source), f"{name}: {cell.source}"


@pytest.mark.parametrize("step", sorted(STEP_NOTEBOOKS))
def test_step_notebook_has_one_graded_check(step):
    notebook = read_notebook(STEP_NOTEBOOKS[step])
    graded = graded_cells(notebook)
    assert len(graded) == 1, f"step {step}: {len(graded)} graded cells"
    cell = graded[0]
    assert cell.cell_type == "code"
    assert cell.metadata.nbgrader == {
        "grade": True,
        "grade_id": f"check_step_{step:02d}",
        "locked": True,
        "points": 1,
        "schema_version": 3,
        "solution": False,
        "task": False,
    }
    assert set(cell.metadata.nbgrader) == NBGRADER_KEYS
    assert "check" in cell.metadata.tags
    assert cell.source == (
        "from grader import check_step\n"
        "from grader.report import StepNotDone\n\n"
        f"result = check_step({step}, run_if_unsure=True)  # a run decides what the reading "
        "cannot\n"
        "display(result)\n"
        "if not result.passed:\n"
        "    raise StepNotDone(result)"
    )


@pytest.mark.parametrize("step", sorted(STEP_NOTEBOOKS))
def test_step_notebook_ends_with_its_next_cell(step):
    """The way on is a cell that closes this notebook and its kernel, not a link (a new tab)."""
    notebook = read_notebook(STEP_NOTEBOOKS[step])
    *_, before, cell = notebook.cells
    following = NOTEBOOK_NAMES[NOTEBOOK_NAMES.index(STEP_NOTEBOOKS[step]) + 1]
    assert cell.cell_type == "code" and cell.metadata.tags == ["next"] and cell.id == "next"
    title = builder.notebook_title(NOTEBOOKS[NOTEBOOK_NAMES.index(following)])
    assert cell.source.endswith(f'open_next("{following}", "{title}")')
    assert before.cell_type == "markdown" and "Run the cell below" in before.source
    assert following not in before.source.split("**Next:")[-1]


@pytest.mark.parametrize("name", [n for n in NOTEBOOK_NAMES if n not in STEP_NOTEBOOKS.values()])
def test_other_notebooks_have_no_graded_cells(name):
    assert graded_cells(read_notebook(name)) == []


@pytest.mark.parametrize("step", sorted(STEP_NOTEBOOKS))
def test_reference_diff_is_the_chains_diff(step):
    scripts = chain_scripts()
    expected = "".join(
        difflib.unified_diff(
            scripts[step - 1].splitlines(keepends=True),
            scripts[step].splitlines(keepends=True),
            fromfile=f"solutions/{output_name(step - 1)}",
            tofile=f"solutions/{output_name(step)}",
        )
    )
    text = markdown_of(read_notebook(STEP_NOTEBOOKS[step]))
    blocks = re.findall(
        r"<details><summary>Reference solution</summary>.*?(`{3,})diff\n(.*?)\n\1\n.*?</details>",
        text,
        re.S,
    )
    assert len(blocks) == 1, f"step {step}: expected one folded reference solution"
    assert blocks[0][1] + "\n" == expected


@pytest.mark.parametrize("step", sorted(STEP_NOTEBOOKS))
def test_title_and_todos_come_from_the_chain(step):
    notebook = read_notebook(STEP_NOTEBOOKS[step])
    assert notebook.cells[0].source.startswith(f"# Step {step}: {STEP_TITLES[step]}\n")
    text = markdown_of(notebook)
    todos = [
        line.strip()
        for line in chain_scripts()[0].splitlines()
        if re.search(rf"# TODO: Step {step}\b", line)
    ]
    assert todos, f"the starting script has no TODO for step {step}"
    for todo in todos:
        assert todo in text
    assert "[fashion_mnist.py](fashion_mnist.py)" in text


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_experiment_cells_leave_the_learners_script_alone(name):
    """The starting-script pass skips them, which is only right if they never run it."""
    for cell in read_notebook(name).cells:
        if "experiment" in cell.metadata.get("tags", []):
            assert not re.search(r"(?<![\w/])fashion_mnist\.py", cell.source), cell.source


def test_add_a_model_gives_the_builder_signature_of_its_reference():
    from grader.bonus import alexnet

    reference = (REPO / "solutions" / BONUSES["alexnet"]).read_text(encoding="utf-8")
    signature = re.search(r"def alexnet\(.*\):", reference).group(0)
    notebook = next(name for name in NOTEBOOK_NAMES if name.endswith("_add_a_model.ipynb"))
    assert signature in markdown_of(read_notebook(notebook))
    assert signature in alexnet.HINT


def write_source(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


CHECK = "```{code-cell} ipython3\n:tags: [check]\n```\n"


# A manifest of its own for the builder's tests: an intro, steps 1, 2 and 4, a run, a bonus.
INTRO, FIRST, SECOND, FOURTH, FINAL, EXTRA = (
    Notebook(0, "intro", LESSON),
    Notebook(1, "first", STEP, 1, STEP_TITLES[1]),
    Notebook(2, "second", STEP, 2, STEP_TITLES[2]),
    Notebook(3, "fourth", STEP, 4, STEP_TITLES[4]),
    Notebook(4, "final", RUN),
    Notebook(5, "extra", BONUS),
)


MANIFEST = (INTRO, FIRST, SECOND, FOURTH, FINAL, EXTRA)


def build(tmp_path: Path, entry: Notebook, text: str):
    write_source(tmp_path, entry.source_name, text)
    return builder.build_notebook(entry, MANIFEST, source_dir=tmp_path)


def test_builder_rejects_an_unknown_placeholder(tmp_path):
    with pytest.raises(builder.NotebookSourceError, match=r"first\.md.*\{\{ tod \}\}"):
        build(tmp_path, FIRST, "# Step {{ step }}\n\n{{ tod }}\n\n" + CHECK)


def test_builder_rejects_a_step_placeholder_outside_a_step(tmp_path):
    with pytest.raises(builder.NotebookSourceError, match="needs a step notebook"):
        build(tmp_path, INTRO, "# Intro\n\n{{ reference_diff }}\n")


def test_builder_rejects_a_placeholder_in_code(tmp_path):
    text = "# Intro\n\n```{code-cell} ipython3\nprint('{{ mystery }}')\n```\n"
    with pytest.raises(builder.NotebookSourceError, match="mystery"):
        build(tmp_path, INTRO, text)


def test_builder_wants_exactly_one_empty_check_cell(tmp_path):
    with pytest.raises(builder.NotebookSourceError, match="exactly one check cell"):
        build(tmp_path, SECOND, "# Step {{ step }}\n")
    filled = "# Step\n\n```{code-cell} ipython3\n:tags: [check]\n1 + 1\n```\n"
    with pytest.raises(builder.NotebookSourceError, match="leave the check cell empty"):
        build(tmp_path, FOURTH, filled)


def test_builder_wants_next_at_the_end_of_its_cell_in_a_step_notebook(tmp_path):
    text = "# Step\n\n" + CHECK + "\n{{ next }}\n\nMore text.\n"
    write_source(tmp_path, SECOND.source_name, "# Step\n\n" + CHECK)
    with pytest.raises(builder.NotebookSourceError, match=r"first\.md.*must end its cell"):
        build(tmp_path, FIRST, text)
    notebook = build(tmp_path, FIRST, text.replace("\nMore text.\n", ""))
    assert notebook.cells[-1].metadata.tags == ["next"]
    assert 'open_next("02_second.ipynb", "Step 2: ' in notebook.cells[-1].source


def test_builder_fills_placeholders(tmp_path):
    text = "# Step {{ step }}: {{ step_title }}\n\n{{ todo }}\n\n{{ reference_diff }}\n\n" + CHECK
    notebook = build(tmp_path, FOURTH, text)
    assert notebook.cells[0].source.startswith(f"# Step 4: {STEP_TITLES[4]}")
    assert "# TODO: Step 4 -" in notebook.cells[0].source
    assert "+    opt = hvd.DistributedOptimizer(opt)" in notebook.cells[0].source
    assert notebook.metadata.workbook.generated_from == "src/fourth.md"


def test_builder_names_other_notebooks_from_the_manifest(tmp_path):
    """A notebook's number is its place in the manifest, not a step's: step 4 is notebook 03."""
    text = (
        "Before {{ number fourth }}, after {{ number final }} ([run]({{ file final }})); "
        "{{ link extra }}; {{ steps_in_words }} steps.\n"
    )
    notebook = build(tmp_path, INTRO, "# Intro\n\n" + text)
    assert notebook.cells[0].source.endswith(
        "Before 03, after 04 ([run](04_final.ipynb)); [05_extra](05_extra.ipynb); "
        f"{builder.in_words(LAST_STEP)} steps."
    )
    with pytest.raises(builder.NotebookSourceError, match=r"intro\.md.*number nowhere.*manifest"):
        build(tmp_path, INTRO, "# Intro\n\nnotebook {{ number nowhere }}\n")


def test_builder_wants_every_source_in_the_manifest(tmp_path):
    for entry in MANIFEST:
        write_source(tmp_path, entry.source_name, "# Notebook\n")
    write_source(tmp_path, "forgotten.md", "# Forgotten\n")
    with pytest.raises(builder.NotebookSourceError, match="forgotten.md.*no entry of the manifest"):
        builder.expected_notebooks(tmp_path, notebooks=MANIFEST)


# Small enough to copy; data/ is linked, notebooks/ gets its .ipynb files and a learner's script.

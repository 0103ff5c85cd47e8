"""The workbook's notebooks, generated from text sources.

Each notebook of the manifest, workbook.facts.NOTEBOOKS, has a source `notebooks/src/SLUG.md`
(MyST markdown: prose, with code in ```{code-cell} blocks) and becomes `notebooks/NN_SLUG.ipynb`,
NN its place in the manifest, without outputs and byte-for-byte the same for the same inputs:

    python -m authoring.notebooks build    # write the notebooks that changed, remove orphans
    python -m authoring.notebooks check    # exit 1 and list them if any is stale

What depends on the chain of scripts or on the manifest is derived here at build time, never
copied into a source. A source says where it goes with a placeholder:

    {{ step }}            the step number N of a step notebook (from the manifest)
    {{ step_title }}      STEP_TITLES[N]
    {{ todo }}            the `# TODO: Step N` comments of the starting script, as a code block
    {{ reference_diff }}  the change of step N (a unified diff of the reference scripts after
                          steps N-1 and N), in a collapsed <details> block
    {{ previous_file }}   the reference script before step N (fashion_mnist_after_step_04.py)
    {{ step_file }}       the reference script after step N
    {{ sample_args }}     the data and model options of the quick runs (a small WideResNet on
                          part of the committed sample), without --epochs
    {{ quick_args }}      the same, plus one short epoch: a training run of seconds
    {{ run_settings }}    code that sets QUICK and RUN_ARGS: the options of the full-size runs
                          (the baseline, the final run), quick when WORKBOOK_QUICK=1
    {{ steps_table }}     the steps, each linked to its notebook
    {{ steps_in_words }}  how many steps there are, in words ("twelve"; {{ Steps_in_words }}:
                          "Twelve")
    {{ number SLUG }}     the number of the notebook SLUG of the manifest, as in its file name
                          ("notebook {{ number run_distributed }}": "notebook 13")
    {{ file SLUG }}       its file name, for a link: 13_run_distributed.ipynb
    {{ link SLUG }}       a link named after its file: [13_run_distributed](13_run_distributed.ipynb)
    {{ next }}            the way to the next notebook: in a step notebook, the last thing in its
                          Markdown cell, followed by a generated "Next" cell that opens the next
                          notebook in the same tab and shuts down this one's kernel
                          (workbook/navigation.py); elsewhere (00 keeps its kernel for the
                          baseline) a link
    {{ NAME_reference_diff }}  for each bonus NAME of the chain (`alexnet_reference_diff`): the
                          change from the solution to that bonus's reference, collapsed

An unknown placeholder or SLUG, or one that needs a step in a notebook that is not a step, is an
error naming the source file; so is a source that is in no entry of the manifest. Three cells are made by the builder from one template each:

- the set-up cell, the first code cell of every notebook, which lets it import `grader` and
  `workbook` from the workbook's top folder;
- the "check my step" cell: the source marks it with an empty code cell tagged `check`; the
  builder writes the check, its nbgrader metadata (one point, locked) and its id;
- the "Next" cell of a step notebook, after its `{{ next }}`.
"""

from __future__ import annotations

import difflib
import json
import re
import sys
from pathlib import Path

from authoring.chain import SOURCE, output_name, render, render_bonus
from authoring.generated import build_or_check_main, stale_names, write_changed
from workbook.facts import BONUSES, LAST_STEP, NOTEBOOKS, STEP_TITLES, Notebook
from workbook.paths import NOTEBOOKS_DIR

SOURCE_DIR = NOTEBOOKS_DIR / "src"
OUTPUT_DIR = NOTEBOOKS_DIR
SOURCE_FORMAT = "md:myst"

# A small model on part of the committed sample (paths from notebooks/): the experiments of the
# step notebooks add their own --epochs and --steps-per-epoch.
SAMPLE_ARGS = "--data-dir ../data/sample --train-images 1024 --test-images 256 --depth 10 --width 1"
# One short epoch of it, seconds on a CPU: what the baseline (00) and the final run (13) train
# when WORKBOOK_QUICK=1 (the tests).
QUICK_ARGS = f"{SAMPLE_ARGS} --epochs 1 --steps-per-epoch 8"

RUN_SETTINGS = "\n".join(
    [
        "# How big this notebook's training runs are: the script's defaults on the full data set, or,",
        "# with WORKBOOK_QUICK=1 (the workbook's tests set it), a run of seconds on the small sample.",
        'QUICK = os.environ.get("WORKBOOK_QUICK") == "1"',
        f'RUN_ARGS = "{QUICK_ARGS}" if QUICK else ""',
    ]
)

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
LANGUAGE_INFO = {"name": "python"}

SETUP_CELL = """\
# Set-up: import the workbook's code (grader/, workbook/) from the first folder above that has it.
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # TensorFlow: warnings and errors, no chatter
ROOT = next((folder for folder in Path.cwd().parents if (folder / "workbook").is_dir()), None)
if ROOT and str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))"""

CHECK_TAG = "check"
# A failed check raises, so that nbgrader scores the cell 0; StepNotDone shows one line, not a
# traceback, under the result.
CHECK_CELL = """\
from grader import check_step
from grader.report import StepNotDone

result = check_step({step}, run_if_unsure=True)  # a run decides what the reading cannot
display(result)
if not result.passed:
    raise StepNotDone(result)"""


NEXT_TAG = "next"
NEXT_CELL = """\
# Saves and closes this notebook, shuts down its kernel and opens the next notebook.
from workbook.navigation import open_next

open_next({notebook}, {title})"""


def check_cell_source(step: int) -> str:
    """The code of step N's graded "check my step" cell."""
    return CHECK_CELL.format(step=step)


def check_cell_metadata(step: int) -> dict:
    """nbgrader's metadata of step N's check cell: an autograded test worth one point."""
    return {
        "nbgrader": {
            "grade": True,
            "grade_id": f"check_step_{step:02d}",
            "locked": True,
            "points": 1,
            "schema_version": 3,
            "solution": False,
            "task": False,
        },
        "tags": [CHECK_TAG],
    }


class NotebookSourceError(ValueError):
    """A notebook source that cannot be built: unknown placeholder, misplaced check cell..."""


_PLACEHOLDER = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_TODO = re.compile(r"#\s*TODO: Step (\d+)\b")
NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen twenty"
).split()


# --- what is derived from the chain -------------------------------------------------------


def chain_scripts(chain_text: str) -> list:
    """The reference script after each step, 0 (the starting script) to LAST_STEP."""
    return [render(chain_text, step) for step in range(LAST_STEP + 1)]


def fenced(text: str, language: str) -> str:
    """A fenced code block whose fence is longer than any run of backticks in `text`."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text.rstrip(chr(10))}\n{fence}"


def step_diff(scripts: list, step: int) -> str:
    """The unified diff of step N: from the script after step N-1 to the one after step N."""
    return "".join(
        difflib.unified_diff(
            scripts[step - 1].splitlines(keepends=True),
            scripts[step].splitlines(keepends=True),
            fromfile=f"solutions/{output_name(step - 1)}",
            tofile=f"solutions/{output_name(step)}",
        )
    )


def reference_block(scripts: list, step: int) -> str:
    whole = f"solutions/{output_name(step)}"
    return (
        "<details><summary>Reference solution</summary>\n\n"
        f"The change of step {step}, as `diff` shows it (`-` lines go, `+` lines come):\n\n"
        f"{fenced(step_diff(scripts, step), 'diff')}\n\n"
        f"The whole script after this step: [{whole}](../{whole}).\n\n"
        "</details>"
    )


def bonus_block(chain_text: str, bonus: str) -> str:
    """The change from the solution to a bonus's reference, in a collapsed <details> block."""
    before = "solutions/fashion_mnist_solution.py"
    whole = f"solutions/{BONUSES[bonus]}"
    diff = "".join(
        difflib.unified_diff(
            render(chain_text, LAST_STEP).splitlines(keepends=True),
            render_bonus(chain_text, bonus).splitlines(keepends=True),
            fromfile=before,
            tofile=whole,
        )
    )
    return (
        "<details><summary>Reference solution</summary>\n\n"
        f"What the reference adds to the finished script `{before}`, as `diff` shows it "
        "(`+` lines come):\n\n"
        f"{fenced(diff, 'diff')}\n\n"
        f"The whole reference script: [{whole}](../{whole}).\n\n"
        "</details>"
    )


def todo_lines(scripts: list, step: int) -> list:
    """The `# TODO: Step N` comments of the starting script, without their indentation."""
    return [
        line.strip()
        for line in scripts[0].splitlines()
        if (match := _TODO.search(line)) and int(match.group(1)) == step
    ]


def todo_block(scripts: list, step: int) -> str:
    lines = todo_lines(scripts, step)
    if not lines:
        raise NotebookSourceError(f"the starting script has no '# TODO: Step {step}' comment")
    return fenced("\n".join(lines), "python")


def source_path(entry: Notebook, source_dir: Path | None = None) -> Path:
    """The text source of a notebook of the manifest: notebooks/src/SLUG.md."""
    return Path(source_dir or SOURCE_DIR) / entry.source_name


def notebook_title(entry: Notebook, source_dir: Path | None = None) -> str:
    """The text of a source's first `# ` heading (step notebooks: `Step N: title`)."""
    if entry.step is not None:
        return f"Step {entry.step}: {STEP_TITLES[entry.step]}"
    for line in source_path(entry, source_dir).read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return entry.stem


def link(entry: Notebook) -> str:
    return f"[{entry.stem}]({entry.file_name})"


def steps_table(notebooks: tuple) -> str:
    by_step = {entry.step: entry for entry in notebooks if entry.step is not None}
    rows = ["| step | what changes | notebook |", "|---|---|---|"]
    for step in range(1, LAST_STEP + 1):
        entry = by_step.get(step)
        rows.append(f"| {step} | {STEP_TITLES[step]} | {link(entry) if entry else '(missing)'} |")
    return "\n".join(rows)


def in_words(number: int) -> str:
    return NUMBER_WORDS[number] if number < len(NUMBER_WORDS) else str(number)


def next_notebook(notebooks: tuple, entry: Notebook) -> Notebook:
    index = notebooks.index(entry)
    if index + 1 == len(notebooks):
        raise NotebookSourceError(f"{entry.source_name}: {{{{ next }}}} in the last notebook")
    return notebooks[index + 1]


def next_link(notebooks: tuple, entry: Notebook, source_dir: Path | None = None) -> str:
    following = next_notebook(notebooks, entry)
    if entry.step is None:
        return f"**Next:** [{notebook_title(following, source_dir)}]({following.file_name})"
    # No link: a click on it would open a new tab and leave this notebook's kernel running.
    return (
        f"**Next: {notebook_title(following, source_dir)}.** Run the cell below: it saves and closes this "
        "notebook, shuts down its kernel, which this step no longer needs, and opens the next "
        "one in its place."
    )


def next_cell_source(notebooks: tuple, entry: Notebook, source_dir: Path | None = None) -> str:
    """The code of a step notebook's "Next" cell."""
    following = next_notebook(notebooks, entry)
    return NEXT_CELL.format(
        notebook=json.dumps(following.file_name, ensure_ascii=False),
        title=json.dumps(notebook_title(following, source_dir), ensure_ascii=False),
    )


def placeholder_values(
    entry: Notebook,
    notebooks: tuple,
    scripts: list,
    chain_text: str | None = None,
    source_dir: Path | None = None,
) -> dict:
    """Every placeholder this source may use, as {name: function returning its text}; the
    ones of a notebook, {{ number SLUG }}..., as {name: function of the slug}, in
    NOTEBOOK_PLACEHOLDERS."""
    step = entry.step
    values = {
        "sample_args": lambda: SAMPLE_ARGS,
        "quick_args": lambda: QUICK_ARGS,
        "run_settings": lambda: RUN_SETTINGS,
        "steps_table": lambda: steps_table(notebooks),
        "steps_in_words": lambda: in_words(len(STEP_TITLES)),
        "Steps_in_words": lambda: in_words(len(STEP_TITLES)).capitalize(),
        "next": lambda: next_link(notebooks, entry, source_dir),
    }
    by_slug = {notebook.slug: notebook for notebook in notebooks}
    for name, text in NOTEBOOK_PLACEHOLDERS.items():
        values[name] = lambda slug, text=text: text(by_slug[slug]) if slug in by_slug else None
    if chain_text is not None:
        for bonus in BONUSES:
            values[f"{bonus}_reference_diff"] = lambda bonus=bonus: bonus_block(chain_text, bonus)
    if step is not None:
        values.update(
            {
                "step": lambda: str(step),
                "step_title": lambda: STEP_TITLES[step],
                "todo": lambda: todo_block(scripts, step),
                "reference_diff": lambda: reference_block(scripts, step),
                "previous_file": lambda: output_name(step - 1),
                "step_file": lambda: output_name(step),
            }
        )
    return values


STEP_PLACEHOLDERS = frozenset(
    {"step", "step_title", "todo", "reference_diff", "previous_file", "step_file"}
)
# `{{ NAME SLUG }}`: what a text says of another notebook of the manifest.
NOTEBOOK_PLACEHOLDERS = {
    "number": lambda entry: f"{entry.number:02d}",
    "file": lambda entry: entry.file_name,
    "link": link,
}


def fill(text: str, values: dict, where: str) -> str:
    """Replaces every `{{ name }}` in text; NotebookSourceError names an unknown one."""

    def replace(match: re.Match) -> str:
        name, _, slug = match.group(1).partition(" ")
        if name in NOTEBOOK_PLACEHOLDERS and name in values:
            filled = values[name](slug.strip())
            if filled is None:
                known = ", ".join(sorted(NOTEBOOK_PLACEHOLDERS))
                raise NotebookSourceError(
                    f"{where}: {{{{ {match.group(1)} }}}} names no notebook of the manifest "
                    f"(workbook.facts.NOTEBOOKS; write {{{{ NAME SLUG }}}}, NAME one of {known})"
                )
            return filled
        name = match.group(1)
        if name not in values:
            known = ", ".join(sorted(values))
            why = (
                "it needs a step notebook" if name in STEP_PLACEHOLDERS else f"known here: {known}"
            )
            raise NotebookSourceError(f"{where}: unknown placeholder {{{{ {name} }}}} ({why})")
        return values[name]()

    return _PLACEHOLDER.sub(replace, text)


def _ends_with_next(markdown: str, where: str) -> bool:
    """Whether a step notebook's Markdown cell has {{ next }}, which must end it."""
    found = [m for m in _PLACEHOLDER.finditer(markdown) if m.group(1) == "next"]
    if found and markdown[found[-1].end() :].strip():
        raise NotebookSourceError(
            f"{where}: {{{{ next }}}} must end its cell (the Next cell follows)"
        )
    return bool(found)


# --- one notebook ---------------------------------------------------------------------------


def build_notebook(
    entry: Notebook,
    notebooks: tuple = NOTEBOOKS,
    chain_text: str | None = None,
    source_dir: Path | None = None,
):
    """The notebook (an nbformat NotebookNode) generated from the source of one entry of the
    manifest `notebooks`."""
    import jupytext
    import nbformat

    source = source_path(entry, source_dir)
    chain_text = chain_text if chain_text is not None else SOURCE.read_text(encoding="utf-8")
    scripts = chain_scripts(chain_text)
    values = placeholder_values(entry, notebooks, scripts, chain_text, source_dir)
    step = entry.step

    parsed = jupytext.reads(source.read_text(encoding="utf-8"), fmt=SOURCE_FORMAT)
    cells = []
    checks = 0
    for number, cell in enumerate(parsed.cells, start=1):
        where = f"{source.name}, cell {number}"
        tags = list(cell.metadata.get("tags", []))
        unknown_metadata = set(cell.metadata) - {"tags"}
        if unknown_metadata:
            raise NotebookSourceError(f"{where}: only tags may be set, not {unknown_metadata}")
        if cell.cell_type == "markdown":
            cells.append(nbformat.v4.new_markdown_cell(fill(cell.source, values, where)))
            if step is not None and _ends_with_next(cell.source, where):
                following = nbformat.v4.new_code_cell(
                    next_cell_source(notebooks, entry, source_dir)
                )
                following.metadata["tags"] = [NEXT_TAG]
                cells.append(following)
        elif cell.cell_type == "code" and CHECK_TAG in tags:
            if step is None:
                raise NotebookSourceError(f"{where}: a check cell in a notebook that is no step")
            if cell.source.strip():
                raise NotebookSourceError(f"{where}: leave the check cell empty; it is generated")
            checks += 1
            check = nbformat.v4.new_code_cell(check_cell_source(step))
            check.metadata = check_cell_metadata(step)
            cells.append(check)
        elif cell.cell_type == "code":
            code = nbformat.v4.new_code_cell(fill(cell.source, values, where))
            if tags:
                code.metadata["tags"] = tags
            cells.append(code)
        else:
            raise NotebookSourceError(f"{where}: {cell.cell_type} cells are not supported")
    if step is not None and checks != 1:
        raise NotebookSourceError(f"{source.name}: needs exactly one check cell, has {checks}")

    # The set-up cell goes first, after the title if the notebook opens with one.
    setup = nbformat.v4.new_code_cell(SETUP_CELL)
    setup.metadata["tags"] = ["setup"]
    at = 1 if cells and cells[0].cell_type == "markdown" else 0
    cells.insert(at, setup)

    for index, cell in enumerate(cells):
        cell.id = stable_cell_id(cell, index)

    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata = {
        "kernelspec": dict(KERNELSPEC),
        "language_info": dict(LANGUAGE_INFO),
        "workbook": {
            "generated_from": f"src/{entry.source_name}",
            "build": "python -m authoring.notebooks build",
        },
    }
    nbformat.validate(notebook)
    return notebook


def stable_cell_id(cell, index: int) -> str:
    """The cell's id, the same from build to build (nbformat would draw random ones)."""
    if cell.metadata.get("nbgrader", {}).get("grade_id"):
        return cell.metadata["nbgrader"]["grade_id"].replace("_", "-")
    if "setup" in cell.metadata.get("tags", []):
        return "setup"
    if NEXT_TAG in cell.metadata.get("tags", []):
        return "next"
    return f"cell-{index:02d}"


def notebook_text(notebook) -> str:
    import nbformat

    text = nbformat.writes(notebook, version=4)
    return text if text.endswith("\n") else text + "\n"


# --- all notebooks --------------------------------------------------------------------------


def source_files(source_dir: Path | None = None) -> list:
    """Every notebook source in source_dir (its README.md is for authors)."""
    return sorted(p for p in Path(source_dir or SOURCE_DIR).glob("*.md") if p.name != "README.md")


def expected_notebooks(
    source_dir: Path | None = None, chain_text: str | None = None, notebooks: tuple = NOTEBOOKS
) -> dict:
    """{notebook file name: its JSON text} for every notebook of the manifest."""
    listed = {entry.source_name for entry in notebooks}
    unlisted = [p.name for p in source_files(source_dir) if p.name not in listed]
    if unlisted:
        raise NotebookSourceError(
            f"{', '.join(unlisted)} in {source_dir or SOURCE_DIR}: in no entry of the manifest "
            "(add each to workbook.facts.NOTEBOOKS)"
        )
    missing = [
        name for name in sorted(listed) if not (Path(source_dir or SOURCE_DIR) / name).is_file()
    ]
    if missing:
        raise NotebookSourceError(f"no source {', '.join(missing)} in {source_dir or SOURCE_DIR}")
    chain_text = chain_text if chain_text is not None else SOURCE.read_text(encoding="utf-8")
    return {
        entry.file_name: notebook_text(build_notebook(entry, notebooks, chain_text, source_dir))
        for entry in notebooks
    }


def orphans(expected: dict, output_dir: Path) -> list:
    """The notebooks this builder made that no entry of the manifest makes any more (a
    notebook renumbered by a new entry before it leaves its old file behind)."""
    made_here = '"generated_from": "src/'  # in the metadata of every notebook built here
    return sorted(
        path.name
        for path in Path(output_dir).glob("[0-9][0-9]_*.ipynb")
        if path.name not in expected and made_here in path.read_text(encoding="utf-8")
    )


def stale_notebooks(source_dir: Path | None = None, output_dir: Path | None = None) -> list:
    """The names of the notebooks that are missing, differ from what their source builds, or
    are orphans."""
    expected, output_dir = expected_notebooks(source_dir), Path(output_dir or OUTPUT_DIR)
    return stale_names(expected, output_dir) + orphans(expected, output_dir)


def build(source_dir: Path | None = None, output_dir: Path | None = None) -> list:
    """Writes the notebooks that changed and removes the orphans; returns their names."""
    expected, output_dir = expected_notebooks(source_dir), Path(output_dir or OUTPUT_DIR)
    removed = orphans(expected, output_dir)
    for name in removed:
        (output_dir / name).unlink()
    return write_changed(expected, output_dir) + [f"{name} (removed)" for name in removed]


def main(argv=None) -> int:
    return build_or_check_main(
        argv,
        prog="python -m authoring.notebooks",
        what="notebooks",
        description="Generate notebooks/*.ipynb from notebooks/src/*.md",
        build=build,
        stale=stale_notebooks,
        source_error=NotebookSourceError,
    )


if __name__ == "__main__":
    sys.exit(main())

"""What is wrong with one student's submitted files, seen before and apart from nbgrader's grades.

- notebook problems: a notebook nbformat cannot read (nbgrader fails that student);
- tampered check cells: edited, re-weighted or deleted (nbgrader restores them and only logs
  a warning), found by comparing the submitted cells with the gradebook's source cells;
- nbgrader metadata the instructor did not write (a cell the student added with a grade_id,
  an old schema version): autograde neutralizes it (instructor/cell_metadata.py), the report
  names it;
- a script problem: fashion_mnist.py missing, unreadable, oversized or not Python, which
  fails every step for a reason that is no step's;
- the commands that recover an ungradable submission.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from workbook.facts import LEARNER_SCRIPT_NAME


@dataclass(frozen=True)
class NotebookProblem:
    notebook: str  # file name
    why: str

    def __str__(self) -> str:
        return f"{self.notebook}: {self.why}"


def read_notebooks(folder: Path):
    """(file name, notebook or the exception reading it) for each notebook in `folder`."""
    import nbformat

    for path in sorted(Path(folder).glob("*.ipynb")):
        try:
            notebook = nbformat.read(path, as_version=4)
            nbformat.validate(notebook)
        except Exception as error:  # noqa: BLE001 (any failure makes the notebook unusable)
            yield path.name, error
        else:
            yield path.name, notebook


def notebook_problems(folder: Path) -> list:
    """The notebooks in a submission folder that nbgrader cannot grade, and why."""
    problems = []
    for name, notebook in read_notebooks(folder):
        if isinstance(notebook, Exception):
            why = (str(notebook).strip().splitlines() or [""])[0].split(": ")[0]  # no quoted JSON
            problems.append(NotebookProblem(name, f"{type(notebook).__name__}: {why[:100]}"))
    return problems


def expected_metadata(gradebook, assignment: str) -> dict:
    """{notebook name: {grade_id: Expected}} of the assignment (instructor/cell_metadata.py),
    read once for a whole class."""
    from instructor import cell_metadata

    return {
        notebook.name: cell_metadata.expected_cells(gradebook, assignment, notebook.name)
        for notebook in gradebook.find_assignment(assignment).notebooks
    }


def metadata_changes(folder: Path, expected: dict) -> list:
    """'<notebook>: added cell 4 with nbgrader metadata (grade_id 'x') ignored', ... for each
    cell whose nbgrader metadata autograde replaced; `expected` is expected_metadata()."""
    from instructor import cell_metadata

    found = []
    for name, notebook in read_notebooks(folder):
        cells = expected.get(name[: -len(".ipynb")])
        if isinstance(notebook, Exception) or cells is None:
            continue  # unreadable (a notebook problem), or no notebook of the assignment
        found += [f"{name}: {change}" for change in cell_metadata.restore(notebook, cells)]
    return found


@dataclass(frozen=True)
class SourceCell:
    """A graded cell as `generate` saved it in the gradebook."""

    notebook: str  # notebook name, without .ipynb
    grade_id: str
    points: float
    checksum: str


def source_cells(gradebook, assignment: str) -> list:
    """Every graded cell of the assignment, from the gradebook."""
    cells = []
    for notebook in gradebook.find_assignment(assignment).notebooks:
        checksums = {cell.name: cell.checksum for cell in notebook.source_cells}
        for cell in notebook.grade_cells:
            cells.append(
                SourceCell(notebook.name, cell.name, float(cell.max_score), checksums[cell.name])
            )
    return cells


def tampered_cells(folder: Path, expected: list) -> list:
    """'<grade_id> edited | re-weighted (N points, not M) | deleted' for each graded cell of
    `expected` (source_cells) that the submitted notebooks in `folder` changed. A notebook
    that is missing or unreadable is a notebook problem, not tampering."""
    import nbformat
    from nbgrader.utils import compute_checksum

    found = []
    by_notebook: dict = {}
    for cell in expected:
        by_notebook.setdefault(cell.notebook, []).append(cell)
    for name, cells in sorted(by_notebook.items()):
        try:
            notebook = nbformat.read(Path(folder) / f"{name}.ipynb", as_version=4)
        except Exception:  # noqa: BLE001 (see notebook_problems)
            continue
        submitted = {
            cell.metadata["nbgrader"]["grade_id"]: cell
            for cell in notebook.cells
            if cell.metadata.get("nbgrader", {}).get("grade_id")
        }
        for source in cells:
            cell = submitted.get(source.grade_id)
            if cell is None:
                found.append(f"{source.grade_id} deleted")
                continue
            try:
                points = float(cell.metadata["nbgrader"].get("points"))
            except (TypeError, ValueError):
                points = None
            if points != source.points:
                weight = "unreadable points" if points is None else f"{points:g} points"
                found.append(f"{source.grade_id} re-weighted ({weight}, not {source.points:g})")
            restored = nbformat.from_dict(cell)
            restored.metadata["nbgrader"]["points"] = source.points
            if compute_checksum(restored) != source.checksum:
                found.append(f"{source.grade_id} edited")
    return found


# Files nbgrader itself puts in every submission (nbgrader 0.9's submit writes both; the secret
# names the student's feedback files), or never copies (CourseDirectory.ignore).
NOT_EXTRA = {"timestamp.txt", "submission_secret.txt"}
IGNORED_PARTS = {".ipynb_checkpoints", "__pycache__", "feedback", "logs"}


def extra_files(folder: Path, release: Path) -> list:
    """The files of a submission that the released assignment does not have (a `grader/`
    package, `sitecustomize.py`, ...): grading never uses them, and the report names them."""
    released = {p.relative_to(release) for p in Path(release).rglob("*") if p.is_file()}
    found = []
    for path in sorted(Path(folder).rglob("*")):
        relative = path.relative_to(folder)
        if path.is_dir() and not path.is_symlink() or IGNORED_PARTS & set(relative.parts):
            continue
        if relative not in released and str(relative) not in NOT_EXTRA:
            found.append(str(relative))
    return found


def missing_notebooks(folder: Path, expected: list) -> list:
    """The assignment's notebooks that the submission lacks (nbgrader scores them 0)."""
    names = sorted({cell.notebook for cell in expected})
    return [f"{name}.ipynb" for name in names if not (Path(folder) / f"{name}.ipynb").is_file()]


def script_problem(folder: Path) -> str:
    """Why the submitted fashion_mnist.py cannot be checked at all, or "" when it can."""
    from grader.api import STEPS, check_step

    script = Path(folder) / LEARNER_SCRIPT_NAME
    if not Path(folder).is_dir():
        return ""
    if not script.exists():
        return f"no {LEARNER_SCRIPT_NAME} in the submission"
    result = check_step(STEPS[0], path=script)
    if not result.file_problem:
        return ""
    message = result.message.replace(str(script), LEARNER_SCRIPT_NAME)
    if message.startswith(LEARNER_SCRIPT_NAME):
        return message
    return f"{LEARNER_SCRIPT_NAME}: {message}"


def recovery_commands(course_root: Path, assignment: str, student: str, notebooks: list) -> list:
    """Shell commands that grade a submission whose `notebooks` nbgrader cannot read: each is
    set aside (kept) and replaced by the released one, whose check cell checks the student's
    own fashion_mnist.py all the same; then that student alone is autograded again."""
    submitted = f"submitted/{student}/{assignment}"
    set_aside = f"set_aside/{student}"
    commands = [f"cd {shlex.quote(str(course_root))}", f"mkdir -p {shlex.quote(set_aside)}"]
    for name in notebooks:
        commands += [
            f"mv {shlex.quote(f'{submitted}/{name}')} {shlex.quote(set_aside)}/",
            f"cp {shlex.quote(f'release/{assignment}/{name}')} {shlex.quote(submitted)}/",
        ]
    python = shlex.quote(sys.executable)
    commands.append(f"{python} -m instructor autograde . --student {shlex.quote(student)} --force")
    return commands

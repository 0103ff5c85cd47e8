"""The nbgrader metadata a submitted notebook may carry: exactly what the instructor wrote.

nbgrader decides what to run and how many points a cell is worth from each cell's
`metadata.nbgrader`, and a student can write anything there: a cell of their own with a
`grade_id` (nbgrader's OverwriteCells then fails with KeyError), `grade: true` without a
`grade_id`, an old `schema_version` (nbgrader stops its whole run), a locked cell turned into a
graded one. Before nbgrader looks at a notebook, `restore` puts back the instructor's metadata
on the cells the instructor wrote (found by `grade_id` among the source cells that `generate`
saved in the gradebook) and strips it from every other cell, which then counts, runs and
scores as an ordinary cell: not at all (instructor/plugins.py runs graded cells only).
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEMA_VERSION = 3  # the nbgrader metadata format of nbgrader 0.9


@dataclass(frozen=True)
class Expected:
    """One cell of the source notebook that carries nbgrader metadata."""

    cell_type: str
    metadata: dict  # the complete metadata.nbgrader of that cell, as generate wrote it


def expected_cells(gradebook, assignment: str, notebook: str) -> dict:
    """{grade_id: Expected} for a notebook of the assignment, from the gradebook."""
    source = gradebook.find_notebook(notebook, assignment)
    grades = {cell.name: float(cell.max_score) for cell in source.grade_cells}
    tasks = {cell.name: float(cell.max_score) for cell in source.task_cells}
    solutions = {cell.name for cell in source.solution_cells}
    expected = {}
    for cell in source.source_cells:
        name = cell.name
        metadata = {
            "cell_type": cell.cell_type,
            "checksum": cell.checksum,
            "grade": name in grades,
            "grade_id": name,
            "locked": bool(cell.locked),
            "schema_version": SCHEMA_VERSION,
            "solution": name in solutions,
            "task": name in tasks,
        }
        if name in grades or name in tasks:
            metadata["points"] = grades.get(name, tasks.get(name))
        expected[name] = Expected(cell.cell_type, metadata)
    return expected


def restore(notebook, expected: dict) -> list:
    """Makes every cell's nbgrader metadata the instructor's; returns what it changed, one
    phrase each ("added cell 4 with nbgrader metadata (grade_id 'mine') ignored", ...)."""
    changes = []
    keep = _cells_to_keep(notebook, expected)
    for index, cell in enumerate(notebook.cells, start=1):
        metadata = cell.get("metadata", {})
        if "nbgrader" not in metadata:
            continue
        ours = metadata["nbgrader"]
        grade_id = _grade_id(cell)
        if grade_id not in expected:
            del metadata["nbgrader"]
            label = f"grade_id {grade_id!r}" if isinstance(grade_id, str) else "no grade_id"
            changes.append(f"added cell {index} with nbgrader metadata ({label}) ignored")
            continue
        if cell.get("cell_type") != expected[grade_id].cell_type:
            del metadata["nbgrader"]  # as if deleted: nbgrader adds the instructor's cell back
            changes.append(f"{grade_id} turned into a {cell.get('cell_type')} cell, ignored")
            continue
        if keep[grade_id] != index:
            del metadata["nbgrader"]
            changes.append(f"cell {index} also claims grade_id {grade_id!r}: ignored")
            continue
        wanted = expected[grade_id].metadata
        if not isinstance(ours, dict) or _differs(ours, wanted):
            changes.append(f"nbgrader metadata of {grade_id} changed, restored")
        metadata["nbgrader"] = dict(wanted)
    return changes


def _grade_id(cell):
    ours = cell.get("metadata", {}).get("nbgrader")
    grade_id = ours.get("grade_id") if isinstance(ours, dict) else None
    return grade_id if isinstance(grade_id, str) else None


def _cells_to_keep(notebook, expected: dict) -> dict:
    """{grade_id: the 1-based index of the cell that keeps it}: of several cells claiming one
    grade_id, the one whose source is the instructor's, else the first of the right type."""
    from nbformat import from_dict
    from nbgrader.utils import compute_checksum

    keep = {}
    for index, cell in enumerate(notebook.cells, start=1):
        grade_id = _grade_id(cell)
        if grade_id not in expected or cell.get("cell_type") != expected[grade_id].cell_type:
            continue
        probe = from_dict(
            dict(
                cell,
                metadata={
                    **cell.get("metadata", {}),
                    "nbgrader": dict(expected[grade_id].metadata),
                },
            )
        )
        try:
            original = compute_checksum(probe) == expected[grade_id].metadata["checksum"]
        except Exception:  # noqa: BLE001 (a malformed cell is not the instructor's)
            original = False
        if grade_id not in keep or (original and not keep[grade_id][1]):
            keep[grade_id] = (index, original)
    return {grade_id: index for grade_id, (index, _) in keep.items()}


def _differs(submitted: dict, wanted: dict) -> bool:
    """Whether the student changed what nbgrader reads (the checksum nbgrader updates anyway;
    a different points value the report names apart, as re-weighting)."""
    keys = ("grade", "locked", "solution", "task", "schema_version")
    return any(
        bool(submitted.get(k)) != bool(wanted.get(k))
        if k != "schema_version"
        else submitted.get(k) != wanted.get(k)
        for k in keys
    )

"""What the course's nbgrader_config.py plugs into nbgrader's autograder.

A step notebook's grade depends only on the learner's fashion_mnist.py, which its one graded
cell checks. Its other cells run Horovod demos and training for minutes, and a cell the learner
adds could change what `check_step` returns, so the autograder runs the graded cells only.
"""

from __future__ import annotations

from nbgrader.converters import Autograde
from nbgrader.preprocessors import Execute


def is_graded(cell) -> bool:
    return cell.cell_type == "code" and bool(cell.metadata.get("nbgrader", {}).get("grade"))


class ExecuteChecksOnly(Execute):
    """nbgrader's Execute, skipping every cell that is not a graded (autograded test) cell."""

    def preprocess_cell(self, cell, resources, index):
        if not is_graded(cell):
            return cell, resources
        return super().preprocess_cell(cell, resources, index)


def autograde_preprocessors() -> list:
    """nbgrader's own autograde preprocessors, with ExecuteChecksOnly in place of Execute."""
    default = Autograde.class_traits()["autograde_preprocessors"].default()
    if Execute not in default:
        raise RuntimeError(f"nbgrader's autograde preprocessors have no Execute: {default}")
    return [ExecuteChecksOnly if step is Execute else step for step in default]

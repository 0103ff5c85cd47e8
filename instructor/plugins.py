"""What the course's nbgrader_config.py plugs into nbgrader's autograder.

A step notebook's grade depends only on the learner's fashion_mnist.py, which its one graded
cell checks. Its other cells run Horovod demos and training for minutes, so the autograder
runs the graded cells only (`ExecuteChecksOnly`), in a kernel that only the instructor's
installation can shape (instructor/kernels.py): one per student, killed before the next.

What nbgrader runs, and for how many points, it reads from each cell's `metadata.nbgrader`,
which a student can edit. `SanitizeCellMetadata` runs before nbgrader's own sanitizers and
puts back the instructor's metadata (instructor/cell_metadata.py), so a cell the student
added is an ordinary cell: not run, not scored, and listed in the class report.

The exchange's plug-ins (collect, release_feedback, the attendees' submit) are in
instructor/exchange.py.
"""

from __future__ import annotations

import functools
import json
import os
import time

from jupyter_core.utils import run_sync
from nbgrader.api import Gradebook
from nbgrader.converters import Autograde
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Unicode

from grader.api import JUDGED_VARIABLE
from instructor import cell_metadata
from instructor.kernels import KernelPool


def is_graded(cell) -> bool:
    return cell.cell_type == "code" and bool(cell.metadata.get("nbgrader", {}).get("grade"))


class SanitizeCellMetadata(NbGraderPreprocessor):
    """Every cell's nbgrader metadata becomes what `generate` saved in the gradebook."""

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        expected = _expected_cells(info["db_url"], info["assignment"], info["notebook"])
        for change in cell_metadata.restore(nb, expected):
            self.log.warning("%s/%s: %s", info["student"], info["notebook"], change)
        return nb, resources


@functools.lru_cache(maxsize=64)
def _expected_cells(db_url: str, assignment: str, notebook: str) -> dict:
    """The source cells `generate` saved; the same for every student of a run, so read once
    (opening the gradebook costs about as much as a check)."""
    with Gradebook(db_url) as gradebook:
        return cell_metadata.expected_cells(gradebook, assignment, notebook)


# The kernels of this nbgrader process (one per student; see instructor/kernels.py).
_pool: KernelPool | None = None


def kernel_pool() -> KernelPool:
    global _pool
    if _pool is None:
        _pool = KernelPool()
    return _pool


class ExecuteChecksOnly(Execute):
    """nbgrader's Execute, running the graded cells only, in the student's grading kernel."""

    timings_file = Unicode(
        "", help="Append one JSON line per notebook: seconds waiting for the kernel, checking."
    ).tag(config=True)
    judged_dir = Unicode(
        "",
        help="The folder of each student's decided verdicts (instructor/class_verdicts.py), which "
        "the check cells return; empty: the check cells read the script only.",
    ).tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        if not any(is_graded(cell) for cell in nb.cells):
            return nb, resources  # nothing graded: no kernel at all
        student = resources["nbgrader"]["student"]
        started = time.monotonic()
        self._kernel = kernel_pool().for_student(student)
        kernel_seconds = time.monotonic() - started
        self._prelude_pending = True
        try:
            return super().preprocess(nb, resources, self._kernel.manager)
        finally:
            self._record(resources, kernel_seconds, time.monotonic() - started - kernel_seconds)

    async def async_start_new_kernel_client(self):
        """The student's kernel already has a connected client (kernels.GradingKernel)."""
        self.kc = self._kernel.client
        self.kc.allow_stdin = False
        return self.kc

    # nbclient binds the synchronous twin to its own coroutine: bind it to this one.
    start_new_kernel_client = run_sync(async_start_new_kernel_client)

    def preprocess_cell(self, cell, resources, index):
        if not is_graded(cell):
            return cell, resources
        if self._prelude_pending:
            self._prelude_pending = False
            self._run_prelude()
        return super().preprocess_cell(cell, resources, index)

    def _run_prelude(self) -> None:
        """Moves the kernel to this notebook's folder. (No %reset: the kernel ran only this
        student's check cells, the instructor's code, and dies before the next student.)"""
        path = self.resources.get("metadata", {}).get("path") or "."
        code = f"import os as _os\n_os.chdir({str(path)!r})\n"
        if self.judged_dir:
            student = self.resources["nbgrader"]["student"]
            judged = os.path.join(self.judged_dir, f"{student}.json")
            code += f"_os.environ[{JUDGED_VARIABLE!r}] = {judged!r}\n"
        code += "del _os"
        msg_id = self.kc.execute(code, silent=True, store_history=False)
        reply = self.wait_for_reply(msg_id)
        if reply is None or reply["content"]["status"] != "ok":
            raise RuntimeError(f"could not move the grading kernel to {path}")

    def _record(self, resources, kernel_seconds: float, check_seconds: float) -> None:
        if not self.timings_file:
            return
        info = resources["nbgrader"]
        line = {
            "student": info["student"],
            "notebook": info["notebook"],
            "kernel": round(kernel_seconds, 4),
            "checks": round(check_seconds, 4),
        }
        with open(self.timings_file, "a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")


def _replaced(default: list, old, new) -> list:
    if old not in default:
        raise RuntimeError(f"nbgrader's preprocessors have no {old.__name__}: {default}")
    return [new if step is old else step for step in default]


def autograde_preprocessors() -> list:
    """nbgrader's own autograde preprocessors, with ExecuteChecksOnly in place of Execute."""
    default = Autograde.class_traits()["autograde_preprocessors"].default()
    return _replaced(default, Execute, ExecuteChecksOnly)


def sanitize_preprocessors() -> list:
    """nbgrader's own sanitizers, after SanitizeCellMetadata (theirs would fail on a cell the
    student added: DeduplicateIds and OverwriteCells on a missing grade_id, CheckCellMetadata
    on an old schema version, for the whole run)."""
    default = Autograde.class_traits()["sanitize_preprocessors"].default()
    return [SanitizeCellMetadata, *default]


# Courses whose nbgrader_config.py was written before the exchange's plug-ins moved.
from instructor.exchange import CollectWithoutFollowingLinks  # noqa: E402,F401

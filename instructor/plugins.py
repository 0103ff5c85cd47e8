"""What the course's nbgrader_config.py plugs into nbgrader's autograder.

A step notebook's grade depends only on the learner's fashion_mnist.py, which its one graded
cell checks. Its other cells run Horovod demos and training for minutes, and a cell the learner
adds could change what `check_step` returns, so the autograder runs the graded cells only.

Starting a kernel costs a second or more, and a submission has twelve notebooks with one
check each; so by default every notebook of one nbgrader run shares one kernel, which moves to
the notebook's folder and then forgets its variables (%reset) before each notebook. The checks
read fashion_mnist.py afresh each time and never execute it, so a student's file cannot leave
anything behind for the next student. A kernel that died is replaced.
"""

from __future__ import annotations

import atexit

from nbgrader.converters import Autograde
from nbgrader.preprocessors import Execute
from traitlets import Bool


def is_graded(cell) -> bool:
    return cell.cell_type == "code" and bool(cell.metadata.get("nbgrader", {}).get("grade"))


# The kernel manager shared by the notebooks of this process (see the module's docstring).
_shared_kernel = {"km": None}


def _shutdown_shared_kernel() -> None:
    km = _shared_kernel["km"]
    if km is not None and km.has_kernel:
        from jupyter_core.utils import run_sync

        run_sync(km.shutdown_kernel)(now=True)


atexit.register(_shutdown_shared_kernel)


class ExecuteChecksOnly(Execute):
    """nbgrader's Execute, skipping every cell that is not a graded (autograded test) cell."""

    share_kernel = Bool(
        True, help="Run every notebook of one nbgrader run in one kernel (much faster)."
    ).tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        if not any(is_graded(cell) for cell in nb.cells):
            return nb, resources  # nothing graded: no kernel at all
        if not self.share_kernel or km is not None:
            return super().preprocess(nb, resources, km)
        km = _shared_kernel["km"]
        if km is None or (km.has_kernel and not self._alive(km)):
            km = _shared_kernel["km"] = self._new_kernel_manager(nb)
        self._prelude_pending = km.has_kernel  # a fresh kernel starts in the right folder
        try:
            return super().preprocess(nb, resources, km)
        finally:
            if self.kc is not None:
                self.kc.stop_channels()  # the kernel stays; its client for this notebook goes

    def preprocess_cell(self, cell, resources, index):
        if not is_graded(cell):
            return cell, resources
        if getattr(self, "_prelude_pending", False):
            self._prelude_pending = False
            self._run_prelude()
        return super().preprocess_cell(cell, resources, index)

    def _new_kernel_manager(self, nb):
        name = self.kernel_name or nb.metadata.get("kernelspec", {}).get("name", "python3")
        return self.kernel_manager_class(kernel_name=name, config=self.config)

    def _alive(self, km) -> bool:
        from jupyter_core.utils import ensure_async, run_sync

        async def alive():
            return await ensure_async(km.is_alive())

        return run_sync(alive)()

    def _run_prelude(self) -> None:
        """Moves the shared kernel to this notebook's folder, then empties its namespace.

        In that order: when nbgrader fails a student, it deletes that student's autograded/
        folder, where the kernel still is, and %reset in a deleted folder raises
        FileNotFoundError, which would fail every later student of the run.
        """
        path = self.resources.get("metadata", {}).get("path") or "."
        code = f"import os as _os\n_os.chdir({str(path)!r})\ndel _os\n%reset -f"
        msg_id = self.kc.execute(code, silent=True, store_history=False)
        reply = self.wait_for_reply(msg_id)
        if reply is None or reply["content"]["status"] != "ok":
            raise RuntimeError(f"could not prepare the shared kernel for {path}")


def autograde_preprocessors() -> list:
    """nbgrader's own autograde preprocessors, with ExecuteChecksOnly in place of Execute."""
    default = Autograde.class_traits()["autograde_preprocessors"].default()
    if Execute not in default:
        raise RuntimeError(f"nbgrader's autograde preprocessors have no Execute: {default}")
    return [ExecuteChecksOnly if step is Execute else step for step in default]

"""The instructor's side: the workbook as an nbgrader course (`python -m instructor ...`).

Modules, one job each:
- course.py      the course folder and nbgrader's Python API on it: init, generate, students,
                 release, collect, zip_collect, feedback, export
- config.py      the nbgrader_config.py that `init` writes, and why each setting
- plugins.py     what nbgrader_config.py plugs into nbgrader: SanitizeCellMetadata,
                 ExecuteChecksOnly (the check cells only)
- exchange.py    nbgrader's exchange as the course uses it: collect (each student's own
                 submissions only), release_feedback (per student); the hub's attendees'
                 submit, list and fetch (their notebooks/ is the assignment)
- kernels.py     the grading kernel: isolated from the submission, one per student
- cell_metadata.py  the nbgrader metadata a notebook may carry: the instructor's
- intake.py      sets aside what must not be graded (links out, FIFOs, devices, huge files)
- autograde.py   the class graded by parallel nbgrader runs over disjoint students, failures
                 alone after, no partial grades
- merge.py       a worker's grades of a student copied into the course's gradebook
- submission.py  what is wrong with one student's files: unusable notebooks, tampered check
                 cells, foreign nbgrader metadata, extra files, an unusable fashion_mnist.py,
                 and the commands that recover a submission
- class_report.py  where the class got stuck: per student and step, as CSV, text and
- heatmap.py     ...a heatmap PNG
- ownership.py   who made a submission (the owner check) and what collect set aside; run
                 as root on someone else's course: what root made goes to the owner
- __main__.py    the command line

It uses grader (the step checker) and workbook (shared facts, paths); neither imports it.
"""

import os as _os
import sys as _sys


def _own_bin_first_on_path() -> None:
    """The interpreter's bin folder first on PATH, for the programs nbgrader starts (alembic,
    jupyter): `.venv/bin/python -m instructor ...` then works without the environment on PATH."""
    own = _os.path.dirname(_sys.executable)
    path = _os.environ.get("PATH", "")
    if own and own not in path.split(_os.pathsep):
        _os.environ["PATH"] = own + (_os.pathsep + path if path else "")


_own_bin_first_on_path()

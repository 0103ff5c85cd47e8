"""An attendee's own copy of the workbook, made on their first login and never overwritten.

    ~/horovod-workbook/
        notebooks/            the notebooks and the attendee's fashion_mnist.py (the starter);
                              also the nbgrader assignment they submit (instructor/exchange.py:
                              nothing to fetch, one copy of each notebook)
        workbook/, grader/    the code the notebooks import: their set-up cell puts this folder
                              first on sys.path, so the runner's logs go to notebooks/logs here
        data/fashion_mnist    -> the shared, prepared data (read-only)
        data/sample           -> the shared sample (read-only)
        solutions             -> the shared reference chain (read-only)

Code is copied rather than linked: the workbook finds its folders from its own file's real
path (workbook.paths), which a link would send back to the shared, read-only repository.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from workbook.facts import LEARNER_SCRIPT_NAME

COPY_NAME = "horovod-workbook"
CODE = ("workbook", "grader")
SHARED_DATA = ("fashion_mnist", "sample")
IGNORE = shutil.ignore_patterns(
    "__pycache__", "*.pyc", "logs", ".ipynb_checkpoints", "src", LEARNER_SCRIPT_NAME
)


def copy_dir(home: Path) -> Path:
    return home / COPY_NAME


def make(repo: Path, home: Path, uid: int, gid: int) -> tuple[Path, bool]:
    """The copy in `home` (made now when missing) and whether it was made now."""
    target = copy_dir(home)
    if target.exists():
        return target, False
    partial = home / f".{COPY_NAME}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    shutil.copytree(repo / "notebooks", partial / "notebooks", ignore=IGNORE)
    shutil.copyfile(
        repo / "solutions" / LEARNER_SCRIPT_NAME, partial / "notebooks" / LEARNER_SCRIPT_NAME
    )
    for name in CODE:
        shutil.copytree(repo / name, partial / name, ignore=IGNORE)
    (partial / "data").mkdir()
    for name in SHARED_DATA:
        (partial / "data" / name).symlink_to(repo / "data" / name)
    (partial / "solutions").symlink_to(repo / "solutions")
    for folder, dirs, files in os.walk(partial):
        for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
            os.lchown(name, uid, gid)
    partial.rename(target)  # only a finished copy counts: an interrupted one is made again
    return target, True

"""make lab's contents manager (workbook/lab_contents.py): a notebook reaches JupyterLab with the
language_info its kernel will report, so that opening it changes nothing (issue 39: the welcome
notebook showed as unsaved as soon as it opened)."""

import asyncio
import json
import shutil

from workbook.facts import NOTEBOOKS
from workbook.lab_contents import WorkbookContentsManager, kernel_language_info
from workbook.paths import NOTEBOOKS_DIR


def test_a_committed_notebook_is_served_with_what_its_kernel_reports(tmp_path):
    welcome = NOTEBOOKS_DIR / NOTEBOOKS[0].file_name
    shutil.copy(welcome, tmp_path / welcome.name)
    committed = json.loads(welcome.read_text())["metadata"]["language_info"]
    assert committed == {"name": "python"}  # nbstripout keeps the name only
    manager = WorkbookContentsManager(root_dir=str(tmp_path))
    model = asyncio.run(manager.get(welcome.name))
    info = model["content"]["metadata"]["language_info"]
    assert info == kernel_language_info()
    assert info["version"] and info["codemirror_mode"] == {"name": "ipython", "version": 3}
    # The file itself is left as it is; only what JupyterLab is handed changes.
    assert (
        json.loads((tmp_path / welcome.name).read_text())["metadata"]["language_info"] == committed
    )
    # Not a notebook's content: nothing to add.
    assert (
        "content" not in asyncio.run(manager.get(welcome.name, content=False))
        or asyncio.run(manager.get(welcome.name, content=False))["content"] is None
    )

"""The "Next" cell at the end of a step notebook: go on to the next notebook in the same tab.

JupyterLab gives every open notebook a kernel of its own, and a Markdown link opens the next
notebook in a new tab; a learner who followed the links through the twelve steps had 18 kernels
using 5.9 GiB. The Next cell instead saves and closes its notebook, shuts down its kernel and
opens the next notebook in its place (first removing the empty cell that Shift+Enter in the
last cell adds, so that the saved notebook is git's, outputs aside):

    from workbook.navigation import open_next
    open_next("NN_pin_gpu.ipynb", "Step 2: Pin one GPU per process")

(the next notebook's file name, NN its place in workbook.facts.NOTEBOOKS, written by the
notebook builder).

It does so in the browser (JupyterLab's own commands, reached through `window.jupyterapp`, which
`make lab` exposes), and only for the kernel that ran the cell: a notebook reopened later with
its saved output does not jump on. Anywhere else (nbclient, nbgrader, a JupyterLab that does
not expose its app) the cell shows the link and how to close the notebook by hand.
"""

from __future__ import annotations

import html
import json
import re

# Shown until the script below replaces it, and for good where it cannot run.
_FALLBACK = (
    'Open <a href="{href}">{title}</a>. Then close this notebook and shut down its kernel: '
    "<em>File &gt; Close and Shut Down Notebook</em> (Ctrl+Shift+Q)."
)

# `element` is this output's node (JupyterLab's JavaScript renderer); it joins the page shortly
# after the script starts, and then tells which notebook ran the cell.
_SCRIPT = """\
(async () => {
  const app = window.jupyterapp;
  if (!app) return;
  for (let i = 0; i < 100 && !element.isConnected; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const panel = Array.from(app.shell.widgets("main")).find((w) => w.node.contains(element));
  const kernel = panel && panel.sessionContext.session && panel.sessionContext.session.kernel;
  if (!kernel || kernel.id !== %(kernel_id)s) return;  // an old output, shown again
  const folder = panel.context.path.split("/").slice(0, -1).join("/");
  const target = (folder ? folder + "/" : "") + %(notebook)s;
  const note = document.querySelector(%(note_selector)s);
  // Shift+Enter in the last cell added an empty one below it: not the learner's, and saved it
  // would make the notebook differ from git's.
  const notebook = panel.content;
  const own = notebook.widgets.findIndex((cell) => cell.node.contains(element));
  for (let i = notebook.model.cells.length - 1; own >= 0 && i > own; i--) {
    const cell = notebook.model.cells.get(i);
    if (cell.type === "code" && cell.sharedModel.getSource() === "") {
      notebook.model.sharedModel.deleteCell(i);
    }
  }
  // Saved before anything else happens to it, and only when changed: a second save right
  // after another (autosave's) is what raises JupyterLab's "File Changed" dialog.
  if (panel.context.model.dirty) await panel.context.save();
  try {
    await app.commands.execute("docmanager:open", { path: target });
  } catch (error) {
    if (note) note.textContent = "Could not open " + target + ": " + error;
    return;
  }
  await panel.sessionContext.shutdown();
  panel.dispose();
})();
"""


def kernel_id() -> str | None:
    """The id the Jupyter server knows this kernel by (from its connection file's name)."""
    try:
        from ipykernel.connect import get_connection_file

        match = re.search(r"kernel-(.+)\.json$", get_connection_file())
    except (ImportError, RuntimeError, AttributeError):
        return None
    return match.group(1) if match else None


def open_next(notebook: str, title: str) -> None:
    """Shows the way to `notebook` and, in JupyterLab, goes there (see the module's doc)."""
    from IPython.display import HTML, Javascript, display

    note_id = f"workbook-next-{kernel_id() or 'none'}-{re.sub(r'[^A-Za-z0-9]', '-', notebook)}"
    fallback = _FALLBACK.format(href=html.escape(notebook), title=html.escape(title))
    display(HTML(f'<div id="{note_id}">{fallback}</div>'))
    display(
        Javascript(
            _SCRIPT
            % {
                "kernel_id": json.dumps(kernel_id()),
                "notebook": json.dumps(notebook),
                "note_selector": json.dumps(f"#{note_id}"),
            }
        )
    )

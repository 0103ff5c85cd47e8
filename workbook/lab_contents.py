"""The contents manager `make lab` gives JupyterLab (workbook.lab starts it with this class).

Imported by the Jupyter server only: it imports jupyter_server, which a notebook's kernel does
not need.
"""

from __future__ import annotations

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager


def kernel_language_info() -> dict:
    """The language_info this environment's kernel (ipykernel) reports when it starts."""
    from ipykernel.ipkernel import IPythonKernel

    return dict(IPythonKernel.language_info)


class WorkbookContentsManager(AsyncLargeFileManager):
    """Jupyter's contents manager, with one change: a notebook is handed to JupyterLab with
    the language_info its kernel will report. The committed notebooks keep only the language's
    name (nbstripout strips the rest), and JupyterLab, setting what the kernel reports when it
    starts, marked every notebook as unsaved on opening it."""

    async def get(self, path, content=True, type=None, format=None, **kwargs):
        model = await super().get(path, content=content, type=type, format=format, **kwargs)
        if content and model.get("type") == "notebook" and model.get("content"):
            metadata = model["content"].setdefault("metadata", {})
            info = kernel_language_info()
            if metadata.get("language_info", {}).get("name", info["name"]) == info["name"]:
                metadata["language_info"] = {**metadata.get("language_info", {}), **info}
        return model

import json
import os
import sys
from pathlib import Path

import pytest

# Make `import workbook` work however pytest is started (bare `pytest` too).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


@pytest.fixture
def lab_env(tmp_path):
    """The environment for a `make lab` started by a test, kept apart from the user's JupyterLab.

    A private runtime dir: `make lab` finds (and `jupyter server list` shows) only the servers
    started here. Private settings and workspaces: the test neither reads nor changes the
    learner's, and JupyterLab does not ask about fetching news (the machine may be offline).
    """
    settings = tmp_path / "lab-settings"
    notification = settings / "@jupyterlab/apputils-extension/notification.jupyterlab-settings"
    notification.parent.mkdir(parents=True)
    notification.write_text(json.dumps({"fetchNews": "false"}))
    return dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
                JUPYTERLAB_SETTINGS_DIR=str(settings),
                JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "lab-workspaces"))

"""Runs a command as on a machine that has never run the workbook: HOME and XDG_* are empty.

    python tests/fresh_home.py -m pytest tests/unit tests/smoke

`make test` runs the fast tiers this way, so that a one-time set-up a library does on first use
(matplotlib's font cache, Jupyter's and IPython's folders, Keras's home) is met in every run, as
a new user meets it, and never hides behind a cache that the developers' machines already have.
The folder is removed afterwards; the command's exit status is this script's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

# Variables that point a library at state kept from earlier runs: unset, so each falls back
# to its default under the empty HOME.
STATE_VARIABLES = (
    "MPLCONFIGDIR",
    "IPYTHONDIR",
    "JUPYTER_CONFIG_DIR",
    "JUPYTER_DATA_DIR",
    "JUPYTER_RUNTIME_DIR",
    "JUPYTERLAB_SETTINGS_DIR",
    "JUPYTERLAB_WORKSPACES_DIR",
    "KERAS_HOME",
    "XDG_RUNTIME_DIR",
)
XDG_FOLDERS = {
    "XDG_CACHE_HOME": ".cache",
    "XDG_CONFIG_HOME": ".config",
    "XDG_DATA_HOME": ".local/share",
    "XDG_STATE_HOME": ".local/state",
}


def fresh_environment(home: str) -> dict:
    """os.environ with HOME at `home` (empty) and every XDG folder inside it, not yet made."""
    env = {name: value for name, value in os.environ.items() if name not in STATE_VARIABLES}
    env["HOME"] = home
    env.update({name: os.path.join(home, folder) for name, folder in XDG_FOLDERS.items()})
    return env


def main(argv: list[str]) -> int:
    home = tempfile.mkdtemp(prefix="workbook-fresh-home-")
    try:
        print(f"==> with an empty HOME ({home}): {' '.join(argv)}", flush=True)
        return subprocess.call([sys.executable, *argv], env=fresh_environment(home))
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

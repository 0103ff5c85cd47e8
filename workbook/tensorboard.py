"""One TensorBoard for the whole workbook, shared by `make lab` and the notebooks.

Every run writes under `notebooks/logs/<run name>/`, so a single TensorBoard on that directory
shows the baseline and the distributed runs side by side.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from workbook.paths import LOGS_DIR

# `make lab --tensorboard-port` passes its choice to the notebooks' kernels through this variable.
PORT_VARIABLE = "WORKBOOK_TENSORBOARD_PORT"
DEFAULT_PORT = int(os.environ.get(PORT_VARIABLE, "6006"))
START_TIMEOUT_S = 60


def tensorboard_url(port: int = DEFAULT_PORT) -> str:
    return f"http://127.0.0.1:{port}/"


def browser_url(port: int = DEFAULT_PORT) -> str:
    """Where the learner's browser finds it: on a JupyterHub (`make hub`), through the
    learner's own server (jupyter-server-proxy), since the browser is on another machine."""
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX")
    return f"{prefix.rstrip('/')}/proxy/{port}/" if prefix else tensorboard_url(port)


def serving_logdir(port: int = DEFAULT_PORT) -> str | None:
    """The log directory a TensorBoard on this port serves, or None if none answers."""
    try:
        with urllib.request.urlopen(tensorboard_url(port) + "data/logdir", timeout=2) as reply:
            return json.load(reply).get("logdir")
    except (OSError, ValueError, urllib.error.URLError):
        return None


@dataclass
class TensorBoard:
    url: str
    started_pid: int | None  # set when this call started it, None when it was already running

    def stop(self) -> None:
        """Stop TensorBoard if this process started it."""
        if self.started_pid:
            try:
                os.killpg(self.started_pid, signal.SIGTERM)
            except ProcessLookupError:
                pass


def ensure_tensorboard(logdir: Path = LOGS_DIR, port: int = DEFAULT_PORT) -> TensorBoard:
    """Start TensorBoard on `logdir` unless one already serves it."""
    logdir.mkdir(parents=True, exist_ok=True)
    serving = serving_logdir(port)
    if serving is not None:
        if Path(serving).resolve() != logdir.resolve():
            raise RuntimeError(f"port {port} already has a TensorBoard for {serving}; stop it "
                               f"or pick another port")
        return TensorBoard(browser_url(port), None)
    log_path = logdir / "tensorboard.log"
    with log_path.open("a") as log_file:
        # A session of its own: TensorBoard outlives the notebook cell that started it.
        process = subprocess.Popen(
            [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--port",
             str(port), "--host", "127.0.0.1", "--reload_interval", "5"],
            stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        if serving_logdir(port) is not None:
            return TensorBoard(browser_url(port), process.pid)
        time.sleep(0.5)
    process.kill()
    raise RuntimeError(f"TensorBoard did not start within {START_TIMEOUT_S} s; see {log_path}")

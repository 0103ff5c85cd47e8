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
from workbook.ports import PORTS_TRIED, free_port_from, is_free, says_port_taken, taken_words

# `make lab --tensorboard-port` passes its choice to the notebooks' kernels through this variable.
PORT_VARIABLE = "WORKBOOK_TENSORBOARD_PORT"
DEFAULT_PORT = int(os.environ.get(PORT_VARIABLE, "6006"))
# Its start imports TensorFlow: on a busy machine, minutes. It returns as soon as it answers.
START_TIMEOUT_S = 120


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
    port: int = DEFAULT_PORT
    # Why it is not on the port asked for, in words ("" when it is): for the banner.
    moved: str = ""

    def stop(self) -> None:
        """Stop TensorBoard if this process started it."""
        if self.started_pid:
            try:
                os.killpg(self.started_pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def banner(self) -> str:
        """`http://127.0.0.1:6007/ - port 6006 was taken by PID 42 (...), so this one is on
        6007`: one level of parentheses, around the holder's command."""
        return f"{self.url} - {self.moved}" if self.moved else self.url


class TensorBoardFailed(RuntimeError):
    """TensorBoard could not be started; the message says why, from its log, in one line."""


def _moved(asked: int, port: int) -> str:
    return "" if port == asked else f"{taken_words(asked)}, so this one is on {port}"


def _already_serving(logdir: Path, port: int) -> int | None:
    """The port of a TensorBoard that serves `logdir`: on `port` or one of the ports after it
    that a start with `port` taken would have picked."""
    for candidate in range(port, port + PORTS_TRIED):
        if is_free(candidate):
            continue  # nothing listens there: no request to wait for
        serving = serving_logdir(candidate)
        if serving is not None and Path(serving).resolve() == logdir.resolve():
            return candidate
    return None


def ensure_tensorboard(logdir: Path = LOGS_DIR, port: int = DEFAULT_PORT) -> TensorBoard:
    """TensorBoard on `logdir`: the one that already serves it, or a new one on `port`, or, when
    another program holds `port`, on the next free port (its `moved` says so).
    TensorBoardFailed names the cause, from TensorBoard's log, when none could be started."""
    logdir.mkdir(parents=True, exist_ok=True)
    serving = _already_serving(logdir, port)
    if serving is not None:
        return TensorBoard(browser_url(serving), None, serving, _moved(port, serving))
    log_path = logdir / "tensorboard.log"
    for attempt in range(2):  # a second time if another program took the port meanwhile
        chosen = free_port_from(port)
        board, problem = _start(logdir, chosen, log_path)
        if board is not None:
            board.moved = _moved(port, chosen)
            return board
        if not problem.startswith("taken"):
            break
    raise TensorBoardFailed(_failure_line(problem, chosen, log_path))


def _start(logdir: Path, port: int, log_path: Path) -> tuple[TensorBoard | None, str]:
    """(the TensorBoard started on `port`, "") or (None, why not: "taken", "exited CODE:
    LAST LOG LINE after S s" or "silent after S s")."""
    offset = log_path.stat().st_size if log_path.exists() else 0
    started = time.monotonic()
    with log_path.open("a") as log_file:
        # A session of its own: TensorBoard outlives the notebook cell that started it.
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tensorboard.main",
                "--logdir",
                str(logdir),
                "--port",
                str(port),
                "--host",
                "127.0.0.1",
                "--reload_interval",
                "5",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = started + START_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        if serving_logdir(port) is not None:
            return TensorBoard(browser_url(port), process.pid, port), ""
        time.sleep(0.5)
    waited = time.monotonic() - started
    if process.poll() is None:
        process.kill()
        process.wait()
    with log_path.open(errors="replace") as log_file:
        log_file.seek(offset)
        said = log_file.read()
    if says_port_taken(said):
        return None, "taken"
    code = process.returncode
    if code is not None and code >= 0 and waited < START_TIMEOUT_S:
        last = next((line.strip() for line in reversed(said.splitlines()) if line.strip()), "")
        return None, f"exited with code {code} after {waited:.0f} s" + (f": {last}" if last else "")
    return None, f"did not answer in the {waited:.0f} s it was given"


def _failure_line(problem: str, port: int, log_path: Path) -> str:
    if problem == "taken":
        return (
            f"TensorBoard could not start: {taken_words(port)} as it started, "
            f"twice; stop that program, or start with another port "
            f"(make lab LAB_ARGS='--tensorboard-port {port + PORTS_TRIED}'); log: {log_path}"
        )
    return (
        f"TensorBoard {problem}; its log: {log_path} (a busy machine starts it slowly: "
        "run this again once it is quieter)"
    )

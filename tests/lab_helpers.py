"""Starting and stopping a real `make lab` in tests (tests/system/test_lab.py,
tests/system/test_browser.py)."""

import os
import re
import signal
import socket
import subprocess
import sys
import time

import psutil

from workbook.paths import REPO

URL = re.compile(r"JupyterLab:\s+(http://\S+)")
START_TIMEOUT_S = 600  # the first `make lab` on a machine may still prepare the data


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_lab(env, lab_port, tb_port):
    """`make lab` in its own process group, so that stop_lab() reaches all it started."""
    return subprocess.Popen(
        [
            "make",
            "--no-print-directory",
            "lab",
            f"VENV={sys.prefix}",
            f"LAB_ARGS=--port {lab_port} --tensorboard-port {tb_port}",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def read_until_url(process, deadline):
    seen = []
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        match = URL.search(line)
        if match:
            return match.group(1), "".join(seen)
    raise AssertionError("make lab printed no JupyterLab URL:\n" + "".join(seen[-40:]))


def stop_lab(process, seconds=60):
    """Stops `make lab` like Ctrl-C does: JupyterLab, its kernels and TensorBoard with it, and
    waits until they are gone (make exits at once; JupyterLab shuts its kernels down first, and
    TensorBoard, in a session of its own, after it). What is left after `seconds` is killed."""
    try:
        started = [process, *psutil.Process(process.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        started = []
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=seconds)
    rest = [p for p in started if isinstance(p, psutil.Process)]
    _, alive = psutil.wait_procs(rest, timeout=seconds)
    for left in alive:
        try:
            left.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=10)

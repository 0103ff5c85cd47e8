"""`make lab`, really started: JupyterLab answers on its URL and `jupyter server list` shows it."""

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from workbook.paths import REPO
from workbook.tensorboard import serving_logdir

pytestmark = pytest.mark.slow
URL = re.compile(r"JupyterLab:\s+(http://\S+)")
START_TIMEOUT_S = 600  # the first `make lab` on a machine may still prepare the data


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_lab(env, lab_port, tb_port):
    return subprocess.Popen(
        ["make", "--no-print-directory", "lab", f"VENV={sys.prefix}",
         f"LAB_ARGS=--port {lab_port} --tensorboard-port {tb_port}"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)


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


@pytest.fixture
def lab_env(tmp_path):
    # A private runtime dir: only the servers started here are listed.
    return dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))


def test_make_lab_serves_jupyterlab_and_a_second_run_reuses_it(lab_env):
    lab_port, tb_port = free_port(), free_port()
    first = make_lab(lab_env, lab_port, tb_port)
    try:
        url, _ = read_until_url(first, time.monotonic() + START_TIMEOUT_S)
        assert f":{lab_port}/lab/tree/notebooks" in url and "token=" in url
        with urllib.request.urlopen(url, timeout=30) as reply:
            assert reply.status == 200
            assert "JupyterLab" in reply.read().decode()
        listed = subprocess.run([sys.executable, "-m", "jupyter", "server", "list"],
                                capture_output=True, text=True, env=lab_env).stdout
        assert f":{lab_port}/" in listed and str(REPO) in listed
        assert Path(serving_logdir(tb_port)).resolve() == (REPO / "notebooks/logs").resolve()
        assert (REPO / "notebooks" / "fashion_mnist.py").exists()

        started = time.monotonic()
        second = subprocess.run(
            ["make", "--no-print-directory", "lab", f"VENV={sys.prefix}",
             f"LAB_ARGS=--port {free_port()} --tensorboard-port {tb_port}"],
            cwd=REPO, env=lab_env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 0, second.stdout + second.stderr
        assert "already running" in second.stdout
        assert URL.search(second.stdout).group(1) == url
        assert time.monotonic() - started < 60
    finally:
        os.killpg(first.pid, signal.SIGTERM)
        first.wait(timeout=60)
    # Stopping `make lab` stops what it started.
    deadline = time.monotonic() + 30
    while serving_logdir(tb_port) is not None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert serving_logdir(tb_port) is None

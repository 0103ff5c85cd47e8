"""`make lab`, really started: JupyterLab answers on its URL and `jupyter server list` shows it."""

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from lab_helpers import START_TIMEOUT_S, URL, free_port, make_lab, read_until_url, stop_lab
from workbook.paths import REPO
from workbook.ports import is_free
from workbook.tensorboard import serving_logdir



def test_make_lab_serves_jupyterlab_and_a_second_run_reuses_it(lab_env):
    lab_port, tb_port = free_port(), free_port()
    # Another program on TensorBoard's port (a learner's other project), and one on
    # JupyterLab's (this test): both take the next free port and the banner says so.
    other = subprocess.Popen([sys.executable, "-m", "http.server", str(tb_port), "--bind",
                              "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    held = socket.socket()
    held.bind(("127.0.0.1", lab_port))
    held.listen()
    deadline = time.monotonic() + 30
    while is_free(tb_port) and time.monotonic() < deadline:
        time.sleep(0.2)
    first = make_lab(lab_env, lab_port, tb_port)
    try:
        url, banner = read_until_url(first, time.monotonic() + START_TIMEOUT_S)
        banner += first.stdout.readline()  # the TensorBoard line comes after the URL's
        assert f":{lab_port}/" not in url and "/lab/tree/notebooks" in url and "token=" in url
        assert f"port {lab_port} (held by PID {os.getpid()} (" in banner
        moved = re.search(rf"TensorBoard:\s+http://127.0.0.1:(\d+)/ \(port {tb_port} \(held "
                          rf"by PID {other.pid} \([^\n]*http.server[^\n]*\) was taken; this "
                          rf"one is on (\d+)\)", banner)  # fmt: skip
        assert moved and moved.group(1) == moved.group(2), banner
        other_port, tb_port = tb_port, int(moved.group(1))
        with urllib.request.urlopen(url, timeout=30) as reply:
            assert reply.status == 200
            page = reply.read().decode()
        assert "JupyterLab" in page
        # The page's own configuration: no news pop-up, and the app the Next cells use.
        config = json.loads(re.search(
            r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', page, re.S
        ).group(1))
        assert config["news"] == {"disabled": True}
        assert config["exposeAppInBrowser"] is True
        # ...and the front end's settings: it never asks about Jupyter's news.
        base, token = url.split("/lab/tree/")[0], url.split("token=")[1]
        notification = json.load(urllib.request.urlopen(
            f"{base}/lab/api/settings/@jupyterlab/apputils-extension:notification?token={token}",
            timeout=30))
        assert notification["schema"]["properties"]["fetchNews"]["default"] == "false"
        listed = subprocess.run([sys.executable, "-m", "jupyter", "server", "list"],
                                capture_output=True, text=True, env=lab_env).stdout
        assert f":{lab_port}/" in listed and str(REPO) in listed
        assert Path(serving_logdir(tb_port)).resolve() == (REPO / "notebooks/logs").resolve()
        assert (REPO / "notebooks" / "fashion_mnist.py").exists()

        started = time.monotonic()
        # Asked for the usual port again, it finds the TensorBoard the first took instead.
        second = subprocess.run(
            ["make", "--no-print-directory", "lab", f"VENV={sys.prefix}",
             f"LAB_ARGS=--port {free_port()} --tensorboard-port {other_port}"],
            cwd=REPO, env=lab_env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 0, second.stdout + second.stderr
        assert "already running" in second.stdout
        assert URL.search(second.stdout).group(1) == url
        assert time.monotonic() - started < 60
    finally:
        stop_lab(first)
        held.close()
        other.terminate()
        other.wait(timeout=30)
    # Stopping `make lab` stops what it started.
    deadline = time.monotonic() + 30
    while serving_logdir(tb_port) is not None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert serving_logdir(tb_port) is None

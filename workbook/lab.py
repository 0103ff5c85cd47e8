"""Start (or find) the workbook's JupyterLab and TensorBoard and print where they are.

    python -m workbook.lab [--port 8888] [--ip 127.0.0.1]     (what `make lab` runs)

If a JupyterLab for this repository is already running, its URL is printed and nothing new is
started, so running `make lab` twice is harmless.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from workbook.facts import LAB_ARGS, with_safe_env
from workbook.paths import LEARNER_SCRIPT, NOTEBOOKS_DIR, REPO, STARTER_SCRIPT
from workbook.tensorboard import DEFAULT_PORT, PORT_VARIABLE, ensure_tensorboard

WELCOME_NOTEBOOK = NOTEBOOKS_DIR / "00_welcome.ipynb"
START_TIMEOUT_S = 90


def ensure_learner_script() -> Path:
    """Give the learner a working copy of the starting script; never overwrite their edits."""
    if not LEARNER_SCRIPT.exists() and STARTER_SCRIPT.exists():
        shutil.copyfile(STARTER_SCRIPT, LEARNER_SCRIPT)
    return LEARNER_SCRIPT


def running_servers() -> list[dict]:
    """Jupyter servers of this environment, as `jupyter server list --json` reports them."""
    result = subprocess.run([sys.executable, "-m", "jupyter", "server", "list", "--json"],
                            capture_output=True, text=True)
    servers = []
    for line in result.stdout.splitlines():
        try:
            servers.append(json.loads(line))
        except ValueError:
            continue
    return servers


def server_for_repo() -> dict | None:
    for server in running_servers():
        if Path(server.get("root_dir", "")).resolve() == REPO.resolve():
            return server
    return None


def lab_url(server: dict) -> str:
    path = WELCOME_NOTEBOOK.relative_to(REPO) if WELCOME_NOTEBOOK.exists() else \
        NOTEBOOKS_DIR.relative_to(REPO)
    token = f"?token={server['token']}" if server.get("token") else ""
    return f"{server['url'].rstrip('/')}/lab/tree/{path.as_posix()}{token}"


def print_banner(server: dict, tensorboard: str) -> None:
    print("\n" + "=" * 72, flush=True)
    print(f"  JupyterLab:   {lab_url(server)}")
    print(f"  TensorBoard:  {tensorboard}")
    print("  Open the JupyterLab link in your browser. Stop with Ctrl-C.")
    print("=" * 72 + "\n", flush=True)


def start_lab(ip: str, port: int) -> subprocess.Popen:
    default_url = "/lab/tree/" + (WELCOME_NOTEBOOK if WELCOME_NOTEBOOK.exists()
                                  else NOTEBOOKS_DIR).relative_to(REPO).as_posix()
    command = [
        sys.executable, "-m", "jupyter", "lab", "--no-browser",
        f"--ServerApp.ip={ip}", f"--ServerApp.port={port}",
        f"--ServerApp.root_dir={REPO}", f"--LabApp.default_url={default_url}",
        *LAB_ARGS,
    ]
    if os.geteuid() == 0:
        # Containers and workshop VMs often run everything as root; Jupyter refuses by default.
        command.append("--allow-root")
    return subprocess.Popen(command)


def wait_for_server(process: subprocess.Popen) -> dict | None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        server = server_for_repo()
        if server and server.get("pid") == process.pid:
            return server
        time.sleep(1)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ip", default="127.0.0.1",
                        help="address to listen on (0.0.0.0 on a shared workshop VM)")
    parser.add_argument("--port", type=int, default=8888)
    parser.add_argument("--tensorboard-port", type=int, default=DEFAULT_PORT)
    args = parser.parse_args(argv)

    ensure_learner_script()
    tensorboard = ensure_tensorboard(port=args.tensorboard_port)
    os.environ[PORT_VARIABLE] = str(args.tensorboard_port)  # inherited by JupyterLab's kernels
    # Kernels and terminals inherit these too: without them, a script run with `!python`,
    # `!mpirun` or `!horovodrun` hangs in hvd.init() while TensorBoard listens (see facts.py).
    os.environ.update(with_safe_env())
    existing = server_for_repo()
    if existing:
        print("JupyterLab is already running for this workbook.")
        print_banner(existing, tensorboard.url)
        return 0

    process = start_lab(args.ip, args.port)
    try:
        server = wait_for_server(process)
        if server is None:
            code = process.poll()
            process.terminate()
            why = (f"exited with code {code}" if code is not None
                   else f"did not start within {START_TIMEOUT_S} s")
            print(f"error: JupyterLab {why} (see its messages above).", file=sys.stderr)
            return 1
        print_banner(server, tensorboard.url)
        # Ctrl-C reaches JupyterLab too (same process group); SIGTERM is passed on explicitly.
        signal.signal(signal.SIGTERM, lambda *_: process.terminate())
        try:
            return process.wait()
        except KeyboardInterrupt:
            return process.wait()
    finally:
        tensorboard.stop()


if __name__ == "__main__":
    sys.exit(main())

"""The hub process: start it in the background, find it, stop it (with everything it started)."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil

from hub.settings import HUB_PORTS, SETTINGS_VARIABLE, HubSettings
from workbook.ports import is_free, taken_words

CONFIG = Path(__file__).with_name("jupyterhub_config.py")
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 60


def log_path(settings: HubSettings) -> Path:
    return Path(settings.state_dir) / "jupyterhub.log"


def running(settings: HubSettings) -> psutil.Process | None:
    """The hub started from these settings, if it runs."""
    pid_file = Path(settings.state_dir) / "jupyterhub.pid"
    try:
        process = psutil.Process(int(pid_file.read_text().strip()))
        if "jupyterhub" in " ".join(process.cmdline()) and process.is_running():
            return process
    except (OSError, ValueError, psutil.Error):
        pass
    return None


def answers(settings: HubSettings) -> bool:
    context = ssl._create_unverified_context() if settings.ssl_cert else None  # its own cert
    try:
        with urllib.request.urlopen(settings.url + "hub/api/", timeout=5, context=context) as reply:
            return reply.status == 200
    except (OSError, urllib.error.URLError):
        return False


MOVES_TRIED = 50  # blocks of HUB_PORTS after the usual one, before giving up


def _taken(settings: HubSettings, port: int) -> int | None:
    """The first of the hub's ports from `port` that another program holds, else None."""
    return next((p for p, host in settings.ports_from(port) if not is_free(p, host)), None)


def take_free_ports(settings: HubSettings, asked: bool) -> str | None:
    """Makes sure the hub can listen where `settings` says: None when it can; else, unless the
    port was `asked` for (then SystemExit, naming the holder), moves settings.port to the next
    free block and says so: `port 8000 was taken by PID 42 (...), so the hub is on 8004`."""
    taken = _taken(settings, settings.port)
    if taken is None:
        return None
    moves = (settings.port + HUB_PORTS * n for n in range(1, MOVES_TRIED + 1))
    free = next(
        (port for port in moves if port + HUB_PORTS <= 65536 and _taken(settings, port) is None),
        None,
    )
    if asked or free is None:
        instead = f'make hub HUB_ARGS="--port {free}"' if free else "another --port"
        raise SystemExit(
            f"error: {taken_words(taken)}, and the hub needs {settings.port}-"
            f"{settings.port + HUB_PORTS - 1}: stop that program, or start on other ports: "
            f"{instead}"
        )
    said = f"{taken_words(taken)}, so the hub is on {free}"
    settings.port = free
    return said


def start(settings: HubSettings) -> int:
    """Start JupyterHub in its own session; its pid once it answers. RuntimeError with the
    log's tail when it does not."""
    venv_bin = Path(settings.venv) / "bin"
    env = {
        **os.environ,
        SETTINGS_VARIABLE: str(settings.path),
        "PATH": f"{venv_bin}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "PYTHONPATH": settings.repo,
    }
    log = log_path(settings)
    # Root only: every request and file name of every attendee is in it.
    descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.chmod(log, 0o600)  # a log from an older hub
    with os.fdopen(descriptor, "a") as out:
        process = subprocess.Popen(
            [str(venv_bin / "jupyterhub"), "-f", str(CONFIG)],
            cwd=settings.state_dir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=lambda: os.umask(0o077),
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        if answers(settings):
            return process.pid
        time.sleep(1)
    why = (
        f"exited with code {process.returncode}"
        if process.poll() is not None
        else f"did not answer within {START_TIMEOUT_S} s"
    )
    stop_pid(process.pid)
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
    raise RuntimeError(f"JupyterHub {why}. The end of {log}:\n{tail}")


def stop_pid(pid: int) -> None:
    """SIGTERM (JupyterHub then stops the servers and the proxy), SIGKILL after a while."""
    try:
        hub = psutil.Process(pid)
        family = [hub, *hub.children(recursive=True)]
    except psutil.Error:
        return
    try:
        hub.send_signal(signal.SIGTERM)
    except psutil.Error:
        return
    gone, alive = psutil.wait_procs([hub], timeout=STOP_TIMEOUT_S)
    for process in alive + family:
        try:
            process.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(family, timeout=10)


def stop(settings: HubSettings) -> bool:
    hub = running(settings)
    if hub is None:
        return False
    stop_pid(hub.pid)
    proxy = Path(settings.state_dir) / "proxy.pid"
    try:
        psutil.Process(int(proxy.read_text().strip())).kill()  # if the hub left it behind
    except (OSError, ValueError, psutil.Error):
        pass
    return True


def api_url(settings: HubSettings) -> str:
    """The hub's own REST API (hub/jupyterhub_config.py: on 127.0.0.1)."""
    return f"http://127.0.0.1:{settings.hub_api_port}/hub/api"


def end_sessions(settings: HubSettings, user: str) -> str:
    """Every open session of `user` ends: the hub stops their server and forgets them (their
    log-in cookies and tokens with them); their next log-in makes them again. What was done,
    in words; RuntimeError when the hub refuses."""
    if running(settings) is None:
        return "the hub is not running: no session is open"
    request = urllib.request.Request(
        f"{api_url(settings)}/users/{user}",
        method="DELETE",
        headers={"Authorization": f"token {settings.api_token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=STOP_TIMEOUT_S):
            return "their open sessions ended (their server stopped; they log in again)"
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return "no session was open"
        raise RuntimeError(
            f"the hub refused to end {user}'s sessions: {error.code} "
            f"{error.read()[:200].decode(errors='replace')}"
        ) from None
    except OSError as error:
        raise RuntimeError(
            f"the hub's API did not answer ({error}): {user}'s open sessions go "
            f"on until `python -m hub down`"
        ) from None


def other_hubs() -> list[int]:
    """The pids of workshop hubs still running on this machine (another state folder): they
    need the folders `make hub` opened as much as this one did."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        words = process.info["cmdline"] or []
        if any(word.endswith("jupyterhub") for word in words[:2]) and str(CONFIG) in words:
            found.append(process.pid)
    return found

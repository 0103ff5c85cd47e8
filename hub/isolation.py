"""What keeps one attendee's things from another on the one machine (issue 29), beyond the
private homes (hub.accounts) and the limits (hub.cores, hub.limits):

- ports: each account has a range of its own (PORTS_EACH ports from PORT_BLOCK_START, the
  instructor's first); its TensorBoard takes the first (hub.spawner), the next ones when that is
  in use (workbook.ports). No other account can listen on them (hub.port_guard: a BPF program
  on bind() in each account's cgroup), and a firewall rule (iptables' owner match, chain
  WORKBOOK-HUB in OUTPUT) lets only that account connect to them, so only its own server's proxy
  (/user/NAME/proxy/PORT/, behind the hub's log-in) reaches them; and only that account may
  answer on them. iptables comes from Debian when missing.
- /proc with hidepid=invisible: an account sees only its own processes and command lines (root
  sees all); `hub down` puts back what was there.
- the attendee's terminal: a login shell resets PATH (/etc/profile), so /etc/profile.d/ gets a
  line that puts the shared environment first again in the hub's servers' shells.
"""

from __future__ import annotations

import pwd
import re
import shutil
import subprocess
from pathlib import Path

from hub import port_guard
from hub.settings import HubSettings
from workbook.ports import PORTS_TRIED

CHAIN = "WORKBOOK-HUB"
# Account i (from 0, the instructor first) has PORTS_EACH ports from PORT_BLOCK_START + i *
# PORTS_EACH: as many as a TensorBoard start tries (workbook.ports), so that a move stays in
# the range. Above make lab's own (6006 and the ports it moves to), below ephemeral ports.
PORT_BLOCK_START = 6100
PORTS_EACH = PORTS_TRIED
PROFILE = Path("/etc/profile.d/horovod-workbook-hub.sh")
APT = Path(__file__).resolve().parents[1] / "bootstrap" / "apt.sh"


def accounts(settings: HubSettings) -> list[str]:
    return [settings.instructor, *settings.attendees]


def port_range(settings: HubSettings, user: str) -> range:
    start = PORT_BLOCK_START + accounts(settings).index(user) * PORTS_EACH
    return range(start, start + PORTS_EACH)


def port_block(settings: HubSettings) -> range:
    """Every account's range, end to end."""
    return range(PORT_BLOCK_START, PORT_BLOCK_START + len(accounts(settings)) * PORTS_EACH)


def tensorboard_port(settings: HubSettings, user: str) -> int:
    return port_range(settings, user).start


# --- TensorBoard's ports -------------------------------------------------------------------


def iptables() -> str | None:
    found = shutil.which("iptables")
    if found is None and APT.is_file():
        subprocess.run(
            [
                "sh",
                "-c",
                f'. "{APT}" && apt_install "iptables, so that only each '
                f'attendee reaches their TensorBoard" iptables',
            ],
            check=False,
        )
        found = shutil.which("iptables")
    return found


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["iptables", "-w", "10", *args], capture_output=True, text=True, check=check, timeout=60
    )


def port_rules(settings: HubSettings) -> list[list[str]]:
    rules = []
    for user in accounts(settings):
        ports, uid = port_range(settings, user), str(pwd.getpwnam(user).pw_uid)
        port = f"{ports.start}:{ports[-1]}"
        # Another account's connection to the ports: refused at once.
        rules.append(
            [
                "-o",
                "lo",
                "-p",
                "tcp",
                "--syn",
                "--dport",
                port,
                "-m",
                "owner",
                "!",
                "--uid-owner",
                uid,
                "-j",
                "REJECT",
                "--reject-with",
                "tcp-reset",
            ]
        )
        # Another account listening on a port (where hub.port_guard could not refuse it): its
        # answer to the handshake never leaves, so the owner's browser never talks to it.
        rules.append(
            [
                "-o",
                "lo",
                "-p",
                "tcp",
                "--sport",
                port,
                "--tcp-flags",
                "SYN,ACK",
                "SYN,ACK",
                "-m",
                "owner",
                "!",
                "--uid-owner",
                uid,
                "-j",
                "DROP",
            ]
        )
    return rules


def guard_tensorboard(settings: HubSettings) -> str | None:
    """The firewall rules for every account's TensorBoard port; None, or why there are none."""
    if iptables() is None:
        return "no iptables: other attendees can reach a TensorBoard's port"
    _run("-N", CHAIN, check=False)  # exists already: flushed below
    _run("-F", CHAIN)
    for rule in port_rules(settings):
        _run("-A", CHAIN, *rule)
    if _run("-C", "OUTPUT", "-j", CHAIN, check=False).returncode != 0:
        _run("-I", "OUTPUT", "1", "-j", CHAIN)
    return None


def guard_ports(settings: HubSettings) -> str | None:
    """Each account's cgroup that refuses it the others' ports (hub.port_guard); None, or why
    there is none."""
    for user in accounts(settings):
        try:
            port_guard.guard(user, port_block(settings), port_range(settings, user))
        except OSError as error:
            return (
                f"ports cannot be kept to their owner here ({error.strerror or error}): "
                "another attendee can listen first on a TensorBoard's port"
            )
    return None


def unguard_ports(settings: HubSettings) -> None:
    for user in accounts(settings):
        port_guard.remove(user)


def unguard_tensorboard() -> bool:
    if shutil.which("iptables") is None or _run("-L", CHAIN, "-n", check=False).returncode:
        return False
    while _run("-D", "OUTPUT", "-j", CHAIN, check=False).returncode == 0:
        pass
    _run("-F", CHAIN, check=False)
    _run("-X", CHAIN, check=False)
    return True


# --- /proc -----------------------------------------------------------------------------------


def proc_options() -> str:
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[1] == "/proc":
            return fields[3]
    return ""


def hidepid_of(options: str) -> str:
    found = re.search(r"hidepid=(\w+)", options)
    return found.group(1) if found else "0"


def hide_processes() -> tuple[str | None, str | None]:
    """/proc remounted with hidepid=invisible: (hidepid before, None) or (None, why not)."""
    before = hidepid_of(proc_options())
    if before in ("2", "invisible"):
        return before, None
    reply = subprocess.run(
        ["mount", "-o", "remount,hidepid=invisible", "/proc"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if reply.returncode != 0:
        reply = subprocess.run(
            ["mount", "-o", "remount,hidepid=2", "/proc"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    if reply.returncode != 0:
        return None, (
            f"/proc cannot be remounted with hidepid here ({reply.stderr.strip()}): "
            "attendees can see each other's processes and command lines"
        )
    return before, None


def restore_processes(before: str | None) -> bool:
    if before is None or hidepid_of(proc_options()) == before:
        return False
    return (
        subprocess.run(
            ["mount", "-o", f"remount,hidepid={before}", "/proc"], capture_output=True, timeout=30
        ).returncode
        == 0
    )


# --- the terminal ----------------------------------------------------------------------------


def profile_text(settings: HubSettings) -> str:
    venv_bin = Path(settings.venv) / "bin"
    return (
        f"# Written by `make hub` (hub/isolation.py); `hub down` removes it. In the hub's\n"
        f"# servers' terminals (login shells), the workbook's environment comes first.\n"
        f'if [ -n "$JUPYTERHUB_USER" ] && [ -d "{venv_bin}" ]; then\n'
        f'    case ":$PATH:" in *":{venv_bin}:"*) ;; *) PATH="{venv_bin}:$PATH" ;; esac\n'
        f"    export PATH\nfi\n"
    )


def write_profile(settings: HubSettings, path: Path = PROFILE) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(profile_text(settings))
    path.chmod(0o644)
    return path


def remove_profile(path: Path = PROFILE) -> bool:
    try:
        path.unlink()
        return True
    except FileNotFoundError:
        return False

"""Hosts: which of a run's hosts horovodrun reaches with ssh, and a quick check that it can.

horovodrun starts the workers on another machine with `ssh <host> <command>`. When a host is
down, has no sshd or asks for a password, horovodrun 0.28.1 tries ssh 5 times with a 10-second
connect timeout and then says only "could not connect to some hosts via ssh". Before a run on
other machines the runner therefore tries `ssh <host> true` once on every host, in parallel,
with the options horovodrun uses (so a host that passes here passes there), and stops with one
message that names each host that failed, ssh's own error, and what to fix.
"""

from __future__ import annotations

import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from workbook.runner.command import host_entries, option_value

SSH_PORT_OPTIONS = ("-p", "--ssh-port")
SSH_IDENTITY_OPTIONS = ("-i", "--ssh-identity-file")
START_TIMEOUT_OPTIONS = ("--start-timeout",)
# horovodrun's limit for its start-up checks on the hosts (ssh, the interface search); its
# default is 30 s, or $HOROVOD_START_TIMEOUT. For remote hosts the runner passes one unless one
# is given, so the command shows the bound, with room for hosts that start Python slowly.
REMOTE_START_TIMEOUT_S = 60
CONNECT_TIMEOUT_S = 5  # per host; the hosts are tried in parallel
# A host that accepts the connection but never answers (a hung sshd) must not hang us either.
SSH_TIMEOUT_S = CONNECT_TIMEOUT_S + 10
# The options horovodrun's own ssh calls use (horovod/runner/util/remote.py), plus BatchMode:
# fail at once where ssh would ask for a password or a passphrase, since nobody can type it.
SSH_OPTIONS = (
    "-o", "PasswordAuthentication=no",
    "-o", "StrictHostKeyChecking=no",
    "-o", "BatchMode=yes",
    "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
)  # fmt: skip
LOCAL_NAMES = frozenset({"localhost", "127.0.0.1"})


class HostsUnreachable(RuntimeError):
    """Some hosts cannot be reached with ssh; the message says which, why, and what to do.

    In Jupyter it shows as its message alone, without a traceback: nothing of the run started,
    and the frames of the runner would only hide the message.
    """

    def _render_traceback_(self) -> list[str]:  # IPython's hook for how an error is shown
        return [f"\x1b[31m{type(self).__name__}\x1b[0m: {self}"]


@dataclass(frozen=True)
class SshSettings:
    """What horovodrun's ssh calls get from its command line: `-p PORT`, `-i KEY`."""

    port: str | None = None
    identity_file: str | None = None

    def args(self) -> list[str]:
        port = ["-p", self.port] if self.port else []
        identity = ["-i", self.identity_file] if self.identity_file else []
        return [*port, *identity]


def ssh_settings(options: list[str]) -> SshSettings:
    """The ssh port and key given to horovodrun, if any (`-p 2222`, `--ssh-identity-file=k`)."""
    return SshSettings(
        port=option_value(options, SSH_PORT_OPTIONS),
        identity_file=option_value(options, SSH_IDENTITY_OPTIONS),
    )


def host_names(hosts: str) -> list[str]:
    """The distinct host names of a -H value, in order: `a:2,b:2,a:1` -> [a, b]."""
    return list(dict.fromkeys(name for name, _ in host_entries(hosts)))


def _local_addresses() -> set[str]:
    import psutil  # here: the runner is imported by every notebook, this is needed by few

    return {
        address.address
        for addresses in psutil.net_if_addrs().values()
        for address in addresses
        if address.family == socket.AF_INET
    }


def is_this_machine(name: str, local_addresses: set[str] | None = None) -> bool:
    """horovodrun's rule: a host is local when its name resolves to an address of this machine.

    A name that does not resolve counts as remote: ssh may still know it (an alias in
    ~/.ssh/config), and if not, ssh's own error says so.
    """
    if name in LOCAL_NAMES or name == socket.gethostname():
        return True
    try:
        address = socket.gethostbyname(name)
    except (OSError, UnicodeError):
        return False
    return address in (_local_addresses() if local_addresses is None else local_addresses)


def remote_hosts(hosts: str) -> list[str]:
    """The hosts of a -H value that horovodrun would start its workers on with ssh."""
    local = _local_addresses()
    return [name for name in host_names(hosts) if not is_this_machine(name, local)]


def ssh_command(host: str, settings: SshSettings = SshSettings()) -> list[str]:
    """`ssh <options> [-p PORT] [-i KEY] host true`: logs in, runs nothing, logs out."""
    return ["ssh", *SSH_OPTIONS, *settings.args(), host, "true"]


def ssh_problem(host: str, settings: SshSettings = SshSettings(), env=None) -> str | None:
    """None when `ssh host true` works; otherwise what went wrong, in ssh's words."""
    try:
        done = subprocess.run(
            ssh_command(host, settings),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=SSH_TIMEOUT_S,
            env=env,
        )
    except FileNotFoundError:
        return "there is no ssh command on this machine (Debian: apt-get install openssh-client)"
    except subprocess.TimeoutExpired:
        return f"no answer within {SSH_TIMEOUT_S} s"
    if done.returncode == 0:
        return None
    said = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    # ssh prints "Warning: Permanently added ..." before the real error: keep the error.
    said = [line for line in said if not line.startswith("Warning: Permanently added")]
    return said[-1] if said else f"ssh exited with code {done.returncode}"


def unreachable_message(problems: dict[str, str], settings: SshSettings = SshSettings()) -> str:
    """One message for all failed hosts: which, ssh's error, and the command to try by hand."""
    failed = ", ".join(problems)
    reasons = "; ".join(f"{host}: {reason}" for host, reason in problems.items())
    first = next(iter(problems))
    by_hand = " ".join(["ssh", *settings.args(), first, "true"])
    return (
        f"cannot start the run: ssh cannot reach {failed} ({reasons}). horovodrun starts the "
        f"workers there with ssh, without a password: check the host name, that the machine "
        f"is up and runs sshd, and that `{by_hand}` works from this machine without asking "
        f"anything (ssh-copy-id {first} installs your key)."
    )


def check_ssh(hosts: list[str], settings: SshSettings = SshSettings(), env=None) -> dict[str, str]:
    """{host: problem} for the hosts `ssh host true` fails on, all tried at the same time."""
    if not hosts:
        return {}
    with ThreadPoolExecutor(max_workers=min(16, len(hosts))) as pool:
        found = dict(zip(hosts, pool.map(lambda host: ssh_problem(host, settings, env), hosts)))
    return {host: problem for host, problem in found.items() if problem is not None}


def ensure_reachable(
    hosts: list[str], settings: SshSettings = SshSettings(), env=None, say=None
) -> None:
    """Raises HostsUnreachable unless ssh reaches every host; `say` hears what is going on."""
    if not hosts:
        return
    if say is not None:
        say(f"Checking that ssh reaches {', '.join(hosts)} (at most {SSH_TIMEOUT_S} s)")
    problems = check_ssh(hosts, settings, env)
    if problems:
        raise HostsUnreachable(unreachable_message(problems, settings))

"""Hosts: which of a run's hosts are this machine, and what the runner does on the others.

horovodrun starts the workers on another machine with `ssh <host> <command>`. Before a run
the runner tries `ssh <host> true` once on every other host, in parallel, with the options
horovodrun uses: when a host is down, has no sshd or asks for a password, horovodrun 0.28.1
tries 5 times with a 10-second connect timeout and then says only "could not connect to some
hosts via ssh"; the runner names each host, ssh's own error, and what to fix.

After a run that failed or was stopped, the runner stops what is left of it on each other
host. ssh without a terminal does not pass a stop on: when horovodrun's ssh client ends, the
worker on the far side keeps running. Every process of a run carries the run's marker in its
environment (horovodrun exports the environment on its ssh command line), and a short shell
script over ssh stops the processes that carry it.
"""

from __future__ import annotations

import itertools
import shlex
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from workbook.facts import with_safe_env

LOCAL_NAMES = frozenset({"localhost", "127.0.0.1"})


def _horovod_hosts():
    # Horovod's own reader of -H values and hostfiles (imported here: the runner's import stays
    # small, and only runs with hosts need it).
    from horovod.runner.common.util import hosts

    return hosts


def host_entries(hosts: str) -> list[tuple[str, int]]:
    """(name, slots) per entry of a horovodrun -H value (`host1:2,host2:4`), read by Horovod.

    horovodrun 0.28.1 refuses a value that is not `name:slots,...` (launch.py checks it with
    parse_hosts_and_slots) and assigns ranks from parse_hosts' entries, in order.
    """
    horovod_hosts = _horovod_hosts()
    try:
        horovod_hosts.parse_hosts_and_slots(hosts)
    except ValueError:
        raise ValueError(
            f"-H {hosts}: horovodrun 0.28.1 takes the hosts as name:slots, comma-separated, "
            f"every host with its number of slots (host1:2,host2:4)"
        ) from None
    return [(host.hostname, host.slots) for host in horovod_hosts.parse_hosts(hosts)]


def slots_of_hosts(hosts: str) -> int:
    """Total slots of a horovodrun -H value like `host1:4,host2:4`."""
    return sum(slots for _, slots in host_entries(hosts))


def hosts_for_workers(hosts: str, workers: int) -> str:
    """The slots horovodrun gives `workers` ranks, as a -H value: `a:2,b:4`, 5 -> `a:2,b:3`."""
    host_entries(hosts)  # the value's check, with the runner's message
    horovod_hosts = _horovod_hosts()
    assigned = horovod_hosts.get_host_assignments(horovod_hosts.parse_hosts(hosts), 1, workers)
    # Consecutive ranks on one entry of -H share a host name: one name:count per entry.
    entries = itertools.groupby(assigned, key=lambda slot: slot.hostname)
    return ",".join(f"{name}:{len(list(slots))}" for name, slots in entries)


def hosts_of_hostfile(path: Path) -> str:
    """A hostfile as horovodrun 0.28.1 reads it (`host slots=4` per line), as a -H value."""
    try:
        return _horovod_hosts().parse_host_files(str(path))
    except IndexError:  # a line without `slots=`, an empty line or a comment
        raise ValueError(
            f"hostfile {path}: horovodrun 0.28.1 reads every line as `host slots=N` and stops "
            f"at any other line (an empty line or a comment too)"
        ) from None


def host_names(hosts: str) -> list[str]:
    """The distinct host names of a -H value, in order: `a:2,b:2,a:1` -> [a, b]."""
    return list(dict.fromkeys(name for name, _ in host_entries(hosts)))


def local_addresses() -> set[str]:
    """This machine's IPv4 addresses, on every interface."""
    import psutil  # here: the runner is imported by every notebook, this is needed by few

    return {
        address.address
        for addresses in psutil.net_if_addrs().values()
        for address in addresses
        if address.family == socket.AF_INET
    }


def is_this_machine(name: str, addresses: set[str] | None = None) -> bool:
    """horovodrun's rule: a host is local when its name resolves to an address of this machine.

    The runner's one rule for "this machine": the layout, the start-up bound, the ssh check
    and the clean-up on other hosts all ask here. A name that does not resolve counts as
    remote: ssh may still know it (an alias in ~/.ssh/config), and if not, ssh's error says so.
    """
    if name in LOCAL_NAMES or name == socket.gethostname():
        return True
    try:
        address = socket.gethostbyname(name)
    except (OSError, UnicodeError):
        return False
    return address in (local_addresses() if addresses is None else addresses)


def remote_hosts(hosts: str) -> list[str]:
    """The hosts of a -H value that horovodrun would start its workers on with ssh."""
    addresses = local_addresses()
    return [name for name in host_names(hosts) if not is_this_machine(name, addresses)]


# --- ssh ---------------------------------------------------------------------------------------

CONNECT_TIMEOUT_S = 5  # per host; the hosts are tried in parallel
# A host that accepts the connection but never answers (a hung sshd) must not hang us either.
SSH_TIMEOUT_S = CONNECT_TIMEOUT_S + 10
# The options horovodrun's own ssh calls use (horovod/runner/util/remote.py), plus BatchMode:
# fail at once where ssh would ask for a password or a passphrase, since nobody can type it.
SSH_OPTIONS = (
    "-o",
    "PasswordAuthentication=no",
    "-o",
    "StrictHostKeyChecking=no",
    "-o",
    "BatchMode=yes",
    "-o",
    f"ConnectTimeout={CONNECT_TIMEOUT_S}",
)


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


def ssh_command(
    host: str, settings: SshSettings = SshSettings(), remote: str = "true"
) -> list[str]:
    """`ssh <options> [-p PORT] [-i KEY] host <remote>`; by default logs in and runs nothing."""
    return ["ssh", *SSH_OPTIONS, *settings.args(), host, remote]


def _ssh(host: str, settings: SshSettings, remote: str, env, timeout: float):
    """Runs `remote` on `host`; (completed process, None) or (None, what went wrong)."""
    try:
        done = subprocess.run(
            ssh_command(host, settings, remote),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=with_safe_env(env),
        )
    except FileNotFoundError:
        return (
            None,
            "there is no ssh command on this machine (Debian: apt-get install openssh-client)",
        )
    except subprocess.TimeoutExpired:
        return None, f"no answer within {timeout:g} s"
    return done, None


def _ssh_error(done: subprocess.CompletedProcess) -> str:
    said = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    # ssh prints "Warning: Permanently added ..." before the real error: keep the error.
    said = [line for line in said if not line.startswith("Warning: Permanently added")]
    return said[-1] if said else f"ssh exited with code {done.returncode}"


def ssh_problem(host: str, settings: SshSettings = SshSettings(), env=None) -> str | None:
    """None when `ssh host true` works; otherwise what went wrong, in ssh's words."""
    done, problem = _ssh(host, settings, "true", env, SSH_TIMEOUT_S)
    if problem is not None:
        return problem
    return None if done.returncode == 0 else _ssh_error(done)


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


def _on_each(hosts: list[str], call) -> dict:
    with ThreadPoolExecutor(max_workers=min(16, len(hosts))) as pool:
        return dict(zip(hosts, pool.map(call, hosts)))


def check_ssh(hosts: list[str], settings: SshSettings = SshSettings(), env=None) -> dict[str, str]:
    """{host: problem} for the hosts `ssh host true` fails on, all tried at the same time."""
    if not hosts:
        return {}
    found = _on_each(hosts, lambda host: ssh_problem(host, settings, env))
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


# --- stopping what a run left on the other hosts -----------------------------------------------

REMOTE_STOP_TIMEOUT_S = SSH_TIMEOUT_S + 10  # the stop script itself waits up to 6 s

# POSIX sh: the pids of the processes whose environment holds the line $1 (NAME=VALUE). The
# shell running this has the marker on its command line, never in its environment.
_MARKED = """marked() {
  for f in /proc/[0-9]*/environ; do
    if tr '\\0' '\\n' < "$f" 2>/dev/null | grep -qxF "$1"; then p=${f#/proc/}; echo "${p%/environ}"; fi
  done
}"""
# SIGTERM, up to 3 s for them to end, then SIGKILL; prints what is still there after 3 s more.
_STOP_MARKED = (
    _MARKED
    + """
pids=$(marked "$1"); [ -z "$pids" ] && exit 0
kill -TERM $pids 2>/dev/null
for i in 1 2 3 4 5 6; do pids=$(marked "$1"); [ -z "$pids" ] && exit 0; sleep 0.5; done
kill -KILL $pids 2>/dev/null
for i in 1 2 3 4 5 6; do pids=$(marked "$1"); [ -z "$pids" ] && exit 0; sleep 0.5; done
echo "left: $pids"
"""
)


def stop_remote(
    hosts: list[str], marker: tuple[str, str], settings: SshSettings = SshSettings(), env=None
) -> dict[str, str]:
    """Stops the processes carrying `marker` (name, value) on each host, all hosts at once.

    Returns {host: problem} for the hosts where that did not work, or where some are left.
    """
    if not hosts:
        return {}
    remote = f"sh -c {shlex.quote(_STOP_MARKED)} stop {shlex.quote('='.join(marker))}"

    def stop(host: str) -> str | None:
        done, problem = _ssh(host, settings, remote, env, REMOTE_STOP_TIMEOUT_S)
        if problem is not None:
            return problem
        if done.returncode != 0:
            return _ssh_error(done)
        return done.stdout.strip() or None

    found = _on_each(hosts, stop)
    return {host: problem for host, problem in found.items() if problem is not None}

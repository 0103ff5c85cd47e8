"""Ports on this machine: a free one near the usual one, and who holds a taken one.

    free_port_from(6006)        6006 when nothing listens there, else the next free one
    port_holder(6006)           "PID 4242 (python -m http.server 6006)", or None
    taken_words(6006)           "port 6006 was taken by PID 4242 (python -m ...)", for messages
    says_port_taken(log_text)   whether a server's log says its port was taken

Who holds a port is read from Linux's /proc (/proc/net/tcp and tcp6 for the listening
socket's inode, /proc/PID/fd for the process that has it open), without starting a process;
elsewhere, or for another user's process, it is not known and None says so.
"""

from __future__ import annotations

import errno
import os
import re
import socket
from pathlib import Path

PORTS_TRIED = 20  # the usual port and the 19 after it; then any free port the system gives
_LISTEN = "0A"  # the state of a listening socket in /proc/net/tcp


def is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on `port` now (nothing listens there, on any address)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As servers bind: a port whose last connection is only closing is free for them.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            # EPERM: refused to this user (a workshop hub keeps each attendee's ports theirs).
            if error.errno in (errno.EADDRINUSE, errno.EACCES, errno.EPERM):
                return False
            raise
    return True


def free_port_from(port: int, host: str = "127.0.0.1") -> int:
    """`port` when it is free, else the first free one of the next PORTS_TRIED - 1, else one
    the system picks."""
    for candidate in range(port, min(port + PORTS_TRIED, 65536)):
        if is_free(candidate, host):
            return candidate
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
            if (
                len(fields) > 9
                and fields[3] == _LISTEN
                and int(fields[1].rsplit(":", 1)[1], 16) == port
            ):
                inodes.add(fields[9])
    return inodes


def _command_line(pid: str) -> str:
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return ""
    text = " ".join(w.decode(errors="replace") for w in words if w)
    return text if len(text) <= 120 else text[:117] + "..."


def port_holder(port: int) -> str | None:
    """The process listening on `port`, as `PID 4242 (its command line)`; None when it cannot be
    known (no /proc, another user's process, nothing listening)."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue  # gone, or another user's
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in wanted:
                    command = _command_line(pid)
                    return f"PID {pid} ({command})" if command else f"PID {pid}"
            except OSError:
                continue
    return None


def taken_words(port: int) -> str:
    """`port 6006 was taken by PID 4242 (python -m http.server 6006)`, or `port 6006 was
    taken` when its holder can't be known."""
    holder = port_holder(port)
    return f"port {port} was taken by {holder}" if holder else f"port {port} was taken"


# What servers write when their port is taken: TensorBoard's "could not bind to port 6006, it
# was already in use", Jupyter's "The port 8888 is already in use", Python's "[Errno 98]
# Address already in use".
_TAKEN = re.compile(r"could not bind to port|already in use", re.IGNORECASE)


def says_port_taken(log_text: str) -> bool:
    """Whether a server's log says that its port (or address) was taken."""
    return bool(_TAKEN.search(log_text))

"""Ports no other account can take first: each account's server runs in a cgroup (v2) of its
own, with a BPF program on bind() (BPF_CGROUP_INET4_BIND and INET6_BIND) that refuses every port
of the workshop's block (hub.isolation.port_block) outside the account's own range. Another
attendee's bind there fails at once with "Operation not permitted", whatever the address
(127.0.0.1, 0.0.0.0, ::) or socket option; the account's own ports, port 0 and every port outside
the block bind as before (kernels, Horovod, MPI pick theirs there).

The program is ten instructions, loaded with the bpf() system call (no compiler, no library):
it reads the port the process asks for and answers 1 (allow) or 0 (refuse). Attached to the
cgroup, it stays until the cgroup goes (`hub down`); a process cannot leave the cgroup (its
folders are root's) nor detach the program (that needs CAP_BPF).

Reaching a port is the firewall's part (hub.isolation: only the owner's connections, only the
owner's answers).
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
from pathlib import Path

CGROUP_NAME = "horovod-workbook"
BPF_SYSCALL = {"x86_64": 321, "aarch64": 280}.get(platform.machine())
BPF_PROG_LOAD, BPF_PROG_ATTACH = 5, 8
BPF_PROG_TYPE_CGROUP_SOCK_ADDR = 18
BIND_HOOKS = (8, 9)  # BPF_CGROUP_INET4_BIND, BPF_CGROUP_INET6_BIND
USER_PORT_OFFSET = 24  # struct bpf_sock_addr.user_port (network byte order)
ATTR_SIZE = 128


def cgroup2_root(mounts: str | None = None) -> Path | None:
    """Where the unified (v2) hierarchy is mounted: /sys/fs/cgroup/unified beside v1's
    controllers, or /sys/fs/cgroup itself."""
    if mounts is None:
        try:
            mounts = Path("/proc/mounts").read_text()
        except OSError:
            return None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


def group(user: str, root: Path | None = None) -> Path | None:
    root = root or cgroup2_root()
    return root / CGROUP_NAME / user if root else None


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


def program(block: range, own: range) -> bytes:
    """BPF: allow (r0 = 1) a port outside `block` or inside `own`; refuse (r0 = 0) the rest."""
    return b"".join(
        [
            _insn(0x61, 2, 1, USER_PORT_OFFSET),  # r2 = ctx->user_port
            _insn(0xDC, 2, imm=16),  # r2 = be16(r2): the port, in this CPU's order
            _insn(0xB7, 0, imm=1),  # r0 = 1 (allow)
            _insn(0xA5, 2, off=5, imm=block.start),  # r2 < block: exit
            _insn(0x25, 2, off=4, imm=block[-1]),  # r2 > block: exit
            _insn(0xA5, 2, off=2, imm=own.start),  # r2 < own: refuse
            _insn(0x25, 2, off=1, imm=own[-1]),  # r2 > own: refuse
            _insn(0x05, off=1),  # own: exit
            _insn(0xB7, 0, imm=0),  # r0 = 0 (refuse)
            _insn(0x95),  # exit
        ]
    )


def _bpf(command: int, attr: bytes) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    buffer = ctypes.create_string_buffer(attr, ATTR_SIZE)
    answer = libc.syscall(BPF_SYSCALL, command, buffer, ATTR_SIZE)
    if answer < 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))
    return answer


def _load(code: bytes, hook: int) -> int:
    instructions = ctypes.create_string_buffer(code, len(code))
    license_ = ctypes.create_string_buffer(b"GPL")
    attr = struct.pack(
        "<IIQQIIQII16sII",
        BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
        len(code) // 8,
        ctypes.addressof(instructions),
        ctypes.addressof(license_),
        0,
        0,
        0,
        0,
        0,
        b"workbook_ports",
        0,
        hook,
    )
    return _bpf(BPF_PROG_LOAD, attr)


def guard(user: str, block: range, own: range, root: Path | None = None) -> Path:
    """The account's cgroup, made when missing, with the program on both bind hooks (attached
    again: the last one replaces the one before). OSError when this machine cannot."""
    if BPF_SYSCALL is None:
        raise OSError(f"no bpf() system call number known for {platform.machine()}")
    folder = group(user, root)
    if folder is None:
        raise OSError("no cgroup v2 hierarchy is mounted")
    folder.mkdir(parents=True, exist_ok=True)
    code = program(block, own)
    target = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for hook in BIND_HOOKS:
            loaded = _load(code, hook)
            try:
                _bpf(BPF_PROG_ATTACH, struct.pack("<IIII", target, loaded, hook, 0))
            finally:
                os.close(loaded)  # the cgroup keeps the program
    finally:
        os.close(target)
    return folder


def join(pid: int, user: str, root: Path | None = None) -> bool:
    """Put `pid` (and what it will start) into the account's cgroup, if `guard` made it."""
    folder = group(user, root)
    if folder is None or not (folder / "cgroup.procs").is_file():
        return False
    (folder / "cgroup.procs").write_text(str(pid))
    return True


def remove(user: str, root: Path | None = None) -> None:
    """The account's cgroup (its programs go with it) once it is empty; an empty parent too."""
    folder = group(user, root)
    if folder is None:
        return
    for each in (folder, folder.parent):
        try:
            each.rmdir()
        except OSError:
            return

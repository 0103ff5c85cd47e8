"""Command line: horovodrun's options, the script and its arguments, and the hosts they name."""

from __future__ import annotations

import socket
from pathlib import Path

# horovodrun 0.28.1 options that take no value (tests/test_runner.py checks this list against
# horovodrun's own parser). Every other option takes one value, --blacklist-cooldown-range two.
HOROVODRUN_FLAGS = frozenset("""
    -h --help -v --version -cb --check-build --disable-cache --verbose
    --hierarchical-allreduce --no-hierarchical-allreduce --hierarchical-allgather
    --no-hierarchical-allgather --torus-allreduce --no-torus-allreduce --autotune --no-autotune
    --timeline-mark-cycles --no-timeline-mark-cycles --no-stall-check --stall-check
    --mpi-threads-disable --no-mpi-threads-disable --tcp --log-with-timestamp
    --log-without-timestamp -prefix-timestamp --prefix-output-with-timestamp --log-hide-timestamp
    --no-log-hide-timestamp --gloo --mpi --jsrun
""".split())
TWO_VALUE_OPTIONS = frozenset({"--blacklist-cooldown-range"})
NP_OPTIONS = ("-np", "--num-proc")
HOSTS_OPTIONS = ("-H", "--hosts")
HOSTFILE_OPTIONS = ("-hostfile", "--hostfile")
CONTROLLER_FLAGS = ("--gloo", "--mpi", "--jsrun")


def split_horovodrun_args(tokens: list[str]) -> tuple[list[str], list[str]]:
    """Splits `[horovodrun options...] command [args...]` the way horovodrun does."""
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if not token.startswith("-") or token == "-":
            break
        if token == "--":
            return tokens[:index], tokens[index + 1 :]
        if "=" in token or token in HOROVODRUN_FLAGS:
            index += 1
        elif token in TWO_VALUE_OPTIONS:
            index += 3
        else:
            index += 2
    return tokens[:index], tokens[index:]


def option_value(options: list[str], names: tuple[str, ...]) -> str | None:
    """The value of the last of `names` in a horovodrun option list (`-np 2` or `-np=2`)."""
    value = None
    for index, token in enumerate(options):
        name, equals, inline = token.partition("=")
        if name in names:
            value = inline if equals else (options[index + 1] if index + 1 < len(options) else None)
    return value


def without_option(options: list[str], names: tuple[str, ...]) -> list[str]:
    """The option list without `names` and their values."""
    kept, skip = [], False
    for token in options:
        if skip:
            skip = False
            continue
        name, equals, _ = token.partition("=")
        if name in names:
            skip = not equals
            continue
        kept.append(token)
    return kept


def host_entries(hosts: str) -> list[tuple[str, int]]:
    """(name, slots) per host of a horovodrun -H value; a host without :N has 1 slot."""
    entries = []
    for host in filter(None, (h.strip() for h in hosts.split(","))):
        name, colon, slots = host.rpartition(":")
        entries.append((name or host, int(slots) if colon and slots.isdigit() else 1))
    return entries


def slots_of_hosts(hosts: str) -> int:
    """Total slots of a horovodrun -H value like `host1:4,host2:4`."""
    return sum(slots for _, slots in host_entries(hosts))


def hosts_of_hostfile(path: Path) -> str:
    """A hostfile (`host slots=4` per line) as a -H value (`host:4,...`)."""
    hosts = []
    for line in Path(path).read_text().splitlines():
        line = line.split("#")[0].strip()
        if not line:
            continue
        name, *rest = line.split()
        slots = next((r.split("=")[1] for r in rest if r.startswith("slots=")), "1")
        hosts.append(f"{name}:{slots}")
    return ",".join(hosts)


def hosts_are_local(hosts: str) -> bool:
    names = {name for name, _ in host_entries(hosts)}
    return names <= {"localhost", "127.0.0.1", socket.gethostname()}

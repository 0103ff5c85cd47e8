"""HTTPS for the hub: `make hub HUB_ARGS="--https"` makes a self-signed certificate once (in the
state folder, for the machine's name and addresses) and serves https with it; `--ssl-cert F
--ssl-key F` uses the instructor's own. With a self-signed certificate each attendee's browser
warns once: they compare the fingerprint the banner shows and accept it (Advanced, then
Proceed / Accept the risk)."""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
from pathlib import Path

import psutil

CERT, KEY = "hub-cert.pem", "hub-key.pem"
DAYS = 90


def names() -> list[str]:
    """The names and addresses the hub is reached at: this host's, and localhost."""
    found = {"localhost", socket.gethostname(), socket.getfqdn(), "127.0.0.1"}
    try:
        found |= {info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        pass
    # Every address of the machine's interfaces: attendees often type the IP address.
    found |= {
        address.address
        for addresses in psutil.net_if_addrs().values()
        for address in addresses
        if address.family == socket.AF_INET
    }
    return sorted(name for name in found if name)


def subject_alt_names(hosts: list[str]) -> str:
    parts = []
    for host in hosts:
        try:
            ipaddress.ip_address(host)
            parts.append(f"IP:{host}")
        except ValueError:
            parts.append(f"DNS:{host}")
    return ",".join(parts)


def self_signed(state_dir: Path) -> tuple[Path, Path, bool]:
    """The certificate and key in the state folder (made when missing) and whether made now."""
    cert, key = Path(state_dir) / CERT, Path(state_dir) / KEY
    if cert.is_file() and key.is_file():
        return cert, key, False
    hosts = names()
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-sha256",
            "-days",
            str(DAYS),
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-subj",
            f"/CN={socket.getfqdn()}/O=Horovod workbook workshop hub",
            "-addext",
            f"subjectAltName={subject_alt_names(hosts)}",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    os.chmod(key, 0o600)
    return cert, key, True


def fingerprint(cert: Path) -> str:
    reply = subprocess.run(
        ["openssl", "x509", "-in", str(cert), "-noout", "-fingerprint", "-sha256"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return reply.stdout.strip().split("=", 1)[-1] if reply.returncode == 0 else "?"

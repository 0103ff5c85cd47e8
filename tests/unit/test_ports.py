"""workbook/ports.py: a free port near the usual one, and who holds a taken one (from /proc)."""

import os
import socket
import sys

import pytest

from workbook import ports


def listening(host="127.0.0.1"):
    held = socket.socket()
    held.bind((host, 0))
    held.listen()
    return held


def test_a_taken_port_is_skipped_and_its_holder_named():
    with listening() as held:
        port = held.getsockname()[1]
        assert not ports.is_free(port)
        chosen = ports.free_port_from(port)
        assert chosen != port and ports.is_free(chosen)
        if sys.platform.startswith("linux"):
            # This test's own process, with its command line, found through /proc.
            assert ports.port_holder(port).startswith(f"PID {os.getpid()} (")
            said = ports.taken_words(port)
            assert said.startswith(f"port {port} was taken by PID {os.getpid()} (")
            assert said.count("(") == 1  # around the command only: nothing nested
    assert ports.is_free(port)
    assert ports.port_holder(port) is None
    assert ports.taken_words(port) == f"port {port} was taken"


def test_a_port_taken_on_every_address_is_taken_for_localhost_too():
    with listening("0.0.0.0") as held:
        assert not ports.is_free(held.getsockname()[1])


@pytest.mark.parametrize(
    "log, taken",
    [
        (
            "E1128 10:02:03 program.py:300] TensorBoard could not bind to port 6006, it was already "
            "in use\nERROR: TensorBoard could not bind to port 6006, it was already in use",
            True,
        ),
        ("[C 2026-11-28 ServerApp] The port 8888 is already in use", True),
        ("OSError: [Errno 98] Address already in use", True),
        ("TensorBoard 2.15.2 at http://127.0.0.1:6006/ (Press CTRL+C to quit)", False),
    ],
)
def test_what_a_server_logs_when_its_port_was_taken(log, taken):
    assert ports.says_port_taken(log) is taken

"""Ports that cannot be taken from another attendee on the workshop hub (issue 38.4), for real:
bob, in his own JupyterLab terminal (his server's cgroup, as every process of his), tries to
listen first on carol's TensorBoard port and on any port of her range: refused at once; his own
ports: his. carol then listens on her first port (where her TensorBoard goes; test_hub.py starts
the real one there) and reaches it through her server; bob cannot. The hub is the session's
(tests/hub_helpers.py).

Root only; slow (about 2 minutes on 2 cores).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hub import isolation, workbook_copy
from hub_helpers import ATTENDEES, give, home, log_in

pytestmark = [pytest.mark.timeout(900)]
pytest_plugins = ["hub_helpers"]  # the session's hub and browser

TRY_PORTS = """\
import socket, sys
for port in map(int, sys.argv[1:]):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
        s.listen()
        print("PORT", port, "listening")
    except OSError as error:
        print("PORT", port, "refused:", error.strerror)
    s.close()
"""


def terminal(page, command: str, timeout_ms: int = 90_000) -> str:
    """What `command` prints in a new JupyterLab terminal of the page's attendee."""
    return page.evaluate(
        """async ([command, timeout]) => {
        const terminals = window.jupyterapp.serviceManager.terminals;
        const session = await terminals.startNew();
        let text = '';
        session.messageReceived.connect((_, message) => {
            if (message.type === 'stdout') { text += message.content[0]; }
        });
        while (session.connectionStatus !== 'connected') {
            await new Promise(done => setTimeout(done, 100));
        }
        session.send({type: 'stdin', content: [command + '; echo "END""MARK"\\r']});
        const deadline = Date.now() + timeout;
        while (!text.includes('ENDMARK') && Date.now() < deadline) {
            await new Promise(done => setTimeout(done, 200));
        }
        await session.shutdown();
        return text;
    }""",
        [command, timeout_ms],
    )


def said_of(output: str) -> dict[int, str]:
    found = {}
    for line in output.splitlines():
        if line.startswith("PORT "):
            _, port, answer = line.strip().split(" ", 2)
            found[int(port)] = answer
    return found


def test_no_attendee_listens_on_or_reaches_anothers_ports(hub, browser):
    s, banner = hub
    _, bob, carol = ATTENDEES
    assert "ports cannot be kept to their owner" not in banner, banner
    carols, bobs = isolation.port_range(s, carol), isolation.port_range(s, bob)
    squatter = log_in(browser, s, bob)
    folder = workbook_copy.copy_dir(home(bob)) / "notebooks"
    give(bob, TRY_PORTS, folder / "try_ports.py")
    tried = [carols.start, carols[-1], bobs.start, bobs[-1], isolation.port_block(s)[-1] + 1]
    started = time.monotonic()
    python = Path(s.venv) / "bin" / "python"
    output = terminal(squatter, f"{python} notebooks/try_ports.py " + " ".join(map(str, tried)))
    said = said_of(output)
    print(f"bob's binds answered in {time.monotonic() - started:.1f} s: {said}")
    assert said == {
        carols.start: "refused: Operation not permitted",
        carols[-1]: "refused: Operation not permitted",
        bobs.start: "listening",
        bobs[-1]: "listening",
        tried[-1]: "listening",
    }, output[-2000:]

    # carol's server (TensorBoard's place: tests/system/test_hub.py starts the real one) listens
    # on her first port, and her own server's proxy reaches it.
    page = log_in(browser, s, carol)
    output = terminal(
        page,
        f"(setsid timeout 300 {python} -m http.server --bind 127.0.0.1 "
        f"{carols.start} >/dev/null 2>&1 &); for i in $(seq 90); do "
        f"c=$(curl -s -o /dev/null -w '%{{http_code}}' "
        f"http://127.0.0.1:{carols.start}/); [ $c = 200 ] && break; sleep 1; "
        "done; echo HTTP=$c",
        timeout_ms=150_000,
    )
    assert "HTTP=200" in output, output[-2000:]
    theirs = page.request.get(f"{s.url}user/{carol}/proxy/{carols.start}/")
    assert theirs.status == 200, theirs.status

    # bob reaches none of it: not from his terminal, nor through his server's proxy.
    output = terminal(
        squatter,
        "curl -s -o /dev/null -w 'HTTP=%{http_code}' -m 10 "
        f"http://127.0.0.1:{carols.start}/data/logdir; echo ' CURL='$?",
    )
    assert "HTTP=000" in output and "CURL=0" not in output, output[-2000:]
    mine = squatter.request.get(f"{s.url}user/{bob}/proxy/{carols.start}/data/logdir")
    assert mine.status >= 400, (mine.status, mine.text()[:200])
    for each in (squatter, page):
        each.context.close()

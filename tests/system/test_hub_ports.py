"""Ports that cannot be taken from another attendee on the workshop hub (issue 38.4), for real:
bob, in his own JupyterLab terminal (his server's cgroup, as every process of his), tries to
listen first on carol's TensorBoard port and on any port of her range: refused at once; his own
ports: his. carol's TensorBoard then starts on her port, and bob cannot reach it. The hub is the
session's (tests/hub_helpers.py).

Root only; slow (about 2 minutes on 2 cores).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from hub import isolation, workbook_copy
from workbook.tensorboard import START_TIMEOUT_S
from hub_helpers import (ARTIFACTS, ATTENDEES, give, home, log_in, notebook,
                         open_notebook, run_cell)

pytestmark = [pytest.mark.timeout(900)]
pytest_plugins = ["hub_helpers"]  # the session's hub and browser

SETUP = ("import sys\nfrom pathlib import Path\n\n"
         "sys.path.insert(0, str(Path.cwd().parent))  # the attendee's copy of the workbook")
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
    return page.evaluate("""async ([command, timeout]) => {
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
    }""", [command, timeout_ms])


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
    assert said == {carols.start: "refused: Operation not permitted",
                    carols[-1]: "refused: Operation not permitted",
                    bobs.start: "listening", bobs[-1]: "listening",
                    tried[-1]: "listening"}, output[-2000:]

    # carol's TensorBoard: on her own first port, through her own server.
    page = log_in(browser, s, carol)
    folder = workbook_copy.copy_dir(home(carol)) / "notebooks"
    start = ("from workbook.tensorboard import ensure_tensorboard\n\n"
             "board = ensure_tensorboard()\nprint('TensorBoard at', board.url, board.moved)")
    give(carol, notebook(SETUP, start), folder / "tb_ports.ipynb")
    cells = open_notebook(page, s, carol, "notebooks/tb_ports.ipynb").locator(".jp-CodeCell")
    run_cell(cells.nth(0))
    started = time.monotonic()
    run_cell(cells.nth(1))
    link = f"/user/{carol}/proxy/{carols.start}/"
    # TensorBoard imports TensorFlow: on a busy machine, minutes (workbook.tensorboard's limit).
    expect(cells.nth(1)).to_contain_text(f"TensorBoard at {link}",
                                         timeout=(START_TIMEOUT_S + 30) * 1000)
    print(f"carol's TensorBoard answered in {time.monotonic() - started:.1f} s")
    page.goto(s.url.rstrip("/") + link)
    expect(page).to_have_title("TensorBoard")
    page.screenshot(path=ARTIFACTS / "hub-carol-tensorboard-port.png", full_page=True)

    # bob reaches none of it: not from his terminal, nor through his server's proxy.
    output = terminal(squatter, "curl -s -o /dev/null -w 'HTTP=%{http_code}' -m 10 "
                                f"http://127.0.0.1:{carols.start}/data/logdir; echo ' CURL='$?")
    assert "HTTP=000" in output and "CURL=0" not in output, output[-2000:]
    mine = squatter.request.get(f"{s.url}user/{bob}/proxy/{carols.start}/data/logdir")
    assert mine.status >= 400, (mine.status, mine.text()[:200])
    for each in (squatter, page):
        each.context.close()

import json
import os
import re
import signal
import socket
import sys
import threading
from pathlib import Path

import pytest

# Make `import workbook` work however pytest is started (bare `pytest` too).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from processes import SESSION_MARKER, TEST_MARKER, new_marker, stop_marked  # noqa: E402

# A shell starts a background job (`make test &`, nohup, some CI runners) with SIGINT ignored,
# and Python keeps an ignored SIGINT: every process the tests start would ignore Ctrl-C too, and
# the tests of what an interrupt stops would fail (the grader went on training after its SIGINT).
# Handled here, a started program gets SIGINT back as a terminal gives it (exec resets it).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The hub tests' shared helpers assert too: their messages need pytest's rewriting.
pytest.register_assert_rewrite("hub_helpers")

# `make test` sets it: there, a test that needs MPI fails instead of being skipped (the skip's
# reason says what to install), so that the MPI tests never pass unnoticed as skipped.
REQUIRE_MPI_VARIABLE = "WORKBOOK_REQUIRE_MPI"
MPI_SKIP = re.compile(r"\bMPI\b|OpenMPI|mpirun")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get(REQUIRE_MPI_VARIABLE) == "1":
        reason = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else ""
        if MPI_SKIP.search(reason):
            report.outcome = "failed"
            report.longrepr = (
                f"skipped for want of MPI, but {REQUIRE_MPI_VARIABLE}=1 "
                f"(make test) needs it: {reason}"
            )


TIERS = ("unit", "smoke", "system")  # tests/<tier>/, in the order they run


def pytest_collection_modifyitems(session, config, items):
    """The tiers in order, however pytest was started (`pytest tests` collects them by name:
    smoke, system, unit): the quickest failures first, and the session-scoped servers of the
    system tier (the class hub) torn down after its last test, not in the teardown of a unit
    test, where starting a process (`python -m hub down`) is refused."""
    here = Path(__file__).resolve().parent

    def tier(item) -> int:
        try:
            folder = Path(str(item.fspath)).resolve().relative_to(here).parts[0]
        except ValueError:  # not under tests/
            return len(TIERS)
        return TIERS.index(folder) if folder in TIERS else len(TIERS)

    items.sort(key=tier)  # stable: each tier keeps pytest's order


# TensorBoard's port. `make lab` beside the tests holds it with TensorBoard; without it, the
# suite holds it itself, so that every test runs where OpenMPI's X probe would hang.
TENSORBOARD_PORT = 6006


class PortHolder:
    """Keeps 127.0.0.1:port taken by a listener that accepts and never answers.

    While another program holds the port (a learner's TensorBoard), that program keeps it taken;
    when it lets go, the holder takes the port within half a second, so it stays taken for the
    whole session whatever else runs on the machine.
    """

    def __init__(self, port: int):
        self.port = port
        self.listener: socket.socket | None = None
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._hold, name=f"hold port {port}", daemon=True)

    def _try_bind(self) -> None:
        listener = socket.socket()
        try:
            listener.bind(("127.0.0.1", self.port))
            listener.listen(64)
        except OSError:
            listener.close()
            return
        self.listener = listener

    def _hold(self) -> None:
        while self.listener is None and not self.stopped.wait(0.5):
            self._try_bind()

    def start(self) -> "PortHolder":
        self._try_bind()
        self.thread.start()
        return self

    def holder(self) -> str:
        """Who holds the port now."""
        return "the tests" if self.listener is not None else "another program"

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)
        if self.listener is not None:
            self.listener.close()

    def __str__(self) -> str:
        return self.holder()


@pytest.fixture(scope="session", autouse=True)
def tensorboard_port_taken():
    """127.0.0.1:6006 taken for the whole session: by the tests' silent listener, or by another
    program (make lab's TensorBoard) while it holds it."""
    holder = PortHolder(TENSORBOARD_PORT).start()
    try:
        yield holder
    finally:
        holder.close()


@pytest.fixture(scope="session", autouse=True)
def session_processes_stopped():
    """At the end of the session, nothing any test started is left running."""
    os.environ[SESSION_MARKER] = new_marker()
    yield
    stop_marked(SESSION_MARKER, os.environ.pop(SESSION_MARKER), "after the test session")


@pytest.fixture(autouse=True)
def test_processes_stopped(request):
    """After each test (passed, failed or timed out), no process it started is left running."""
    marker = os.environ[TEST_MARKER] = new_marker()
    yield
    os.environ.pop(TEST_MARKER, None)
    stop_marked(TEST_MARKER, marker, f"after {request.node.nodeid}")


@pytest.fixture
def lab_env(tmp_path):
    """The environment for a `make lab` started by a test, kept apart from the user's JupyterLab.

    A private runtime dir: `make lab` finds (and `jupyter server list` shows) only the servers
    started here. Private settings and workspaces: the test neither reads nor changes the
    learner's, and JupyterLab does not ask about fetching news (the machine may be offline).
    """
    settings = tmp_path / "lab-settings"
    notification = settings / "@jupyterlab/apputils-extension/notification.jupyterlab-settings"
    notification.parent.mkdir(parents=True)
    notification.write_text(json.dumps({"fetchNews": "false"}))
    return dict(
        os.environ,
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "lab-workspaces"),
    )

import json
import os
import re
import socket
import sys
from pathlib import Path

import pytest

# Make `import workbook` work however pytest is started (bare `pytest` too).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from processes import SESSION_MARKER, TEST_MARKER, new_marker, stop_marked  # noqa: E402

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
            report.longrepr = (f"skipped for want of MPI, but {REQUIRE_MPI_VARIABLE}=1 "
                               f"(make test) needs it: {reason}")


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


@pytest.fixture(scope="session", autouse=True)
def tensorboard_port_taken():
    """A listener on 127.0.0.1:6006 that accepts and never answers, for the whole session."""
    listener = socket.socket()
    try:
        listener.bind(("127.0.0.1", TENSORBOARD_PORT))
        listener.listen(64)
        yield "the tests"
    except OSError:
        yield "another process (make lab's TensorBoard?)"
    finally:
        listener.close()


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
    return dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
                JUPYTERLAB_SETTINGS_DIR=str(settings),
                JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "lab-workspaces"))

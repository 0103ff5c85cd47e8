"""The notebook runner never hangs and leaves nothing behind, with real workers: runs finish
while something silent listens on port 6006 (OpenMPI's X probe), MPI without the safe
environment hangs and the clean-up still stops orted, an interrupted MPI run leaves no process.
"""

import re
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import psutil
import pytest

from runner_fixtures import VENV_BIN, needs_horovodrun, quiet_tensorflow, wait_for  # noqa: F401
from workbook import runner
from workbook.facts import with_safe_env

CASES = Path(__file__).resolve().parents[1] / "runner_cases"
INIT_HOROVOD = CASES / "init_horovod.py"  # hvd.init(), one line, then --wait S seconds


# --- never hang, and leave nothing behind -------------------------------------------------------

# Starts a daemon the way OpenMPI's orted becomes one (fork, setsid, fork: re-parented to init,
# in a session of its own) that ignores SIGINT and SIGTERM, prints its pid, and waits.


SILENT_PORT = 6006  # TensorBoard's: OpenMPI's hwloc takes a listener there for X display :6


def answers_within(port: int, seconds: float) -> bool:
    """Whether the listener on `port` answers an X11 greeting (or hangs up) within `seconds`."""
    with socket.create_connection(("127.0.0.1", port), timeout=seconds) as connection:
        connection.sendall(b"l\0\x0b\0\0\0\0\0\0\0\0\0")  # an X11 client's first bytes
        connection.settimeout(seconds)
        try:
            return connection.recv(1) is not None
        except socket.timeout:
            return False


@pytest.fixture
def port_6006_silent():
    """A listener on 127.0.0.1:6006 that accepts and never answers, like TensorBoard to hwloc.

    If the port is taken, something listens there already (the test session's own listener,
    or make lab's TensorBoard): what the tests need. Yields whether that one never answers.
    """
    listener = socket.socket()
    try:
        listener.bind(("127.0.0.1", SILENT_PORT))
    except OSError:
        listener.close()
        yield not answers_within(SILENT_PORT, 2)
        return
    listener.listen(64)
    accepted, done = [], threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not done.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield True
    finally:
        done.set()
        thread.join(5)
        for connection in accepted:
            connection.close()
        listener.close()


def carrying(marker):
    """The live processes whose environment has `marker` (name, value)."""
    name, value = marker
    found = []
    for process in psutil.process_iter(["name", "status"]):
        try:
            if process.info["status"] != psutil.STATUS_ZOMBIE and (
                process.environ().get(name) == value
            ):
                found.append(process)
        except psutil.Error:
            continue
    return found


@pytest.fixture(scope="module")
def mpi_controller():
    """Skips unless mpirun is here and this Horovod has its MPI controller (`horovodrun -cb`)."""
    if shutil.which("mpirun") is None:
        pytest.skip("no mpirun: tests/setup_mpi.sh installs OpenMPI")
    built = subprocess.run(
        [str(VENV_BIN / "horovodrun"), "--check-build"],
        capture_output=True,
        text=True,
        timeout=300,
        env=with_safe_env(),
    ).stdout
    controllers = built.split("Available Controllers:")[-1].split("Available Tensor")[0]
    if "[X] MPI" not in controllers:
        pytest.skip("Horovod was built without MPI: make env REBUILD_HOROVOD=1 after setup_mpi.sh")


needs_mpi = pytest.mark.usefixtures("mpi_controller")


@needs_horovodrun
@pytest.mark.parametrize("launch", ["--mpi", "--gloo", "python"])
def test_runs_finish_while_something_silent_listens_on_6006(
    launch, request, tmp_path, port_6006_silent, quiet_tensorflow, monkeypatch
):
    if launch == "--mpi":
        request.getfixturevalue("mpi_controller")
    monkeypatch.delenv("HWLOC_COMPONENTS", raising=False)  # as in a terminal without make lab
    if launch == "python":
        handle = runner.start_in_background(
            str(INIT_HOROVOD), np=1, launcher="python", logs_root=tmp_path, timeout=240
        )
    else:
        handle = runner.start_in_background(
            f"{launch} {INIT_HOROVOD}", np=2, logs_root=tmp_path, timeout=240
        )
    result = handle.result(timeout=300)
    assert result.ok, f"{result}\n{result.log_path.read_text()[-3000:]}"
    size = 1 if launch == "python" else 2
    initialized = sorted(re.findall(rf"initialized rank (\d) of {size}", result.output))
    assert initialized == [str(rank) for rank in range(size)], result.output


@needs_horovodrun
@needs_mpi
def test_without_the_safe_env_mpi_hangs_and_the_cleanup_still_stops_orted(
    tmp_path, port_6006_silent, quiet_tensorflow
):
    """The control: without HWLOC_COMPONENTS=-gl hvd.init() hangs (so the test above can fail),
    and the timeout stops it all, OpenMPI's orted (in a session of its own) included."""
    if not port_6006_silent:
        pytest.skip("what listens on 127.0.0.1:6006 answers: hwloc would not hang")
    plan = runner.plan_run(
        str(INIT_HOROVOD), np=1, launcher="python", logs_root=tmp_path, timeout=25
    )  # hvd.init() finishes in 2-6 s with the setting; orted starts within seconds
    # As in a terminal that lacks it. Empty, not unset: the environment's start-up hook
    # (bootstrap/safe_env.py) sets it when unset, and keeps a value the user gave.
    plan.env["HWLOC_COMPONENTS"] = ""
    handle = runner.BackgroundRun(plan)
    wait_for(lambda: any(p.name() == "orted" for p in carrying(plan.marker)), 20, "OpenMPI's orted")
    result = handle.result(timeout=120)
    assert result.timed_out, result
    assert "initialized" not in result.output  # it hung in hvd.init()
    assert result.leftover_pids == []
    assert carrying(plan.marker) == []


@needs_horovodrun
@needs_mpi
def test_an_interrupted_mpi_run_leaves_no_process_with_its_marker(tmp_path, quiet_tensorflow):
    handle = runner.start_in_background(
        f"--mpi {INIT_HOROVOD} --wait 300", np=2, logs_root=tmp_path, run_name="mpi-stopped"
    )
    wait_for(lambda: handle.tail(20).count("initialized rank") == 2, 240, "both workers")
    # horovodrun --mpi becomes `sh -c mpirun ...` (os.execve); mpirun starts the 2 workers.
    names = sorted(p.name() for p in carrying(handle.plan.marker))
    assert names == ["mpirun", "python", "python", "sh"], names
    result = handle.stop()
    assert result.interrupted and result.leftover_pids == []
    assert carrying(handle.plan.marker) == []

"""The notebook runner (workbook/runner/) with the short processes it starts: counting GPUs with
nvidia-smi, checking ssh to each host (a real ssh client, no server), a recorded output replayed
through a real pipe, importing the runner in a fresh Python, and the run marker finding a daemon
that left the process tree.
"""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import runner_outputs
from lab_helpers import free_port
from runner_outputs import finished_bars, parse_in_pieces
from workbook import runner
from workbook.prose import plural
from workbook.runner import Transcript, hosts
from workbook.runner.processes import ProcessTree

REPO = Path(__file__).resolve().parents[2]
REPLAY_OUTPUT = Path(__file__).resolve().parents[1] / "runner_cases" / "replay_output.py"
VENV_BIN = Path(sys.executable).parent


def a_script(tmp_path, name="train.py", takes_log_dir=True):
    path = tmp_path / name
    path.write_text("import argparse  # --log-dir\n" if takes_log_dir else "print('hi')\n")
    return path


needs_horovodrun = pytest.mark.skipif(
    not (VENV_BIN / "horovodrun").exists() and shutil.which("horovodrun") is None,
    reason="horovodrun is not installed in this environment",
)
needs_ssh = pytest.mark.skipif(
    shutil.which("ssh") is None, reason="no ssh client (Debian: apt-get install openssh-client)"
)


def test_gpus_are_counted_without_tensorflow(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi here
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert runner.visible_gpus() == 0
    for visible, count in [("0,1", 2), ("", 0), ("-1", 0), ("3", 1)]:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        assert runner.visible_gpus() == count, visible

    fake = tmp_path / "nvidia-smi"
    fake.write_text(
        "#!/bin/sh\n"
        "echo 'GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-1)'\n"
        "echo 'GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-2)'\n"
    )
    fake.chmod(0o755)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert runner.visible_gpus() == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert runner.visible_gpus() == 1


def stand_in_nvidia_smi(folder: Path, gpus: int) -> None:
    """An `nvidia-smi` that lists `gpus` H100s, as `nvidia-smi -L` does."""
    lines = "".join(f"echo 'GPU {n}: NVIDIA H100 80GB HBM3 (UUID: GPU-{n})'\n" for n in range(gpus))
    path = folder / "nvidia-smi"
    path.write_text("#!/bin/sh\n" + lines)
    path.chmod(0o755)


# The layout line np="auto" prints on a 16-core machine with 0, 1, 2 and 4 GPUs listed, with
# CUDA_VISIBLE_DEVICES unset, and set to show only GPUs 0 and 1.
HIDDEN = (
    'on the CPU, the {n} hidden (CUDA_VISIBLE_DEVICES=""): the lesson\'s '
    "gpus[hvd.local_rank()] needs a GPU per worker, and with {w} on {n} local rank {r} "
    "would find none (IndexError)"
)
CPU_AUTO = "2 workers x 8 threads on 16 CPU cores, each pinned to 8 cores of its own"
AUTO_LINES = {
    0: CPU_AUTO,
    1: f"{CPU_AUTO}; " + HIDDEN.format(n="1 GPU", w="2 workers", r=1),
    2: "2 workers x 8 threads on 16 CPU cores, one GPU each (2 GPUs visible)",
    4: "4 workers x 4 threads on 16 CPU cores, one GPU each (4 GPUs visible)",
}


@pytest.mark.parametrize("listed", [0, 1, 2, 4])
@pytest.mark.parametrize("cuda_visible", [None, "0,1"])
def test_layouts_on_machines_with_0_1_2_4_gpus(tmp_path, monkeypatch, listed, cuda_visible):
    stand_in_nvidia_smi(tmp_path, listed)
    monkeypatch.setenv("PATH", str(tmp_path))
    if cuda_visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", cuda_visible)
    seen = runner.visible_gpus()
    assert seen == (listed if cuda_visible is None else min(2, listed))

    def layout(np, share=None):
        return runner.layout.choose_layout(
            np,
            share=share,
            launcher="horovodrun",
            cores=16,
            gpus=None,
            hosts=None,
            remote=None,
            launch_options=[],
        )

    auto = layout("auto")
    print(f"{plural(listed, 'GPU')} listed, CUDA_VISIBLE_DEVICES={cuda_visible}: {auto.describe()}")
    assert auto.describe() == AUTO_LINES[seen]
    # Whatever was asked, no worker is left without a GPU while the others pin theirs.
    for np in (1, 2, 4):
        planned = layout(np)
        assert planned.gpus >= planned.workers or (
            planned.gpus == 0 and planned.env().get("CUDA_VISIBLE_DEVICES", "") == ""
        ), planned.describe()
        assert (planned.hidden_gpus > 0) == (0 < seen < np)
    # The reference of np="auto" runs where np="auto"'s workers run.
    reference = layout(1, share="auto")
    assert (reference.gpus > 0) == (auto.gpus > 0)


@needs_ssh
def test_ssh_check_names_each_failing_host_with_sshs_reason():
    closed = hosts.SshSettings(port=str(free_port()))  # nothing listens there
    started = time.monotonic()
    problems = hosts.check_ssh(["127.0.0.1", "nowhere.invalid"], closed)
    assert time.monotonic() - started < hosts.SSH_TIMEOUT_S
    assert problems["127.0.0.1"].endswith("Connection refused"), problems
    assert "Could not resolve hostname nowhere.invalid" in problems["nowhere.invalid"]

    with pytest.raises(hosts.HostsUnreachable) as raised:
        hosts.ensure_reachable(["127.0.0.1"], closed)
    message = str(raised.value)
    assert message.startswith("cannot start the run: ssh cannot reach 127.0.0.1 (127.0.0.1: ssh:")
    assert f"`ssh -p {closed.port} 127.0.0.1 true` works" in message
    assert "\n" not in message
    # In Jupyter the message alone, no traceback of the runner's frames.
    assert raised.value._render_traceback_() == [f"\x1b[31mHostsUnreachable\x1b[0m: {message}"]


@needs_horovodrun
@needs_ssh
def test_run_on_an_unreachable_host_stops_before_starting(tmp_path, capsys):
    a_script(tmp_path)
    where = dict(cwd=tmp_path, logs_root=tmp_path)
    started = time.monotonic()
    with pytest.raises(runner.HostsUnreachable, match=r"ssh cannot reach nowhere\.invalid \("):
        runner.horovodrun("-H localhost:1,nowhere.invalid:1 train.py", np=2, **where)
    assert time.monotonic() - started < hosts.SSH_TIMEOUT_S
    assert list(tmp_path.iterdir()) == [tmp_path / "train.py"]  # no log folder: nothing ran
    assert "Checking that ssh reaches nowhere.invalid" in capsys.readouterr().out
    with pytest.raises(runner.HostsUnreachable):
        runner.start_in_background("-H nowhere.invalid:2 train.py", **where)


@pytest.mark.parametrize("name", ["SOLUTION_OUTPUT", "MPI_OUTPUT"])
def test_a_real_pipe_cutting_and_delaying_the_output_changes_nothing(name, tmp_path):
    """The recorded output through a real pipe, cut and delayed at random, three times."""
    (tmp_path / "output.bin").write_bytes(getattr(runner_outputs, name))
    expected = Transcript(label_ranks=False)
    for event in parse_in_pieces(getattr(runner_outputs, name), 4096, default_rank=0):
        expected.add(event)
    for seed in range(3):
        handle = runner.start_in_background(
            [str(REPLAY_OUTPUT), str(tmp_path / "output.bin"), str(seed)],
            np=1,
            launcher="python",
            logs_root=tmp_path,
            run_name=f"replay-{seed}",
            timeout=60,
        )
        result = handle.result(timeout=90)
        assert result.ok, result.error
        assert result.output.splitlines() == expected.shown
        assert len(finished_bars(expected)) == 2


def test_importing_the_runner_leaves_tensorflow_out_of_the_kernel():
    code = (
        "import sys, workbook.runner; print(sorted({'tensorflow', 'horovod'} & set(sys.modules)))"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert output.strip() == "[]"
    # Reading a command line asks horovodrun's own parser: Horovod's launcher, no TensorFlow.
    code = (
        "import sys; from workbook.runner import split_horovodrun_args as split\n"
        "assert split(['-np', '2', '--verbose', 'x.py']) == (['-np', '2', '--verbose'], ['x.py'])\n"
        "print('horovod.runner.launch' in sys.modules, 'tensorflow' in sys.modules)"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert output.split() == ["True", "False"]


# Starts a daemon the way OpenMPI's orted becomes one (fork, setsid, fork: re-parented to init,
# in a session of its own) that ignores SIGINT and SIGTERM, prints its pid, and waits.
DAEMONIZES = """\
import os, signal, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print(os.getpid(), flush=True)
        time.sleep(120)
    os._exit(0)
os.wait()
time.sleep(120)
"""


def alive(process: psutil.Process) -> bool:
    try:  # init may be slow to reap a killed orphan: a zombie is not alive
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


QUICK_STOP = ((signal.SIGINT, 0.5), (signal.SIGTERM, 0.5), (signal.SIGKILL, 3.0))


@pytest.mark.parametrize("with_marker", [True, False])
def test_the_marker_finds_a_daemon_that_left_the_process_tree(with_marker):
    marker = ("WORKBOOK_RUN_ID", f"test-{os.getpid()}-{time.monotonic_ns()}")
    process = subprocess.Popen(
        [sys.executable, "-c", DAEMONIZES],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, **dict([marker])),
        start_new_session=True,
    )
    daemon = psutil.Process(int(process.stdout.readline()))
    try:
        assert daemon.ppid() != process.pid and daemon.environ()[marker[0]] == marker[1]
        tree = ProcessTree(process, marker if with_marker else None)
        assert tree.stop(QUICK_STOP) == []
        # Without the marker, the tree (horovodrun and what is below it) misses the daemon.
        assert alive(daemon) != with_marker
    finally:
        if alive(daemon):
            daemon.kill()
        process.kill()
        process.wait(10)
        process.stdout.close()

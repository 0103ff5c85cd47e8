"""The notebook runner (workbook/runner/) with real workers: a worker fails and is named with its
traceback, a run times out, a background run is watched and stopped, Gloo starts every slot of
-H, the Addons notice is folded; from a notebook kernel, the solution runs on 2 workers, a
failing rank shows in a box, TensorBoard shows the run, and interrupting the kernel stops them.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from lab_helpers import free_port
from runner_fixtures import VENV_BIN, needs_horovodrun, quiet_tensorflow, wait_for  # noqa: F401
from workbook import runner
from workbook.facts import with_safe_env

REPO = Path(__file__).resolve().parents[2]
SOLUTION = REPO / "solutions" / "fashion_mnist_solution.py"
CASES = Path(__file__).resolve().parents[1] / "runner_cases"
FAILS_ON_RANK_1 = CASES / "fails_on_rank_1.py"
SAMPLE = REPO / "data" / "sample"
QUICK = (
    f"--data-dir {SAMPLE} --epochs 2 --steps-per-epoch 8 --train-images 1024 "
    "--test-images 256 --depth 10 --width 1"
)

needs_sample = pytest.mark.skipif(
    not (SAMPLE / "train.npz").is_file(),
    reason=f"no sample data in {SAMPLE}: git checkout -- data/sample",
)


# ---------------------------------------------------------------------------------------------
# Real runs
# ---------------------------------------------------------------------------------------------


def processes_running(text):
    """Processes (not zombies) whose command line mentions `text`."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        try:
            if process.info["status"] != psutil.STATUS_ZOMBIE and text in " ".join(
                process.info["cmdline"] or []
            ):
                found.append(process)
        except psutil.Error:
            continue
    return found


def wait_until_gone(text, seconds):
    deadline = time.monotonic() + seconds
    while processes_running(text) and time.monotonic() < deadline:
        time.sleep(0.2)
    return processes_running(text)


@needs_horovodrun
def test_failing_worker_is_named_with_its_traceback(tmp_path, capsys, quiet_tensorflow):
    result = runner.horovodrun(f"{FAILS_ON_RANK_1} x", np=2, logs_root=tmp_path)
    assert result.exit_code != 0
    assert result.failed_rank == 1
    assert "RuntimeError: rank 1 fails on purpose" in result.error
    assert "Horovod detected" not in result.error
    shown = capsys.readouterr().out
    # The error box comes last, after the output of the workers horovodrun stopped.
    box = shown.rindex("Rank 1 failed")
    # Every line of the run, rank 0's and horovodrun's included, comes before the box. Rank 0's
    # exit line is not always there: in Horovod 0.28.1 the thread that stops a worker can reap
    # its shell (psutil's wait) before the thread waiting for it, which then reads exit code 0
    # and prints nothing (4 of 25 runs on a loaded 2-core machine).
    run_lines = [m.start() for m in re.finditer(r"^\[(?:rank \d|horovodrun)\] ", shown, re.M)]
    assert run_lines and max(run_lines) < box
    assert shown.rindex("Terminating remaining workers after failure of Process 1") < box
    assert shown.index("RuntimeError: rank 1 fails on purpose", box) > box
    assert "rank 1 fails on purpose" in result.log_path.read_text()
    assert not wait_until_gone(str(FAILS_ON_RANK_1), 5)
    assert runner.last_result is result


STUBBORN = """\
import os, signal, time
# Ignores Ctrl-C and SIGTERM, like a worker stuck in a collective: only SIGKILL stops it.
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("worker", os.environ.get("HOROVOD_RANK"), "waiting", flush=True)
time.sleep(300)
"""


# A worker of a machine with STAND_IN_GPUS GPUs (the check's probe simulates them on a CPU:
# grader/running/probe.py's SimulatedGpus, CUDA_VISIBLE_DEVICES respected) that runs the lesson's
# own step 2, as the solution has it, and says what it pinned.
PINS_LIKE_THE_LESSON = """\
import os, sys
sys.path.insert(0, {probe_dir!r})
import tensorflow as tf
import horovod.tensorflow.keras as hvd
from probe import SimulatedGpus

SimulatedGpus(int(os.environ["STAND_IN_GPUS"])).install()
hvd.init()
{step_2}
print(f"rank {{hvd.rank()}} found {{len(gpus)}} GPUs", flush=True)
"""


def lessons_pinning() -> str:
    """The solution's step 2: from its `Horovod: pin` comment to the blank line after it."""
    text = SOLUTION.read_text()
    start = text.index("# Horovod: pin one GPU")
    return text[start : text.index("\n\n", start)]


@needs_horovodrun
def test_one_gpu_machine_runs_two_workers_the_lessons_pinning_does_not_crash(
    tmp_path, monkeypatch, quiet_tensorflow
):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 (UUID: GPU-0)'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    script = tmp_path / "pins.py"
    script.write_text(
        PINS_LIKE_THE_LESSON.format(
            probe_dir=str(REPO / "grader" / "running"), step_2=lessons_pinning()
        )
    )
    env = {"STAND_IN_GPUS": "1"}
    result = runner.horovodrun(
        str(script), np="auto", logs_root=tmp_path / "logs", env=env, timeout=120, log_dir=False
    )
    assert result.ok, result.error
    assert "1 GPU hidden" in result.layout
    output = (tmp_path / "logs" / result.run_name / "horovodrun.log").read_text()
    assert "rank 0 found 0 GPUs" in output and "rank 1 found 0 GPUs" in output
    # The launcher is run with -m and imported by nothing before: no runpy warning.
    assert "found in sys.modules" not in output
    # The same workers with the one GPU shown to both: what the runner's layout prevents.
    shown = runner.horovodrun(
        str(script),
        np=2,
        logs_root=tmp_path / "logs",
        timeout=120,
        env={**env, "CUDA_VISIBLE_DEVICES": "0"},
        log_dir=False,
    )
    assert not shown.ok and shown.failed_rank == 1
    assert "IndexError" in shown.error


@needs_horovodrun
def test_timeout_stops_even_stubborn_workers(tmp_path, quiet_tensorflow):
    script = tmp_path / "stubborn_worker.py"
    script.write_text(STUBBORN)
    started = time.monotonic()
    # 15 s: horovodrun and both workers (no TensorFlow) start in 1-3 s, even on a busy machine.
    result = runner.horovodrun(str(script), np=2, timeout=15, logs_root=tmp_path, quiet=True)
    assert result.timed_out and not result.ok
    assert result.leftover_pids == []
    assert not processes_running(str(script))
    assert time.monotonic() - started < 15 + 15
    assert "worker 1 waiting" in result.log_path.read_text()


@needs_horovodrun
def test_background_run_can_be_watched_and_stopped(tmp_path, quiet_tensorflow):
    script = tmp_path / "slow_worker.py"
    script.write_text(
        "import os, time\n"
        "for step in range(300):\n"
        "    print(f'worker {os.environ[\"HOROVOD_RANK\"]} step {step}', flush=True)\n"
        "    time.sleep(0.5)\n"
    )
    handle = runner.start_in_background(str(script), np=2, logs_root=tmp_path, run_name="bg")
    wait_for(lambda: "[rank 1] worker 1 step 2" in handle.tail(20), 60, "both workers' output")
    assert not handle.done
    assert "running" in repr(handle)
    result = handle.stop()
    assert handle.done and result.interrupted and result.leftover_pids == []
    assert not processes_running(str(script))
    assert result.log_path == tmp_path / "bg" / "horovodrun.log"


def test_background_baseline_without_horovodrun(tmp_path):
    script = tmp_path / "baseline.py"
    script.write_text(
        "import sys, time\n"
        "print('Epoch 1/1')\n"
        "for step in range(1, 5):\n"
        "    sys.stdout.write('\\b' * 20 + '\\r' + f'{step}/4 [' + '=' * step + ']')\n"
        "    sys.stdout.flush(); time.sleep(0.1)\n"
        "print()\n"
        'print(\'RESULT {"test_accuracy": 0.5, "images_per_second": 100.0}\')\n'
    )
    handle = runner.start_in_background(str(script), np=1, launcher="python", logs_root=tmp_path)
    result = handle.result(timeout=60)
    assert result.ok, result.error
    assert result.images_per_second == 100.0 and result.test_accuracy == 0.5
    assert handle.tail(3).splitlines() == [
        "Epoch 1/1",
        "4/4 [====]",
        'RESULT {"test_accuracy": 0.5, "images_per_second": 100.0}',
    ]


@needs_horovodrun
def test_gloo_starts_every_slot_of_H(tmp_path, quiet_tensorflow):
    """Why the runner refuses `-np 1 -H localhost:2`: horovodrun itself starts 2 workers."""
    script = tmp_path / "who.py"
    script.write_text("import os\nprint('size', os.environ['HOROVOD_SIZE'], flush=True)\n")
    done = subprocess.run(
        [
            str(VENV_BIN / "horovodrun"),
            "--gloo",
            "-np",
            "1",
            "-H",
            "localhost:2",
            sys.executable,
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=with_safe_env(),
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert sorted(re.findall(r"\[(\d)\]<stdout>:size (\d)", done.stdout)) == [
        ("0", "2"),
        ("1", "2"),
    ]


def test_tensorflow_addons_notice_is_folded_but_kept_in_the_raw_log(tmp_path, quiet_tensorflow):
    script = tmp_path / "uses_addons.py"
    script.write_text("import tensorflow_addons\nprint('imported', flush=True)\n")
    handle = runner.start_in_background(str(script), np=1, launcher="python", logs_root=tmp_path)
    result = handle.result(timeout=300)
    assert result.ok, result.error
    assert result.output.splitlines() == ["imported"]
    raw = result.log_path.read_text()
    assert "TensorFlow Addons (TFA) has ended development" in raw
    assert "  warnings.warn(" in raw


# --- from a notebook kernel -------------------------------------------------------------------


@pytest.fixture(scope="module")
def kernel_spec_dir(tmp_path_factory):
    """A kernelspec that runs this environment's Python with the workbook importable."""
    root = tmp_path_factory.mktemp("kernels")
    spec = root / "workbook-test"
    spec.mkdir()
    path = os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")])
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "workbook test",
                "language": "python",
                "env": {"PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2", "PATH": path},
            }
        )
    )
    return root


def kernel_manager(kernel_spec_dir):
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpecManager

    return KernelManager(
        kernel_name="workbook-test",
        kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernel_spec_dir)]),
    )


@pytest.fixture(scope="module")
def notebook_run(kernel_spec_dir, tmp_path_factory):
    """Runs the solution on 2 workers from a notebook; returns (executed notebook, logs root)."""
    if not (VENV_BIN / "horovodrun").exists() or not (SAMPLE / "train.npz").is_file():
        pytest.skip("needs horovodrun and the sample data")
    import nbformat
    from nbclient import NotebookClient

    work = tmp_path_factory.mktemp("notebook")
    logs = work / "logs"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import sys\nfrom workbook.runner import horovodrun"),
        nbformat.v4.new_code_cell(
            f"r = horovodrun({f'{SOLUTION} {QUICK}'!r}, np=2, logs_root={str(logs)!r}, "
            "run_name='nb-run')\nr"
        ),
        nbformat.v4.new_code_cell(
            "assert r.exit_code == 0, r.error\n"
            "assert 'test_accuracy' in r.metrics, r.metrics\n"
            "assert r.images_per_second > 0\n"
            "# The kernel only watched: TensorFlow ran in the workers.\n"
            "assert 'tensorflow' not in sys.modules\n"
            "print(r.wall_seconds)"
        ),
        # The magic, on a script that fails on rank 1.
        nbformat.v4.new_code_cell("%load_ext workbook.runner"),
        nbformat.v4.new_code_cell(
            f"%horovodrun -np 2 --name failing {FAILS_ON_RANK_1} x --log-dir {logs / 'failing'}"
        ),
        nbformat.v4.new_code_cell("failed = _\nassert failed.failed_rank == 1, failed"),
    ]
    client = NotebookClient(
        nb,
        km=kernel_manager(kernel_spec_dir),
        timeout=300,
        resources={"metadata": {"path": str(work)}},
    )
    client.execute()
    return nb, logs


def outputs_text(cell, output_type):
    texts = []
    for output in cell.outputs:
        if output.output_type == output_type == "stream":
            texts.append(output.text)
        elif output.output_type == output_type:
            texts.append(output.data.get("text/plain", ""))
    return "\n".join(texts)


@needs_sample
def test_run_from_a_notebook(notebook_run):
    nb, logs = notebook_run
    run_cell = nb.cells[1]
    stream = outputs_text(run_cell, "stream")
    assert "2 workers x 1 thread on 2 CPU cores" in stream
    assert "[rank 0] Epoch 1/2" in stream
    assert "[rank 0] RESULT {" in stream
    # No progress redraws in the cell: the only bars are the finished ones (4 steps per epoch).
    bars = [line for line in stream.splitlines() if " [====" in line]
    assert "\b" not in stream and len(bars) >= 2
    assert all(line.startswith("[rank 0] 4/4 [") for line in bars), bars
    displays = outputs_text(run_cell, "display_data")
    assert "finished in" in displays and "full output:" in displays  # the updated status line
    summary = outputs_text(run_cell, "execute_result")
    assert "test accuracy" in summary
    assert (logs / "nb-run" / "horovodrun.log").is_file()
    assert list((logs / "nb-run" / "train").glob("events.out.tfevents.*"))


@needs_sample
def test_magic_shows_the_failing_rank_in_a_box(notebook_run):
    nb, logs = notebook_run
    magic_cell = nb.cells[4]
    types = [output.output_type for output in magic_cell.outputs]
    # Output lines, then the red box with rank 1's traceback, then the summary table.
    assert types[-2:] == ["display_data", "execute_result"]
    box = magic_cell.outputs[-2].data
    assert "Rank 1 failed" in box["text/html"] and "#cf222e" in box["text/html"]
    assert "RuntimeError: rank 1 fails on purpose" in box["text/plain"]
    assert "Horovod detected" not in box["text/plain"]
    stream = outputs_text(magic_cell, "stream")
    assert "[rank 0] worker 0 started with arguments ['x', '--log-dir'," in stream
    assert (logs / "failing" / "horovodrun.log").is_file()


def get_json(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return json.load(reply)
    except (OSError, ValueError):
        return None


@needs_sample
def test_tensorboard_shows_the_run(notebook_run):
    from workbook.tensorboard import ensure_tensorboard

    _, logs = notebook_run
    board = ensure_tensorboard(logdir=logs, port=free_port())
    try:
        assert board.started_pid
        tags = {}

        def scalars_loaded():
            tags.update(get_json(board.url + "data/plugin/scalars/tags") or {})
            runs = get_json(board.url + "data/runs") or []
            return "nb-run/train" in runs and {"epoch_loss", "epoch_accuracy"} <= set(
                tags.get("nb-run/train", {})
            )

        wait_for(scalars_loaded, 60, "the run's scalars in TensorBoard")
        assert {"epoch_loss", "epoch_accuracy"} <= set(tags["nb-run/validation"])
    finally:
        board.stop()
    wait_for(
        lambda: (
            not psutil.pid_exists(board.started_pid)
            or psutil.Process(board.started_pid).status() == psutil.STATUS_ZOMBIE
        ),
        10,
        "TensorBoard to stop",
    )


@needs_horovodrun
@needs_sample
def test_interrupting_the_kernel_stops_every_worker(kernel_spec_dir, tmp_path):
    # A copy of the solution with a name of its own, so that only this run's processes match.
    script = tmp_path / "interrupted_solution.py"
    shutil.copyfile(SOLUTION, script)
    logs = tmp_path / "logs"
    log = logs / "interrupted" / "horovodrun.log"
    km = kernel_manager(kernel_spec_dir)
    km.start_kernel(cwd=str(tmp_path))
    client = km.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        args = QUICK.replace("--epochs 2", "--epochs 50")
        msg_id = client.execute(
            "from workbook.runner import horovodrun\n"
            f"horovodrun({f'{script} {args}'!r}, np=2, logs_root={str(logs)!r}, "
            "run_name='interrupted')"
        )
        wait_for(
            lambda: log.is_file() and b"Epoch 1/" in log.read_bytes(),
            150,
            "the workers to start training",
        )
        workers = [
            p
            for p in processes_running(str(script))
            if "horovod" not in " ".join(p.cmdline()) and "sh" != p.name()
        ]
        assert len(workers) >= 2, "both workers should be running"

        interrupted = time.monotonic()
        km.interrupt_kernel()
        reply = client.get_shell_msg(timeout=60)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = client.get_shell_msg(timeout=60)
        assert reply["content"]["status"] == "error"
        assert reply["content"]["ename"] == "KeyboardInterrupt"
        left = wait_until_gone(str(script), max(0.0, 10 - (time.monotonic() - interrupted)))
        assert not left, [p.cmdline() for p in left]
        assert time.monotonic() - interrupted < 10

        # The kernel is still usable, and kept what the run got to.
        msg_id = client.execute(
            "from workbook import runner\n"
            "print(runner.last_result.interrupted, runner.last_result.leftover_pids)",
        )
        output = ""
        while True:
            message = client.get_iopub_msg(timeout=30)
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            if message["msg_type"] == "stream":
                output += message["content"]["text"]
            if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
                break
        assert output.strip() == "True []"
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)

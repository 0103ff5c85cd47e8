"""The notebook runner (workbook/runner/): layout, parsing, and real runs.

Fast tests check the layout rules, the command-line split (against horovodrun's own parser) and
the output parsing on output captured from real horovodrun 0.28.1 runs. The slow ones start real
workers: a notebook kernel runs the solution on 2 workers, a worker fails, a run is interrupted
from the kernel, a run times out, and TensorBoard shows a run's scalars.
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from lab_helpers import free_port

from workbook import runner
from workbook.facts import with_safe_env
from workbook.runner import horovodrun_cli, hosts
from workbook.runner.processes import ProcessTree
from workbook.runner import (
    Line,
    OutputParser,
    Progress,
    Transcript,
    auto_layout,
    parse_magic_line,
    plan_run,
    rank_error,
    split_horovodrun_args,
)

REPO = Path(__file__).resolve().parents[1]
SOLUTION = REPO / "solutions" / "fashion_mnist_solution.py"
CASES = Path(__file__).resolve().parent / "runner_cases"
FAILS_ON_RANK_1 = CASES / "fails_on_rank_1.py"
INIT_HOROVOD = CASES / "init_horovod.py"  # hvd.init(), one line, then --wait S seconds
REPLAY_OUTPUT = CASES / "replay_output.py"
SAMPLE = REPO / "data" / "sample"
VENV_BIN = Path(sys.executable).parent
QUICK = (
    f"--data-dir {SAMPLE} --epochs 2 --steps-per-epoch 8 --train-images 1024 "
    "--test-images 256 --depth 10 --width 1"
)

needs_horovodrun = pytest.mark.skipif(
    not (VENV_BIN / "horovodrun").exists() and shutil.which("horovodrun") is None,
    reason="horovodrun is not installed in this environment",
)
needs_sample = pytest.mark.skipif(
    not (SAMPLE / "train.npz").is_file(),
    reason=f"no sample data in {SAMPLE}: git checkout -- data/sample",
)

# ---------------------------------------------------------------------------------------------
# Output captured from real runs (horovodrun 0.28.1, Gloo, TF 2.15), progress bars shortened.
# ---------------------------------------------------------------------------------------------

BS = b"\x08" * 80  # Keras moves back over the previous progress bar with backspaces

# The solution on 2 workers: only rank 0 prints progress; horovodrun's own TensorFlow import and
# the workers' log unprefixed and prefixed TensorFlow C++ lines.
SOLUTION_OUTPUT = b"".join([
    b"2026-11-22 01:04:53.328618: I tensorflow/core/util/port.cc:113] oneDNN custom operations "
    b"are on. You may see slightly different numerical results.\n",
    b"2026-11-22 01:04:53.366720: I tensorflow/core/platform/cpu_feature_guard.cc:182] This "
    b"TensorFlow binary is optimized to use available CPU instructions.\n",
    b"To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild "
    b"TensorFlow with the appropriate compiler flags.\n",
    b"[1]<stderr>:2026-11-22 01:04:58.128311: I tensorflow/core/util/port.cc:113] oneDNN custom "
    b"operations are on.\n",
    b"[1]<stderr>:To enable the following instructions: AVX2 AVX512F FMA, in other operations, "
    b"rebuild TensorFlow with the appropriate compiler flags.\n",
    b"[0]<stdout>:Epoch 1/2\n",
    b"[0]<stdout>:\r",
    b"[0]<stdout>:1/4 [======>.......................] - ETA: 1:12 - loss: 2.4671 - accuracy: "
    b"0.0312" + BS + b"\r",
    b"[0]<stdout>:2/4 [==============>...............] - ETA: 0s - loss: 2.3244 - accuracy: "
    b"0.1562  " + BS + b"\r",
    b"[0]<stdout>:3/4 [=====================>........] - ETA: 0s - loss: 2.3941 - accuracy: "
    b"0.1146" + BS + b"\r",
    b"[0]<stderr>:/work/main/.venv/lib/python3.11/site-packages/keras/src/engine/training.py:3103:"
    b" UserWarning: You are saving your model as an HDF5 file via `model.save()`.\n",
    b"[0]<stderr>:  saving_api.save_model(\n",
    b"[0]<stdout>:4/4 [==============================] - ETA: 0s - loss: 2.3600 - accuracy: "
    b"0.1328\n",
    b"[0]<stdout>:Epoch 1: finished gradual learning rate warmup to 0.025.\n",
    b"[0]<stdout>:" + BS + b"\r",
    b"[0]<stdout>:4/4 [==============================] - 26s 511ms/step - loss: 2.3604 - accuracy: "
    b"0.1406 - val_loss: 2.8129 - val_accuracy: 0.1198 - lr: 0.0250\n",
    b"[0]<stdout>:Epoch 2/2\n",
    b"[0]<stdout>:\r",
    b"[0]<stdout>:1/4 [======>.......................] - ETA: 0s - loss: 2.2611 - accuracy: "
    b"0.2500" + BS + b"\r",
    b"[1]<stderr>:WARNING:tensorflow:Callback method `on_train_batch_end` is slow compared to the "
    b"batch time (batch time: 0.1243s vs `on_train_batch_end` time: 0.1850s).\n",
    b"[0]<stdout>:2/4 [==============>...............] - ETA: 0s - loss: 2.2120 - accuracy: "
    b"0.1875" + BS + b"\r",
    b"[0]<stdout>:4/4 [==============================] - 1s 237ms/step - loss: 2.1475 - accuracy: "
    b"0.2852 - val_loss: 2.8825 - val_accuracy: 0.1576 - lr: 0.0250\n",
    b"[0]<stdout>:Throughput: 443 images/s, 13.2 s per epoch\n",
    b"[0]<stdout>:Test loss: 2.9397, test accuracy: 0.1406\n",
    b'[0]<stdout>:RESULT {"test_loss": 2.9397, "test_accuracy": 0.1406, "train_seconds": 26.9, '
    b'"images_per_second": 443.1, "epochs": 2, "resumed_from_epoch": 0}\n',
])  # fmt: skip

# The starting script (no Horovod in it) on 2 workers: both print everything, interleaved.
STARTER_PIECES = [
    b"[0]<stdout>:\r",
    b"[0]<stdout>:1/4 [======>.......................] - ETA: 8s - loss: 2.4350" + BS + b"\r",
    b"[1]<stdout>:\r",
    b"[0]<stderr>:/work/main/.venv/lib/python3.11/site-packages/keras/src/engine/training.py:3103:"
    b" UserWarning: You are saving your model as an HDF5 file via `model.save()`.\n",
    b"[0]<stderr>:  saving_api.save_model(\n",
    b"[1]<stdout>:1/4 [======>.......................] - ETA: 7s - loss: 2.4836" + BS + b"\r",
    b"[0]<stdout>:4/4 [==============================] - 4s 416ms/step - loss: 2.4443\n",
    b"[1]<stdout>:3/4 [=====================>........] - ETA: 0s - loss: 2.4598" + BS + b"\r",
    b"[0]<stdout>:Trouser          0.000   0.000\n",
    b'[0]<stdout>:RESULT {"test_loss": 2.5946, "test_accuracy": 0.0938, "epochs": 1}\n',
    b"[1]<stderr>:/work/main/.venv/lib/python3.11/site-packages/keras/src/engine/training.py:3103:"
    b" UserWarning: You are saving your model as an HDF5 file via `model.save()`.\n",
    b"[1]<stderr>:  saving_api.save_model(\n",
    b"[1]<stdout>:4/4 [==============================] - 4s 414ms/step - loss: 2.4515\n",
    b"[1]<stdout>:Trouser          0.000   0.000\n",
    b'[1]<stdout>:RESULT {"test_loss": 2.821, "test_accuracy": 0.0625, "epochs": 1}\n',
]  # fmt: skip
STARTER_OUTPUT = b"".join(STARTER_PIECES)

# tests/runner_cases/fails_on_rank_1.py on 2 workers.
FAILURE_OUTPUT = b"""\
[0]<stdout>:worker 0 started with arguments ['x']
[1]<stdout>:worker 1 started with arguments ['x']
[1]<stderr>:Traceback (most recent call last):
[1]<stderr>:  File "/work/main/tests/runner_cases/fails_on_rank_1.py", line 14, in <module>
[1]<stderr>:    raise RuntimeError("rank 1 fails on purpose")
[1]<stderr>:RuntimeError: rank 1 fails on purpose
Process 1 exit with status code 1.
Terminating remaining workers after failure of Process 1.
[0]<stderr>:Terminated
Process 0 exit with status code 143.
Traceback (most recent call last):
  File "/work/main/.venv/bin/horovodrun", line 8, in <module>
    sys.exit(run_commandline())
RuntimeError: Horovod detected that one or more processes exited with non-zero status, thus \
causing the job to be terminated. The first process to do so was:
Process name: 1
Exit code: 1

"""

# The solution on 2 workers with `horovodrun --mpi`: mpirun tags every chunk it reads, so a bar,
# and even a print, comes in pieces, with other ranks' chunks in between.
MPI_OUTPUT = b"".join([
    b"[1,0]<stdout>:Epoch 1/2\n",
    b"[1,0]<stdout>:\r1/4 [======>.......................] - ETA: 2:56 - loss: 2.6750 - accuracy: "
    b"0.1250[1,0]<stdout>:" + BS + b"\r2/4 [==============>...............] - ETA: 0s - loss: "
    b"2.6462 - accuracy: 0.0938  [1,0]<stdout>:" + BS + b"\r3/4 [=====================>........]"
    b" - ETA: 0s - loss: 2.5300 - accuracy: 0.1250[1,0]<stdout>:" + BS + b"\r4/4 [=============="
    b"================] - ETA: 0s - loss: 2.4950 - accuracy: 0.1406[1,0]<stdout>:\n",
    b"[1,0]<stdout>:Epoch 1: finished gradual learning rate warmup to 0.025.\n",
    b"[1,0]<stderr>:/work/main/.venv/lib/python3.11/site-packages/keras/src/engine/training.py:3103"
    b": UserWarning: You are saving your model as an HDF5 file via `model.save()`. This file format"
    b" is considered legacy.\n",
    b"[1,0]<stderr>:  saving_api.save_model(\n",
    b"[1,0]<stdout>:" + BS + b"\r4/4 [==============================] - 62s 923ms/step - loss: "
    b"2.4971 - accuracy: 0.1094 - val_loss: 2.7094 - val_accuracy: 0.1250 - lr: 0.0250\n",
    b"[1,0]<stdout>:Epoch 2/2\n",
    b"[1,0]<stdout>:\r1/4 [======>.......................] - ETA: 0s - loss: 2.2232 - accuracy: "
    b"0.1250[1,1]<stderr>:WARNING:tensorflow:Callback method `on_train_batch_end` is slow "
    b"compared to the batch time (batch time: 0.1646s vs `on_train_batch_end` time: 0.4584s). "
    b"Check your callbacks.\n",
    b"[1,0]<stdout>:" + BS + b"\r3/4 [=====================>........] - ETA: 0s - loss: 2.2328 - "
    b"accuracy: 0.1979[1,0]<stdout>:" + BS + b"\r4/4 [==============================] - 1s "
    b"421ms/step - loss: 2.1931 - accuracy: 0.2344 - val_loss: 2.5645 - val_accuracy: 0.2018\n",
    b"[1,0]<stdout>:Throughput: 408 images/s, 31.3 s per epoch[1,0]<stdout>:\n",
    b"[1,0]<stdout>:Test loss: 2.5277, test accuracy: 0.2031\n",
    # print("worker", rank, ...) on rank 0: one chunk per piece that print() writes.
    b"[1,0]<stdout>:worker[1,0]<stdout>: [1,0]<stdout>:0[1,0]<stdout>: [1,0]<stdout>:of 2"
    b"[1,0]<stdout>:\n",
    b'[1,0]<stdout>:RESULT {"test_loss": 2.5277, "test_accuracy": 0.2031, "epochs": 2}\n',
])  # fmt: skip

# `python -c "import tensorflow_addons"` (tensorflow-addons 0.23.0) on stderr, on both workers.
TFA_NOTICE = [
    "/work/main/.venv/lib/python3.11/site-packages/tensorflow_addons/utils/tfa_eol_msg.py:23: "
    "UserWarning: ",
    "",
    "TensorFlow Addons (TFA) has ended development and introduction of new features.",
    "TFA has entered a minimal maintenance and release mode until a planned end of life in May "
    "2024.",
    "Please modify downstream libraries to take dependencies from other repositories in our "
    "TensorFlow community (e.g. Keras, Keras-CV, and Keras-NLP). ",
    "",
    "For more information see: https://github.com/tensorflow/addons/issues/2807 ",
    "",
    "  warnings.warn(",
]


def parse_in_pieces(data, size, default_rank=None):
    """Feeds the parser `size` bytes at a time, as a pipe would deliver them."""
    parser = OutputParser(default_rank=default_rank)
    events = []
    for start in range(0, len(data), size):
        events += parser.feed(data[start : start + size])
    return events + parser.finish()


def transcript_of(data, **kwargs):
    transcript = Transcript(**kwargs)
    for event in parse_in_pieces(data, 4096):
        transcript.add(event)
    return transcript


# ---------------------------------------------------------------------------------------------
# Layout
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cores, gpus, workers, threads, text",
    [
        (1, 0, 1, 1, "1 worker x 1 thread on 1 CPU core"),
        (2, 0, 2, 1, "2 workers x 1 thread on 2 CPU cores"),
        (8, 0, 2, 4, "2 workers x 4 threads on 8 CPU cores"),
        (16, 4, 4, 4, "4 workers x 4 threads on 16 CPU cores, one GPU each (4 GPUs visible)"),
        (2, 4, 4, 1, "4 workers x 1 thread on 2 CPU cores, one GPU each (4 GPUs visible)"),
    ],
)
def test_auto_layout(cores, gpus, workers, threads, text):
    layout = auto_layout(cores=cores, gpus=gpus)
    assert (layout.workers, layout.threads) == (workers, threads)
    assert layout.workers * layout.threads <= max(cores, layout.workers)
    assert layout.describe() == text
    assert layout.env() == {
        "TF_NUM_INTRAOP_THREADS": str(threads),
        "OMP_NUM_THREADS": str(threads),
        "TF_NUM_INTEROP_THREADS": "1",
    }


def test_more_workers_than_cores_is_said():
    assert runner.explicit_layout(4, cores=2, gpus=0).describe() == (
        "4 workers x 1 thread on 2 CPU cores (more workers than cores: they take turns)"
    )


def test_remote_hosts_keep_tensorflows_thread_default():
    layout = runner.explicit_layout(8, cores=2, gpus=0, hosts="host1:4,host2:4")
    assert layout.env() == {}
    assert layout.describe() == "8 workers on hosts host1:4,host2:4"


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


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


@needs_horovodrun
def test_options_come_from_horovodruns_own_parser():
    from horovod.runner import launch

    parser = horovodrun_cli.horovodrun_parser()
    assert launch.argparse is argparse  # the substitute was only there while the parser was built
    assert isinstance(parser, argparse.ArgumentParser)
    assert parser.parse_args(["-np", "2", "--verbose", "x.py"]).verbose is True
    # Options horovodrun knows are known here, with the number of values they take.
    flags = horovodrun_cli.horovodrun_flags()
    assert {"--verbose", "--gloo", "--mpi", "--tcp", "-cb", "--disable-cache", "-h"} <= flags
    assert {"-np", "-H", "--fusion-threshold-mb", "--start-timeout"}.isdisjoint(flags)
    assert horovodrun_cli.two_value_options() == {"--blacklist-cooldown-range"}
    for action in parser._actions:
        if action.option_strings and action.nargs not in (0, 2):
            # The split gives every other option one value: check that holds in this Horovod.
            assert action.nargs in (None, 1), action.option_strings

    for line in [
        "-np 2 -H localhost:2 python train.py --epochs 3",
        "--gloo --verbose -np 4 --hostfile hosts.txt --fusion-threshold-mb 32 train.py -np 9",
        "--blacklist-cooldown-range 10 100 -np=2 --start-timeout 60 train.py --lr 0.1",
        "-np 2 --tcp --log-level INFO --no-stall-check train.py",
        "-np 2 --no-hierarchical-allreduce --log-hide-timestamp train.py --verbose",
    ]:
        tokens = line.split()
        options, command = split_horovodrun_args(tokens)
        assert options + command == tokens
        assert command == parser.parse_args(tokens).command, line


def test_magic_line_parsing():
    args = parse_magic_line("-np auto fashion_mnist.py --epochs 3")
    assert (args.np, args.timeout, args.run_name) == ("auto", None, None)
    assert args.command == ["fashion_mnist.py", "--epochs", "3"]

    args = parse_magic_line(
        "--timeout 600 --name wide -np 8 -H host1:4,host2:4 --verbose fashion_mnist.py "
        "--epochs 3 -np 5 --name x"
    )
    assert (args.np, args.timeout, args.run_name) == ("8", 600.0, "wide")
    # horovodrun's options pass through; the script's own arguments are left alone.
    assert args.command == [
        "-H", "host1:4,host2:4", "--verbose",
        "fashion_mnist.py", "--epochs", "3", "-np", "5", "--name", "x",
    ]  # fmt: skip

    args = parse_magic_line("--hostfile hosts.txt 'my script.py' --depth 10")
    assert args.np == "auto" and args.command == [
        "--hostfile",
        "hosts.txt",
        "my script.py",
        "--depth",
        "10",
    ]
    with pytest.raises(ValueError):
        parse_magic_line("-np 2")


def a_script(tmp_path, name="train.py", takes_log_dir=True):
    path = tmp_path / name
    path.write_text("import argparse  # --log-dir\n" if takes_log_dir else "print('hi')\n")
    return path


@needs_horovodrun
def test_plan_for_auto_on_two_cores(tmp_path, monkeypatch):
    monkeypatch.delenv("TF_NUM_INTRAOP_THREADS", raising=False)
    script = a_script(tmp_path)
    plan = plan_run(
        "train.py --epochs 3",
        np="auto",
        cwd=tmp_path,
        logs_root=tmp_path / "logs",
        run_name="base",
        cores=2,
        gpus=0,
    )
    # Each worker pinned to its own core, by the launcher, before the script starts.
    pin = [str(runner.command.PIN_LAUNCHER), "1"]
    assert plan.argv[1:] == [
        "--gloo", "-np", "2", sys.executable, *pin,
        str(script), "--epochs", "3", "--log-dir", str(tmp_path / "logs/base"),
    ]  # fmt: skip
    assert Path(plan.argv[0]).name == "horovodrun"
    assert plan.display_command == (
        f"horovodrun --gloo -np 2 python {pin[0]} 1 train.py --epochs 3 --log-dir logs/base"
    )
    assert plan.env["TF_NUM_INTRAOP_THREADS"] == "1"
    assert plan.env["TF_NUM_INTEROP_THREADS"] == "1"
    assert plan.env["PATH"].split(os.pathsep)[0] == str(VENV_BIN)
    assert (plan.np, plan.hosts) == (2, "localhost:2")
    assert plan.log_path == tmp_path / "logs" / "base" / "horovodrun.log"


@needs_horovodrun
def test_plan_passes_explicit_options_through(tmp_path, monkeypatch):
    monkeypatch.delenv("TF_NUM_INTRAOP_THREADS", raising=False)
    a_script(tmp_path)
    # One options object for every plan below (np="auto": -np and the hosts decide).
    options = runner.RunOptions(np="auto", cwd=tmp_path, logs_root=tmp_path / "logs", cores=2,
                                gpus=0)  # fmt: skip
    plan = plan_run("-np 3 --mpi -H host1:2,host2:2 train.py --log-dir elsewhere", options=options)
    assert plan.argv[1:6] == ["-np", "3", "--mpi", "-H", "host1:2,host2:2"]
    assert "--gloo" not in plan.argv
    assert plan.argv.count("--log-dir") == 1 and plan.argv[-1] == "elsewhere"
    assert plan.run_dir == tmp_path / "elsewhere"
    assert (plan.np, plan.hosts) == (3, "host1:2,host2:2")
    assert "TF_NUM_INTRAOP_THREADS" not in plan.env  # remote hosts: their cores are unknown

    plan = plan_run("-H host1:4,host2:4 train.py", options=options)
    assert plan.np == 8 and plan.run_name.startswith("train-np8-")

    (tmp_path / "hosts.txt").write_text("host1 slots=2\nhost2 slots=4\n")
    plan = plan_run(["--hostfile", "hosts.txt", "train.py"], options=options)
    assert (plan.np, plan.hosts) == (6, "host1:2,host2:4")
    # horovodrun 0.28.1 reads a hostfile with horovod.runner.common.util.hosts.parse_host_files,
    # which fails with an IndexError on a comment or an empty line: refused here, with the rule.
    (tmp_path / "hosts.txt").write_text("# two machines\nhost1 slots=2\nhost2 slots=4\n")
    with pytest.raises(ValueError, match=r"reads every line as `host slots=N`"):
        plan_run(["--hostfile", "hosts.txt", "train.py"], cwd=tmp_path, cores=2, gpus=0)


@pytest.mark.parametrize(
    "args",
    [
        "--log-dir first --log-dir second",
        "--log-dir=first --log-dir=second",
        "--log-dir first --log-dir=second",
        "--log-dir=first --epochs 2 --log-dir second",
    ],
)
def test_plan_takes_the_last_log_dir_like_argparse(tmp_path, args):
    a_script(tmp_path)
    plan = plan_run(
        f"train.py {args}",
        np=1,
        launcher="python",
        cwd=tmp_path,
        logs_root=tmp_path / "logs",
        cores=2,
        gpus=0,
    )
    assert plan.tensorboard_dir == tmp_path / "second"
    assert plan.run_dir == tmp_path / "second"
    assert plan.argv[2:] == args.split()  # the script's own --log-dir: none is added


@needs_horovodrun
def test_plan_leaves_scripts_without_log_dir_alone(tmp_path):
    a_script(tmp_path, takes_log_dir=False)
    plan = plan_run("train.py", np=2, cwd=tmp_path, logs_root=tmp_path / "logs", cores=2, gpus=0)
    assert "--log-dir" not in plan.argv and plan.tensorboard_dir is None
    assert plan.run_dir.parent == tmp_path / "logs"  # the raw log still has its place
    # Default names never collide: a reused one would resume from the old checkpoints.
    plan.run_dir.mkdir(parents=True)
    again = plan_run("train.py", np=2, cwd=tmp_path, logs_root=tmp_path / "logs", cores=2, gpus=0)
    assert again.run_name == plan.run_name + "-2"
    with pytest.raises(FileNotFoundError):
        plan_run("missing.py", cwd=tmp_path, logs_root=tmp_path / "logs", cores=2, gpus=0)


@needs_horovodrun
def test_one_options_object_carries_a_run(tmp_path):
    a_script(tmp_path)
    options = runner.RunOptions(
        np=2, run_name="same", cwd=tmp_path, logs_root=tmp_path / "logs", cores=2, gpus=0,
        share=1, env={"X": "1"},
    )  # fmt: skip
    with pytest.raises(AttributeError):
        options.np = 3  # built once, handed down unchanged
    plan = plan_run("train.py", options=options)
    as_keywords = plan_run("train.py", 2, run_name="same", cwd=tmp_path,
                           logs_root=tmp_path / "logs", cores=2, gpus=0, share=1, env={"X": "1"})
    assert (plan.argv, plan.layout, plan.run_dir) == (
        as_keywords.argv, as_keywords.layout, as_keywords.run_dir
    )
    assert plan.layout.pinned and plan.env["X"] == "1" and plan.np == 2
    # Keywords beside the options replace those fields; a -np in the command wins over both.
    one = plan_run("train.py", options=options, np=1, run_name="one")
    assert (one.np, one.run_name, one.layout.threads) == (1, "one", 1)
    assert plan_run("-np 1 train.py", options=options).np == 1
    with pytest.raises(TypeError, match="workers"):
        plan_run("train.py", options=options, workers=2)


@needs_horovodrun
def test_plan_refuses_fewer_workers_than_the_slots_of_H_with_gloo(tmp_path):
    a_script(tmp_path)
    common = dict(cwd=tmp_path, logs_root=tmp_path / "logs", cores=2, gpus=0)
    # horovodrun 0.28.1 with Gloo would start 2 workers here (test_gloo_starts_every_slot_of_H).
    with pytest.raises(ValueError) as raised:
        plan_run("-np 1 -H localhost:2 train.py", **common)
    assert str(raised.value) == (
        "-np 1 with -H localhost:2 would start 2 workers: horovodrun 0.28.1 (Gloo) starts one "
        "on every slot of -H, whatever -np says. Give -H only the slots to use: "
        "-np 1 -H localhost:1"
    )
    with pytest.raises(ValueError, match=r"Give -H only the slots to use: -np 5 -H a:2,b:3$"):
        plan_run("-np 5 -H a:2,b:4 train.py", **common)
    with pytest.raises(ValueError, match=r"^-np 3 asks for more workers than the 2 slots of -H"):
        plan_run("-np 3 -H localhost:2 train.py", **common)
    # mpirun starts -np workers; `auto` and an -np equal to the slots are what -H says.
    assert plan_run("--mpi -np 1 -H localhost:2 train.py", **common).np == 1
    assert plan_run("-H localhost:2 train.py", **common).np == 2
    assert plan_run("-np 2 -H localhost:2 train.py", **common).np == 2


@needs_horovodrun
def test_this_machines_own_address_is_this_machine_everywhere(tmp_path, monkeypatch):
    monkeypatch.delenv("HOROVOD_START_TIMEOUT", raising=False)
    lan = [a for a in hosts.local_addresses() if not a.startswith("127.")]
    if not lan:
        pytest.skip("this machine has no address but loopback")
    a_script(tmp_path)
    plan = plan_run(
        f"-H {lan[0]}:2 train.py", cwd=tmp_path, logs_root=tmp_path / "logs", cores=2, gpus=0
    )
    # Local for the layout (threads split), the start-up bound, the ssh check and the clean-up.
    assert plan.layout.describe() == "2 workers x 1 thread on 2 CPU cores"
    assert "--start-timeout" not in plan.argv and plan.remote_hosts == ()


def test_every_process_of_a_run_gets_the_safe_env_and_a_marker_of_its_own(tmp_path, monkeypatch):
    monkeypatch.delenv("HWLOC_COMPONENTS", raising=False)
    a_script(tmp_path)
    common = dict(launcher="python", np=1, cwd=tmp_path, logs_root=tmp_path / "logs")
    first, second = plan_run("train.py", **common), plan_run("train.py", **common)
    assert first.env["HWLOC_COMPONENTS"] == "-gl"
    assert first.marker[0] == "WORKBOOK_RUN_ID" and first.marker != second.marker
    own = plan_run("train.py", env={"HWLOC_COMPONENTS": "-gl,-opencl"}, **common)
    assert own.env["HWLOC_COMPONENTS"] == "-gl,-opencl"  # the caller's own value wins


# ---------------------------------------------------------------------------------------------
# Hosts: which ones horovodrun reaches with ssh, and the check before a run (real ssh, no server)
# ---------------------------------------------------------------------------------------------

needs_ssh = pytest.mark.skipif(
    shutil.which("ssh") is None, reason="no ssh client (Debian: apt-get install openssh-client)"
)


def test_ssh_settings_come_from_horovodruns_options():
    options, command = split_horovodrun_args("-np 4 -p 2222 -i /k/id -H a:2,b:2 x.py -p 9".split())
    assert command == ["x.py", "-p", "9"]  # the script's own -p is the script's
    assert runner.command.ssh_settings(options) == hosts.SshSettings(
        port="2222", identity_file="/k/id"
    )
    long = runner.command.ssh_settings(["--ssh-port=22", "--ssh-identity-file", "key"])
    assert long.args() == ["-p", "22", "-i", "key"]
    assert runner.command.ssh_settings(["-H", "a:1"]).args() == []
    assert hosts.ssh_command("a", long)[-6:] == ["-p", "22", "-i", "key", "a", "true"]
    plain = hosts.ssh_command("a")
    assert "BatchMode=yes" in plain and "ConnectTimeout=5" in plain


@needs_horovodrun
def test_host_strings_are_read_as_horovodrun_reads_them():
    assert hosts.host_entries("a:2,b:2,a:1, c:3") == [("a", 2), ("b", 2), ("a", 1), ("c", 3)]
    assert hosts.host_names("a:2,b:2,a:1, c:3") == ["a", "b", "c"]
    assert hosts.slots_of_hosts("a:2,b:2,a:1, c:3") == 8
    # The first ranks' slots, host by host, as horovodrun's get_host_assignments gives them.
    assert hosts.hosts_for_workers("a:2,b:4", 5) == "a:2,b:3"
    assert hosts.hosts_for_workers("a:2,b:2,a:1", 5) == "a:2,b:2,a:1"
    assert hosts.hosts_for_workers("localhost:4", 1) == "localhost:1"
    # horovodrun 0.28.1 refuses a host without its slots (parse_hosts_and_slots), and so does
    # the runner, before anything starts.
    for value in ["a:2,c", "a", "a:2,,b:1", "a:two"]:
        with pytest.raises(ValueError, match=r"takes the hosts as name:slots"):
            hosts.host_entries(value)
        with pytest.raises(ValueError, match=r"takes the hosts as name:slots"):
            hosts.slots_of_hosts(value)


@needs_horovodrun
def test_which_hosts_are_remote():
    this_machine = [
        address.address
        for addresses in psutil.net_if_addrs().values()
        for address in addresses
        if address.family == socket.AF_INET and not address.address.startswith("127.")
    ]
    local = ["localhost", "127.0.0.1", socket.gethostname(), *this_machine]
    given = ",".join(f"{name}:1" for name in [*local, "elsewhere.invalid", "10.254.253.252"])
    # horovodrun's rule: a name that resolves to an address of this machine is local; one that
    # does not resolve is remote (ssh may know it from its config).
    assert hosts.remote_hosts(given) == ["elsewhere.invalid", "10.254.253.252"]


@needs_horovodrun
def test_plan_bounds_the_start_on_remote_hosts(tmp_path, monkeypatch):
    monkeypatch.delenv("HOROVOD_START_TIMEOUT", raising=False)
    a_script(tmp_path)
    common = dict(cwd=tmp_path, logs_root=tmp_path / "logs", cores=2, gpus=0)
    plan = plan_run("-H host1:2,host2:2 -p 2222 train.py", **common)
    assert plan.argv[plan.argv.index("--start-timeout") + 1] == "60"
    assert "--start-timeout 60" in plan.display_command
    assert plan.ssh == hosts.SshSettings(port="2222")
    given = plan_run("-H host1:2,host2:2 --start-timeout 120 train.py", **common)
    assert given.argv.count("--start-timeout") == 1 and "120" in given.argv
    from_env = plan_run("-H host1:2 train.py", env={"HOROVOD_START_TIMEOUT": "90"}, **common)
    assert "--start-timeout" not in from_env.argv
    local = plan_run("-H localhost:2 train.py", **common)
    assert "--start-timeout" not in local.argv and local.ssh == hosts.SshSettings()


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


# ---------------------------------------------------------------------------------------------
# Output parsing
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 7, 4096])
def test_progress_redraws_become_progress_events(size):
    events = parse_in_pieces(SOLUTION_OUTPUT, size)
    progress = [e for e in events if isinstance(e, Progress)]
    assert [e.text.split(" [")[0] for e in progress] == ["1/4", "2/4", "3/4", "1/4", "2/4"]
    assert all(e.rank == 0 and "\b" not in e.text and "\r" not in e.text for e in progress)
    lines = [e for e in events if isinstance(e, Line)]
    assert Line(0, "stdout", "Epoch 1/2") in lines
    assert (
        Line(
            1,
            "stderr",
            "WARNING:tensorflow:Callback method `on_train_batch_end` is slow "
            "compared to the batch time (batch time: 0.1243s vs `on_train_batch_end` time: "
            "0.1850s).",
        )
        in lines
    )
    assert lines[0].rank is None  # horovodrun's own output has no prefix


def finished_bars(transcript):
    """The progress bars kept as lines."""
    return [line for line in transcript.shown if re.search(r"\d+/\d+ \[", line)]


def test_transcript_of_the_solution():
    transcript = transcript_of(SOLUTION_OUTPUT)
    shown = "\n".join(transcript.shown)
    assert "[rank 0] Epoch 1/2" in transcript.shown
    assert "[rank 0] Epoch 1: finished gradual learning rate warmup to 0.025." in transcript.shown
    assert "[rank 0] Throughput: 443 images/s, 13.2 s per epoch" in transcript.shown
    # Of ~10 progress redraws only each epoch's finished bar is a line, none with a backspace;
    # the 4/4 bar with an ETA that the warmup callback's print ended is a redraw too.
    bars = finished_bars(transcript)
    assert [bar.split(" - ")[1] for bar in bars] == ["26s 511ms/step", "1s 237ms/step"]
    assert "\b" not in shown and "\r" not in shown
    # TensorFlow's C++ logging is kept aside, prefixed or not, and so are the known warnings.
    assert "tensorflow/core" not in shown and "To enable" not in shown
    assert "UserWarning" not in shown and "saving_api" not in shown and "is slow" not in shown
    assert len(transcript.hidden_logs) == 5 + 2 + 1
    assert transcript.metrics()["test_accuracy"] == 0.1406
    assert transcript.metrics()["images_per_second"] == 443.1
    assert transcript.failed_rank() is None


def test_mpiruns_chunks_are_put_back_together():
    transcript = transcript_of(MPI_OUTPUT)
    assert transcript.shown == [
        "[rank 0] Epoch 1/2",
        "[rank 0] Epoch 1: finished gradual learning rate warmup to 0.025.",
        "[rank 0] 4/4 [==============================] - 62s 923ms/step - loss: 2.4971 - "
        "accuracy: 0.1094 - val_loss: 2.7094 - val_accuracy: 0.1250 - lr: 0.0250",
        "[rank 0] Epoch 2/2",
        "[rank 0] 4/4 [==============================] - 1s 421ms/step - loss: 2.1931 - "
        "accuracy: 0.2344 - val_loss: 2.5645 - val_accuracy: 0.2018",
        "[rank 0] Throughput: 408 images/s, 31.3 s per epoch",
        "[rank 0] Test loss: 2.5277, test accuracy: 0.2031",
        "[rank 0] worker 0 of 2",
        '[rank 0] RESULT {"test_loss": 2.5277, "test_accuracy": 0.2031, "epochs": 2}',
    ]
    assert transcript.metrics()["test_accuracy"] == 0.2031
    assert [line.split("]", 1)[0] for line in transcript.hidden_logs] == ["[rank 0"] * 2 + [
        "[rank 1"
    ]


def split_everywhere(data, default_rank=None):
    """The events of `data` cut in two at every byte, each cut fed as two pieces."""
    for cut in range(1, len(data)):
        parser = OutputParser(default_rank=default_rank)
        yield cut, parser.feed(data[:cut]) + parser.feed(data[cut:]) + parser.finish()


@pytest.mark.parametrize(
    "name", ["SOLUTION_OUTPUT", "MPI_OUTPUT", "STARTER_OUTPUT", "FAILURE_OUTPUT"]
)
def test_events_do_not_depend_on_where_the_output_is_cut(name):
    data = globals()[name]
    whole = parse_in_pieces(data, len(data))
    for cut, events in split_everywhere(data):
        assert events == whole, f"cut at byte {cut}: {data[max(0, cut - 30):cut + 30]!r}"
    assert parse_in_pieces(data, 1) == whole
    # And into many pieces at random places, with multi-byte characters cut too.
    text = data.replace(b"Epoch", "Époque ✓".encode())
    whole = parse_in_pieces(text, len(text))
    rng = random.Random(7)
    for _ in range(200):
        parser, at, events = OutputParser(), 0, []
        while at < len(text):
            size = rng.choice([1, 2, 3, 13, 80, 1000])
            events += parser.feed(text[at : at + size])
            at += size
        assert events + parser.finish() == whole


@pytest.mark.parametrize("name", ["SOLUTION_OUTPUT", "MPI_OUTPUT"])
def test_a_real_pipe_cutting_and_delaying_the_output_changes_nothing(name, tmp_path):
    """The recorded output through a real pipe, cut and delayed at random, three times."""
    (tmp_path / "output.bin").write_bytes(globals()[name])
    expected = Transcript(label_ranks=False)
    for event in parse_in_pieces(globals()[name], 4096, default_rank=0):
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


def test_known_warnings_and_empty_lines_are_folded():
    lines = [
        *(f"[{rank}]<stderr>:{line}\n" for rank in (0, 1) for line in TFA_NOTICE),
        "[0]<stdout>:\n",
        "[1]<stdout>:Epoch 1/1\n",
        "[1]<stderr>:\n",
        "[0]<stderr>:UserWarning: something else\n",
        "[1]<stderr>:UserWarning: something else\n",
    ]
    transcript = transcript_of("".join(lines).encode())
    assert transcript.shown == ["[rank 1] Epoch 1/1", "[rank 0] UserWarning: something else"]
    assert len(transcript.hidden_logs) == 2 * len(TFA_NOTICE) + 2
    # The same unknown warning on another rank: shown once, counted.
    assert transcript.collapsed == 1
    # A notice whose end never comes is hidden for a few lines only.
    cut_short = "".join(f"[0]<stderr>:{line}\n" for line in TFA_NOTICE[:3] + ["x"] * 20)
    assert len(transcript_of(cut_short.encode()).shown) == 23 - runner.output.NOISE_MAX_LINES


def test_transcript_of_two_ranks_printing_everything():
    transcript = transcript_of(STARTER_OUTPUT)
    # rank 0's progress bar is the one on the status line; rank 1's redraws are not lines.
    events = parse_in_pieces(b"".join(STARTER_PIECES[:6]), 4096)
    partial = Transcript()
    for event in events:
        partial.add(event)
    assert set(partial.progress) == {0, 1}
    assert partial.current_progress().startswith("[rank 0] 1/4 [")
    assert not any("ETA" in line for line in transcript.shown)
    # Keras' HDF5 notice on both ranks is a known one: hidden, 2 lines each.
    assert not any("UserWarning" in line for line in transcript.shown)
    assert len(transcript.hidden_logs) == 4
    # stdout (a table row) is shown per rank, even when equal.
    assert "[rank 0] Trouser          0.000   0.000" in transcript.shown
    assert "[rank 1] Trouser          0.000   0.000" in transcript.shown
    # Both ranks print RESULT; rank 0's is the run's.
    assert set(transcript.results) == {0, 1}
    assert transcript.metrics()["test_accuracy"] == 0.0938


def test_transcript_of_a_failure():
    transcript = transcript_of(FAILURE_OUTPUT)
    assert transcript.failed_rank() == 1
    assert transcript.exits == [(1, 1), (0, 143)]
    error = rank_error(transcript.by_rank[1])
    assert error.startswith("Traceback (most recent call last):")
    assert error.endswith("RuntimeError: rank 1 fails on purpose")
    # horovodrun's own traceback after the failure is a consequence: kept out of sight.
    assert not any("Horovod detected" in line for line in transcript.shown)
    assert "[horovodrun] Process 1 exit with status code 1." in transcript.shown


def test_rank_error_keeps_chained_tracebacks_and_falls_back_to_last_lines():
    lines = textwrap.dedent("""\
        Epoch 1/2
        Traceback (most recent call last):
          File "a.py", line 1, in <module>
        KeyError: 'x'

        During handling of the above exception, another exception occurred:

        Traceback (most recent call last):
          File "a.py", line 3, in <module>
        ValueError: bad
        Terminated""").splitlines()
    error = rank_error(lines)
    assert error.splitlines()[1] == '  File "a.py", line 1, in <module>'
    assert error.endswith("ValueError: bad")
    assert rank_error(["Epoch 1/2", "No prepared data in /x: run prepare"]) == (
        "Epoch 1/2\nNo prepared data in /x: run prepare"
    )
    assert runner.exit_code_meaning(143) == "143: killed by SIGTERM"
    assert runner.exit_code_meaning(137) == "137: killed by SIGKILL (out of memory?)"
    assert runner.exit_code_meaning(1) == "1"


def test_plain_python_output_is_rank_0_without_prefixes():
    data = (
        b"Epoch 1/2\n\r1/4 [==>...] - loss: 2.4" + BS + b"\r4/4 [=====] - loss: 2.3\n"
        b'RESULT {"test_accuracy": 0.5}\n'
    )
    transcript = Transcript(label_ranks=False)
    for event in parse_in_pieces(data, 3, default_rank=0):
        transcript.add(event)
    assert transcript.shown == [
        "Epoch 1/2",
        "4/4 [=====] - loss: 2.3",
        'RESULT {"test_accuracy": 0.5}',
    ]
    assert transcript.metrics() == {"test_accuracy": 0.5}


def test_result_summary():
    result = runner.RunResult(
        exit_code=1,
        wall_seconds=8.5,
        np=2,
        hosts="localhost:2",
        metrics={},
        failed_rank=1,
        error="Traceback (most recent call last):\nRuntimeError: <boom>",
        log_path=Path("x.log"),
        run_name="r",
        layout="2 workers x 1 thread on 2 CPU cores",
    )
    assert not result.ok and result.images_per_second is None
    assert "FAILED (rank 1, exit code 1)" in str(result)
    assert "RuntimeError: &lt;boom&gt;" in result._repr_html_()
    ok = runner.RunResult(
        0,
        40.0,
        2,
        "localhost:2",
        {"test_accuracy": 0.9, "images_per_second": 512.3},
        None,
        "",
        Path("x.log"),
    )
    assert ok.ok and ok.test_accuracy == 0.9 and ok.images_per_second == 512.3
    assert "512" in ok._repr_html_() and "finished in 40.0 s" in str(ok)


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


def test_magic_is_registered():
    registered = {}

    class FakeShell:
        def register_magic_function(self, function, magic_kind, magic_name):
            registered[magic_name] = (function, magic_kind)

    runner.load_ipython_extension(FakeShell())
    assert registered["horovodrun"] == (runner.horovodrun_magic, "line")


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


def wait_for(condition, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    pytest.fail(f"waited {seconds} s for {what}")


@pytest.fixture
def quiet_tensorflow(monkeypatch):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    monkeypatch.setenv("PATH", os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")]))


@pytest.mark.slow
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


@pytest.mark.slow
@needs_horovodrun
def test_timeout_stops_even_stubborn_workers(tmp_path, quiet_tensorflow):
    script = tmp_path / "stubborn_worker.py"
    script.write_text(STUBBORN)
    started = time.monotonic()
    # 30 s: time for horovodrun and both workers to start on a busy machine.
    result = runner.horovodrun(str(script), np=2, timeout=30, logs_root=tmp_path, quiet=True)
    assert result.timed_out and not result.ok
    assert result.leftover_pids == []
    assert not processes_running(str(script))
    assert time.monotonic() - started < 30 + 15
    assert "worker 1 waiting" in result.log_path.read_text()


@pytest.mark.slow
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


@pytest.mark.slow
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
        'RESULT {"test_accuracy": 0.5, "images_per_second": ' "100.0}",
    ]


@pytest.mark.slow
@needs_horovodrun
def test_gloo_starts_every_slot_of_H(tmp_path, quiet_tensorflow):
    """Why the runner refuses `-np 1 -H localhost:2`: horovodrun itself starts 2 workers."""
    script = tmp_path / "who.py"
    script.write_text("import os\nprint('size', os.environ['HOROVOD_SIZE'], flush=True)\n")
    done = subprocess.run(
        [str(VENV_BIN / "horovodrun"), "--gloo", "-np", "1", "-H", "localhost:2",
         sys.executable, str(script)],
        capture_output=True, text=True, timeout=300, env=with_safe_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert sorted(re.findall(r"\[(\d)\]<stdout>:size (\d)", done.stdout)) == [
        ("0", "2"),
        ("1", "2"),
    ]


@pytest.mark.slow
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


# --- never hang, and leave nothing behind -------------------------------------------------------

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
        capture_output=True, text=True, timeout=300, env=with_safe_env(),
    ).stdout  # fmt: skip
    controllers = built.split("Available Controllers:")[-1].split("Available Tensor")[0]
    if "[X] MPI" not in controllers:
        pytest.skip("Horovod was built without MPI: make env REBUILD_HOROVOD=1 after setup_mpi.sh")


needs_mpi = pytest.mark.usefixtures("mpi_controller")


@pytest.mark.slow
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


@pytest.mark.slow
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
        str(INIT_HOROVOD), np=1, launcher="python", logs_root=tmp_path, timeout=45
    )
    # As in a terminal that lacks it. Empty, not unset: the environment's start-up hook
    # (bootstrap/safe_env.py) sets it when unset, and keeps a value the user gave.
    plan.env["HWLOC_COMPONENTS"] = ""
    handle = runner.BackgroundRun(plan)
    wait_for(lambda: any(p.name() == "orted" for p in carrying(plan.marker)), 40, "OpenMPI's orted")
    result = handle.result(timeout=120)
    assert result.timed_out, result
    assert "initialized" not in result.output  # it hung in hvd.init()
    assert result.leftover_pids == []
    assert carrying(plan.marker) == []


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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
        lambda: not psutil.pid_exists(board.started_pid)
        or psutil.Process(board.started_pid).status() == psutil.STATUS_ZOMBIE,
        10,
        "TensorBoard to stop",
    )


@pytest.mark.slow
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

"""Output captured from real horovodrun 0.28.1 runs (Gloo and MPI, TF 2.15), progress bars
shortened, and how the tests feed it to the runner's parser. Shared by
tests/unit/test_runner_output.py and tests/smoke/test_runner_processes.py.
"""

import re

from workbook.runner import OutputParser, Transcript

BS = b"\x08" * 80  # Keras moves back over the previous progress bar with backspaces

# The solution on 2 workers: only rank 0 prints progress; horovodrun's own TensorFlow import and
# the workers' log unprefixed and prefixed TensorFlow C++ lines.
SOLUTION_OUTPUT = b"".join(
    [
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
    ]
)

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
]
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
MPI_OUTPUT = b"".join(
    [
        b"[1,0]<stdout>:Epoch 1/2\n",
        b"[1,0]<stdout>:\r1/4 [======>.......................] - ETA: 2:56 - loss: 2.6750 - accuracy: "
        b"0.1250[1,0]<stdout>:" + BS + b"\r2/4 [==============>...............] - ETA: 0s - loss: "
        b"2.6462 - accuracy: 0.0938  [1,0]<stdout>:"
        + BS
        + b"\r3/4 [=====================>........]"
        b" - ETA: 0s - loss: 2.5300 - accuracy: 0.1250[1,0]<stdout>:"
        + BS
        + b"\r4/4 [=============="
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
        b"[1,0]<stdout>:"
        + BS
        + b"\r3/4 [=====================>........] - ETA: 0s - loss: 2.2328 - "
        b"accuracy: 0.1979[1,0]<stdout>:" + BS + b"\r4/4 [==============================] - 1s "
        b"421ms/step - loss: 2.1931 - accuracy: 0.2344 - val_loss: 2.5645 - val_accuracy: 0.2018\n",
        b"[1,0]<stdout>:Throughput: 408 images/s, 31.3 s per epoch[1,0]<stdout>:\n",
        b"[1,0]<stdout>:Test loss: 2.5277, test accuracy: 0.2031\n",
        # print("worker", rank, ...) on rank 0: one chunk per piece that print() writes.
        b"[1,0]<stdout>:worker[1,0]<stdout>: [1,0]<stdout>:0[1,0]<stdout>: [1,0]<stdout>:of 2"
        b"[1,0]<stdout>:\n",
        b'[1,0]<stdout>:RESULT {"test_loss": 2.5277, "test_accuracy": 0.2031, "epochs": 2}\n',
    ]
)

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


def finished_bars(transcript):
    """The progress bars kept as lines."""
    return [line for line in transcript.shown if re.search(r"\d+/\d+ \[", line)]

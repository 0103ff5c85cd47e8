"""What the workbook says Horovod, TensorFlow and Keras do, shown by real runs.

notebooks/CLAIMS.md lists every behavioural claim of the notebooks and of the checker's
messages, with the test below that shows it (or, for GPU-only claims, Horovod's source).
tests/claims/two_workers.py runs the experiments under `horovodrun --gloo -np 2` on the committed
sample, a few batches each, many experiments in one horovodrun; rank 0 prints `CLAIM name {json}`.
A version of Horovod, TensorFlow or Keras that behaves otherwise fails a test here.

Step 11's schedule experiments are in tests/smoke/test_schedule_claims.py (make check, one
horovodrun, about 30 s); the others, and the resume that hangs, here (make test).
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from claim_runs import (
    all_close,
    close,
    needs_horovodrun_and_sample,
    run_experiments,
    start,
    stop,
    worker_env,
)

pytestmark = needs_horovodrun_and_sample

# Every experiment but step 11's schedules (tests/smoke/test_schedule_claims.py).
OTHER_EXPERIMENTS = [
    "init",
    "gpu_list",
    "progress_bars",
    "averaged_step",
    "wrapped_twice",
    "wrapped_after_compile",
    "broadcast_variables",
    "broadcast_callback",
    "shard_and_shuffle",
    "validation_coverage",
    "metric_average",
    "hdf5_lock",
    "tensorboard_two_writers",
    "load_model",
    "optimizer_variable_names",
    "resume_with_created_weights",
    "scaled_rate",
    "warmup_default",
    "novograd_first_step",
    "api",
    "cache_replays",
    "model_sizes",
]
START_TIMEOUT = 150  # seconds for both workers to reach model.fit in the hang experiment
HANG_SECONDS = 10  # the fixed resume finishes its one batch in well under a second


@pytest.fixture(scope="module")
def claims(tmp_path_factory):
    return run_experiments(OTHER_EXPERIMENTS, tmp_path_factory.mktemp("claims"))


# ---- every notebook but step 11's schedules ------------------------------------------------


def test_init_ranks_and_sizes(claims):
    """Notebook 01: ranks 0 and 1 of size 2; local ranks 0 and 1 on one machine."""
    assert claims["init"] == [{"rank": r, "size": 2, "local_rank": r} for r in (0, 1)]


def test_without_gpus_the_list_is_empty_and_indexing_it_fails(claims):
    """Notebooks 02: the list of GPUs is empty on a CPU; indexing it raises IndexError."""
    assert claims["gpu_list"] == {"gpus": 0, "indexing_error": "IndexError"}


def test_every_rank_prints_progress_bars_unless_verbose_0(claims):
    """Notebook 03: fit and evaluate print a bar on every worker; verbose=0 silences fit."""
    for rank in claims["progress_bars"]:
        assert rank["fit"] and rank["evaluate"] and rank["predict"]
        assert not rank["fit_verbose_0"]


def test_the_averaged_step_is_the_big_batch_step(claims):
    """Notebook 04: 2 workers of 32 images take the step of one process with 64; both agree."""
    ranks = claims["averaged_step"]
    assert ranks[0]["weights"] == ranks[1]["weights"]
    for rank in ranks:
        assert rank["moved"] > 1e-3 and rank["vs_one_process"] < 1e-5


def test_wrapping_twice_and_wrapping_after_compile(claims):
    """Step 4's checker: Horovod 0.28.1 can't wrap its own wrapper (its methods call
    super(self.__class__, self), so the inner one calls itself: RecursionError); a wrapper made
    after compile() is never used (the model keeps the plain SGD, and the ranks drift apart)."""
    assert claims["wrapped_twice"]["error"].startswith("RecursionError")
    ranks = claims["wrapped_after_compile"]
    assert {rank["optimizer"] for rank in ranks} == {"SGD"}  # not "SGD, wrapped"
    assert ranks[0]["weights"] != ranks[1]["weights"]


def test_a_broadcast_copies_rank_0s_weights(claims):
    """Notebook 05: different random starts; after the broadcast both hold rank 0's."""
    rank_0, rank_1 = claims["broadcast_variables"]
    assert rank_0["before"] != rank_1["before"]
    assert rank_0["after"] == rank_1["after"] == rank_0["before"]


def test_the_broadcast_callback_acts_after_the_first_batch(claims):
    """Notebook 05: the callback copies the weights at the end of the first batch (so they
    differ at its start and agree from the second on), and the optimizer's variables too (a
    plain SGD's momentum, different on each rank after batch 0, is rank 0's at batch 1); without
    it the ranks never agree."""
    rank_0, rank_1 = claims["broadcast_callback"]
    assert rank_0["with"]["batch_0"] != rank_1["with"]["batch_0"]
    assert rank_0["with"]["batch_1"] == rank_1["with"]["batch_1"]
    assert rank_0["with"]["end"] == rank_1["with"]["end"]
    assert rank_0["without"]["end"] != rank_1["without"]["end"]
    plain_0, plain_1 = rank_0["plain_sgd"], rank_1["plain_sgd"]
    assert plain_0["slots_batch_1"] != 0
    assert plain_0["slots_batch_1"] == plain_1["slots_batch_1"]
    assert plain_0["batch_1"] == plain_1["batch_1"]
    alone_0, alone_1 = rank_0["plain_sgd_without"], rank_1["plain_sgd_without"]
    assert alone_0["slots_batch_1"] != alone_1["slots_batch_1"]  # so the callback copied it


def test_shard_before_shuffling(claims):
    """Notebook 06: sharded first, the workers read disjoint halves; shuffled first (each in
    its own order), they overlap."""
    orders = claims["shard_and_shuffle"]
    assert orders["shard_then_shuffle"] == {"read": 3000, "distinct": 3000}
    assert orders["shuffle_then_shard"]["read"] == 3000
    assert orders["shuffle_then_shard"]["distinct"] < 3000


def test_sharded_validation_evaluates_each_test_image_at_most_once(claims):
    """Notebook 06: each worker validates validation_steps // N batches of its own shard. Both
    together read 31 // 2 = 15 batches of 32 each: 960 of the 1,000 test images, none twice,
    480 per worker (the rest is each shard's partial last batch)."""
    coverage = claims["validation_coverage"]
    assert coverage["steps"] == (1000 // 32) // 2
    assert coverage["read"] == coverage["evaluated"] == 2 * 15 * 32
    assert coverage["per_worker"] == 15 * 32


def test_metrics_are_averaged_only_for_callbacks_after_the_average(claims):
    """Notebook 07: a callback before MetricAverageCallback sees its rank's own numbers; one
    after it sees the average, the same on every rank."""
    rank_0, rank_1 = claims["metric_average"]
    assert rank_0["before"]["loss"] != rank_1["before"]["loss"]
    assert rank_0["after"] == rank_1["after"]
    average = (rank_0["before"]["loss"] + rank_1["before"]["loss"]) / 2
    assert close(rank_0["after"]["loss"], average)


def test_a_second_writer_of_a_locked_hdf5_file_fails(claims):
    """Notebook 09: HDF5 locks a file while it is written; saving to it then raises
    BlockingIOError (errno 11, unable to lock file)."""
    rank_0, rank_1 = claims["hdf5_lock"]
    assert rank_0 is None
    assert rank_1.startswith("BlockingIOError") and "unable to lock file" in rank_1


def test_two_tensorboard_writers_leave_two_event_files(claims):
    """Notebook 09: one set of event files per worker in the same folder."""
    assert claims["tensorboard_two_writers"] == 2


def test_loading_a_checkpoint(claims):
    """Notebooks 08 and 12, steps 8 and 12's checks: hvd.load_model wraps the restored legacy
    optimizer in DistributedOptimizer with legacy_opts=True (without it, Keras's new optimizers
    refuse the checkpoint: "decay is deprecated"); Keras's own load_model doesn't wrap it;
    NovoGrad must be named in custom_optimizers, a list (in custom_objects it loads unwrapped)."""
    loads = claims["load_model"]
    assert loads["legacy_opts"] == {"value": "SGD, wrapped", "error": None}
    assert loads["legacy_without_legacy_opts"]["error"].startswith("ValueError")
    assert loads["keras_load_model"] == {"value": "SGD", "error": None}
    # Step 8's checker: legacy_opts=True with a new optimizer's checkpoint fails.
    assert (
        "Unexpected keyword argument passed to optimizer: weight_decay"
        in (loads["new_with_legacy_opts"]["error"])
    )
    assert loads["new_without_legacy_opts"] == {"value": "SGD, wrapped", "error": None}
    assert "Unknown optimizer: 'NovoGrad'" in loads["novograd_plain"]["error"]
    assert loads["novograd_custom_optimizers"] == {"value": "NovoGrad, wrapped", "error": None}
    assert loads["novograd_class_not_list"]["error"].startswith("TypeError")
    assert loads["novograd_custom_objects"] == {"value": "NovoGrad", "error": None}


def test_a_fresh_optimizer_names_its_variables_otherwise(claims):
    """Notebook 08: the loaded optimizer's variable names differ from a fresh one's after its
    first step; _create_all_weights makes them under the loaded names, at once."""
    names = claims["optimizer_variable_names"]
    assert names["fresh_before"] == []
    assert names["fresh_after"] != names["loaded"]
    assert names["created"] == names["loaded"]


def test_resuming_with_the_created_weights_agrees(claims):
    """Notebook 08: with the fix, rank 1 ends with rank 0's weights, no hang."""
    rank_0, rank_1 = claims["resume_with_created_weights"]
    assert rank_0 == rank_1


@pytest.mark.timeout(START_TIMEOUT + HANG_SECONDS + 60)
def test_a_collective_that_not_every_rank_joins_hangs(tmp_path):
    """Two runs at once, both stuck where the notebooks and the checker say, while the fixed
    versions finish in well under a second:
    - notebook 08 and step 8's check: resuming without _create_all_weights, the broadcast
      callback waits forever (rank 0 loaded the checkpoint, rank 1 built a fresh model);
    - step 4's check: a DistributedOptimizer that trains on rank 0 only waits forever for the
      others' gradients."""
    runs = {}
    try:
        for name in ("resume_without_created_weights", "distributed_optimizer_on_rank_0_only"):
            (tmp_path / name).mkdir()
            log_path = tmp_path / name / "horovodrun.log"
            runs[name] = (start([name], log_path), log_path)
        deadline = time.monotonic() + START_TIMEOUT
        for name, (process, log_path) in runs.items():
            while time.monotonic() < deadline and process.poll() is None:
                if all(f"rank {r} training" in log_path.read_text() for r in (0, 1)):
                    break
                time.sleep(1)
            output = log_path.read_text()
            assert all(f"rank {r} training" in output for r in (0, 1)), output[-5000:]
        time.sleep(HANG_SECONDS)
        for name, (process, log_path) in runs.items():
            output = log_path.read_text()
            assert process.poll() is None, f"{name} ended ({process.returncode}):\n{output[-5000:]}"
            assert "CLAIM" not in output, name
    finally:
        for process, _ in runs.values():
            stop(process)


def test_linear_scaling_learns_more_per_epoch(claims):
    """Notebook 10: with 1/N of the steps, the scaled rate ends the epoch at a lower loss."""
    assert claims["scaled_rate"]["scaled"] < claims["scaled_rate"]["base"]


def test_the_warmups_default_length(claims):
    """Step 11's check: without warmup_epochs, the warmup lasts 5 epochs."""
    assert claims["warmup_default"] == 5


def test_the_names_the_checker_relies_on(claims):
    """Step 8's check: horovod.tensorflow.keras has no broadcast_object, horovod.tensorflow
    has; notebook 08: hvd.broadcast returns a tensor, int() of it rank 0's number; step 8's:
    DistributedOptimizer(opt) is a new optimizer, so variables made in `opt` never reach it
    (horovod/_keras/__init__.py:252-255); step 1's: a question to Horovod before hvd.init() is
    an error."""
    api = claims["api"]
    assert api["keras_has_broadcast_object"] is False
    assert api["tensorflow_has_broadcast_object"] is True
    assert api["broadcast_returns"] == "EagerTensor" and api["broadcast_int"] == [3, 3]
    assert api["wrapper_variables"] == {"same_object": False, "inner": 3, "wrapper": 0}
    assert api["before_init"]["error"] == (
        "ValueError: Horovod has not been initialized; use hvd.init()."
    )


def test_a_cache_after_random_work_replays_it(claims):
    """Notebook 17: cache() before the random work, or every epoch sees the same "random"
    images."""
    assert claims["cache_replays"] == {"cached_same": True, "uncached_same": False}


def run_python(*codes: str) -> list:
    """Fresh Python processes (TensorFlow not yet started), run at once: their outputs."""
    env = dict(worker_env(), TF_CPP_MIN_LOG_LEVEL="3")
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,
        )
        for code in codes
    ]
    outputs = []
    try:
        for process in processes:
            outputs.append(process.communicate(timeout=120)[0])
    finally:
        for process in processes:
            if process.poll() is None:
                stop(process)
    return outputs


def test_visible_devices_hide_every_type_and_are_fixed_once_tensorflow_runs():
    """Step 2's check (a CPU stand-in for the GPU claims): set_visible_devices without a device
    type applies to every type, so a list without the CPU hides it; once TensorFlow has run,
    the visible devices can't change any more ("pin it right after hvd.init()")."""
    hidden, late = run_python(
        "import tensorflow as tf\n"
        "tf.config.set_visible_devices([])\n"
        "try:\n    tf.constant(1) + 1\nexcept Exception as e:\n    print(type(e).__name__, e)\n",
        "import tensorflow as tf\n"
        "tf.constant(1) + 1\n"
        "try:\n    tf.config.set_visible_devices([], 'CPU')\n"
        "except Exception as e:\n    print(type(e).__name__, e)\n",
    )
    assert "No CPU devices are available in this process" in hidden, hidden[-2000:]
    assert "RuntimeError Visible devices cannot be modified after being initialized" in late, late[
        -2000:
    ]


def test_the_models_weights_are_counted_right(claims):
    """Notebook 16: AlexNet for 28x28 has 1,929,066 weights, WRN-16-1 175,706."""
    assert claims["model_sizes"] == {"alexnet": 1_929_066, "wide_resnet": 175_706}


def test_novograd_moves_every_layer_by_the_learning_rate(claims):
    """Notebook 12: SGD moves the layers by 0.001 and 10; NovoGrad both by 0.1."""
    steps = claims["novograd_first_step"]
    assert all_close(steps["sgd"], [0.001, 10.0])
    assert all_close(steps["novograd"], [0.1, 0.1])
    assert steps["novograd_has_momentum"] is False

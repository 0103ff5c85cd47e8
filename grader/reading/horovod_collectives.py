"""Horovod's collectives, as the checks model them (Horovod 0.28.1): which calls need every
worker, what a broadcast copies, and when the callbacks that run collectives act.

- A collective (allreduce, allgather, broadcast, join...) completes only when every worker
  calls it: a worker that skips one leaves the others waiting for it forever. Its result is
  the same on every worker.
- A broadcast sends rank 0's value to every worker (`hvd.broadcast(value, root_rank=0)`).
- BroadcastGlobalVariablesCallback(0) copies rank 0's weights and optimizer state to the
  others at the end of the first batch (horovod/_keras/callbacks.py), matching variables by
  name; MetricAverageCallback averages the metrics at the end of each epoch, so the two are
  independent and either order trains alike.
"""

from __future__ import annotations

from grader.reading.syntax import HVD

# Calls that send rank 0's value to every worker: their results are the same on all.
BROADCASTS = (
    f"{HVD}.broadcast",
    "horovod.tensorflow.broadcast",
    "horovod.tensorflow.broadcast_object",
)
# Horovod's collectives: each completes only when every worker calls it, so a worker that
# skips one leaves the others waiting for it forever. Their results are the same on all.
COLLECTIVES = BROADCASTS + (
    f"{HVD}.allreduce",
    f"{HVD}.allgather",
    f"{HVD}.reducescatter",
    f"{HVD}.broadcast_global_variables",
    "horovod.tensorflow.allreduce",
    "horovod.tensorflow.grouped_allreduce",
    "horovod.tensorflow.allgather",
    "horovod.tensorflow.allgather_object",
    "horovod.tensorflow.alltoall",
    "horovod.tensorflow.reducescatter",
    "horovod.tensorflow.broadcast_variables",
    "horovod.tensorflow.join",
    "horovod.tensorflow.barrier",
)

# What a worker that skips a collective does to the others, in words.
WAITS = (
    "completes only when every worker calls it, so the workers that call it wait forever for "
    "the others (training hangs)"
)

BROADCAST_CALLBACK = f"{HVD}.callbacks.BroadcastGlobalVariablesCallback"
METRIC_AVERAGE_CALLBACK = f"{HVD}.callbacks.MetricAverageCallback"

# What the broadcast callback copies from rank 0, and when each callback acts, in words.
BROADCAST_COPIES = "its weights and optimizer state"
BROADCAST_ACTS = "after the first batch"
AVERAGING_ACTS = "at the end of each epoch"


def is_broadcast(name: str) -> bool:
    """True if the qualified `name` is one of Horovod's broadcasts (of a value or variables)."""
    return name in COLLECTIVES and "broadcast" in name

"""TensorBoard's event files, read: the per-epoch scalars Keras's TensorBoard callback logs.

    epoch_scalars(run_dir, split, tag)   [(wall time, epoch, value)] of one scalar

The notebooks' comparisons (workbook.run_times) and the benchmarks (bench.training) read a
run's epochs from here, and nothing else opens TensorBoard's event files to read them.
"""

from __future__ import annotations

from pathlib import Path


def epoch_scalars(run_dir: Path, split: str, tag: str) -> list[tuple[float, int, float]]:
    """[(wall time, epoch, value)] of one scalar Keras's TensorBoard callback logged, in the
    order written (split: train or validation)."""
    import logging

    from tensorboard.backend.event_processing.event_accumulator import TENSORS, EventAccumulator
    from tensorboard.util.tensor_util import make_ndarray

    logging.getLogger("tensorboard").setLevel(logging.ERROR)  # no notes about the graph
    path = Path(run_dir) / split
    if not path.is_dir():
        return []
    events = EventAccumulator(str(path), size_guidance={TENSORS: 0})
    events.Reload()
    if tag not in events.Tags().get("tensors", []):
        return []
    return [(e.wall_time, e.step, float(make_ndarray(e.tensor_proto))) for e in events.Tensors(tag)]

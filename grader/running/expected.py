"""What the lesson's recipe implies for a run: the learning rate and momentum of every batch.

The finished script scales the learning rate by the number of workers (step 10), warms it up
with Horovod's LearningRateWarmupCallback and then follows step_decay with Horovod's
LearningRateScheduleCallback (step 11). These are Horovod 0.28.1's formulas
(horovod/_keras/callbacks.py), written out so that the check compares what the ranks did with
what the arguments imply, not only rank with rank:

- warmup, epochs below warmup_epochs, every batch: scaled / N * (e * (N - 1) / warmup + 1) with
  e = epoch + (batch + 1) / steps_per_epoch (Horovod adds one step "for round numbers");
- after it, at the first batch of each epoch: scaled * 0.1 ** (drops passed);
- momentum correction (an optimizer with momentum): while a batch runs after the rate changed
  from old to new, momentum * new / old, restored at the batch's end.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass


@dataclass(frozen=True)
class Recipe:
    """The arguments a run was given, as the rates depend on them."""

    base_lr: float
    workers: int
    warmup_epochs: float
    lr_drops: tuple

    @property
    def scaled_lr(self) -> float:
        return self.base_lr * self.workers

    def rate(self, epoch: int, batch: int, steps_per_epoch: int) -> float:
        """The learning rate of `batch` (from 0) of `epoch` (from 0)."""
        if self.warmup_epochs and epoch < self.warmup_epochs:
            progress = epoch + (batch + 1) / steps_per_epoch
            return (
                self.scaled_lr
                / self.workers
                * (progress * (self.workers - 1) / self.warmup_epochs + 1)
            )
        return self.scaled_lr * 0.1 ** sum(epoch >= drop for drop in self.lr_drops)

    def rates(self, epoch: int, steps: int) -> list:
        return [self.rate(epoch, batch, steps) for batch in range(steps)]


def corrected_momentum(momentum: float, rate: float, previous: float) -> float:
    """Horovod's momentum correction while a batch runs at `rate` after `previous`."""
    return momentum * rate / previous if previous else momentum


def same(a: float, b: float, relative: float = 1e-3) -> bool:
    """Equal up to float32 rounding (the rates are float32 variables)."""
    return abs(a - b) <= relative * max(abs(a), abs(b), 1e-30)


@functools.cache
def preset_value(script_path, preset: str, key: str):
    """`PRESETS[preset][key]` of a script of the lesson's chain, read without running it (a
    literal in `PRESETS = {"cpu": dict(key=...), ...}`); None when it isn't there."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(script_path).read_text(encoding="utf-8"))
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Dict)
            and any(getattr(t, "id", None) == "PRESETS" for t in node.targets)
        ):
            for name, table in zip(node.value.keys, node.value.values):
                if isinstance(name, ast.Constant) and name.value == preset:
                    entries = table.keywords if isinstance(table, ast.Call) else []
                    for entry in entries:
                        if entry.arg == key:
                            try:
                                return ast.literal_eval(entry.value)
                            except ValueError:
                                return None
    return None

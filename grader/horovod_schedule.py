"""Horovod 0.28.1's learning-rate callbacks, as the step-11 check models them: which epochs
each acts on and what rate it sets there (grader/schedule.py evaluates the multipliers).

- LearningRateScheduleCallback (`ScheduleCallback`) sets `initial_lr * multiplier(epoch)` at the
  first batch of each epoch it covers for a function, but `initial_lr * m ** (epoch -
  start_epoch)` for a number m: exponential decay;
- a Keras LearningRateScheduler (`KerasScheduler`) sets `schedule(epoch)` at each epoch's start,
  before any batch, so the warmup and Horovod's schedules set the rate after it;
- two of Horovod's schedules that cover one epoch fight over its rate (`overlap_failure`).
"""

from __future__ import annotations

import ast
import math

from grader.verdicts import Failure, Note
from grader.schedule import CantTell, Evaluator, Function
from grader.syntax import HVD, argument

WARMUP = f"{HVD}.callbacks.LearningRateWarmupCallback"
SCHEDULE = f"{HVD}.callbacks.LearningRateScheduleCallback"


def overlap_failure(script, warmup_epochs, schedules):
    """The schedules must start where the warmup ends and must not overlap each other: two
    callbacks that set the rate at one epoch also undo each other's momentum correction."""
    warmup_end = script.constant(warmup_epochs)
    spans = []  # (start, end or None, entry); start -1 stands for "where the warmup ends"
    for entry in schedules:
        start = argument(entry.call, "start_epoch", 2)
        end = argument(entry.call, "end_epoch", 3)
        end_value = None if end is None else script.constant(end)
        unknown = [
            bound
            for bound, value in ((start, script.constant(start)), (end, end_value))
            if bound is not None
            and not script.same_value(bound, warmup_epochs)
            and not isinstance(value, (int, float))
            and not (isinstance(script.resolve(bound), ast.Constant))  # end_epoch=None
        ]
        if unknown:
            return Note(
                f"line {entry.line}: it can't tell which epochs this LearningRateScheduleCallback "
                f"covers (`{script.source(unknown[0])}`); it looked for the first starting where "
                f"the warmup ends, start_epoch={script.source(warmup_epochs)}, and the others at "
                "fixed epochs, none overlapping",
                entry.line,
            )
        if start is not None and script.same_value(start, warmup_epochs):
            spans.append((-1 if warmup_end is None else warmup_end, end_value, entry))
            continue
        start_value = 0 if start is None else script.constant(start)
        if start_value == 0 or (warmup_end is not None and start_value < warmup_end):
            return Failure(
                f"line {entry.line}: this LearningRateScheduleCallback starts at epoch "
                f"{start_value}, during the warmup, so the two fight over the learning rate (it "
                "sets its own at the first batch of each warmup epoch) and spoil SGD's momentum "
                "(each restores the other's corrected value after the batch): "
                f"start_epoch={script.source(warmup_epochs)}",
                entry.line,
            )
        spans.append((start_value, end_value, entry))
    spans.sort(key=lambda span: span[0])
    if spans[0][0] != -1 and warmup_end is None:
        first = spans[0][2]
        return Note(
            f"line {first.line}: it can't tell whether this first LearningRateScheduleCallback "
            f"starts where the warmup ends; it looked for start_epoch="
            f"{script.source(warmup_epochs)}",
            first.line,
        )
    for (_, end, entry), (next_start, _, next_entry) in zip(spans, spans[1:]):
        if end is None or (isinstance(end, (int, float)) and end > next_start):
            return Failure(
                f"line {next_entry.line}: this schedule starts at epoch {next_start}, before "
                f"the one on line {entry.line} ends: give each an end_epoch where the next "
                "starts",
                next_entry.line,
            )
    return None


class ScheduleCallback:
    """One LearningRateScheduleCallback: the epochs it acts on and what it sets there."""

    def __init__(self, script, evaluator, entry, warmup_epochs, warmup_lr):
        self.entry = entry
        self.line = entry.line
        call = entry.call
        self.multiplier = argument(call, "multiplier", 1)
        self._start = _epoch_bound(script, argument(call, "start_epoch", 2), warmup_epochs, 0)
        self._end = _epoch_bound(script, argument(call, "end_epoch", 3), warmup_epochs, math.inf)
        self.factor = _factor(script, argument(call, "initial_lr", 0), warmup_lr)
        value = evaluator.expr(self.multiplier, {})
        self.function = value if isinstance(value, Function) else None
        self.number = None if self.function else value
        if self.function is None and (
            isinstance(value, bool) or not isinstance(value, (int, float))
        ):
            raise CantTell(self.multiplier)
        self.evaluator = evaluator
        self._called = {}

    def start(self, warmup_end):
        return warmup_end if self._start is None else self._start

    def end(self, warmup_end):
        return warmup_end if self._end is None else self._end

    def covers(self, epoch, warmup_end) -> bool:
        return self.start(warmup_end) <= epoch < self.end(warmup_end)

    def rate(self, epoch, warmup_end) -> float:
        """The multiple of the warmup's initial_lr it sets at `epoch` (Horovod 0.28.1)."""
        if self.function is not None:
            if epoch not in self._called:  # a function of the epoch alone
                self._called[epoch] = self.evaluator.multiplier(self.multiplier, epoch)
            return self.factor * self._called[epoch]
        return self.factor * self.number ** (epoch - self.start(warmup_end))


def _epoch_bound(script, node, warmup_epochs, default):
    """An epoch bound as a number, or None for "where the warmup ends"."""
    if node is None:
        return default
    if script.same_value(node, warmup_epochs):
        return None
    resolved = script.resolve(node)
    if isinstance(resolved, ast.Constant) and resolved.value is None:
        return default  # end_epoch=None: no end
    value = script.constant(node)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CantTell(node)
    return value


def _factor(script, initial_lr, warmup_lr) -> float:
    """initial_lr as a multiple of the warmup's (1 when they are the same expression)."""
    if script.same_value(initial_lr, warmup_lr):
        return 1.0
    value = script.resolve(initial_lr)
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult):
        for same, other in ((value.left, value.right), (value.right, value.left)):
            number = script.constant(other)
            if script.same_value(same, warmup_lr) and isinstance(number, (int, float)):
                return float(number)
    raise CantTell(initial_lr)


class KerasScheduler:
    """A Keras LearningRateScheduler: it sets `schedule(epoch)` at the start of every epoch,
    before any batch, so the warmup (every batch of its epochs) and Horovod's schedules (the
    first batch of theirs) set the rate after it."""

    number = None
    factor = 1.0

    def __init__(self, script, options, entry, warmup_lr):
        self.entry = entry
        self.line = entry.line
        self.multiplier = argument(entry.call, "schedule", 0) if entry.call else None
        if self.multiplier is None:
            raise CantTell(entry.expr)
        self.evaluator = RateEvaluator(script, options, warmup_lr)
        self.function = self.evaluator.expr(self.multiplier, {})
        spec = getattr(self.function, "node", None)
        if (
            not isinstance(self.function, Function)
            or len(spec.args.posonlyargs + spec.args.args) != 1
        ):
            raise CantTell(self.multiplier)  # Keras passes (epoch, lr) to a two-argument one
        self._called = {}

    def covers(self, epoch, warmup_end) -> bool:
        return True

    def rate(self, epoch, warmup_end) -> float:
        """The multiple of the scaled rate it sets at `epoch`. A rate that doesn't double when
        the scaled rate does is not a multiple of it: Unscaled."""
        if epoch not in self._called:
            once, twice = (self._value(epoch, unit) for unit in (1.0, 2.0))
            if not math.isclose(twice, 2 * once, rel_tol=1e-9, abs_tol=1e-15):
                raise Unscaled(self, epoch, once)
            self._called[epoch] = once
        return self._called[epoch]

    def _value(self, epoch, unit):
        self.evaluator.steps = 0
        self.evaluator.unit_value = unit
        value = self.evaluator.call(self.function, [epoch], self.multiplier)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise CantTell(self.multiplier)
        return float(value)


class Unscaled(Exception):
    """A Keras schedule whose rate is no multiple of the scaled rate (e.g. step_decay alone)."""

    def __init__(self, stretch, epoch, value):
        super().__init__("unscaled")
        self.stretch, self.epoch, self.value = stretch, epoch, value


class RateEvaluator(Evaluator):
    """Evaluates a Keras schedule, which returns a rate, in units of the scaled rate: the
    warmup's initial_lr (scaled_lr, or the expression it stands for) counts as 1."""

    def __init__(self, script, options, unit):
        super().__init__(script, options)
        self.unit = unit
        self.unit_value = 1.0  # what the scaled rate counts as (1, or 2 to see that it scales)

    def expr(self, node, env: dict):
        if (
            isinstance(node, (ast.Name, ast.Attribute, ast.BinOp))
            and not (isinstance(node, ast.Name) and node.id in env)
            and self.script.same_value(node, self.unit)
        ):
            return self.unit_value
        return super().expr(node, env)

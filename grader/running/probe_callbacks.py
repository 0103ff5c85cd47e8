"""The two callbacks the probe (grader/running/probe.py) puts around the script's own in model.fit.

FirstProbe, first in the list, sees the weights right after the first training step's update,
before any other callback; LastProbe, last, sees what every callback left: the learning rate
and momentum of each batch, the steps of each epoch and its metrics. Both write to the record
they are given (probe.Record).

Loaded by the probe by its file path, in the worker (the sandbox shows it, grader/running/sandbox.py):
only NumPy and TensorFlow, no import of the probe or the grader.
"""

import numpy as np
import tensorflow as tf


def trainable_vector(model):
    values = [np.asarray(v.numpy(), dtype=np.float64).ravel() for v in model.trainable_variables]
    return np.concatenate(values) if values else np.zeros(0)


def learning_rate(optimizer):
    """The optimizer's current learning rate as a float, or None."""
    try:
        rate = optimizer.lr if hasattr(optimizer, "lr") else optimizer.learning_rate
        if isinstance(rate, tf.keras.optimizers.schedules.LearningRateSchedule):
            rate = rate(optimizer.iterations)
        return float(tf.keras.backend.get_value(rate))
    except Exception:  # an optimizer without a readable rate: the check says it can't tell
        return None


def momentum(optimizer):
    """The optimizer's momentum as a float, or None when it has none (NovoGrad, Adam...)."""
    try:
        return float(tf.keras.backend.get_value(optimizer.momentum))
    except Exception:  # no momentum hyperparameter
        return None


class FirstProbe(tf.keras.callbacks.Callback):
    """First in the list: the weights before training and right after step 1's update."""

    def __init__(self, record):
        super().__init__()
        self.record, self.before = record, None

    def on_train_begin(self, logs=None):
        self.before = trainable_vector(self.model)

    def on_epoch_end(self, epoch, logs=None):
        """The metrics of this rank's own batches, before any callback averaged them."""
        if not self.record.data["own_logs"] and logs:
            self.record.data["own_logs"] = {
                key: float(value) for key, value in logs.items() if hasattr(value, "__float__")
            }

    def on_train_batch_end(self, batch, logs=None):
        if self.before is not None:
            self.record.save_vector("before-first-step", self.before)
            self.record.save_vector("first-update", trainable_vector(self.model) - self.before)
            self.before = None


class LastProbe(tf.keras.callbacks.Callback):
    """Last in the list: what every callback left behind."""

    def __init__(self, record):
        super().__init__()
        self.record, self.epoch, self.steps = record, 0, 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
        self.record.data["lr"][str(epoch)] = []

    def on_train_batch_begin(self, batch, logs=None):
        epoch = str(self.epoch)
        self.record.data["lr"].setdefault(epoch, []).append(learning_rate(self.model.optimizer))
        value = momentum(self.model.optimizer)
        if value is not None:
            self.record.data["momentum"].setdefault(epoch, []).append(value)

    def on_train_batch_end(self, batch, logs=None):
        steps = self.record.data["steps"]
        steps[str(self.epoch)] = steps.get(str(self.epoch), 0) + 1
        self.steps += 1
        if self.steps == 1:
            self.record.save_vector("after-first-step", trainable_vector(self.model))
            self.record.stage("finished training step 1")
        else:
            self.record.save()  # progress the run check sees (grader/running/run_check.py)

    def on_test_batch_end(self, batch, logs=None):  # validation inside model.fit
        steps = self.record.data["val_steps"]
        steps[str(self.epoch)] = steps.get(str(self.epoch), 0) + 1
        self.record.save()

    def on_epoch_end(self, epoch, logs=None):
        names = set(self.model.metrics_names)
        self.record.data["epoch_logs"][str(epoch)] = {
            key: float(value)
            for key, value in (logs or {}).items()
            if key in names or (key.startswith("val_") and key[4:] in names)
        }
        self.record.stage(f"finished epoch {epoch + 1}")

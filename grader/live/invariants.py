"""What must hold on the ranks once step N is done, judged from what they reported.

One function per step, listed in INVARIANTS. Each returns a finding, a grader.report.Result
of that step: PASSED (the invariant holds), FAILED, or CANT_TELL when the run did not show it
(a rank that never got that far, a script that does things this check can't see). A finding
states only what the records show.
"""

from __future__ import annotations

from dataclasses import dataclass

from grader.live.evidence import Evidence, event_file_writers
from grader.report import CANT_TELL, FAILED, PASSED, Result

SAME_METRIC = 1e-5  # relative; averaged metrics are the same float on every rank
SAME_RATE = 1e-3  # relative; learning rates are float32


# What each step's invariant is, in a few words: the title of its finding.
TITLES = {
    4: "identical updates",
    5: "the same weights",
    6: "different batches",
    7: "averaged metrics",
    8: "the resume epoch",
    9: "one writer",
    10: "the scaled learning rate",
    11: "the warmup",
    12: "NovoGrad",
}


def finding(step: int, status: str, message: str, hint: str = "") -> Result:
    """Step `step`'s invariant: PASSED (it holds), FAILED or CANT_TELL, and what was seen."""
    return Result(status, TITLES[step], message, step=step, hint=hint)


@dataclass
class Setting:
    """What the check asked of the script, for the invariants that compare against it."""

    np: int
    base_lr: float
    steps_per_epoch: int  # --steps-per-epoch given to the script
    log_dir: str  # the first run's --log-dir
    shared_log_dir: bool  # in the first run, whether every rank got the same --log-dir
    resumed: bool  # whether a second run went on from the first run's checkpoint


def _ranks_with(evidence: Evidence, run: int, what) -> dict:
    return {rank: value for rank, record in sorted(evidence.ranks(run).items())
            if (value := what(record)) is not None}  # fmt: skip


def _ranks_text(ranks: list) -> str:
    """ "rank 1", "ranks 0 and 1", "ranks 1, 2 and 3"."""
    names = [str(rank) for rank in ranks]
    if len(names) == 1:
        return f"rank {names[0]}"
    return f"ranks {', '.join(names[:-1])} and {names[-1]}"


def _not_reached(evidence: Evidence, have: dict, what: str, run: int = 1) -> str:
    """ "rank 1 never ...": which ranks did not report `what`."""
    absent = [rank for rank in range(evidence.np) if rank not in have]
    second = " in the second run" if run == 2 else ""
    return f"can't tell: {_ranks_text(absent)} never {what}{second}"


def _relative(a, b) -> float:
    import numpy as np

    scale = max(float(np.max(np.abs(a))) if a.size else 0.0, 1e-30)
    return float(np.max(np.abs(a - b))) / scale if a.size else 0.0


def rounding_excess(before: dict, updates: dict) -> tuple:
    """(rank, how many times float32 rounding the rank's update differs from rank 0's).

    The averaged gradient, and so the update, is the same on every rank; only adding it to
    weights that differ (before the broadcast) rounds differently: by half a float32 step of
    the weights at most. 1 or less: the same update.
    """
    import numpy as np

    eps = float(np.finfo(np.float32).eps)
    worst_rank, worst = 0, 0.0
    for rank, update in updates.items():
        if not rank:
            continue
        after = [before[0] + updates[0], before[rank] + update]
        size = np.max(np.abs([before[0], before[rank], *after]), axis=0)
        allowed = 2 * eps * size + 1e-30
        excess = float(np.max(np.abs(update - updates[0]) / allowed))
        if excess > worst:
            worst_rank, worst = rank, excess
    return worst_rank, worst


def identical_updates(evidence: Evidence, setting: Setting) -> Result:
    updates = _ranks_with(evidence, 1, lambda r: r.first_update)
    before = _ranks_with(evidence, 1, lambda r: r.weights_before_first_step)
    if len(updates) < evidence.np or len(before) < evidence.np:
        return finding(4, CANT_TELL, _not_reached(evidence, updates, "finished a training step"))
    first = updates[0]
    if not first.size or not first.any():
        return finding(4, CANT_TELL, "can't tell: the first training step did not change rank "
                       "0's weights")  # fmt: skip
    if any(update.shape != first.shape for update in updates.values()):
        return finding(4, FAILED, "the ranks train models of different sizes")
    rank, excess = rounding_excess(before, updates)
    if excess <= 1:
        return finding(4, PASSED, "in the first training step every rank changed its weights by "
                       "the same amount (up to float32 rounding): the gradients are averaged")  # fmt: skip
    plain = [rank for rank, record in sorted(evidence.ranks(1).items())
             if record.fit and not record.fit.get("distributed_optimizer")]  # fmt: skip
    why = (f" ({_ranks_text(plain)}: a plain {evidence.ranks(1)[plain[0]].fit.get('optimizer')}"
           ", not wrapped)" if plain else "")  # fmt: skip
    return finding(
        4,
        FAILED,
        f"in the first training step rank 0 and rank {rank} changed their weights differently "
        f"(by up to {_relative(first, updates[rank]):.0%} of the change): each rank applied the "
        f"gradient of its own batch{why}",
        "Wrap the optimizer: opt = hvd.DistributedOptimizer(opt), and compile the model with it; "
        "it averages the gradients of all workers before every update.",
    )


def same_weights(evidence: Evidence, setting: Setting) -> Result:
    weights = _ranks_with(evidence, 1, lambda r: r.weights_after_first_step)
    if len(weights) < evidence.np:
        return finding(5, CANT_TELL, _not_reached(evidence, weights, "finished a training step"))
    first = weights[0]
    different = [rank for rank, values in weights.items()
                 if values.shape != first.shape or _relative(first, values) > 0]  # fmt: skip
    if not different:
        return finding(5, PASSED, "after the first training step every rank has the same "
                       "weights")  # fmt: skip
    return finding(
        5,
        FAILED,
        f"after the first training step the weights of rank {different[0]} differ from rank "
        f"0's (by up to {_relative(first, weights[different[0]]):.0%}): every rank started from "
        "its own random weights",
        "Add hvd.callbacks.BroadcastGlobalVariablesCallback(0) to the callbacks of model.fit, on "
        "every rank: it copies rank 0's weights to all after the first step.",
    )


def different_batches(evidence: Evidence, setting: Setting) -> Result:
    labels = _ranks_with(evidence, 1, lambda r: r.data.get("labels") or None)
    fits = _ranks_with(evidence, 1, lambda r: r.fit)
    if fits and not all(fit.get("dataset") for fit in fits.values()):
        return finding(6, CANT_TELL, "can't tell: model.fit got no tf.data.Dataset, whose "
                       "batches this check can see")  # fmt: skip
    if len(labels) < evidence.np:
        return finding(6, CANT_TELL, _not_reached(evidence, labels, "read a batch"))
    batches = min(len(seen) for seen in labels.values())
    same = [rank for rank, seen in labels.items() if rank and seen[:batches] == labels[0][:batches]]
    if same:
        return finding(
            6,
            FAILED,
            f"rank 0 and rank {same[0]} trained on the same images: their first {batches} "
            "batches have the same labels in the same order (this check gives every rank's "
            "shuffle the same seed, so ranks that read the same images show it)",
            "Shard the training dataset before shuffling it: "
            "train_dataset.shard(hvd.size(), hvd.rank()) gives each worker its own part.",
        )
    steps = {rank: fit.get("steps_per_epoch") for rank, fit in fits.items()}
    expected = setting.steps_per_epoch // setting.np
    if steps and all(isinstance(value, int) for value in steps.values()):
        too_many = [
            rank for rank, value in steps.items() if value * setting.np > setting.steps_per_epoch
        ]
        if too_many:
            return finding(
                6,
                FAILED,
                f"the ranks read different batches, but each trains {steps[too_many[0]]} steps "
                f"per epoch, as many as one process would: with {setting.np} workers each should "
                f"train {setting.steps_per_epoch} // {setting.np} = {expected}, so that an epoch "
                "still goes over the data once",
                "Divide the steps: steps_per_epoch = steps_per_epoch // hvd.size().",
            )
    per_rank = f", {expected} steps per epoch each" if steps else ""
    return finding(6, PASSED, f"every rank trained on different batches{per_rank} (with the "
                   "same shuffle seed on every rank)")  # fmt: skip


def averaged_metrics(evidence: Evidence, setting: Setting) -> Result:
    logs = _ranks_with(evidence, 1, lambda r: r.epoch_logs().get(0))
    if len(logs) < evidence.np:
        return finding(7, CANT_TELL, _not_reached(evidence, logs, "finished an epoch"))
    names = [name for name in logs[0] if all(name in other for other in logs.values())]
    if not names:
        return finding(7, CANT_TELL, "can't tell: the epoch's logs have no metrics")
    for name in names:
        values = [logs[rank][name] for rank in sorted(logs)]
        scale = max(abs(v) for v in values) or 1.0
        if (max(values) - min(values)) / scale > SAME_METRIC:
            shown = ", ".join(f"rank {rank} {logs[rank][name]:.4f}" for rank in sorted(logs))
            return finding(
                7,
                FAILED,
                f"at the end of epoch 1 the ranks report different {name}: {shown}: each shows "
                "its own, not the average over all workers",
                "Add hvd.callbacks.MetricAverageCallback() to the callbacks, before those that "
                "read the metrics.",
            )
    shown = ", ".join(f"{name} {logs[0][name]:.4f}" for name in names)
    return finding(7, PASSED, f"every rank ended epoch 1 with the same metrics ({shown})")


def agreed_resume_epoch(evidence: Evidence, setting: Setting) -> Result:
    if not setting.resumed:
        return finding(8, CANT_TELL, "can't tell: there was no second run to resume")
    reached = _ranks_with(evidence, 2, lambda r: r.fit)
    starts = {rank: fit.get("initial_epoch") or 0 for rank, fit in reached.items()}
    scene = ("a second run went on from the first one's checkpoint, which only rank 0 could "
             "see (every other rank got an empty --log-dir, as on another machine)")  # fmt: skip
    if len(set(starts.values())) > 1:
        shown = ", ".join(
            f"rank {rank} {_resumed(epoch)}" for rank, epoch in sorted(starts.items())
        )
        return finding(
            8,
            FAILED,
            f"{scene}; the ranks disagree on where to go on: {shown}",
            "Let rank 0 look for the checkpoint and broadcast its epoch to every rank: "
            'resume_from_epoch = hvd.broadcast(resume_from_epoch, root_rank=0, name="resume_from_epoch").',
        )
    if len(reached) < evidence.np:
        return finding(8, CANT_TELL, _not_reached(evidence, reached, "reached model.fit", 2))
    epoch = next(iter(starts.values()))
    if epoch == 0:
        first = evidence.ranks(1).get(0)
        wrote = first.data.get("saved") if first else None
        why = ("although rank 0 had written " + ", ".join(_names(wrote))) if wrote else (
            "the first run wrote no checkpoint")  # fmt: skip
        return finding(8, CANT_TELL, f"can't tell: {scene}, but no rank resumed ({why})")
    return finding(8, PASSED, f"{scene}; every rank {_resumed(epoch)}")


def _resumed(epoch: int) -> str:
    """What model.fit(initial_epoch=epoch) does, in words."""
    return f"resumed after epoch {epoch}" if epoch else "started from scratch"


def _names(paths) -> list:
    return sorted({str(path).replace("\\", "/").rsplit("/", 1)[-1] for path in paths})


def one_writer(evidence: Evidence, setting: Setting) -> Result:
    records = evidence.ranks(1)
    if len(records) < evidence.np:
        return finding(9, CANT_TELL, _not_reached(evidence, records, "started"))
    if not setting.shared_log_dir:
        return finding(9, CANT_TELL, "can't tell: the ranks had log folders of their own")
    pids = {record.data["pid"]: rank for rank, record in records.items()}
    logs = event_file_writers([setting.log_dir], pids)
    writers = {}
    for rank, record in sorted(records.items()):
        wrote = []
        if record.data.get("saved"):
            wrote.append("checkpoints (" + ", ".join(_names(record.data["saved"])) + ")")
        if logs.get(rank):
            wrote.append("TensorBoard logs")
        if wrote:
            writers[rank] = wrote
    others = [rank for rank in writers if rank]
    if others:
        rank = others[0]
        return finding(
            9,
            FAILED,
            f"rank {rank} also wrote {' and '.join(writers[rank])} into the --log-dir every "
            "rank shares",
            "Add ModelCheckpoint and TensorBoard to the callbacks only under "
            "`if hvd.rank() == 0:`: one writer, no clashes.",
        )
    if 0 not in writers:
        return finding(9, CANT_TELL, "can't tell: no rank wrote checkpoints or TensorBoard logs "
                       "in the first epoch")  # fmt: skip
    return finding(9, PASSED, f"only rank 0 wrote {' and '.join(writers[0])}")


def _rates(evidence: Evidence, rank: int) -> list:
    """[(run, epoch, [rates])] of one rank, in order."""
    found = []
    for run in sorted(evidence.runs):
        record = evidence.ranks(run).get(rank)
        if record:
            for epoch, rates in sorted(record.learning_rates().items()):
                if rates and None not in rates:
                    found.append((run, epoch, rates))
    return found


def _rate_list(rates: list) -> str:
    shown = [f"{rate:.4g}" for rate in rates]
    return shown[0] if len(set(shown)) == 1 else " → ".join(shown)


def _schedule(epochs: list) -> str:
    return "; ".join(f"epoch {epoch + 1}: {_rate_list(rates)}" for _, epoch, rates in epochs)


def scaled_learning_rate(evidence: Evidence, setting: Setting) -> Result:
    epochs = _rates(evidence, 0)
    if not epochs:
        return finding(10, CANT_TELL, "can't tell: rank 0 reported no learning rate")
    scaled = setting.base_lr * setting.np
    highest = max(max(rates) for _, _, rates in epochs)
    schedule = _schedule(epochs)
    if abs(highest - scaled) <= SAME_RATE * scaled:
        return finding(10, PASSED, f"the learning rate reached {scaled:.4g} = --base-lr "
                       f"{setting.base_lr:g} × {setting.np} workers ({schedule})")  # fmt: skip
    last = epochs[-1][2]
    if highest < scaled and len(last) > 1 and last[-1] > last[0]:
        return finding(10, CANT_TELL, f"can't tell: the learning rate was still rising at the end "
                       f"of the run ({schedule})")  # fmt: skip
    hint = "Multiply it by the number of workers: scaled_lr = args.base_lr * hvd.size()."
    if abs(highest - setting.base_lr) <= SAME_RATE * setting.base_lr:
        return finding(10, FAILED, f"the learning rate stays at --base-lr {setting.base_lr:g} "
                       f"({schedule}), though every step averages {setting.np} workers' "
                       "batches", hint)  # fmt: skip
    return finding(10, FAILED, f"the learning rate peaked at {highest:.4g}, not {scaled:.4g} = "
                   f"--base-lr {setting.base_lr:g} × {setting.np} workers ({schedule})", hint)  # fmt: skip


def warmup(evidence: Evidence, setting: Setting) -> Result:
    epochs = {rank: _rates(evidence, rank) for rank in evidence.ranks(1)}
    if not epochs.get(0):
        return finding(11, CANT_TELL, "can't tell: rank 0 reported no learning rate")
    scaled = setting.base_lr * setting.np
    first = epochs[0][0][2]
    schedule = _schedule(epochs[0])
    for rank, seen in sorted(epochs.items()):
        if rank and seen and seen != epochs[0][: len(seen)]:
            return finding(11, FAILED, f"rank {rank} used other learning rates than rank 0: "
                           f"{_schedule(seen)}, and rank 0 {schedule}",
                           "Give every rank the same callbacks for the learning rate.")  # fmt: skip
    hint = ("Start from a smaller rate: hvd.callbacks.LearningRateWarmupCallback(initial_lr="
            "scaled_lr, warmup_epochs=args.warmup_epochs) raises it from base-lr to scaled_lr.")  # fmt: skip
    if first[0] >= 0.75 * scaled:
        near = "" if abs(first[0] - scaled) <= SAME_RATE * scaled else f"{first[0]:.4g}, near "
        return finding(11, FAILED, f"the first training step already used {near}the full rate "
                       f"{scaled:.4g} ({schedule}): no warmup", hint)  # fmt: skip
    if any(later < earlier * (1 - SAME_RATE) for earlier, later in zip(first, first[1:])):
        return finding(11, FAILED, f"the learning rate went down in the first epoch "
                       f"({schedule}); a warmup raises it", hint)  # fmt: skip
    if len(first) < 2 or first[-1] <= first[0] * (1 + SAME_RATE):
        return finding(11, FAILED, f"the learning rate did not rise in the first epoch "
                       f"({schedule})", hint)  # fmt: skip
    return finding(11, PASSED, f"the learning rate rose from {first[0]:.4g} towards {scaled:.4g} "
                   f"on every rank alike ({schedule})")  # fmt: skip


def novograd(evidence: Evidence, setting: Setting) -> Result:
    fits = _ranks_with(evidence, 1, lambda r: r.fit)
    if len(fits) < evidence.np:
        return finding(12, CANT_TELL, _not_reached(evidence, fits, "reached model.fit"))
    others = {rank: fit.get("optimizer") for rank, fit in fits.items()
              if "novograd" not in str(fit.get("optimizer")).lower()}  # fmt: skip
    if others:
        rank, name = next(iter(others.items()))
        return finding(12, FAILED, f"rank {rank} trains with {name}, not NovoGrad",
                       "opt = tfa.optimizers.NovoGrad(learning_rate=scaled_lr, ...), then wrap it "
                       "in hvd.DistributedOptimizer as before.")  # fmt: skip
    return finding(12, PASSED, "every rank trains with NovoGrad")


# The invariant of each step, checked once the step is done (steps 1-3 show no such thing).
INVARIANTS = {
    4: identical_updates,
    5: same_weights,
    6: different_batches,
    7: averaged_metrics,
    8: agreed_resume_epoch,
    9: one_writer,
    10: scaled_learning_rate,
    11: warmup,
    12: novograd,
}
FIRST_STEP = min(INVARIANTS)


def findings(evidence: Evidence, setting: Setting, step: int) -> list:
    """The findings of steps FIRST_STEP..step."""
    found = []
    for number in range(FIRST_STEP, step + 1):
        try:
            found.append(INVARIANTS[number](evidence, setting))
        except Exception as error:  # a bug here must read as one, never as the learner's
            found.append(finding(number, CANT_TELL, f"can't tell: the check failed "
                                 f"({type(error).__name__}: {error})"))  # fmt: skip
    return found

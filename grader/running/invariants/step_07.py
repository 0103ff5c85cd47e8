"""Step 7's run invariant: every rank ends an epoch with the same metrics, the mean of the ranks'
own."""

from __future__ import annotations

from grader.report import CANT_TELL, FAILED, PASSED, Result
from grader.running.evidence import Evidence
from grader.running.invariants.shared import (
    Setting,
    finding,
    not_reached,
    not_shown,
    on_some_ranks,
    ranks_with,
)

STEP = 7
TITLE = "averaged metrics"  # the title of its findings

SAME_METRIC = 1e-5  # relative; averaged metrics are the same float on every rank


def check(evidence: Evidence, setting: Setting) -> Result:
    partly = on_some_ranks(evidence, "MetricAverageCallback", STEP)
    if partly is not None:
        return partly
    logs = ranks_with(evidence, 1, lambda r: r.epoch_logs().get(0))
    if len(logs) < evidence.np:
        return not_shown(STEP, not_reached(evidence, logs, "finished an epoch"))
    names = [name for name in logs[0] if all(name in other for other in logs.values())]
    if not names:
        return finding(STEP, CANT_TELL, "can't tell: the epoch's logs have no metrics")
    for name in names:
        values = [logs[rank][name] for rank in sorted(logs)]
        scale = max(abs(v) for v in values) or 1.0
        if (max(values) - min(values)) / scale > SAME_METRIC:
            shown = ", ".join(f"rank {rank} {logs[rank][name]:.4f}" for rank in sorted(logs))
            return finding(
                STEP,
                FAILED,
                f"at the end of epoch 1 the ranks report different {name}: {shown}: each shows "
                "its own, not the average over all workers",
                "Add hvd.callbacks.MetricAverageCallback() to the callbacks, before those that "
                "read the metrics.",
            )
    shown = ", ".join(f"{name} {logs[0][name]:.4f}" for name in names)
    summed = _summed_metric(evidence, logs, names)
    if summed:
        return finding(
            STEP,
            FAILED,
            summed,
            "Average the metrics, not sum them: "
            "hvd.callbacks.MetricAverageCallback() does (or hvd.allreduce's default "
            "op, hvd.Average).",
        )
    averaged = _averaged(evidence, logs, names)
    value = "the average" if averaged else "the value every rank ended the epoch with"
    for rank, record in sorted(evidence.ranks(1).items()):
        for seen in record.data.get("seen_logs") or []:
            if not seen.get("reads", True):
                continue  # the script's own callbacks: what they saw on entry is no record
            differ = [
                name
                for name in names
                if name in seen["logs"] and not _same_metric(seen["logs"][name], logs[rank][name])
            ]
            if differ:
                name = differ[0]
                return finding(
                    STEP,
                    FAILED,
                    f"every rank ended epoch 1 with the same metrics, but on rank {rank} "
                    f"{seen['callback']} recorded {name} {seen['logs'][name]:.4f}, its own, not "
                    f"{value} {logs[rank][name]:.4f}: it ran before the metrics were averaged",
                    "Put hvd.callbacks.MetricAverageCallback() before the callbacks that read "
                    "the metrics, right after the broadcast callback.",
                )
    how = " (the average of the ranks' own)" if averaged else ""
    return finding(
        STEP,
        PASSED,
        f"every rank ended epoch 1 with the same metrics ({shown}){how}, "
        "and the callbacks that record them saw them so",
    )


def _own_metrics(evidence: Evidence, names: list) -> dict | None:
    """{rank: {metric: its own value}} at epoch 1's end, before any callback averaged them;
    None when a rank's records lack them."""
    own = {rank: record.data.get("own_logs") or {} for rank, record in evidence.ranks(1).items()}
    if len(own) < evidence.np or any(
        not all(name in values for name in names) for values in own.values()
    ):
        return None
    return own


def _averaged(evidence: Evidence, logs: dict, names: list) -> bool:
    """Whether every metric the ranks ended epoch 1 with is the mean of the ranks' own."""
    own = _own_metrics(evidence, names)
    return own is not None and all(
        _same_metric(logs[0][name], sum(values[name] for values in own.values()) / len(own))
        for name in names
    )


def _summed_metric(evidence: Evidence, logs: dict, names: list) -> str:
    """What shows that the ranks summed a metric instead of averaging it, in words, or ""."""
    own = _own_metrics(evidence, names)
    if own is None:
        return ""
    for name in names:
        values = [own[rank][name] for rank in sorted(own)]
        total = sum(values)
        if _same_metric(logs[0][name], total) and not _same_metric(total, total / len(values)):
            each = ", ".join(f"rank {rank} {own[rank][name]:.4f}" for rank in sorted(own))
            return (
                f"every rank ended epoch 1 with {name} {logs[0][name]:.4f}, the sum of the "
                f"ranks' own ({each}), not their average {total / len(values):.4f}"
            )
    return ""


def _same_metric(a: float, b: float) -> bool:
    return abs(a - b) <= SAME_METRIC * max(abs(a), abs(b), 1e-30)

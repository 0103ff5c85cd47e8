"""Step 9's run invariant: only rank 0 writes checkpoints and logs."""

from __future__ import annotations

from pathlib import Path

from grader.report import FAILED, PASSED, Result
from grader.running.evidence import Evidence, event_file_writers
from grader.running.invariants.shared import Setting, file_names, finding, not_reached, not_shown

STEP = 9
TITLE = "one writer"  # the title of its findings


def _files_under(folder: str) -> list:
    root = Path(folder)
    if not root.is_dir():
        return []
    return sorted(path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file())


def _written_elsewhere(paths: list) -> str:
    """What a rank opened for writing outside its --log-dir (its CSV log, its own files)."""
    names = file_names(paths)
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f"{len(names)} file{'s' if len(names) > 1 else ''} outside its --log-dir ({shown})"


def check(evidence: Evidence, setting: Setting) -> Result:
    records = evidence.ranks(1)
    if len(records) < evidence.np:
        return not_shown(STEP, not_reached(evidence, records, "started"))
    pids = {record.data["pid"]: rank for rank, record in records.items()}
    logs = event_file_writers([setting.log_dir], pids)
    saved, private, elsewhere = {}, {}, {}
    for run in sorted(evidence.runs):
        for rank, record in sorted(evidence.ranks(run).items()):
            saved.setdefault(rank, []).extend(record.data.get("saved") or [])
            if rank:
                own = setting.private_log_dir(rank, run)
                private.setdefault(rank, []).extend(_files_under(own))
                elsewhere.setdefault(rank, []).extend(
                    path
                    for path in record.data.get("wrote") or []
                    if not path.startswith(own.rstrip("/") + "/") and path not in saved[rank]
                )
    writers = {}
    for rank in sorted(set(saved) | set(private) | set(elsewhere)):
        wrote = writers.setdefault(rank, [])
        if saved.get(rank):
            wrote.append("checkpoints (" + ", ".join(file_names(saved[rank])) + ")")
        if private.get(rank):
            wrote.append(
                f"{len(private[rank])} files into its own --log-dir ({file_names(private[rank])[0]}...)"
            )
        if elsewhere.get(rank):
            wrote.append(_written_elsewhere(elsewhere[rank]))
    if logs.get(0):
        writers.setdefault(0, []).append("TensorBoard logs")
    others = [rank for rank, wrote in writers.items() if rank and wrote]
    if others:
        rank = others[0]
        return finding(
            STEP,
            FAILED,
            f"rank {rank} wrote {' and '.join(writers[rank])} too: on one disk "
            "the workers' files would clash",
            "Add ModelCheckpoint and TensorBoard to the callbacks only under "
            "`if hvd.rank() == 0:`: one writer, no clashes.",
        )
    if not writers.get(0):
        return not_shown(STEP, "can't tell: no rank wrote checkpoints or TensorBoard logs")
    if not saved.get(0):  # TensorBoard's logs alone: that checkpoints stay on rank 0 is unseen
        return not_shown(
            STEP,
            f"can't tell: rank 0 wrote {' and '.join(writers[0])} but no "
            "checkpoint, so the run did not show that only rank 0 writes them",
        )
    return finding(STEP, PASSED, f"only rank 0 wrote {' and '.join(writers[0])}")

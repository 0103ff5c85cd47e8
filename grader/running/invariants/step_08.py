"""Step 8's run invariant: every rank resumes from the epoch of rank 0's newest checkpoint."""

from __future__ import annotations

import re

from grader.report import FAILED, PASSED, Result
from grader.running.evidence import Evidence, line_and_code
from grader.running.invariants.shared import (
    Setting,
    file_names,
    finding,
    not_reached,
    not_shown,
    own_epochs,
    ranks_with,
)

STEP = 8
TITLE = "the resume epoch"  # the title of its findings
RESUMES = True  # its invariant needs the second launch, from the first one's checkpoint


def check(evidence: Evidence, setting: Setting) -> Result:
    scene = (
        f"a second run, asked for {setting.final_epochs} epochs, went on from the first "
        f"run's checkpoints, which only rank 0 could see (the others had an empty --log-dir, "
        "as on another machine)"
    )
    hint = (
        "Let rank 0 look for the checkpoint and broadcast its epoch to every rank: "
        'resume_from_epoch = hvd.broadcast(resume_from_epoch, root_rank=0, name="resume_from_epoch").'
    )
    second = evidence.ranks(2)
    if not second:
        return not_shown(STEP, "can't tell: there was no second run to resume")
    reached = ranks_with(evidence, 2, lambda r: r.fit)
    starts = {rank: fit.get("initial_epoch") or 0 for rank, fit in reached.items()}
    if len(set(starts.values())) > 1:
        shown = ", ".join(
            f"rank {rank} {_resumed(epoch)}" for rank, epoch in sorted(starts.items())
        )
        return finding(
            STEP, FAILED, f"{scene}; the ranks disagree on where to go on: {shown}", hint
        )
    crashed = [(rank, record.error) for rank, record in sorted(second.items()) if record.error]
    if crashed:  # whose fault it is, the line tells (grader/decision.py blames a step by it)
        rank, error = crashed[0]
        return not_shown(
            STEP,
            f"can't tell: the second run, which was to go on from the "
            f"first one's checkpoint, stopped: rank {rank} with an error"
            f"{line_and_code(error)}: {error['type']}: {error.get('message', '')}",
        )
    if len(reached) < evidence.np:
        return not_shown(STEP, not_reached(evidence, reached, "reached model.fit", 2))
    epoch = next(iter(starts.values()))
    first = evidence.ranks(1).get(0)
    wrote = (first.data.get("saved") or []) if first else []
    if not wrote:
        return not_shown(STEP, f"can't tell: {scene}, but the first run wrote no checkpoint")
    newest = _newest_epoch(wrote, setting.first_epochs)
    if epoch != newest:
        said = "started from scratch" if epoch == 0 else f"went on after epoch {epoch}"
        return finding(
            STEP,
            FAILED,
            f"{scene}; every rank {said}, but the newest checkpoint, "
            f"{file_names(wrote)[-1]}, is of epoch {newest}",
            hint,
        )
    unfinished = [
        rank
        for rank, record in sorted(second.items())
        if not record.learning_rates().get(epoch) or not record.data.get("finished")
    ]
    if unfinished:
        return not_shown(
            STEP,
            f"can't tell: {scene}; every rank {_resumed(epoch)}, but "
            f"rank {unfinished[0]} {second[unfinished[0]].where()} in the second "
            "run, which never ended",
        )
    finals = {rank: fit.get("epochs") for rank, fit in reached.items()}
    # A script whose model.fit never trains to --epochs (epochs // hvd.size(): step 6's to
    # judge) did so in the first run too; its resume is judged by where it went on from.
    if own_epochs(evidence, setting) is not None and len(set(finals.values())) == 1:
        return finding(
            STEP,
            PASSED,
            f"{scene}; every rank {_resumed(epoch)} and trained until epoch "
            f"{next(iter(finals.values()))}, its model.fit's last (not --epochs in either "
            "run: step 6 judges the epochs)",
        )
    if set(finals.values()) != {setting.final_epochs}:
        rank = next(r for r, value in finals.items() if value != setting.final_epochs)
        return finding(
            STEP,
            FAILED,
            f"{scene}; rank {rank} resumed after epoch {epoch} but trained "
            f"until epoch {finals[rank]}, not the {setting.final_epochs} asked for",
            "Pass initial_epoch=resume_from_epoch and epochs=args.epochs to "
            "model.fit: epochs is the last epoch, not how many more.",
        )
    return finding(
        STEP,
        PASSED,
        f"{scene}; every rank {_resumed(epoch)} and trained until epoch {setting.final_epochs}",
    )


def _newest_epoch(paths, default: int) -> int:
    """The highest epoch number in the checkpoints' names (checkpoint-2.h5: 2), else `default`."""
    numbers = [
        int(found[-1])
        for name in file_names(paths)
        if (found := re.findall(r"(?<![A-Za-z])\d+", name))
    ]
    return max(numbers) if numbers else default


def _resumed(epoch: int) -> str:
    """What model.fit(initial_epoch=epoch) does, in words."""
    return f"resumed after epoch {epoch}" if epoch else "started from scratch"

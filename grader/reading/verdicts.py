"""What a rule returns: a Failure (the step is not done: why, and where), a Note (the grader
can't tell, so the step passes and the note says what it looked for), an Advice (a Note for a
step done by another route that works), or None (done). `first_verdict` runs checks in order.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Failure:
    """What a rule returns when its step is not done: why, and where."""

    message: str
    line: int | None = None
    hint: str | None = None  # overrides the rule's general hint when set


@dataclass
class Note:
    """What a rule returns when it can't tell: the step passes, and the note says what the
    grader looked for and could not follow."""

    message: str
    line: int | None = None


def first_verdict(*checks):
    """Runs the checks (functions returning Failure, Note or None) in order: the first Failure,
    else the first Note, else None. A check the grader can't follow doesn't hide a later one
    that fails."""
    note = None
    for check in checks:
        verdict = check()
        if isinstance(verdict, Failure):
            return verdict
        note = note or verdict
    return note


@dataclass
class Advice(Note):
    """A Note for a step done by another route that works: the step passes, and the message
    says what the workbook recommends instead and why (it is no doubt of the grader's)."""

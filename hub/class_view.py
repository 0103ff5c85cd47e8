"""The instructor's class view: each attendee's step as their check cells last said it, and who
has been stuck on the same step longest.

    standing(name, records)          one attendee: their last record and, when it failed, since
                                     when they fail that step
    class_standings(records_by, now) everyone, the longest stuck first
    table_html(standings, now)       the page's table (hub/class_view_service.py serves it)

"Stuck" is a step whose last check failed: since the first failed check of that step after its
last pass (checks of other steps in between do not reset it). "can't tell" counts as done, as
the grader counts it. The records are workbook/class_progress.py's.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from workbook.class_progress import FAILED, Record
from workbook.facts import step_notebook

STATUS_COLORS = {"passed": "#1a7f37", "failed": "#cf222e", "can't tell": "#9a6700"}


@dataclass(frozen=True)
class Standing:
    attendee: str
    last: Record | None = None  # their latest check; None: no check yet
    stuck_since: float | None = None  # the first failed check of last.step since its last pass
    failed_checks: int = 0  # failed checks of that step since then
    unreadable: str = ""  # why their records could not be read ("" when they were)

    def stuck_for(self, now: float) -> float | None:
        return None if self.stuck_since is None else max(0.0, now - self.stuck_since)


def standing(attendee: str, records: list[Record]) -> Standing:
    if not records:
        return Standing(attendee)
    last = records[-1]
    if last.status != FAILED:
        return Standing(attendee, last)
    since, failed = last.time, 0
    for record in reversed(records):
        if record.step != last.step:
            continue  # another step checked meanwhile: still stuck on this one
        if record.status != FAILED:
            break
        since, failed = record.time, failed + 1
    return Standing(attendee, last, since, failed)


def class_standings(records_by: dict[str, list[Record] | str], now: float) -> list[Standing]:
    """Everyone, in the order the instructor should look: stuck, the longest first; then the
    others, the furthest behind first; then those with no check yet. A str instead of the
    records says why they could not be read."""
    found = [
        Standing(name, unreadable=records) if isinstance(records, str) else standing(name, records)
        for name, records in records_by.items()
    ]

    def order(each: Standing):
        if each.stuck_since is not None:
            return (0, -each.stuck_for(now), each.attendee)
        if each.last is not None:
            return (1, each.last.step, each.attendee)
        return (2, 0, each.attendee)

    return sorted(found, key=order)


def stuck_longest(standings: list[Standing]) -> Standing | None:
    stuck = [each for each in standings if each.stuck_since is not None]
    return min(stuck, key=lambda each: each.stuck_since) if stuck else None


def duration(seconds: float) -> str:
    """12 s, 4 min, 1 h 05 min."""
    seconds = int(max(0, seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def headline(standings: list[Standing], now: float) -> str:
    longest = stuck_longest(standings)
    if longest is None:
        return "Nobody is stuck: no one's last check failed."
    return (
        f"Stuck longest: {longest.attendee}, on step {longest.last.step} "
        f"({step_notebook(longest.last.step).title}) for "
        f"{duration(longest.stuck_for(now))}, {longest.failed_checks} failed "
        f"check{'s' if longest.failed_checks != 1 else ''}."
    )


def _row(each: Standing, now: float) -> str:
    name = html.escape(each.attendee)
    if each.unreadable:
        return (
            f'<tr class="unreadable"><td>{name}</td><td colspan="4">its records cannot be '
            f"read: {html.escape(each.unreadable)}</td></tr>"
        )
    if each.last is None:
        return f'<tr class="none"><td>{name}</td><td colspan="4">no check yet</td></tr>'
    last = each.last
    color = STATUS_COLORS[last.status]
    stuck = (
        f"{duration(each.stuck_for(now))} ({each.failed_checks} failed)"
        if each.stuck_since is not None
        else ""
    )
    return (
        f'<tr class="{"stuck" if stuck else "moving"}" data-attendee="{name}">'
        f"<td>{name}</td>"
        f"<td>step {last.step}: {html.escape(step_notebook(last.step).title)}</td>"
        f'<td style="color:{color};font-weight:bold">{html.escape(last.status)}</td>'
        f"<td>{duration(now - last.time)} ago</td><td>{stuck}</td></tr>"
    )


def table_html(standings: list[Standing], now: float) -> str:
    """The headline and the table: what the page shows, and what it fetches again to update."""
    rows = "\n".join(_row(each, now) for each in standings)
    return (
        f'<p id="headline">{html.escape(headline(standings, now))}</p>\n'
        '<table id="class"><thead><tr><th>attendee</th><th>step (their last check)</th>'
        "<th>it said</th><th>when</th><th>stuck on it for</th></tr></thead>\n"
        f"<tbody>\n{rows}\n</tbody></table>"
    )

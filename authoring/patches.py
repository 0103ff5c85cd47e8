"""Unified diffs: make one, apply one to a text. The one home of "apply a patch" (the elastic
variant in authoring/variants.py, the learner corpus in authoring/learners.py).

Hunks are found by their text (' ' and '-' lines, in order, in one place only after the previous
hunk); the line numbers in `@@` headers are not used, so a hunk edited by hand need not recount
them. With `fuzz`, a hunk whose full context no longer matches is tried again without up to that
many of its first and last context lines (as GNU patch's fuzz factor), fewest dropped first: new
lines next to a hunk leave it in place, while a change to its '-' lines, or between its changes,
still fails, naming the patch file, the hunk and the line it expects.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from itertools import takewhile


class PatchError(ValueError):
    """A patch that is malformed or no longer matches the text it is applied to."""


@dataclass
class Hunk:
    line: int  # 1-based line of its `@@` header in the patch
    old: list[str]  # the base's lines it expects (context and removed)
    new: list[str]  # what replaces them (context and added)
    ops: str = ""  # ' ', '-' or '+' per line of the hunk, in order

    def context_around(self) -> tuple[int, int]:
        """How many context lines it has before its first change and after its last."""
        return (
            len(list(takewhile(" ".__eq__, self.ops))),
            len(list(takewhile(" ".__eq__, reversed(self.ops)))),
        )

    def trimmed(self, lead: int, trail: int) -> tuple[list[str], list[str]]:
        """(old, new) without its first `lead` and last `trail` context lines."""
        return (
            self.old[lead : len(self.old) - trail],
            self.new[lead : len(self.new) - trail],
        )


def parse_patch(text: str, filename: str = "<patch>") -> list[Hunk]:
    hunks: list[Hunk] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("@@"):
            hunks.append(Hunk(number, [], []))
        elif not hunks:  # the `---`/`+++` file names, and any text before the first hunk
            continue
        elif line.startswith("-"):
            hunks[-1].old.append(line[1:])
            hunks[-1].ops += "-"
        elif line.startswith("+"):
            hunks[-1].new.append(line[1:])
            hunks[-1].ops += "+"
        elif line.startswith(" ") or line == "":  # an editor may strip a blank context line
            hunks[-1].old.append(line[1:])
            hunks[-1].new.append(line[1:])
            hunks[-1].ops += " "
        elif not line.startswith("\\"):  # "\ No newline at end of file"
            raise PatchError(f"{filename}:{number}: not a line of a unified diff: {line[:60]!r}")
    for hunk in hunks:
        if not hunk.old:
            raise PatchError(f"{filename}:{hunk.line}: the hunk has no context lines to place it")
    return hunks


def places(lines: list[str], old: list[str], start: int) -> list[int]:
    """Where `old` occurs in `lines`, from `start` on."""
    size = len(old)
    return [at for at in range(start, len(lines) - size + 1) if lines[at : at + size] == old]


def place_hunk(lines: list[str], hunk: Hunk, cursor: int, fuzz: int):
    """(where, old, new) of the hunk's one place from `cursor` on, with the fewest context lines
    dropped (up to `fuzz` at each end); (None, count) where it has no place (count 0) or more
    than one with as few dropped."""
    lead_max, trail_max = (min(fuzz, count) for count in hunk.context_around())
    for dropped in range(lead_max + trail_max + 1):
        found = {}  # where the full hunk would start: (where the trimmed one does, old, new)
        for lead in range(max(0, dropped - trail_max), min(dropped, lead_max) + 1):
            old, new = hunk.trimmed(lead, dropped - lead)
            for at in places(lines, old, cursor) if old else []:
                found.setdefault(at - lead, (at, old, new))
        if len(found) == 1:
            return next(iter(found.values()))
        if found:  # more than one place: dropping more context would not tell them apart
            return None, len(found)
    return None, 0


def apply_patch(
    base: str,
    patch: str,
    filename: str = "<patch>",
    base_name: str = "the base",
    advice: str = "",
    fuzz: int = 0,
) -> str:
    """`base` with the hunks of `patch` applied in order; PatchError names the first that does
    not match exactly one place after the previous hunk, followed by `advice`."""
    lines = base.splitlines()
    out: list[str] = []
    cursor = 0
    for index, hunk in enumerate(parse_patch(patch, filename), start=1):
        at, *found = place_hunk(lines, hunk, cursor, fuzz)
        if at is None:
            where = "no longer matches" if not found[0] else f"matches {found[0]} places in"
            first = next((line for line in hunk.old if line.strip()), "")
            raise PatchError(
                f"{filename}:{hunk.line}: hunk {index} {where} {base_name} (it expects "
                f"{first.strip()!r} and the {len(hunk.old) - 1} lines after it)" + advice
            )
        old, new = found
        out += lines[cursor:at] + new
        cursor = at + len(old)
    return "".join(line + "\n" for line in out + lines[cursor:])


def make_patch(base: str, target: str, base_name: str, target_name: str) -> str:
    """The unified diff from base to target (3 lines of context)."""
    return "".join(
        difflib.unified_diff(
            base.splitlines(keepends=True),
            target.splitlines(keepends=True),
            fromfile=base_name,
            tofile=target_name,
        )
    )

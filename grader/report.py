"""The one result vocabulary of the checker, and how a result looks: text, HTML in JupyterLab, JSON.

Every check returns a `Result`: the static check of a step (grader/__init__.py), strict mode,
a bonus, the run-for-real check (grader/running/) and each invariant it judges. Its status is one of

    PASSED      done, as far as the check can see
    FAILED      not done yet (or the file can't be checked): the message says why, at `line`
    CANT_TELL   the check saw nothing wrong but could not confirm it either: counts as done,
                and the message says what it looked for

`passed` (status is not FAILED) is the verdict nbgrader's check cells, the exit status and the
batch grader use. A result made of parts has them as `details` (the run-for-real check: one
Result per step's invariant), and a real run's own evidence (how it ended, how long it took, its
log and the failing rank's error) as `run`. `Results` is the list of one file's results.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

ERROR_TAIL_LINES = 12  # of the failing rank's traceback, shown under a failed step
FRAME_STARTS = ('File "', "Traceback")

PASSED, FAILED, CANT_TELL = "passed", "failed", "can't tell"
STATUSES = (PASSED, FAILED, CANT_TELL)
PASS_COLOR, FAIL_COLOR, CANT_TELL_COLOR = "#1a7f37", "#cf222e", "#9a6700"
# How a detail's status is marked: (text, HTML symbol, colour).
MARKS = {
    PASSED: ("ok", "&#10004;", PASS_COLOR),
    FAILED: ("NO", "&#10008;", FAIL_COLOR),
    CANT_TELL: ("??", "?", CANT_TELL_COLOR),
}
FINISHED = "finished"  # Run.outcome of a run that went to its end (grader/running/outcome.py)
# Who decided a step's verdict (grader/decision.py): Result.decided_by.
RUN, READING, NEITHER = "the run", "the reading", "neither"
DECIDERS = (RUN, READING, NEITHER)


@dataclass
class Run:
    """The evidence of a real run behind a result (grader/running/)."""

    outcome: str  # FINISHED, or how it ended early: grader/running/outcome.py's kinds, or "not run"
    seconds: float = 0.0
    workers: int = 2
    log_path: str = ""  # the run's whole output, kept when something went wrong
    error: str = ""  # the failing rank's error output
    line: int | None = None  # the line of the script where it crashed or hung, if known
    code: str = ""  # ... and that line's code
    resumed: bool = False  # it ended early in the second launch, the resume from a checkpoint
    exception: str = ""  # the failing rank's exception, "Type: message", when it crashed
    # What the failing library code was working on, when it crashed: {"kind" (callback,
    # callback class, optimizer), "class", "line", "code" (the script's line that built it)}
    culprit: dict | None = None
    # The launches the machine cut (too busy) and that were run again alone, and why.
    reruns: list = field(default_factory=list)
    # After a crash blamed on one step: the second run with that step's line swapped for the
    # reference's, which decided the steps the first run did not show (grader/reference_swap.py).
    swapped: str = ""
    # What ran that is not the script's own code (another file run or imported, model.fit
    # called from elsewhere): the run's evidence earns nothing (grader/running/run_check.py).
    foreign: list = field(default_factory=list)
    copy_of: str = ""  # the reference script this script is, up to formatting
    counted_seconds: float = (
        0.0  # the run's time as the machine gave it (grader/running/run_clock.py)
    )

    @property
    def finished(self) -> bool:
        return self.outcome == FINISHED


@dataclass
class Result:
    """The verdict of one check: a step, the whole file (step None), or one part of a run."""

    status: str  # PASSED, FAILED or CANT_TELL
    title: str
    message: str
    step: int | None = None
    hint: str = ""
    expected_diff: str = ""
    line: int | None = None
    path: str = ""
    file_problem: bool = False  # the file itself can't be checked (syntax error, empty, ...)
    unreadable: bool = False  # ... or isn't readable text at all (missing, binary, ...)
    details: list = field(default_factory=list)  # Result of each part (a run's invariants)
    run: Run | None = None  # the real run this result comes from, if any
    # Who decided a step's verdict (grader/decision.py): one of DECIDERS; "" for a check that
    # stands alone.
    decided_by: str = ""
    # A run's finding that can't tell because the script kept the run from showing it (it
    # stopped, hung or exited before, or never did what the step is about): not credited.
    withheld: bool = False

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {self.status!r}")

    @property
    def passed(self) -> bool:
        """Done as far as the check can see: nothing failed ("can't tell" counts as done)."""
        return self.status != FAILED

    @property
    def label(self) -> str:
        if self.step is None or self.run is not None:  # a run's title names its step
            return self.title
        return f"Step {self.step}: {self.title}"

    def to_dict(self) -> dict:
        data = asdict(self)
        data["passed"] = self.passed
        return data

    def to_json(self) -> str:
        import json

        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: dict) -> Result:
        """The Result that to_dict() wrote."""
        data = {key: value for key, value in data.items() if key != "passed"}
        data["details"] = [cls.from_dict(detail) for detail in data.get("details") or []]
        if data.get("run") is not None:
            data["run"] = Run(**data["run"])
        return cls(**data)

    @property
    def decided_note(self) -> str:
        """ "Decided by the run." and the like, or "" for a check that stands alone."""
        if not self.decided_by:
            return ""
        if self.decided_by == NEITHER:
            return "Neither the run nor the reading could decide: counted as done for now."
        return f"Decided by {self.decided_by}."

    def shown_details(self) -> list:
        """(status, what, message, hint) of each detail to show; after a run that stopped
        early, the parts it could not tell are one line."""
        shown, unseen = [], []
        for detail in self.details:
            if self.run is not None and not self.run.finished and detail.status == CANT_TELL:
                unseen.append(detail.step)
                continue
            shown.append((detail.status, f"step {detail.step}", detail.message, detail.hint))
        if unseen:
            steps = ", ".join(map(str, unseen))
            shown.append(
                (
                    CANT_TELL,
                    f"step{'s' if len(unseen) > 1 else ''} {steps}",
                    "not shown: the run stopped before it showed (no credit)",
                    "",
                )
            )
        return shown

    def _error_tail(self) -> str:
        """The failing rank's traceback, its last ERROR_TAIL_LINES lines, from a frame's first
        line on: a cut through a frame would start with its code or its ^^^^ markers alone."""
        error = self.run.error if self.run is not None and not self.passed else ""
        lines = error.strip().splitlines()
        tail = lines[-ERROR_TAIL_LINES:]
        frames = [i for i, line in enumerate(tail) if line.lstrip().startswith(FRAME_STARTS)]
        if len(tail) < len(lines) and frames:
            tail = tail[frames[0] :]
        return "\n".join(tail)

    def __str__(self) -> str:
        lines = [f"[{'PASS' if self.passed else 'FAIL'}] {self.label}", f"  {self.message}"]
        if self.decided_note:
            lines.append(f"  {self.decided_note}")
        if not self.passed:
            if self.hint:
                lines.append(f"  Hint: {self.hint}")
            if self.expected_diff:
                lines.append("  Expected change:")
                lines.extend("    " + line for line in self.expected_diff.rstrip("\n").split("\n"))
        for status, what, message, hint in self.shown_details():
            lines.append(f"  [{MARKS[status][0]}] {what}: {message}")
            if status == FAILED and hint:
                lines.append(f"         Hint: {hint}")
        if self.run is not None and self.run.log_path and not self.passed:
            lines.append(f"  The whole output is in {self.run.log_path}")
        if self._error_tail():
            lines.append("  The failing rank's error:")
            lines.extend("    " + line for line in self._error_tail().splitlines())
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html  # only notebooks render HTML; keeps the command line's start-up short

        from workbook.prose import code_html

        color = PASS_COLOR if self.passed else FAIL_COLOR
        mark = "&#10004; passed" if self.passed else "&#10008; not yet"
        heading = (
            f'<strong style="color:{color}">{mark}</strong> &mdash; '
            f"<strong>{html.escape(self.label)}</strong>"
        )
        box = f'<div style="border-left:6px solid {color};padding:4px 10px;margin:6px 0">'
        decided = (
            f' <em style="color:#57606a">{html.escape(self.decided_note)}</em>'
            if self.decided_note
            else ""
        )
        message = code_html(self.message)  # `code` spans as code, not as literal backticks
        if decided and not message.endswith("."):
            message += "."  # the note is a sentence of its own
        if self.passed and not self.details:  # one line: nothing to fix, nothing to read
            return f"{box}{heading}: {message}{decided}</div>"
        parts = [box, heading, f'<div style="margin-top:4px">{message}{decided}</div>']
        if self.hint and not self.passed:
            parts.append(f'<div style="margin-top:4px"><em>Hint:</em> {code_html(self.hint)}</div>')
        if self.expected_diff and not self.passed:
            parts.append(
                '<details style="margin-top:4px"><summary>Expected change</summary>'
                f'<pre style="font-size:90%">{_diff_html(self.expected_diff)}</pre></details>'
            )
        if self.details:
            parts.append('<ul style="margin:4px 0">')
            for status, what, message, hint in self.shown_details():
                _, symbol, shade = MARKS[status]
                shown = status == FAILED and hint
                hint = f"<br><em>Hint:</em> {code_html(hint)}" if shown else ""
                parts.append(
                    f'<li style="list-style:none"><span style="color:{shade}">{symbol}</span> '
                    f"{what}: {code_html(message)}{hint}</li>"
                )
            parts.append("</ul>")
        if self._error_tail():
            parts.append(f"<pre>{html.escape(self._error_tail())}</pre>")
        if self.run is not None and self.run.log_path and not self.passed:
            parts.append(
                f"<div>The whole output: <code>{html.escape(self.run.log_path)}</code></div>"
            )
        parts.append("</div>")
        return "".join(parts)


def worst(statuses) -> str:
    """The status of a whole made of parts: FAILED if one failed, else CANT_TELL if one can't
    tell, else PASSED."""
    statuses = set(statuses)
    return next((status for status in (FAILED, CANT_TELL) if status in statuses), PASSED)


class StepNotDone(Exception):
    """What a notebook's check cell raises when its step fails.

    nbgrader scores a graded cell 0 when it raises. IPython shows an exception through its
    `_render_traceback_()` when it has one: this one shows a single line instead of a
    traceback, since the result displayed above it already says what is wrong.
    """

    def __init__(self, result: Result):
        what = f"Step {result.step}" if result.step is not None else result.title
        super().__init__(f"{what} is not done yet; see the message above.")

    def _render_traceback_(self) -> list:
        return [str(self)]


class Results(list):
    """The results of several steps for one file; renders as a list in text and HTML."""

    @property
    def passed(self) -> bool:
        return all(result.passed for result in self)

    def summary(self) -> str:
        passed = sum(result.passed for result in self)
        return f"{passed} of {len(self)} checks pass"

    def to_json(self) -> str:
        import json

        return json.dumps([result.to_dict() for result in self], indent=2)

    def __str__(self) -> str:
        problems = [result for result in self if result.file_problem]
        if self and len(problems) == len(self):
            first = problems[0]
            where = f"{first.path}: " if first.path else ""
            return f"{where}{first.message}\n(all {len(self)} checks fail until this is fixed)"
        return "\n".join([*(str(result) for result in self), self.summary()])

    def _repr_html_(self) -> str:
        import html

        items = "".join(result._repr_html_() for result in self)
        return f"<div>{items}<div><strong>{html.escape(self.summary())}</strong></div></div>"


def _diff_html(diff: str) -> str:
    """The diff, escaped, with added lines green and removed lines red."""
    import html

    out = []
    for line in diff.rstrip("\n").split("\n"):
        escaped = html.escape(line)
        if line.startswith("+") and not line.startswith("+++"):
            out.append(f'<span style="color:{PASS_COLOR}">{escaped}</span>')
        elif line.startswith("-") and not line.startswith("---"):
            out.append(f'<span style="color:{FAIL_COLOR}">{escaped}</span>')
        else:
            out.append(escaped)
    return "\n".join(out)

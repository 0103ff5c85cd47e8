"""What the run-for-real check returns, and how it looks: text, HTML in JupyterLab, and JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from grader.live.invariants import FAILS, HOLDS
from grader.live.outcome import FINISHED
from grader.report import FAIL_COLOR, PASS_COLOR

UNKNOWN_COLOR = "#9a6700"
NOT_RUN = "not run"
_MARKS = {HOLDS: ("ok", "&#10004;", PASS_COLOR), FAILS: ("NO", "&#10008;", FAIL_COLOR)}
_UNKNOWN_MARK = ("??", "?", UNKNOWN_COLOR)


@dataclass
class LiveResult:
    """The verdict of one run-for-real check of step N's invariants (and those before it)."""

    step: int
    path: str
    outcome: str  # outcome.FINISHED, CRASHED, HUNG, UNFINISHED, or NOT_RUN
    message: str  # how the run went, in one sentence ("" when it simply finished)
    findings: list = field(default_factory=list)  # invariants.Finding, steps 4..step
    hint: str = ""
    seconds: float = 0.0
    workers: int = 2
    log_path: str = ""  # the run's whole output, kept when something went wrong
    error: str = ""  # the failing rank's error output
    unreadable: bool = False  # not run: the file is missing or not text

    @property
    def passed(self) -> bool:
        """It ran to the end and nothing it could see is wrong (some may be "can't tell")."""
        return self.outcome == FINISHED and not any(f.failed for f in self.findings)

    @property
    def title(self) -> str:
        return f"Step {self.step}, run for real on {self.workers} workers"

    def summary(self) -> str:
        if self.outcome == NOT_RUN:
            return f"not run: {self.message}"
        took = f" ({self.seconds:.0f} s)"
        if self.outcome != FINISHED:
            return self.message + took
        failed = sum(f.failed for f in self.findings)
        held = sum(f.status == HOLDS for f in self.findings)
        unknown = len(self.findings) - failed - held
        parts = [f"{held} of {len(self.findings)} hold"]
        if failed:
            parts.append(f"{failed} fail")
        if unknown:
            parts.append(f"{unknown} can't tell")
        return "the script ran on every worker; " + ", ".join(parts) + took

    def shown_findings(self) -> list:
        """(status, step text, message, hint) to show; after a run that stopped early, the
        steps it could not show are one line."""
        shown, unseen = [], []
        for finding in self.findings:
            if self.outcome != FINISHED and finding.status not in _MARKS:
                unseen.append(finding.step)
                continue
            shown.append((finding.status, f"step {finding.step}", finding.message, finding.hint))
        if unseen:
            steps = ", ".join(map(str, unseen))
            shown.append(("", f"step{'s' if len(unseen) > 1 else ''} {steps}",
                          "can't tell: the run stopped before it showed", ""))  # fmt: skip
        return shown

    def to_dict(self) -> dict:
        data = asdict(self)
        data["passed"] = self.passed
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def __str__(self) -> str:
        lines = [f"[{'PASS' if self.passed else 'FAIL'}] {self.title}", f"  {self.summary()}"]
        if self.hint:
            lines.append(f"  Hint: {self.hint}")
        for status, steps, message, hint in self.shown_findings():
            lines.append(f"  [{_MARKS.get(status, _UNKNOWN_MARK)[0]}] {steps}: {message}")
            if status == FAILS and hint:
                lines.append(f"         Hint: {hint}")
        if self.log_path and not self.passed:
            lines.append(f"  The whole output is in {self.log_path}")
        if self.error and not self.passed:
            lines.append("  The failing rank's error:")
            lines.extend("    " + line for line in self.error.strip().splitlines()[-12:])
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html

        color = PASS_COLOR if self.passed else FAIL_COLOR
        mark = "&#10004; passed" if self.passed else "&#10008; not yet"
        parts = [
            f'<div style="border-left:6px solid {color};padding:4px 10px;margin:6px 0">',
            f'<strong style="color:{color}">{mark}</strong> &mdash; '
            f"<strong>{html.escape(self.title)}</strong>",
            f"<div>{html.escape(self.summary())}</div>",
        ]
        if self.hint:
            parts.append(f"<div><em>Hint:</em> {html.escape(self.hint)}</div>")
        if self.findings:
            parts.append('<ul style="margin:4px 0">')
            for status, steps, message, hint in self.shown_findings():
                _, symbol, shade = _MARKS.get(status, _UNKNOWN_MARK)
                hint = f"<br><em>Hint:</em> {html.escape(hint)}" if status == FAILS and hint else ""
                parts.append(
                    f'<li style="list-style:none"><span style="color:{shade}">{symbol}</span> '
                    f"{steps}: {html.escape(message)}{hint}</li>"
                )
            parts.append("</ul>")
        if self.error and not self.passed:
            tail = "\n".join(self.error.strip().splitlines()[-12:])
            parts.append(f"<pre>{html.escape(tail)}</pre>")
        if self.log_path and not self.passed:
            parts.append(f"<div>The whole output: <code>{html.escape(self.log_path)}</code></div>")
        parts.append("</div>")
        return "".join(parts)

"""What a check returns, and how it looks: plain text, HTML in JupyterLab, and JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass

PASS_COLOR, FAIL_COLOR = "#1a7f37", "#cf222e"


@dataclass
class StepResult:
    """The verdict on one step (or, with step None, on the whole file in strict mode)."""

    step: int | None
    title: str
    passed: bool
    message: str
    hint: str = ""
    expected_diff: str = ""
    line: int | None = None
    path: str = ""
    file_problem: bool = False  # the file itself can't be checked (syntax error, empty, ...)
    unreadable: bool = False  # ... or isn't readable text at all (missing, binary, ...)

    @property
    def label(self) -> str:
        return f"Step {self.step}: {self.title}" if self.step is not None else self.title

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        lines = [f"[{'PASS' if self.passed else 'FAIL'}] {self.label}", f"  {self.message}"]
        if not self.passed:
            if self.hint:
                lines.append(f"  Hint: {self.hint}")
            if self.expected_diff:
                lines.append("  Expected change:")
                lines.extend("    " + line for line in self.expected_diff.rstrip("\n").split("\n"))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html  # only notebooks render HTML; keeps the command line's start-up short

        color = PASS_COLOR if self.passed else FAIL_COLOR
        mark = "&#10004; passed" if self.passed else "&#10008; not yet"
        heading = (f'<strong style="color:{color}">{mark}</strong> &mdash; '
                   f"<strong>{html.escape(self.label)}</strong>")
        box = f'<div style="border-left:6px solid {color};padding:4px 10px;margin:6px 0">'
        if self.passed:  # one line: nothing to fix, nothing to read
            return f"{box}{heading}: {html.escape(self.message)}</div>"
        parts = [box, heading, f'<div style="margin-top:4px">{html.escape(self.message)}</div>']
        if self.hint:
            parts.append(
                f'<div style="margin-top:4px"><em>Hint:</em> {html.escape(self.hint)}</div>'
            )
        if self.expected_diff:
            parts.append(
                '<details style="margin-top:4px"><summary>Expected change</summary>'
                f'<pre style="font-size:90%">{_diff_html(self.expected_diff)}</pre></details>'
            )
        parts.append("</div>")
        return "".join(parts)


class StepNotDone(Exception):
    """What a notebook's check cell raises when its step fails.

    nbgrader scores a graded cell 0 when it raises. IPython shows an exception through its
    `_render_traceback_()` when it has one: this one shows a single line instead of a
    traceback, since the result displayed above it already says what is wrong.
    """

    def __init__(self, result: StepResult):
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

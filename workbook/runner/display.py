"""Display: a run's result; its lines, live status and summary in Jupyter, a terminal, or nowhere.

RunResult is what a run returns: how it ended, its metrics and where its logs are, as text and
as an HTML table. The consoles show a run while it goes on; execute() tells them what to show.
"""

from __future__ import annotations

import html
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from workbook import speed
from workbook.prose import code_html
from workbook.runner.command import RunPlan
from workbook.runner.output import Transcript


@dataclass(repr=False)
class RunResult:
    exit_code: int | None
    wall_seconds: float
    np: int
    hosts: str
    metrics: dict
    failed_rank: int | None
    error: str
    log_path: Path
    run_name: str = ""
    command: str = ""
    layout: str = ""
    tensorboard_dir: Path | None = None
    interrupted: bool = False
    timed_out: bool = False
    stopped_processes: int = 0  # how many were stopped (after an interrupt or the timeout)
    leftover_pids: list[int] = field(default_factory=list)  # processes that would not stop
    leftover_remote: dict[str, str] = field(default_factory=dict)  # host: what is left there
    output: str = field(default="", repr=False)  # the lines shown, labelled by rank
    started_at: float | None = None  # time.time() when the launcher started
    ended_at: float | None = None  # ... and when its last process was gone
    # Other processes that used the CPU during the run (see contention.py), one sentence each.
    busy_others: list[str] = field(default_factory=list)
    others_mean_cores: float = 0.0  # the cores all other processes used, on average
    timeline_path: Path | None = None  # Horovod's timeline, when the run recorded one

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.interrupted and not self.timed_out

    @property
    def images_per_second(self) -> float | None:
        return self.metrics.get("images_per_second")

    @property
    def images_label(self) -> str:
        """workbook.speed's label of images/s, for the epochs this run trained."""
        first = int(self.metrics.get("resumed_from_epoch") or 0) + 1
        epochs = int(self.metrics.get("epochs") or first) - first + 1
        return speed.images_per_second_label(max(1, epochs), first)

    @property
    def test_accuracy(self) -> float | None:
        return self.metrics.get("test_accuracy")

    @property
    def test_loss(self) -> float | None:
        return self.metrics.get("test_loss")

    @property
    def status_color(self) -> str:
        """Green when it went well, amber when interrupted, red otherwise (for HTML)."""
        return "#1a7f37" if self.ok else "#9a6700" if self.interrupted else "#cf222e"

    def status(self) -> str:
        if self.interrupted:
            return f"interrupted after {self.wall_seconds:.1f} s"
        if self.timed_out:
            return f"stopped at the timeout, after {self.wall_seconds:.1f} s"
        if self.exit_code == 0:
            return f"finished in {self.wall_seconds:.1f} s"
        who = f"rank {self.failed_rank}" if self.failed_rank is not None else "horovodrun"
        return f"FAILED ({who}, exit code {self.exit_code}) after {self.wall_seconds:.1f} s"

    def _rows(self) -> list[tuple[str, str]]:
        rows = [
            ("run", self.run_name),
            ("status", self.status()),
            ("workers", self.layout or str(self.np)),
            ("hosts", self.hosts),
        ]
        if self.test_accuracy is not None:
            rows.append(("test accuracy", f"{self.test_accuracy:.4f}"))
        if self.test_loss is not None:
            rows.append(("test loss", f"{self.test_loss:.4f}"))
        if self.images_per_second is not None:
            rows.append((self.images_label, f"{self.images_per_second:,.0f}"))
        if "train_seconds" in self.metrics:
            # The script's own measure; workbook.run_times times runs from their epochs.
            rows.append(("time in model.fit", f"{self.metrics['train_seconds']} s"))
        for busy in self.busy_others:
            rows.append(("CPU shared with", busy))
        if self.error and not self.ok:
            last = self.error.strip().splitlines()[-1] if self.error.strip() else ""
            rows.append(("error", last))
        if self.leftover_pids:
            rows.append(("NOT stopped", ", ".join(map(str, self.leftover_pids))))
        for host, problem in self.leftover_remote.items():
            rows.append((f"NOT stopped on {host}", problem))
        if self.tensorboard_dir:
            rows.append(("TensorBoard logs", str(self.tensorboard_dir)))
        if self.timeline_path:
            rows.append(("Horovod timeline", str(self.timeline_path)))
        rows.append(("full output", str(self.log_path)))
        return rows

    def __repr__(self) -> str:
        return str(self)

    def __str__(self) -> str:
        text = "\n".join(f"{name:>16}: {value}" for name, value in self._rows())
        if self.error and not self.ok:
            text += "\n\n" + self.error
        return text

    def _repr_html_(self) -> str:
        cells = "".join(
            f"<tr><th style='text-align:left'>{html.escape(name)}</th>"
            f"<td style='text-align:left'>"
            + (
                f"<b style='color:{self.status_color}'>{html.escape(value)}</b>"
                if name == "status"
                else (
                    f"<code>{html.escape(value)}</code>"
                    if name in ("full output", "error", "TensorBoard logs", "Horovod timeline")
                    else code_html(value)  # a busy program's `command` shows as code
                )
            )
            + "</td></tr>"
            for name, value in self._rows()
        )
        return f"<table>{cells}</table>"


STATUS_INTERVAL_S = 0.5  # how often the live status line is redrawn


def clock(seconds: float) -> str:
    """`1:05`, or `1:02:05` past an hour."""
    minutes, seconds = divmod(int(seconds), 60)
    return (
        f"{minutes // 60}:{minutes % 60:02d}:{seconds:02d}"
        if minutes >= 60
        else f"{minutes}:{seconds:02d}"
    )


def status_text(elapsed: float, transcript: Transcript) -> str:
    """The live status line: elapsed time, then the progress bar or the last line shown."""
    progress = transcript.current_progress()
    text = f"running {clock(elapsed)}"
    if progress:
        text += f" | {progress[:140]}"
    elif transcript.shown:
        text += f" | {transcript.shown[-1][:140]}"
    else:
        text += " | starting the workers (importing TensorFlow takes a while)"
    return text


def _final_text(result: RunResult, transcript: Transcript) -> str:
    text = result.status()
    parts = []
    if result.test_accuracy is not None:
        parts.append(f"test accuracy {result.test_accuracy:.4f}")
    if result.images_per_second is not None:
        parts.append(f"{result.images_label}: {result.images_per_second:,.0f}")
    if parts:
        text += " | " + ", ".join(parts)
    notes = []
    if result.stopped_processes and not result.leftover_pids and not result.leftover_remote:
        notes.append(f"all {result.stopped_processes} processes stopped")
    if transcript.collapsed:
        notes.append(f"{transcript.collapsed} lines identical to another rank's not repeated")
    if transcript.hidden_logs:
        notes.append(f"{len(transcript.hidden_logs)} log and warning lines hidden")
    notes.append(f"full output: {result.log_path}")
    return text + "\n" + "; ".join(notes)


def _shows_error_box(result: RunResult) -> bool:
    # A failure or a timeout gets its error boxed; an interrupt the learner caused does not.
    return bool(result.error) and not result.ok and not result.interrupted


def _error_title(result: RunResult) -> str:
    if result.timed_out:
        return "Timed out:"
    if result.failed_rank is not None:
        return f"Rank {result.failed_rank} failed; the other workers were stopped. Its error:"
    return f"horovodrun failed (exit code {result.exit_code}):"


class _Every:
    """Says yes at most once per `seconds` (to redraw the status line without flicker)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._last = 0.0

    def due(self) -> bool:
        now = time.monotonic()
        if now - self._last < self.seconds:
            return False
        self._last = now
        return True


class SilentConsole:
    """Shows nothing: background runs and quiet=True. The others override what they show."""

    def start(self, plan: RunPlan) -> None:
        pass

    def line(self, text: str) -> None:
        pass

    def status(self, text: str) -> None:
        pass

    def finish(self, result: RunResult, transcript: Transcript) -> None:
        pass


class TerminalConsole(SilentConsole):
    """Plain lines; the status line redrawn with `\\r` when the output is a terminal."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stdout
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self._status_width = 0
        self._redraw = _Every(STATUS_INTERVAL_S)

    def start(self, plan: RunPlan) -> None:
        self._write(f"{plan.layout.describe()}\n$ {plan.display_command}\n")

    def _clear_status(self) -> None:
        if self._status_width:
            self._write("\r" + " " * self._status_width + "\r")
            self._status_width = 0

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def line(self, text: str) -> None:
        self._clear_status()
        self._write(text + "\n")

    def status(self, text: str) -> None:
        if not self.live or not self._redraw.due():
            return
        width = shutil.get_terminal_size().columns - 1
        text = text[:width]
        self._write("\r" + text.ljust(self._status_width))
        self._status_width = len(text)

    def finish(self, result: RunResult, transcript: Transcript) -> None:
        self._clear_status()
        self._write(_final_text(result, transcript) + "\n")
        if _shows_error_box(result):
            rule = "=" * 78
            body = "\n".join("  " + line for line in result.error.splitlines())
            self._write(f"{rule}\n{_error_title(result)}\n{body}\n{rule}\n")


class JupyterConsole(SilentConsole):
    """Lines as the cell's text output; the status line as a display updated in place."""

    def __init__(self):
        self._handle = None
        self._redraw = _Every(STATUS_INTERVAL_S)

    def start(self, plan: RunPlan) -> None:
        from IPython.display import display

        print(f"{plan.layout.describe()}\n$ {plan.display_command}", flush=True)
        self._handle = display(self._bundle("starting", "#57606a"), raw=True, display_id=True)

    @staticmethod
    def _bundle(text: str, color: str) -> dict:
        lines = html.escape(text).replace("\n", "<br>")
        return {
            "text/plain": text,
            "text/html": f"<div style='font-family:monospace;color:{color}'>{lines}</div>",
        }

    def line(self, text: str) -> None:
        print(text, flush=True)

    def status(self, text: str) -> None:
        if self._handle is None or not self._redraw.due():
            return
        self._handle.update(self._bundle(text, "#0969da"), raw=True)

    def finish(self, result: RunResult, transcript: Transcript) -> None:
        from IPython.display import display

        if self._handle is not None:
            final = self._bundle(_final_text(result, transcript), result.status_color)
            self._handle.update(final, raw=True)
        if _shows_error_box(result):
            title = html.escape(_error_title(result))
            logs = ""
            if transcript.hidden_logs:
                hidden = html.escape("\n".join(transcript.hidden_logs[-200:]))
                logs = (
                    f"<details><summary>{len(transcript.hidden_logs)} hidden log lines"
                    f"</summary><pre>{hidden}</pre></details>"
                )
            box = (
                "<div style='border:2px solid #cf222e;background:#ffebe9;padding:8px 12px;"
                "border-radius:6px;margin-top:6px'>"
                f"<b style='color:#cf222e'>{title}</b>"
                f"<pre style='background:transparent;margin:6px 0'>{html.escape(result.error)}"
                f"</pre>{logs}<small>Full output: <code>{html.escape(str(result.log_path))}"
                "</code></small></div>"
            )
            plain = f"{_error_title(result)}\n{result.error}\nFull output: {result.log_path}"
            display({"text/plain": plain, "text/html": box}, raw=True)


def console_for(quiet: bool) -> SilentConsole:
    """Where a foreground run shows itself: nowhere (quiet), the notebook cell, or stdout."""
    if quiet:
        return SilentConsole()
    return JupyterConsole() if _in_jupyter() else TerminalConsole()


def _in_jupyter() -> bool:
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return shell is not None and hasattr(shell, "kernel")

"""Display: a run's lines, live status and final summary in Jupyter, a terminal, or nowhere."""

from __future__ import annotations

import html
import shutil
import sys
import time

from workbook.runner.plan import RunPlan
from workbook.runner.result import RunResult
from workbook.runner.transcript import Transcript

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
        parts.append(f"{result.images_per_second:,.0f} images/s")
    if parts:
        text += " | " + ", ".join(parts)
    notes = []
    if result.stopped_processes and not result.leftover_pids:
        notes.append(f"all {result.stopped_processes} processes stopped")
    if transcript.collapsed:
        notes.append(f"{transcript.collapsed} lines identical to another rank's not repeated")
    if transcript.hidden_logs:
        notes.append(f"{len(transcript.hidden_logs)} log lines hidden")
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

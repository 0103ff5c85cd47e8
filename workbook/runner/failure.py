"""Failure: what went wrong in a run, as a learner should see it (a traceback, an exit code)."""

from __future__ import annotations

import signal

from workbook.runner.output import TF_SEVERE, is_tensorflow_log
from workbook.runner.transcript import Transcript


def exit_code_meaning(code: int) -> str:
    """`143` -> `143: killed by SIGTERM`: shells report death by signal N as 128+N."""
    number = -code if code < 0 else code - 128 if 128 < code < 160 else None
    if number:
        try:
            name = signal.Signals(number).name
            hint = " (out of memory?)" if name == "SIGKILL" else ""
            return f"{code}: killed by {name}{hint}"
        except ValueError:
            pass
    return str(code)


def rank_error(lines: list[str], max_lines: int = 60) -> str:
    """The last traceback in a worker's output (with chained ones), else its last lines."""
    lines = [line for line in lines if not is_tensorflow_log(line) or TF_SEVERE.match(line)]
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call")]
    if not starts:
        tail = [line for line in lines if line.strip() and line.strip() != "Terminated"]
        return "\n".join(tail[-15:])
    start = starts[-1]
    # "During handling of the above exception..." chains tracebacks: keep the whole chain.
    for earlier in reversed(starts[:-1]):
        between = "\n".join(lines[earlier:start])
        if (
            "During handling of the above exception" in between
            or "The above exception was the direct cause" in between
        ):
            start = earlier
        else:
            break
    error = lines[start:]
    while error and error[-1].strip() in ("", "Terminated"):
        error.pop()
    return "\n".join(error[-max_lines:])


def failure_text(
    transcript: Transcript, failed_rank: int | None, unprefixed_rank: int | None
) -> str:
    """Why a run failed: the failed rank's error and exit code, else the launcher's last words."""
    if failed_rank is None:
        return rank_error(transcript.by_rank[unprefixed_rank])
    error = rank_error(transcript.by_rank[failed_rank])
    code = dict(transcript.exits).get(failed_rank)
    if code is not None and not error.strip():
        return f"exit code {exit_code_meaning(code)}, and no error message"
    if code is not None and code != 1:
        error += f"\nexit code {exit_code_meaning(code)}"
    return error

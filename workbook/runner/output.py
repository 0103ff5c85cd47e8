"""Output: horovodrun's byte stream as lines and progress bars, sorted into what to show.

- OutputParser: bytes, fed in pieces of any size and at any time, to Line and Progress events;
- Transcript: those events sorted into the lines shown, the lines kept aside (TensorFlow's C++
  logging, known harmless warnings), the progress bars, the results and the exit codes;
- rank_error() and failure_text(): a failed worker's traceback and what its exit code means.

How the launchers label a worker's output:

- horovodrun with Gloo prefixes each `\\r`- or `\\n`-terminated piece a worker writes with
  `[<rank>]<stdout>:` or `[<rank>]<stderr>:`; its own messages (`Process 1 exit with status
  code 1.`) carry no prefix.
- mpirun (`horovodrun --mpi`) prefixes `[<job>,<rank>]<stdout>:` to each *chunk* it reads from
  a worker, and again after each `\\n` in it: one line can come in several tagged chunks, with
  other workers' chunks in between (`[1,0]<stdout>:Throughput: 408 images/s[1,0]<stdout>:\\n`).
- launcher="python": no prefix; stdout and stderr come through pipes of their own.

The parser therefore keeps one unfinished line per (rank, stream), so its events depend only on
the bytes, never on how they were cut. Keras redraws its progress bar as `\\b...\\b\\r<bar>`:
the bar is the text before the next `\\r`, a Progress event. A bar that a newline ends (a
callback that prints while the bar is on screen) is still a redraw unless it is finished: only
Keras' final bar of an epoch (`4/4 [====] - 3s 120ms/step - ...`, time instead of ETA) is kept
as a line.
"""

from __future__ import annotations

import codecs
import re
import signal
from collections import defaultdict, deque
from dataclasses import dataclass

from workbook.facts import RESULT_LINE, TF_LOG_LINE, TF_SEVERE_LINE, parse_result

# `[1]<stdout>:` (Gloo), `[0,1]<stderr>:` (mpirun --tag-output), optionally after a timestamp
# (horovodrun --prefix-output-with-timestamp puts time.asctime() first).
PREFIX = re.compile(
    r"(?:[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})?"
    r"\[(?P<job>\d+,)?(?P<rank>\d+)\]<(?P<stream>stdout|stderr|stddiag)>:"
)
PROCESS_EXIT = re.compile(r"^Process (\d+) exit with status code (-?\d+)\.")
FIRST_FAILURE = re.compile(r"^Terminating remaining workers after failure of Process (\d+)\.")
# A Keras progress bar before its end (`3/4 [===>....] - ETA: 0s - loss: ...`).
UNFINISHED_BAR = re.compile(r"^\s*\d+/(?:\d+|Unknown) (?:\[[=>.]*\] )?- ETA: ")

# Harmless warnings every run would show, with the line that ends each (None: one line). They
# stay in the raw log; the transcript counts them with the hidden log lines.
KNOWN_NOISE = [
    # tensorflow_addons 0.23 warns on import that it is at its end of life (10 lines); the
    # workbook uses only NovoGrad from it, which works on the pinned TensorFlow.
    (
        re.compile(r"tensorflow_addons/utils/tfa_eol_msg\.py:\d+: UserWarning:"),
        re.compile(r"^\s*warnings\.warn\($"),
    ),
    # Keras 2.15 on every model.save() to a .h5 file; the script's checkpoints are .h5 on
    # purpose (Horovod's examples and step 8 load them).
    (
        re.compile(r"UserWarning: You are saving your model as an HDF5 file via `model\.save\(\)`"),
        re.compile(r"^\s*saving_api\.save_model\($"),
    ),
    # Keras times the first batches, which include Horovod's first allreduce: not a problem.
    (
        re.compile(
            r"^WARNING:tensorflow:Callback method `on_train_batch_(?:begin|end)` is slow "
            r"compared to the batch time"
        ),
        None,
    ),
]
NOISE_MAX_LINES = 15  # a block whose end never comes stops being hidden after this many lines


@dataclass(frozen=True)
class Line:
    rank: int | None  # None: horovodrun itself
    stream: str
    text: str


@dataclass(frozen=True)
class Progress:
    rank: int | None
    text: str  # the progress bar as it is now


class OutputParser:
    """Turns a run's output, fed in arbitrary pieces, into Line and Progress events.

    A piece ending in `\\r` is a redraw of a progress line (Keras also writes `\\b` to move
    back over the previous bar); a piece ending in `\\n` is a finished line. `pipe` names the
    pipe a piece came through when stdout and stderr come apart (launcher="python").
    """

    def __init__(self, default_rank: int | None = None):
        self.default_rank = default_rank  # the rank of unprefixed lines (0 without horovodrun)
        self._pipes: dict[str, _Pipe] = {}

    def _pipe(self, name: str) -> _Pipe:
        if name not in self._pipes:
            self._pipes[name] = _Pipe((self.default_rank, name, False))
        return self._pipes[name]

    def feed(self, data: bytes | str, pipe: str = "stdout") -> list:
        return self._events(self._pipe(pipe).feed(data))

    def finish(self) -> list:
        """The events of what is left at the end (the output closed without a last newline)."""
        return self._events([piece for pipe in self._pipes.values() for piece in pipe.finish()])

    def _events(self, pieces: list[tuple[tuple, str]]) -> list:
        return [event for source, piece in pieces if (event := self._event(source, piece))]

    def _event(self, source: tuple, piece: str):
        rank, stream, _ = source
        terminator, body = piece[-1], piece[:-1].replace("\b", "")
        if terminator == "\r":
            body = body.rstrip()
            return Progress(rank, body) if body else None
        return Line(rank, stream, body.rstrip("\r"))


class _Pipe:
    """One byte stream: decoded, cut into prefixed runs, and each run added to its source's
    unfinished line. Only text up to the stream's last `\\r` or `\\n` is looked at: a prefix
    never spans one, so a prefix cut in two by a chunk boundary is always seen whole."""

    def __init__(self, default: tuple):
        self.default = default  # (rank, stream, tagged per chunk): unprefixed text's source
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._unsplit = ""  # after the last terminator seen so far
        self._source = default  # whose text the next unprefixed text continues
        self._open: dict[tuple, str] = defaultdict(str)  # each source's unfinished line

    def feed(self, data: bytes | str) -> list[tuple[tuple, str]]:
        text = self._decoder.decode(data) if isinstance(data, bytes) else data
        text = self._unsplit + text
        end = max(text.rfind("\r"), text.rfind("\n")) + 1
        self._unsplit = text[end:]
        return self._split(text[:end])

    def finish(self) -> list[tuple[tuple, str]]:
        rest = self._unsplit + self._decoder.decode(b"", final=True)
        self._unsplit = ""
        pieces = self._split(rest)
        for source, text in list(self._open.items()):
            if text:
                pieces.append((source, text + "\n"))
        self._open.clear()
        return pieces

    def _split(self, text: str) -> list[tuple[tuple, str]]:
        pieces, at = [], 0
        for match in PREFIX.finditer(text):
            pieces += self._add(text[at : match.start()])
            self._source = (int(match["rank"]), match["stream"], bool(match["job"]))
            at = match.end()
        return pieces + self._add(text[at:])

    def _add(self, text: str) -> list[tuple[tuple, str]]:
        """Adds text of the current source; returns the pieces it finished."""
        pieces = []
        for part in re.split(r"(?<=[\r\n])", text):
            if not part:
                continue
            source = self._source
            self._open[source] += part
            if part[-1] in "\r\n":
                pieces.append((source, self._open.pop(source)))
                # What follows a piece without a prefix is the launcher's own output, except
                # after a `\r` in mpirun's chunks, which prefix only what follows a `\n`.
                if not (part[-1] == "\r" and source[2]):
                    self._source = self.default
        return pieces


def is_tensorflow_log(text: str) -> bool:
    return bool(TF_LOG_LINE.match(text))


def parse_result_line(text: str) -> dict | None:
    """The metrics of a line that is a RESULT line; None for any other line."""
    if not RESULT_LINE.match(text):
        return None
    try:
        return parse_result(text)
    except ValueError:  # not JSON: an ordinary line
        return None


class Transcript:
    """What a run printed, sorted for display: shown lines, hidden logs, progress, results."""

    def __init__(self, label_ranks: bool = True):
        self.label_ranks = label_ranks
        self.shown: list[str] = []  # lines as displayed, labelled
        self.hidden_logs: list[str] = []  # TensorFlow's C++ log and known warnings, labelled
        self.by_rank: dict[int | None, list[str]] = defaultdict(list)  # every line, per rank
        self.progress: dict[int | None, str] = {}  # current progress bar per rank
        self.results: dict[int | None, dict] = {}
        self.exits: list[tuple[int, int]] = []  # (rank, code) as horovodrun reported them
        self.first_failure: int | None = None
        self.collapsed = 0  # stderr lines not shown because another rank just showed the same
        self.stopping = False  # set when the run is being stopped: hide what follows
        self._recent: deque[tuple[int | None, str]] = deque(maxlen=400)
        self._noise: dict[tuple[int | None, str], tuple[re.Pattern, int]] = {}  # open blocks

    def label(self, rank: int | None) -> str:
        if rank is None:
            return "[horovodrun] "
        return f"[rank {rank}] " if self.label_ranks else ""

    def add(self, event) -> list[str]:
        """Records an event; returns the lines to show now."""
        if event is None:
            return []
        if isinstance(event, Progress):
            self.progress[event.rank] = event.text
            return []
        rank, text = event.rank, event.text
        if event.stream == "stdout" and UNFINISHED_BAR.match(text):
            # A bar that a print in a callback ended: still a redraw, not a line.
            self.progress[rank] = text.rstrip()
            self.by_rank[rank].append(text)
            return []
        if event.stream == "stdout":
            self.progress.pop(rank, None)  # the bar was finished, or a print ended its line
        self.by_rank[rank].append(text)
        if is_tensorflow_log(text) or self.stopping or self._is_noise(event):
            self.hidden_logs.append(self.label(rank) + text)
            return []
        if rank is None:
            return self._driver_line(text)
        result = parse_result_line(text)
        if result is not None:
            self.results.setdefault(rank, result)
        # A warning every worker prints is shown once. Only on stderr: stdout is the program's
        # own output, where equal lines (rows of a table) mean something.
        if event.stream != "stdout" and any(r != rank and t == text for r, t in self._recent):
            self.collapsed += 1
            self._recent.append((rank, text))
            return []
        self._recent.append((rank, text))
        return self._show(self.label(rank) + text)

    def _is_noise(self, event: Line) -> bool:
        """Known harmless warnings (and the lines of their block), and empty worker lines."""
        key = (event.rank, event.stream)
        if key in self._noise:
            end, seen = self._noise.pop(key)
            if not end.search(event.text) and seen + 1 < NOISE_MAX_LINES:
                self._noise[key] = (end, seen + 1)
            return True
        if event.rank is not None and not event.text.strip():
            return True
        for start, end in KNOWN_NOISE:
            if start.search(event.text):
                if end is not None:
                    self._noise[key] = (end, 1)
                return True
        return False

    def _driver_line(self, text: str) -> list[str]:
        exited = PROCESS_EXIT.match(text)
        failure = FIRST_FAILURE.match(text)
        if exited:
            self.exits.append((int(exited[1]), int(exited[2])))
        elif failure:
            self.first_failure = int(failure[1])
        elif any(code != 0 for _, code in self.exits):
            # After a worker failed, horovodrun prints its own traceback: a consequence.
            self.hidden_logs.append(self.label(None) + text)
            return []
        return self._show(self.label(None) + text)

    def _show(self, line: str) -> list[str]:
        self.shown.append(line)
        return [line]

    def current_progress(self) -> str | None:
        """The progress bar to show: rank 0's, else the lowest rank's that has one."""
        if not self.progress:
            return None
        rank = min(self.progress, key=lambda r: -1 if r is None else r)
        return self.label(rank) + self.progress[rank]

    def metrics(self) -> dict:
        if 0 in self.results:
            return self.results[0]
        return next(iter(self.results.values()), {})

    def failed_rank(self) -> int | None:
        if self.first_failure is not None:
            return self.first_failure
        return next((rank for rank, code in self.exits if code != 0), None)

    def tail(self, lines: int = 10) -> str:
        shown = self.shown[-lines:]
        progress = self.current_progress()
        return "\n".join(shown + ([progress] if progress else []))


# --- failures ---------------------------------------------------------------------------------


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
    lines = [line for line in lines if not is_tensorflow_log(line) or TF_SEVERE_LINE.match(line)]
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

"""Output: from horovodrun's byte stream to Line and Progress events, and what a line is."""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass

# `[1]<stdout>:` (Gloo), `[0,1]<stderr>:` (mpirun --tag-output), optionally after a timestamp
# (horovodrun --prefix-output-with-timestamp puts time.asctime() first).
PREFIX = re.compile(
    r"^(?:[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})?"
    r"\[(?:\d+,)?(?P<rank>\d+)\]<(?P<stream>stdout|stderr|stddiag)>:"
)
# TensorFlow's C++ logging, and the abseil format newer parts of TensorFlow use.
TF_LOG = re.compile(
    r"^(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] \S+:\d+\]"
    r"|[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+:\d+\]"
    r"|To enable the following instructions:"
    r"|WARNING: All log messages before absl::InitializeLog\(\) is called)"
)
TF_SEVERE = re.compile(r"^(?:\S+ \S+: [EF] |[EF]\d{4} )")  # errors and fatal ones
PROCESS_EXIT = re.compile(r"^Process (\d+) exit with status code (-?\d+)\.")
FIRST_FAILURE = re.compile(r"^Terminating remaining workers after failure of Process (\d+)\.")
RESULT = re.compile(r"^RESULT (\{.*\})\s*$")


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
    """Turns horovodrun's output, fed in arbitrary pieces, into Line and Progress events.

    A piece ending in `\\r` is a redraw of a progress line (Keras also writes `\\b` to move
    back over the previous bar); a piece ending in `\\n` is a finished line.
    """

    def __init__(self, default_rank: int | None = None):
        self.default_rank = default_rank  # the rank of unprefixed lines (0 without horovodrun)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""

    def feed(self, data: bytes | str) -> list:
        text = self._decoder.decode(data) if isinstance(data, bytes) else data
        pieces = re.split(r"(?<=[\r\n])", self._pending + text)
        self._pending = pieces.pop()  # not yet terminated (or "")
        return [event for piece in pieces if (event := self._event(piece))]

    def finish(self) -> list:
        rest = self._pending + self._decoder.decode(b"", final=True)
        self._pending = ""
        return [event] if rest and (event := self._event(rest + "\n")) else []

    def _event(self, piece: str):
        terminator, body = piece[-1], piece[:-1]
        match = PREFIX.match(body)
        if match:
            rank, stream, body = int(match["rank"]), match["stream"], body[match.end() :]
        else:
            rank, stream = self.default_rank, "stdout"
        body = body.replace("\b", "")
        if terminator == "\r":
            body = body.rstrip()
            return Progress(rank, body) if body else None
        return Line(rank, stream, body.rstrip("\r"))


def is_tensorflow_log(text: str) -> bool:
    return bool(TF_LOG.match(text))


def parse_result_line(text: str) -> dict | None:
    match = RESULT.match(text)
    if not match:
        return None
    try:
        return json.loads(match.group(1))
    except ValueError:
        return None

"""What the ranks reported: the probe's records (grader/running/probe.py) read back, one per rank and run.

Each worker writes `run{M}-rank{N}.json` (and two .npy weight vectors) into the probe folder;
a missing or half-written file means that rank never got that far, which is evidence too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from grader.running.kept import MAX_RECORD_BYTES, read_regular

# TensorBoard's event files: events.out.tfevents.<time>.<host>.<pid>.<n>[.v2]
_EVENT_FILE = re.compile(r"events\.out\.tfevents\.\d+\.(?P<host>.+)\.(?P<pid>\d+)\.\d+(?:\.v2)?$")


@dataclass
class RankRecord:
    """What one rank did in one run of the script."""

    rank: int
    data: dict
    folder: Path

    def _vector(self, name: str):
        import io

        import numpy as np

        data = read_plain_file(self.folder / f"run{self.data['run']}-rank{self.rank}-{name}.npy")
        try:
            return None if data is None else np.load(io.BytesIO(data), allow_pickle=False)
        except (OSError, ValueError, EOFError):
            return None

    @property
    def first_update(self):
        """The change of the trainable weights in the first training step, before callbacks."""
        return self._vector("first-update")

    @property
    def weights_before_first_step(self):
        return self._vector("before-first-step")

    @property
    def weights_after_first_step(self):
        """The trainable weights after the first step and every callback of its end."""
        return self._vector("after-first-step")

    @property
    def local_gradient(self):
        """This rank's own gradients of the first step, as they went into the allreduce."""
        return self._vector("local-gradient")

    @property
    def reduced_gradient(self):
        """The gradients of the first step as the allreduce gave them back."""
        return self._vector("reduced-gradient")

    @property
    def fit(self) -> dict | None:
        return self.data.get("fit")

    @property
    def error(self) -> dict | None:
        return self.data.get("error")

    @property
    def waiting(self) -> dict | None:
        """The collective this rank waits in ({"call", "name", "line", "code"}), if any."""
        return self.data.get("waiting")

    @property
    def finished(self) -> bool:
        return bool(self.data.get("finished"))

    @property
    def last_stage(self) -> tuple:
        """(seconds since the worker started, what) of the last thing this rank reported."""
        stages = self.data.get("stages") or [[0.0, "started"]]
        return tuple(stages[-1])

    @property
    def in_fit(self) -> bool:
        stages = [what for _, what in self.data.get("stages", [])]
        return "started model.fit" in stages and "model.fit returned" not in stages

    def position(self) -> float | None:
        """How far down the script this rank is: the top-level line it waits at (a collective
        in a function counts at the line that called the function; one in a callback, at
        model.fit's), model.fit's while it trains, infinity once it finished; None when the
        probe can't say."""
        if self.finished:
            return float("inf")
        for where in (self.waiting, self.fit if self.in_fit else None):
            if where and where.get("top_line"):
                return float(where["top_line"])
        return None

    def where(self) -> str:
        """Where this rank is, in words, with its line of the script."""
        if self.error:
            at = f" at line {self.error['line']}" if self.error.get("line") else ""
            return f"stopped with an error{at}"
        if self.finished:
            return "had finished"
        if self.waiting:
            return f"waited in {self.waiting['call']}{line_and_code(self.waiting)}"
        if self.in_fit:
            done = self.last_stage[1]
            progress = "" if done == "started model.fit" else f" ({done})"
            line = f" at line {self.fit['line']}" if self.fit and self.fit.get("line") else ""
            return f"was training in model.fit{line}{progress}"
        return f"had reached: {self.last_stage[1]}"

    def learning_rates(self) -> dict:
        """{epoch (from 0): [the learning rate of each training step]}."""
        return {int(epoch): rates for epoch, rates in (self.data.get("lr") or {}).items()}

    def epoch_logs(self) -> dict:
        """{epoch (from 0): {metric: value}} as the last callback saw them."""
        return {int(epoch): logs for epoch, logs in (self.data.get("epoch_logs") or {}).items()}


def read_plain_file(path: Path) -> bytes | None:
    """The bytes of a regular file the script's run wrote, or None: the run is untrusted, so
    a link is not followed, a named pipe or device is not waited on, a huge file is not read
    (grader/running/kept.py's bounded reader)."""
    return read_regular(path, MAX_RECORD_BYTES)


def split_by_callback(fits: dict, callback: str) -> tuple[list, list]:
    """(the ranks whose model.fit got `callback`, by class name; the others), of {rank: fit}."""
    having = sorted(rank for rank, fit in fits.items() if callback in (fit.get("callbacks") or []))
    return having, sorted(set(fits) - set(having))


def line_and_code(where: dict | None) -> str:
    """` at line 313 (`code`)`, or "" when the line is not known."""
    if not where or not where.get("line"):
        return ""
    code = where.get("code") or ""
    return f" at line {where['line']}" + (f" (`{closed(code)}`)" if code else "")


_CLOSING = {"(": ")", "[": "]", "{": "}"}


def closed(code: str) -> str:
    """A statement's first line with what it leaves open closed by `...`: `model.fit(` is
    `model.fit(...)`, which reads as the call it starts (a lone `(` in a parenthesis read as
    one never closed)."""
    still_open, quote = [], None
    for character in code:
        if quote:  # inside a string: brackets there are text (escapes are rare enough here)
            quote = None if character == quote else quote
        elif character in "'\"":
            quote = character
        elif character == "#":
            break
        elif character in _CLOSING:
            still_open.append(_CLOSING[character])
        elif still_open and character == still_open[-1]:
            still_open.pop()
    return code + ("..." + "".join(reversed(still_open)) if still_open else "")


@dataclass
class Evidence:
    """Every rank's records of one check: {run number: {rank: RankRecord}}."""

    folder: Path
    np: int
    runs: dict = field(default_factory=dict)

    @classmethod
    def read(cls, folder, np: int) -> Evidence:
        folder = Path(folder)
        evidence = cls(folder, np)
        for path in sorted(folder.glob("run*-rank*.json")):
            match = re.fullmatch(r"run(\d+)-rank(\d+)\.json", path.name)
            if not match:
                continue
            text = read_plain_file(path)
            try:
                data = json.loads(text.decode("utf-8")) if text is not None else None
            except ValueError:
                data = None
            if not isinstance(data, dict):
                continue  # written as the worker was stopped: as if it never got there
            run, rank = int(match.group(1)), int(match.group(2))
            evidence.runs.setdefault(run, {})[rank] = RankRecord(rank, data, folder)
        return evidence

    def ranks(self, run: int = 1) -> dict:
        """{rank: RankRecord} of one run (ranks that never started it are missing)."""
        return self.runs.get(run, {})


def event_file_writers(log_dirs: list, pids: dict) -> dict:
    """{rank: [TensorBoard event files it wrote]} under `log_dirs`; `pids` is {pid: rank}."""
    found: dict = {}
    for log_dir in log_dirs:
        log_dir = Path(log_dir)
        if not log_dir.is_dir():
            continue
        for path in sorted(log_dir.rglob("events.out.tfevents.*")):
            match = _EVENT_FILE.match(path.name)
            if match and int(match.group("pid")) in pids:
                rank = pids[int(match.group("pid"))]
                found.setdefault(rank, []).append(path.relative_to(log_dir).as_posix())
    return found

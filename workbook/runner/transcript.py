"""Transcript: what a run printed, sorted into what to show and what to keep aside."""

from __future__ import annotations

from collections import defaultdict, deque

from workbook.runner.output import (
    FIRST_FAILURE,
    PROCESS_EXIT,
    Progress,
    is_tensorflow_log,
    parse_result_line,
)


class Transcript:
    """What a run printed, sorted for display: shown lines, hidden logs, progress, results."""

    def __init__(self, label_ranks: bool = True):
        self.label_ranks = label_ranks
        self.shown: list[str] = []  # lines as displayed, labelled
        self.hidden_logs: list[str] = []  # TensorFlow C++ log lines, labelled
        self.by_rank: dict[int | None, list[str]] = defaultdict(list)  # every line, per rank
        self.progress: dict[int | None, str] = {}  # current progress bar per rank
        self.results: dict[int | None, dict] = {}
        self.exits: list[tuple[int, int]] = []  # (rank, code) as horovodrun reported them
        self.first_failure: int | None = None
        self.collapsed = 0  # stderr lines not shown because another rank just showed the same
        self.stopping = False  # set when the run is being stopped: hide what follows
        self._recent: deque[tuple[int | None, str]] = deque(maxlen=400)

    def label(self, rank: int | None) -> str:
        if rank is None:
            return "[horovodrun] "
        return f"[rank {rank}] " if self.label_ranks else ""

    def add(self, event) -> list[str]:
        """Records an event; returns the lines to show now."""
        if isinstance(event, Progress):
            self.progress[event.rank] = event.text
            return []
        rank, text = event.rank, event.text
        if event.stream == "stdout":
            self.progress.pop(rank, None)  # the bar was finished, or a print ended its line
        self.by_rank[rank].append(text)
        if is_tensorflow_log(text) or self.stopping:
            self.hidden_logs.append(self.label(rank) + text)
            return []
        if rank is None:
            return self._driver_line(text)
        result = parse_result_line(text)
        if result is not None:
            self.results.setdefault(rank, result)
        # A warning every worker prints is shown once. Only on stderr: stdout is the program's
        # own output, where equal lines (rows of a table) mean something.
        if (
            event.stream != "stdout"
            and text.strip()
            and any(r != rank and t == text for r, t in self._recent)
        ):
            self.collapsed += 1
            self._recent.append((rank, text))
            return []
        self._recent.append((rank, text))
        return self._show(self.label(rank) + text)

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

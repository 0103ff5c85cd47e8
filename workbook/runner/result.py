"""RunResult: how a run ended, its metrics and where its logs are, as text and as an HTML table."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path


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
    output: str = field(default="", repr=False)  # the lines shown, labelled by rank

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.interrupted and not self.timed_out

    @property
    def images_per_second(self) -> float | None:
        return self.metrics.get("images_per_second")

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
            rows.append(("images/second", f"{self.images_per_second:,.0f}"))
        if "train_seconds" in self.metrics:
            rows.append(("training time", f"{self.metrics['train_seconds']} s"))
        if self.error and not self.ok:
            last = self.error.strip().splitlines()[-1] if self.error.strip() else ""
            rows.append(("error", last))
        if self.leftover_pids:
            rows.append(("NOT stopped", ", ".join(map(str, self.leftover_pids))))
        if self.tensorboard_dir:
            rows.append(("TensorBoard logs", str(self.tensorboard_dir)))
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
                    if name in ("full output", "error", "TensorBoard logs")
                    else html.escape(value)
                )
            )
            + "</td></tr>"
            for name, value in self._rows()
        )
        return f"<table>{cells}</table>"

"""Background runs: start a run and return at once; watch, wait for or stop it later."""

from __future__ import annotations

import atexit
import html
import threading
import time
from pathlib import Path

from workbook.paths import LOGS_DIR
from workbook.runner.display import SilentConsole, clock
from workbook.runner.execute import ensure_hosts_reachable, execute, transcript_for
from workbook.runner.plan import RunPlan, plan_run
from workbook.runner.result import RunResult


class BackgroundRun:
    """A run going on in a background thread: `done`, `result()`, `tail()`, `stop()`."""

    def __init__(self, plan: RunPlan):
        self.plan = plan
        self.run_name = plan.run_name
        self.log_path = plan.log_path
        self._transcript = transcript_for(plan)
        self._stop = threading.Event()
        self._result: RunResult | None = None
        self._failure: BaseException | None = None
        self._started = time.monotonic()
        self._thread = threading.Thread(
            target=self._run, daemon=True, name=f"runner-{plan.run_name}"
        )
        self._thread.start()

    def _run(self) -> None:
        try:
            self._result, _ = execute(self.plan, SilentConsole(), self._stop, self._transcript)
        except BaseException as failure:  # shown by result()
            self._failure = failure

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self, timeout: float | None = None) -> RunResult:
        """Waits for the run to end (TimeoutError after `timeout` seconds) and returns it."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"{self.run_name} is still running")
        if self._failure is not None:
            raise RuntimeError(f"{self.run_name} could not run") from self._failure
        return self._result

    def tail(self, lines: int = 10) -> str:
        """The last lines shown, and the current progress bar."""
        return self._transcript.tail(lines)

    def stop(self, timeout: float = 30) -> RunResult:
        """Stops every process of the run and returns its (interrupted) result."""
        self._stop.set()
        return self.result(timeout)

    def status(self) -> str:
        if self.done:
            return self._result.status() if self._result else "could not run"
        return f"running {clock(time.monotonic() - self._started)}"

    def __repr__(self) -> str:
        return f"{self.run_name}: {self.status()}\n{self.tail(5)}"

    def _repr_html_(self) -> str:
        if self.done and self._result is not None:
            return self._result._repr_html_()
        return (
            f"<b>{html.escape(self.run_name)}</b>: {html.escape(self.status())}"
            f"<pre>{html.escape(self.tail(5))}</pre>"
        )


_background_runs: list[BackgroundRun] = []


def running_in_background() -> list[str]:
    """The names of the background runs that have not ended yet."""
    return [run.run_name for run in _background_runs if not run.done]


def start_in_background(
    command: str | list[str],
    np: int | str = "auto",
    *,
    launcher: str = "horovodrun",
    timeout: float | None = None,
    run_name: str | None = None,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    log_dir: str | Path | bool | None = None,
    logs_root: str | Path = LOGS_DIR,
) -> BackgroundRun:
    """Starts a run and returns at once; the same arguments as horovodrun().

    launcher="python" runs the script as one plain process (np=1), for a baseline without
    Horovod's launcher.
    """
    plan = plan_run(
        command,
        np,
        run_name=run_name,
        timeout=timeout,
        env=env,
        cwd=cwd,
        log_dir=log_dir,
        logs_root=logs_root,
        launcher=launcher,
    )
    ensure_hosts_reachable(plan)  # here, so that an unreachable host is said at once
    run = BackgroundRun(plan)
    _background_runs.append(run)
    return run


@atexit.register
def _stop_background_runs() -> None:
    """A kernel that shuts down takes its background runs with it."""
    for run in _background_runs:
        if not run.done:
            run._stop.set()
    for run in _background_runs:
        run._thread.join(timeout=15)

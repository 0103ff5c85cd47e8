"""Cell: a run in a notebook cell, in the foreground or in the background.

- horovodrun(): plans a run, checks its hosts, runs it with a console, and keeps `last_result`;
- start_in_background() and BackgroundRun: a run that goes on while the notebook does other
  things; a kernel that shuts down stops them.
"""

from __future__ import annotations

import atexit
import html
import threading
import time

from workbook.runner.command import RunOptions, RunPlan, plan_run
from workbook.runner.display import RunResult, SilentConsole, clock, console_for
from workbook.runner.execute import execute, transcript_for
from workbook.runner.hosts import ensure_reachable


def ensure_hosts_reachable(plan: RunPlan, say=None) -> None:
    """Before a run on other machines: HostsUnreachable, at once, unless ssh reaches them all."""
    ensure_reachable(list(plan.remote_hosts), plan.ssh, plan.ssh_env, say)


# The result of the last foreground run, also when it was interrupted. The package reads it
# from here on every access (`workbook.runner.last_result`), so it is always the current one.
last_result: RunResult | None = None


def horovodrun(
    command: str | list[str],
    np: int | str | None = None,
    *,
    quiet: bool = False,
    options: RunOptions | None = None,
    **fields,
) -> RunResult:
    """Runs `horovodrun [options] script [args]` and shows its output live; returns a RunResult.

    command: `"fashion_mnist.py --epochs 3"`, optionally with horovodrun options in front
        (`"-H host1:4,host2:4 fashion_mnist.py"`); a `-np` there wins over `np`.
    np: "auto" (the default: one worker per GPU, else 2 CPU workers sharing the cores) or a
        number.
    quiet: show nothing while it runs.
    options, or as keywords: how to run it (workbook.runner.RunOptions, where each is
        explained): run_name, timeout, env, cwd, log_dir, logs_root, share, timeline.
        `horovodrun("train.py", np=1, share="auto", timeout=600)`

    The run's record, run.json next to its log, has its start and end times, its layout and
    the other processes that were busy meanwhile (also in the result's busy_others).

    Interrupting the cell stops all workers, then raises KeyboardInterrupt; the partial
    result is in `workbook.runner.last_result`.
    """
    global last_result
    plan = plan_run(command, options=RunOptions.of(options, np=np, **fields))
    console = console_for(quiet)
    ensure_hosts_reachable(plan, console.line)  # an unreachable host: a clear error, no hang
    busy = running_in_background()
    if busy and not quiet:
        console.line(
            f"Note: {', '.join(busy)} still running in the background; both share "
            "the CPU cores, so both run slower."
        )
    result, ctrl_c = execute(plan, console)
    last_result = result
    if ctrl_c:
        stopped = (
            f"processes {result.leftover_pids} did NOT stop"
            if result.leftover_pids
            else "all its processes stopped"
        )
        raise KeyboardInterrupt(f"run {plan.run_name} interrupted; {stopped}")
    return result


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
    np: int | str | None = None,
    *,
    options: RunOptions | None = None,
    **fields,
) -> BackgroundRun:
    """Starts a run and returns at once; the same arguments as horovodrun() (but `quiet`).

    launcher="python" runs the script as one plain process (np=1), for a baseline without
    Horovod's launcher.
    """
    plan = plan_run(command, options=RunOptions.of(options, np=np, **fields))
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

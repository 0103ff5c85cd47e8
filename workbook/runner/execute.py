"""Execute: one run from its start to its last process stopped, in the foreground or not.

- execute(): starts the plan's command, shows its output live, and stops every process it
  started, here and on the other hosts, whatever happens (the end, a failure, the timeout, an
  interrupt, an exception);
- horovodrun(): a run in a notebook cell, and `last_result`, what it left behind;
- start_in_background() and BackgroundRun: a run that goes on while the notebook does other things.
"""

from __future__ import annotations

import atexit
import html
import json
import os
import queue
import subprocess
import threading
import time
from datetime import datetime

from workbook.runner.command import RUN_MARKER, RunOptions, RunPlan, plan_run, plural
from workbook.runner.contention import ContentionMonitor
from workbook.runner.display import RunResult, SilentConsole, clock, console_for, status_text
from workbook.runner.hosts import ensure_reachable, stop_remote
from workbook.runner.output import OutputParser, Transcript, failure_text
from workbook.runner.processes import STOP_STAGES, ProcessTree, sigint_deferred, wait_briefly

SNAPSHOT_INTERVAL_S = 0.5  # how often the process tree is recorded (to find orphans later)

_EOF = object()


def transcript_for(plan: RunPlan) -> Transcript:
    """An empty transcript; lines get `[rank N]` labels when horovodrun runs the workers."""
    return Transcript(label_ranks=plan.launcher == "horovodrun")


def ensure_hosts_reachable(plan: RunPlan, say=None) -> None:
    """Before a run on other machines: HostsUnreachable, at once, unless ssh reaches them all."""
    ensure_reachable(list(plan.remote_hosts), plan.ssh, _ssh_env(plan), say)


def _ssh_env(plan: RunPlan) -> dict[str, str]:
    """The run's environment for the runner's own ssh calls, without the run's marker: the
    clean-up must not count them among the run's processes."""
    return {key: value for key, value in plan.env.items() if key != RUN_MARKER}


class _Pump(threading.Thread):
    """Copies one pipe of the child to the raw log (at once) and to the queue (for display)."""

    def __init__(self, name: str, pipe, log_file, log_lock, chunks: queue.Queue):
        super().__init__(daemon=True, name=f"runner-{name}")
        self.pipe_name, self.pipe = name, pipe
        self.log_file, self.log_lock, self.chunks = log_file, log_lock, chunks

    def run(self) -> None:
        try:
            while data := os.read(self.pipe.fileno(), 65536):
                with self.log_lock:
                    self.log_file.write(data)
                    self.log_file.flush()
                self.chunks.put((self.pipe_name, data))
        except (OSError, ValueError):  # the pipe or the log closed under us at the very end
            pass
        finally:
            self.chunks.put((self.pipe_name, _EOF))


def write_record(plan: RunPlan, started_at: float, monitor: ContentionMonitor,
                 result: RunResult | None = None) -> None:
    """run.json next to the log: the run's facts for whoever compares runs later, in any kernel
    (written at the start, completed at the end)."""
    layout = plan.layout
    record = {
        "run_name": plan.run_name,
        "command": plan.display_command,
        "launcher": plan.launcher,
        "layout": layout.describe(),
        "workers": layout.workers,
        "threads_per_worker": layout.threads,
        "cores": layout.cores,
        "gpus": layout.gpus,
        "pinned": layout.pinned,
        "hosts": plan.hosts,
        "started": started_at,
        "timeline": str(plan.timeline_path) if plan.timeline_path else None,
    }
    if result is not None:
        record.update(
            ended=result.ended_at,
            exit_code=result.exit_code,
            ok=result.ok,
            busy_others=result.busy_others,
            contention=monitor.record(),
        )
    plan.record_path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def _start(plan: RunPlan) -> subprocess.Popen:
    # One process sees its stdout and stderr apart: a warning on stderr must not end the line
    # of a progress bar on stdout. horovodrun keeps them apart itself, with its prefixes, and
    # its own order of the two is kept in one pipe.
    return subprocess.Popen(
        plan.argv,
        cwd=plan.cwd,
        env=plan.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if plan.launcher == "python" else subprocess.STDOUT,
        # Its own session: Ctrl-C in a terminal reaches only us, and we stop it all in order.
        start_new_session=True,
    )


def execute(
    plan: RunPlan,
    console: SilentConsole,
    stop: threading.Event | None = None,
    transcript: Transcript | None = None,
) -> tuple[RunResult, bool]:
    """Runs the plan to its end (or the timeout, or `stop`); returns (result, ctrl_c_pressed).

    Whatever happens here, including an exception, every process of the run is stopped.
    """
    transcript = transcript or transcript_for(plan)
    parser = OutputParser(default_rank=plan.unprefixed_rank)
    plan.run_dir.mkdir(parents=True, exist_ok=True)
    log_file = plan.log_path.open("wb")
    log_file.write(
        f"# {plan.display_command}\n# {plan.layout.describe()}\n# started "
        f"{datetime.now():%Y-%m-%d %H:%M:%S}\n".encode()
    )
    log_file.flush()
    console.start(plan)

    started, started_at = time.monotonic(), time.time()
    monitor = ContentionMonitor()
    write_record(plan, started_at, monitor)
    process = _start(plan)
    tree = ProcessTree(process, plan.marker)
    chunks: queue.Queue = queue.Queue()
    log_lock = threading.Lock()
    pipes = {"stdout": process.stdout, "stderr": process.stderr}
    pumps = [
        _Pump(name, pipe, log_file, log_lock, chunks)
        for name, pipe in pipes.items()
        if pipe is not None
    ]
    for pump in pumps:
        pump.start()
    open_pipes = len(pumps)

    def show(events: list) -> None:
        for event in events:
            for line in transcript.add(event):
                console.line(line)

    def take(item) -> None:
        nonlocal open_pipes
        pipe, data = item
        if data is _EOF:
            open_pipes -= 1
        else:
            show(parser.feed(data, pipe))

    def show_queued() -> None:
        """Shows the output the readers have queued and the loop has not taken yet."""
        while True:
            try:
                take(chunks.get_nowait())
            except queue.Empty:
                return

    interrupted = timed_out = ctrl_c = False
    leftover: list[int] = []
    left_remote: dict[str, str] = {}
    stopped = 0
    exited_at = None
    try:
        last_snapshot = 0.0
        while open_pipes:
            try:
                take(chunks.get(timeout=0.25))
            except queue.Empty:
                pass
            now = time.monotonic()
            if now - last_snapshot > SNAPSHOT_INTERVAL_S:
                tree.snapshot()
                last_snapshot = now
            if monitor.due(now):
                monitor.sample(now, {process.pid, *tree.known})
            console.status(status_text(now - started, transcript))
            if plan.timeout and now - started > plan.timeout:
                timed_out = True
                break
            if stop is not None and stop.is_set():
                interrupted = True
                break
            if exited_at is None and process.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > 5:
                break  # horovodrun ended, but something it left behind holds the output open
    except KeyboardInterrupt:
        interrupted = ctrl_c = True
    finally:
        with sigint_deferred():
            if interrupted or timed_out or (open_pipes and exited_at is None):
                show_queued()  # show what arrived before the stop...
                # ...but not the tracebacks of the workers being stopped (they go to the log).
                transcript.stopping = True
                tree.snapshot()
                stopped = 1 + len(tree.alive_descendants())
                console.line(
                    f"Stopping horovodrun and the {plural(stopped - 1, 'process')} it started"
                    if plan.launcher == "horovodrun"
                    else "Stopping the script"
                )
                leftover = tree.stop()
            else:
                # Ended by itself: give stragglers a moment, then stop any that remain.
                wait_briefly(process, 10)
                if not tree.wait(2.0):
                    leftover = tree.stop(STOP_STAGES[1:])
            if plan.remote_hosts and (interrupted or timed_out or process.returncode != 0):
                # The workers over there outlive horovodrun's ssh clients: stop them too.
                console.line(f"Stopping what is left on {', '.join(plan.remote_hosts)}")
                left_remote = stop_remote(
                    list(plan.remote_hosts), plan.marker, plan.ssh, _ssh_env(plan)
                )
            wait_briefly(process, 5)
            for pump in pumps:
                pump.join(timeout=5)
            show_queued()  # show what arrived before the end
            show(parser.finish())
            log_file.close()

    wall = time.monotonic() - started
    failed_rank = None if interrupted or timed_out else transcript.failed_rank()
    if timed_out:
        error = f"stopped after the timeout of {plan.timeout:g} s"
    elif interrupted or process.returncode == 0:
        error = ""
    else:
        error = failure_text(transcript, failed_rank, plan.unprefixed_rank)
    result = RunResult(
        exit_code=process.returncode,
        wall_seconds=round(wall, 1),
        np=plan.np,
        hosts=plan.hosts,
        metrics=transcript.metrics(),
        failed_rank=failed_rank,
        error=error,
        log_path=plan.log_path,
        run_name=plan.run_name,
        command=plan.display_command,
        layout=plan.layout.describe(),
        tensorboard_dir=plan.tensorboard_dir,
        interrupted=interrupted,
        timed_out=timed_out,
        leftover_pids=leftover,
        leftover_remote=left_remote,
        stopped_processes=stopped,
        output="\n".join(transcript.shown),
        started_at=started_at,
        ended_at=time.time(),
        busy_others=monitor.findings(),
        timeline_path=plan.timeline_path,
    )
    write_record(plan, started_at, monitor, result)
    console.finish(result, transcript)
    if leftover:
        console.line(f"WARNING: processes {leftover} did not stop; kill them by hand")
    for host, problem in left_remote.items():
        console.line(
            f"WARNING: could not stop the run's processes on {host} ({problem}); on {host}, "
            f"stop the processes whose environment has {'='.join(plan.marker)}"
        )
    return result, ctrl_c


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

"""Execute: one run from its start to its last process stopped.

execute() starts the plan's command, shows its output live, and stops every process it started,
here and on the other hosts, whatever happens (the end, a failure, the timeout, an interrupt,
an exception). Its parts, one job each:

- _start: the launcher's process, in a session of its own;
- RunOutput: the child's pipes, copied to the raw log by pumps and shown from their queue;
- _supervise: the loop while the run goes on (the process tree, the other processes' CPU use,
  the status line, the timeout, a stop request);
- _stop_everything: what is left of the run, here and on the other hosts;
- _result: the RunResult, and the warnings about processes that would not stop.

The notebook's entry points (horovodrun(), start_in_background()) are in cell.py; the
benchmarks call execute() with a console of their own.
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime

from workbook.prose import plural
from workbook.runner.command import RunPlan
from workbook.runner.contention import ContentionMonitor
from workbook.runner.display import RunResult, SilentConsole, status_text
from workbook.runner.horovod_build import BUILT_VARIABLE, built_controllers
from workbook.runner.hosts import stop_remote
from workbook.runner.output import OutputParser, Transcript, failure_text
from workbook.runner.processes import (
    STOP_STAGES,
    ProcessTree,
    interrupts_deferred,
    marked_pids,
    wait_briefly,
)
from workbook.runner.record import write_record

SNAPSHOT_INTERVAL_S = 0.5  # how often the process tree is recorded (to find orphans later)
EXITED_GRACE_S = 5  # horovodrun ended, but something it left behind holds the output open

_EOF = object()


def transcript_for(plan: RunPlan) -> Transcript:
    """An empty transcript; lines get `[rank N]` labels when horovodrun runs the workers."""
    return Transcript(label_ranks=plan.launcher == "horovodrun")


def _start(plan: RunPlan) -> subprocess.Popen:
    # One process sees its stdout and stderr apart: a warning on stderr must not end the line
    # of a progress bar on stdout. horovodrun keeps them apart itself, with its prefixes, and
    # its own order of the two is kept in one pipe.
    env = plan.env
    if plan.launcher == "horovodrun":  # asked here, not in the plan: planning starts nothing
        env = {BUILT_VARIABLE: built_controllers(), **env}
    return subprocess.Popen(
        plan.argv,
        cwd=plan.cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if plan.launcher == "python" else subprocess.STDOUT,
        # Its own session: Ctrl-C in a terminal reaches only us, and we stop it all in order.
        start_new_session=True,
    )


def _open_log(plan: RunPlan):
    """The raw log, headed by the command, the layout and the start."""
    plan.run_dir.mkdir(parents=True, exist_ok=True)
    log_file = plan.log_path.open("wb")
    log_file.write(
        f"# {plan.display_command}\n# {plan.layout.describe()}\n# started "
        f"{datetime.now():%Y-%m-%d %H:%M:%S}\n".encode()
    )
    log_file.flush()
    return log_file


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


class RunOutput:
    """The child's output: pumps copy each pipe to the raw log and a queue; what is taken from
    the queue is parsed into the transcript and its lines shown on the console."""

    def __init__(
        self,
        plan: RunPlan,
        process: subprocess.Popen,
        log_file,
        transcript: Transcript,
        console: SilentConsole,
    ):
        self.transcript, self.console = transcript, console
        self.parser = OutputParser(default_rank=plan.unprefixed_rank)
        self.chunks: queue.Queue = queue.Queue()
        lock = threading.Lock()
        pipes = {"stdout": process.stdout, "stderr": process.stderr}
        self.pumps = [
            _Pump(name, pipe, log_file, lock, self.chunks)
            for name, pipe in pipes.items()
            if pipe is not None
        ]
        for pump in self.pumps:
            pump.start()
        self.open_pipes = len(self.pumps)

    def _show(self, events: list) -> None:
        for event in events:
            for line in self.transcript.add(event):
                self.console.line(line)

    def _take(self, item) -> None:
        pipe, data = item
        if data is _EOF:
            self.open_pipes -= 1
        else:
            self._show(self.parser.feed(data, pipe))

    def take(self, timeout: float) -> None:
        """Shows the next piece of output, waiting up to `timeout` seconds for one."""
        try:
            self._take(self.chunks.get(timeout=timeout))
        except queue.Empty:
            pass

    def take_queued(self) -> None:
        """Shows the output the pumps have queued and nobody has taken yet."""
        while True:
            try:
                self._take(self.chunks.get_nowait())
            except queue.Empty:
                return

    def finish(self) -> None:
        """After the run: the pumps' last pieces, and what the parser still holds."""
        for pump in self.pumps:
            pump.join(timeout=5)
        self.take_queued()
        self._show(self.parser.finish())


@dataclass
class Ending:
    """How a run ended, as the supervision and the clean-up saw it."""

    interrupted: bool = False  # a stop request, or Ctrl-C
    timed_out: bool = False
    ctrl_c: bool = False
    exited_at: float | None = None  # when the launcher's process was seen gone (monotonic)
    stopped: int = 0  # processes stopped after an interrupt or the timeout
    leftover: list[int] = field(default_factory=list)  # pids that would not stop
    left_remote: dict[str, str] = field(default_factory=dict)  # host: what is left there

    @property
    def cut_short(self) -> bool:
        return self.interrupted or self.timed_out


def _supervise(
    plan: RunPlan,
    process: subprocess.Popen,
    tree: ProcessTree,
    output: RunOutput,
    monitor: ContentionMonitor,
    console: SilentConsole,
    stop: threading.Event | None,
    started: float,
    ending: Ending,
) -> None:
    """Shows the output until the pipes close; notes the timeout, a stop request or Ctrl-C."""
    last_snapshot = 0.0
    slowed_said = False
    try:
        while output.open_pipes:
            output.take(timeout=0.25)
            now = time.monotonic()
            if now - last_snapshot > SNAPSHOT_INTERVAL_S:
                tree.snapshot()
                last_snapshot = now
            if monitor.due(now):
                monitor.sample(now, {process.pid, *tree.known, *_companions(plan)})
                slowed = None if slowed_said else monitor.slowed_line()
                if slowed:  # at once, once: the summary at the end names them all
                    console.line(slowed)
                    slowed_said = True
            console.status(status_text(now - started, output.transcript))
            if plan.timeout and now - started > plan.timeout:
                ending.timed_out = True
                return
            if stop is not None and stop.is_set():
                ending.interrupted = True
                return
            if ending.exited_at is None and process.poll() is not None:
                ending.exited_at = now
            if ending.exited_at is not None and now - ending.exited_at > EXITED_GRACE_S:
                return
    except KeyboardInterrupt:
        ending.interrupted = ending.ctrl_c = True


def _companions(plan: RunPlan) -> set[int]:
    """The processes of the runs started together with this one (RunOptions.group)."""
    return marked_pids(plan.group_marker) if plan.group_marker else set()


def _stop_everything(
    plan: RunPlan,
    process: subprocess.Popen,
    tree: ProcessTree,
    output: RunOutput,
    console: SilentConsole,
    ending: Ending,
) -> None:
    """Stops what is left of the run: all of it when cut short (or failing in the loop), else
    the stragglers; then the workers on other hosts when it did not end well."""
    if ending.cut_short or (output.open_pipes and ending.exited_at is None):
        output.take_queued()  # show what arrived before the stop...
        # ...but not the tracebacks of the workers being stopped (they go to the log).
        output.transcript.stopping = True
        tree.snapshot()
        ending.stopped = 1 + len(tree.alive_descendants())
        console.line(
            f"Stopping horovodrun and the {plural(ending.stopped - 1, 'process')} it started"
            if plan.launcher == "horovodrun"
            else "Stopping the script"
        )
        ending.leftover = tree.stop()
    else:
        # Ended by itself: give stragglers a moment, then stop any that remain.
        wait_briefly(process, 10)
        if not tree.wait(2.0):
            ending.leftover = tree.stop(STOP_STAGES[1:])
    if plan.remote_hosts and (ending.cut_short or process.returncode != 0):
        # The workers over there outlive horovodrun's ssh clients: stop them too.
        console.line(f"Stopping what is left on {', '.join(plan.remote_hosts)}")
        ending.left_remote = stop_remote(
            list(plan.remote_hosts), plan.marker, plan.ssh, plan.ssh_env
        )
    wait_briefly(process, 5)


def _result(
    plan: RunPlan,
    process: subprocess.Popen,
    transcript: Transcript,
    ending: Ending,
    monitor: ContentionMonitor,
    started: float,
    started_at: float,
) -> RunResult:
    failed_rank = None if ending.cut_short else transcript.failed_rank()
    if ending.timed_out:
        error = f"stopped after the timeout of {plan.timeout:g} s"
    elif ending.interrupted or process.returncode == 0:
        error = ""
    else:
        error = failure_text(transcript, failed_rank, plan.unprefixed_rank)
    return RunResult(
        exit_code=process.returncode,
        wall_seconds=round(time.monotonic() - started, 1),
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
        interrupted=ending.interrupted,
        timed_out=ending.timed_out,
        leftover_pids=ending.leftover,
        leftover_remote=ending.left_remote,
        stopped_processes=ending.stopped,
        output="\n".join(transcript.shown),
        started_at=started_at,
        ended_at=time.time(),
        busy_others=monitor.findings(),
        others_mean_cores=round(monitor.others_mean_share, 2),
        timeline_path=plan.timeline_path,
    )


def _warn_leftovers(plan: RunPlan, result: RunResult, console: SilentConsole) -> None:
    if result.leftover_pids:
        console.line(f"WARNING: processes {result.leftover_pids} did not stop; kill them by hand")
    for host, problem in result.leftover_remote.items():
        console.line(
            f"WARNING: could not stop the run's processes on {host} ({problem}); on {host}, "
            f"stop the processes whose environment has {'='.join(plan.marker)}"
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
    log_file = _open_log(plan)
    console.start(plan)
    started, started_at = time.monotonic(), time.time()
    monitor = ContentionMonitor()
    write_record(plan, started_at, monitor)
    process = _start(plan)
    tree = ProcessTree(process, plan.marker)
    output = RunOutput(plan, process, log_file, transcript, console)
    ending = Ending()
    try:
        _supervise(plan, process, tree, output, monitor, console, stop, started, ending)
    finally:
        with interrupts_deferred():
            _stop_everything(plan, process, tree, output, console, ending)
            output.finish()  # show what arrived before the end
            log_file.close()
    result = _result(plan, process, transcript, ending, monitor, started, started_at)
    write_record(plan, started_at, monitor, result)
    console.finish(result, transcript)
    _warn_leftovers(plan, result, console)
    return result, ending.ctrl_c

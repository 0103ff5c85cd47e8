"""Execute: run a plan to its end, showing its output live, and stop every process it started."""

from __future__ import annotations

import os
import queue
import subprocess
import threading
import time
from datetime import datetime

from workbook.runner.display import SilentConsole, status_text
from workbook.runner.failure import failure_text
from workbook.runner.hosts import ensure_reachable, remote_hosts
from workbook.runner.layout import plural
from workbook.runner.output import OutputParser
from workbook.runner.plan import RunPlan
from workbook.runner.processes import STOP_STAGES, ProcessTree, sigint_deferred, wait_briefly
from workbook.runner.result import RunResult
from workbook.runner.transcript import Transcript

SNAPSHOT_INTERVAL_S = 0.5  # how often the process tree is recorded (to find orphans later)

_EOF = object()


def transcript_for(plan: RunPlan) -> Transcript:
    """An empty transcript; lines get `[rank N]` labels when horovodrun runs the workers."""
    return Transcript(label_ranks=plan.launcher == "horovodrun")


def ensure_hosts_reachable(plan: RunPlan, say=None) -> None:
    """Before a run on other machines: HostsUnreachable, at once, unless ssh reaches them all."""
    if plan.launcher == "horovodrun":
        ensure_reachable(remote_hosts(plan.hosts), plan.ssh, plan.env, say)


def _pump(pipe, log_file, chunks: queue.Queue) -> None:
    """Copies the child's output to the raw log (at once) and to the queue (for display)."""
    try:
        while data := os.read(pipe.fileno(), 65536):
            log_file.write(data)
            log_file.flush()
            chunks.put(data)
    except (OSError, ValueError):  # the pipe or the log closed under us at the very end
        pass
    finally:
        chunks.put(_EOF)


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

    started = time.monotonic()
    process = subprocess.Popen(
        plan.argv,
        cwd=plan.cwd,
        env=plan.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        # Its own session: Ctrl-C in a terminal reaches only us, and we stop it all in order.
        start_new_session=True,
    )
    tree = ProcessTree(process)
    chunks: queue.Queue = queue.Queue()
    reader = threading.Thread(
        target=_pump,
        args=(process.stdout, log_file, chunks),
        daemon=True,
        name=f"runner-output-{plan.run_name}",
    )
    reader.start()

    def show(events: list) -> None:
        for event in events:
            for line in transcript.add(event):
                console.line(line)

    def show_queued() -> None:
        """Shows the output the reader has queued and the loop has not taken yet."""
        while True:
            try:
                item = chunks.get_nowait()
            except queue.Empty:
                return
            if item is not _EOF:
                show(parser.feed(item))

    interrupted = timed_out = ctrl_c = False
    leftover: list[int] = []
    stopped = 0
    eof = False
    exited_at = None
    try:
        last_snapshot = 0.0
        while not eof:
            try:
                item = chunks.get(timeout=0.25)
            except queue.Empty:
                item = None
            if item is _EOF:
                eof = True
            elif item is not None:
                show(parser.feed(item))
            now = time.monotonic()
            if now - last_snapshot > SNAPSHOT_INTERVAL_S:
                tree.snapshot()
                last_snapshot = now
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
            if interrupted or timed_out or (not eof and exited_at is None):
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
            wait_briefly(process, 5)
            reader.join(timeout=5)
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
        stopped_processes=stopped,
        output="\n".join(transcript.shown),
    )
    console.finish(result, transcript)
    if leftover:
        console.line(f"WARNING: processes {leftover} did not stop; kill them by hand")
    return result, ctrl_c

"""Every process a test starts is found and stopped afterwards, wherever it went.

Each test runs with a marker variable in its environment. Every process it starts inherits it,
including the ones that leave the test's process tree: horovodrun's workers (setsid), and
OpenMPI's `orted`, which is re-parented to init and ignores SIGTERM. After the test, whatever
still carries the marker is shown (pid, parent, session, command) and killed with SIGKILL.

A test that runs a small program the way the benchmarks run theirs plans it with the runner
(python_c_plan) and hands it to bench.processes.run_timed: one launcher for everything. A test
that runs one of the workbook's scripts starts it as the notebook's runner cell does
(script_plan, run_script): the runner's plan_run and execute, with a time limit, and every
process stopped afterwards.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid

import psutil

from workbook.paths import REPO

TEST_MARKER = "WORKBOOK_TEST_ID"
SESSION_MARKER = "WORKBOOK_TEST_SESSION"


def new_marker() -> str:
    return uuid.uuid4().hex


def marked(variable: str, value: str) -> list[psutil.Process]:
    """The live processes (not this one) whose environment has variable=value."""
    found = []
    for process in psutil.process_iter():
        if process.pid == os.getpid():
            continue
        try:
            if (
                process.status() != psutil.STATUS_ZOMBIE
                and process.environ().get(variable) == value
            ):
                found.append(process)
        except psutil.Error:
            pass
    return found


def describe(processes: list[psutil.Process]) -> str:
    lines = []
    for process in processes:
        try:
            lines.append(
                f"  pid {process.pid} ppid {process.ppid()} session {os.getsid(process.pid)}: "
                + " ".join(process.cmdline())[:200]
            )
        except (psutil.Error, OSError):
            lines.append(f"  pid {process.pid} (gone)")
    return "\n".join(lines)


def stop_marked(variable: str, value: str, why: str, grace: float = 2.0) -> list[int]:
    """Waits `grace` seconds for the marked processes to end, then shows and kills the rest."""
    deadline = time.monotonic() + grace
    left = marked(variable, value)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = marked(variable, value)
    if not left:
        return []
    print(
        f"\n{why}: killing {len(left)} process(es) left behind:\n{describe(left)}", file=sys.stderr
    )
    for process in left:
        try:
            process.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(left, timeout=5)
    return [process.pid for process in left]


def kill_group(process, wait_seconds: float = 30) -> None:
    """Kills a process started with start_new_session=True: its group and every descendant
    (horovodrun's workers have sessions of their own), then waits for them. The runner's own
    clean-up does it (workbook.runner.processes.ProcessTree), with SIGKILL at once."""
    from workbook.runner.processes import ProcessTree

    tree = ProcessTree(process)
    tree.snapshot()  # the descendants, before the root's death orphans them
    tree.stop(((signal.SIGKILL, wait_seconds),))
    process.wait(timeout=wait_seconds)


def python_c_plan(
    code: str, logs_root, timeout: float | None = None, env: dict | None = None, **options
):
    """The runner's plan of `python -c code` as one plain process (no horovodrun), its log in
    logs_root/run/horovodrun.log: how the tests run a small program the way the benchmarks do."""
    from workbook.runner import RunOptions, plan_run

    return plan_run(
        [sys.executable, "-c", code],
        options=RunOptions(
            np=1,
            launcher="python",
            log_dir=False,
            logs_root=logs_root,
            run_name="run",
            timeout=timeout,
            env=env,
            **options,
        ),
    )


def script_plan(
    command: list,
    logs_root,
    *,
    timeout: float,
    np: int = 2,
    launcher: str = "horovodrun",
    **options,
):
    """The runner's plan of one of the workbook's scripts (`command`: the script and its
    arguments), as the runner cell starts it: `np` workers under horovodrun sharing this
    machine's cores (launcher="python": one plain process), stopped after `timeout` seconds.
    The runner adds no --log-dir; its log, horovodrun.log, goes into the script's --log-dir
    if the command gives one, else into logs_root/run."""
    from workbook.runner import RunOptions, plan_run

    return plan_run(
        [str(part) for part in command],
        options=RunOptions(
            np=np,
            launcher=launcher,
            log_dir=False,
            logs_root=logs_root,
            run_name="run",
            timeout=timeout,
            **options,
        ),
    )


def raw_output(plan) -> str:
    """What the run printed, as the runner's log keeps it (horovodrun's `[rank]<stdout>:`
    prefixes included), without the log's header (`# command`, which may span lines, as
    `python -c` code does, `# layout`, `# started ...`)."""
    text = plan.log_path.read_text(errors="replace")
    header_end = re.search(r"^# started [^\n]*\n", text, re.MULTILINE)
    return text[header_end.end() :] if header_end else ""


def run_script(command: list, logs_root, *, timeout: float, **options):
    """Runs script_plan(...) to its end with the runner's execute, showing nothing; returns
    (the runner's RunResult, its output): under horovodrun, raw_output (one pipe, every line
    with horovodrun's prefix); as one plain process, the lines the runner shows, each pipe's
    lines whole (its log has the two pipes' pieces in the order they came). A run that
    outlives `timeout` fails the test with the end of its output (the runner has stopped all
    its processes by then)."""
    import pytest

    from workbook.runner.display import SilentConsole
    from workbook.runner.execute import execute

    plan = script_plan(command, logs_root, timeout=timeout, **options)
    result, ctrl_c = execute(plan, SilentConsole())
    if ctrl_c:
        raise KeyboardInterrupt(f"{plan.display_command} interrupted")
    output = raw_output(plan) if plan.launcher == "horovodrun" else result.output
    if result.timed_out:
        pytest.fail(f"timed out after {timeout} s: {plan.display_command}\n{output[-5000:]}")
    return result, output


def plain_shell(command: str, timeout: float) -> subprocess.CompletedProcess:
    """`sh -c command` with nothing but a minimal PATH and HOME (and the tests' process markers,
    so that whatever it leaves behind is found and killed)."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }
    for marker in (TEST_MARKER, SESSION_MARKER):
        if marker in os.environ:
            env[marker] = os.environ[marker]
    return subprocess.run(
        ["sh", "-c", command],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,
        cwd=REPO,
    )

"""The foreground run: horovodrun() in a notebook cell, and the last result it left behind."""

from __future__ import annotations

from pathlib import Path

from workbook.paths import LOGS_DIR
from workbook.runner.background import running_in_background
from workbook.runner.display import console_for
from workbook.runner.execute import ensure_hosts_reachable, execute
from workbook.runner.plan import plan_run
from workbook.runner.result import RunResult

# The result of the last foreground run, also when it was interrupted. The package reads it
# from here on every access (`workbook.runner.last_result`), so it is always the current one.
last_result: RunResult | None = None


def horovodrun(
    command: str | list[str],
    np: int | str = "auto",
    *,
    timeout: float | None = None,
    run_name: str | None = None,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    log_dir: str | Path | bool | None = None,
    logs_root: str | Path = LOGS_DIR,
    quiet: bool = False,
) -> RunResult:
    """Runs `horovodrun [options] script [args]` and shows its output live; returns a RunResult.

    command: `"fashion_mnist.py --epochs 3"`, optionally with horovodrun options in front
        (`"-H host1:4,host2:4 fashion_mnist.py"`); a `-np` there wins over `np`.
    np: "auto" (one worker per GPU, else 2 CPU workers sharing the cores) or a number.
    timeout: seconds, after which every worker is stopped (the result has timed_out=True).
    run_name: the folder under logs_root for the script's --log-dir and horovodrun.log;
        default `<script>-np<N>-<HHMM>`. A script that takes --log-dir and got none gets
        `--log-dir <logs_root>/<run_name>`, so TensorBoard shows the runs side by side.
        Reuse a run_name to let the script resume from that run's checkpoints.
    log_dir: False to never add --log-dir, or a folder to use instead of logs_root/run_name.

    Interrupting the cell stops all workers, then raises KeyboardInterrupt; the partial
    result is in `workbook.runner.last_result`.
    """
    global last_result
    plan = plan_run(
        command,
        np,
        run_name=run_name,
        timeout=timeout,
        env=env,
        cwd=cwd,
        log_dir=log_dir,
        logs_root=logs_root,
    )
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

"""The plan: everything about a run decided before anything starts (command, env, layout, logs)."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from workbook.paths import LOGS_DIR
from workbook.runner.command import (
    CONTROLLER_FLAGS,
    HOSTFILE_OPTIONS,
    HOSTS_OPTIONS,
    NP_OPTIONS,
    hosts_are_local,
    hosts_of_hostfile,
    option_value,
    slots_of_hosts,
    split_horovodrun_args,
    without_option,
)
from workbook.runner.hosts import (
    REMOTE_START_TIMEOUT_S,
    START_TIMEOUT_OPTIONS,
    SshSettings,
    ssh_settings,
)
from workbook.runner.layout import (
    Layout,
    auto_layout,
    explicit_layout,
    usable_cores,
    visible_gpus,
)

RAW_LOG_NAME = "horovodrun.log"


@dataclass
class RunPlan:
    argv: list[str]
    display_command: str  # argv as a person would type it
    env: dict[str, str]
    cwd: Path
    layout: Layout
    np: int
    hosts: str
    run_name: str
    run_dir: Path  # where horovodrun.log goes (the script's --log-dir when it has one)
    tensorboard_dir: Path | None  # the script's --log-dir, if any
    timeout: float | None
    launcher: str  # "horovodrun" or "python" (one process, no Horovod launcher)
    ssh: SshSettings = SshSettings()  # the -p/-i options horovodrun's ssh calls get

    @property
    def log_path(self) -> Path:
        return self.run_dir / RAW_LOG_NAME

    @property
    def unprefixed_rank(self) -> int | None:
        """Whose are output lines without a rank prefix: horovodrun's (None), or the script's."""
        return None if self.launcher == "horovodrun" else 0


def _horovodrun_executable() -> str:
    beside = Path(sys.executable).with_name("horovodrun")
    found = str(beside) if beside.exists() else shutil.which("horovodrun")
    if not found:
        raise FileNotFoundError(
            "horovodrun is not installed in this environment "
            f"({Path(sys.executable).parent}); run `make env`"
        )
    return found


def _default_run_name(stem: str, workers: int, logs_root: Path) -> str:
    name = f"{stem}-np{workers}-{datetime.now():%H%M}"
    # A new name per run: reusing one would make the script resume from its checkpoints.
    candidate, suffix = name, 2
    while (logs_root / candidate).exists():
        candidate, suffix = f"{name}-{suffix}", suffix + 1
    return candidate


def _shown_path(path: str | Path, cwd: Path) -> str:
    relative = os.path.relpath(path, cwd)
    return str(path) if relative.startswith("..") else relative


def _has_log_dir(args: list[str]) -> str | None:
    """The script's --log-dir: the last one given (`--log-dir X` or `--log-dir=X`), as argparse."""
    return option_value(args, ("--log-dir",))


def plan_run(
    command: str | list[str],
    np: int | str = "auto",
    *,
    run_name: str | None = None,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    log_dir: str | Path | bool | None = None,
    logs_root: str | Path = LOGS_DIR,
    launcher: str = "horovodrun",
    cores: int | None = None,
    gpus: int | None = None,
) -> RunPlan:
    """Decides the command line, environment, layout and log places of one run."""
    tokens = shlex.split(command) if isinstance(command, str) else [str(t) for t in command]
    options, script_and_args = split_horovodrun_args(tokens)
    if not script_and_args:
        raise ValueError(f"no script to run in {command!r}")
    cwd = Path(cwd or os.getcwd()).resolve()
    logs_root = Path(logs_root).resolve()
    np = option_value(options, NP_OPTIONS) or np
    options = without_option(options, NP_OPTIONS)
    cores = usable_cores() if cores is None else cores

    hosts = option_value(options, HOSTS_OPTIONS)
    hostfile = option_value(options, HOSTFILE_OPTIONS)
    if hostfile:
        hosts = hosts_of_hostfile(cwd / hostfile)
    remote = hosts is not None and not hosts_are_local(hosts)
    if launcher == "python":
        if options:
            raise ValueError(f"horovodrun options {options} need launcher='horovodrun'")
        if str(np) not in ("auto", "1"):
            raise ValueError("launcher='python' runs one process: use np=1")
        layout = Layout(workers=1, threads=None, cores=cores)
    elif str(np) == "auto":
        if hosts is not None:
            layout = explicit_layout(slots_of_hosts(hosts), cores, 0, hosts if remote else None)
        else:
            layout = auto_layout(cores, visible_gpus() if gpus is None else gpus)
    else:
        workers = int(np)
        if workers < 1:
            raise ValueError(f"-np must be at least 1, not {np}")
        layout = explicit_layout(
            workers, cores, visible_gpus() if gpus is None else gpus, hosts if remote else None
        )

    # The script: a .py file runs with this kernel's Python (the environment with Horovod).
    program, *script_args = script_and_args
    if program in ("python", "python3") and script_args and script_args[0].endswith(".py"):
        program, *script_args = script_args
    script_path = (cwd / program).resolve() if program.endswith(".py") else None
    if script_path is not None and not script_path.is_file():
        raise FileNotFoundError(f"no script {script_path}")
    stem = Path(program).stem if script_path is not None else Path(program).name

    run_name = run_name or _default_run_name(stem, layout.workers, logs_root)
    given_log_dir = _has_log_dir(script_args)
    if given_log_dir is not None:
        tensorboard_dir = (cwd / given_log_dir).resolve()
    elif log_dir is False:
        tensorboard_dir = None
    elif log_dir not in (None, True):
        tensorboard_dir = Path(log_dir).resolve()
    elif script_path is not None and "--log-dir" in script_path.read_text(errors="replace"):
        tensorboard_dir = logs_root / run_name  # the script takes --log-dir: give it one
    elif log_dir is True:
        tensorboard_dir = logs_root / run_name
    else:
        tensorboard_dir = None
    if tensorboard_dir is not None and given_log_dir is None:
        script_args = [*script_args, "--log-dir", str(tensorboard_dir)]
    run_dir = tensorboard_dir or logs_root / run_name

    if script_path is not None:
        worker_command = [sys.executable, str(script_path), *script_args]
        shown_worker = ["python", program]
    else:
        worker_command = [program, *script_args]
        shown_worker = [program]
    shown_worker += [
        _shown_path(a, cwd) if tensorboard_dir and a == str(tensorboard_dir) else a
        for a in script_args
    ]

    if launcher == "python":
        argv, shown = worker_command, shown_worker
    elif launcher == "horovodrun":
        controller = [] if any(f in options for f in CONTROLLER_FLAGS) else ["--gloo"]
        launch = [*controller, "-np", str(layout.workers), *options]
        given_timeout = option_value(options, START_TIMEOUT_OPTIONS) or {
            **os.environ,
            **(env or {}),
        }.get("HOROVOD_START_TIMEOUT")
        if remote and not given_timeout:
            # Other machines: horovodrun's start-up checks get a bound the command shows.
            launch += [START_TIMEOUT_OPTIONS[0], str(REMOTE_START_TIMEOUT_S)]
        argv = [_horovodrun_executable(), *launch, *worker_command]
        shown = ["horovodrun", *launch, *shown_worker]
    else:
        raise ValueError(f"launcher must be 'horovodrun' or 'python', not {launcher!r}")

    run_env = dict(os.environ)
    for key, value in layout.env().items():
        run_env.setdefault(key, value)  # a thread count the user set wins
    # Output line by line as it happens, not in blocks when a buffer fills.
    run_env["PYTHONUNBUFFERED"] = "1"
    bin_dir = str(Path(sys.executable).parent)
    run_env["PATH"] = os.pathsep.join([bin_dir, run_env.get("PATH", "")])
    run_env.update(env or {})

    return RunPlan(
        argv=argv,
        display_command=shlex.join(shown),
        env=run_env,
        cwd=cwd,
        layout=layout,
        np=layout.workers,
        hosts=hosts or f"localhost:{layout.workers}",
        run_name=run_name,
        run_dir=run_dir,
        tensorboard_dir=tensorboard_dir,
        timeout=timeout,
        launcher=launcher,
        ssh=ssh_settings(options),
    )

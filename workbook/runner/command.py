"""Command: everything about a run decided before anything starts.

- RunOptions: how to start a run, apart from its command (one object, handed down as it is);
- the pieces of a plan, one decision each: the script (Script), the hosts and whether -np fits
  them, the run's name and --log-dir, the worker's command line, Horovod's timeline,
  horovodrun's command line, the environment (the layout comes from layout.py);
- plan_run(): those pieces put together as a RunPlan.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from workbook.facts import usable_cores, with_safe_env
from workbook.paths import LOGS_DIR
from workbook.runner.horovodrun_cli import (
    CONTROLLER_FLAGS,
    ELASTIC_OPTIONS,
    HOSTFILE_OPTIONS,
    HOSTS_OPTIONS,
    NP_OPTIONS,
    SSH_IDENTITY_OPTIONS,
    SSH_PORT_OPTIONS,
    START_TIMEOUT_OPTIONS,
    TIMELINE_OPTIONS,
    has_option,
    option_value,
    split_horovodrun_args,
    without_option,
)
from workbook.runner.hosts import (
    SshSettings,
    hosts_for_workers,
    hosts_of_hostfile,
    remote_hosts,
    slots_of_hosts,
)
from workbook.runner.layout import HIDE_GPUS, Layout, choose_layout, without_threads

# ---------------------------------------------------------------------------------------------
# horovodrun's command line
# ---------------------------------------------------------------------------------------------

# horovodrun's limit for its start-up checks on the hosts (ssh, the interface search); its
# default is 30 s, or $HOROVOD_START_TIMEOUT. For remote hosts the runner passes one unless one
# is given, so the command shows the bound, with room for hosts that start Python slowly.
REMOTE_START_TIMEOUT_S = 60


def ssh_settings(options: list[str]) -> SshSettings:
    """The ssh port and key given to horovodrun, if any (`-p 2222`, `--ssh-identity-file=k`)."""
    return SshSettings(
        port=option_value(options, SSH_PORT_OPTIONS),
        identity_file=option_value(options, SSH_IDENTITY_OPTIONS),
    )


# ---------------------------------------------------------------------------------------------
# The plan
# ---------------------------------------------------------------------------------------------

RAW_LOG_NAME = "horovodrun.log"
TIMELINE_NAME = "timeline.json"  # Horovod's timeline of a run with timeline=True, in its run_dir
# What the runner records of a run next to its log: when it started and ended, its layout, and
# the other processes that were busy meanwhile (workbook.runner.record.RunRecord, its format).
RUN_RECORD_NAME = "run.json"
# The launcher that pins each worker of a pinned layout to its own cores (run by its path).
PIN_LAUNCHER = Path(__file__).with_name("pin_cores.py")
# Every process of a run carries this variable with the run's own id, so that the clean-up
# finds them all, also those that left the process tree (OpenMPI's orted daemonizes) and those
# on other hosts (horovodrun exports the environment on its ssh command line).
RUN_MARKER = "WORKBOOK_RUN_ID"
# ...and the processes of runs started together on purpose (RunOptions.group) carry this one,
# with the group's name, so that each run's contention leaves the others out.
GROUP_MARKER = "WORKBOOK_RUN_GROUP"


@dataclass(frozen=True)
class RunOptions:
    """How to start one run, apart from its command: built once (from the keywords of
    horovodrun(), start_in_background() or plan_run()) and handed down as it is.

    np: "auto" (one worker per GPU on 2 or more, else 2 CPU workers sharing the cores, a
        single GPU hidden) or a number; a `-np` in the command wins.
    run_name: the folder under logs_root for the script's --log-dir and horovodrun.log;
        default `<script>-np<N>-<HHMM>`. A script that takes --log-dir and got none gets
        `--log-dir <logs_root>/<run_name>`, so TensorBoard shows the runs side by side.
        Reuse a run_name to let the script resume from that run's checkpoints.
    timeout: seconds, after which every worker is stopped (the result has timed_out=True).
    env: variables added to the run's environment (they win over the runner's own).
    cwd: the folder the script runs in (default: the current one).
    log_dir: False to never add --log-dir, True to always add it, or a folder to use instead
        of logs_root/run_name.
    launcher: "horovodrun", or "python": the script as one plain process (np=1), for a
        baseline without Horovod's launcher.
    cores, gpus: what this machine has for the run (default: what this process may use).
    share: "auto" gives each worker exactly what one worker of np="auto" gets, its threads and
        its cores (pinned), whatever np is: `np=1, share="auto"` is the reference that N
        workers are compared with, the CPU analogue of 1 GPU against N. A number: that many
        cores per worker (see share_layout). (np="auto" pins its workers to their cores anyway.)
    timeline: True records Horovod's timeline in <run dir>/timeline.json (or give a file):
        every allreduce of every step, with the time each rank asked for it (the runner turns
        Horovod's response cache off for this, HOROVOD_CACHE_CAPACITY=0, or only the first
        step would show the ranks). For short runs: it grows by tens of KB per step.
    tf_threads: False leaves TensorFlow's own thread counts (no TF_NUM_*_THREADS), as a plain
        `horovodrun` does; the benchmarks measure that too.
    group: a name for runs started together on purpose (the benchmarks' side-by-side
        processes): their processes are not counted as each other's contention.
    sandbox: None, or an object whose wrap(argv, env, cwd=, writable=) returns the command that
        runs argv (the launcher and all it starts) in a sandbox that can read `cwd` and write
        the run's folder (grader.running.sandbox.Sandbox).
    """

    np: int | str = "auto"
    run_name: str | None = None
    timeout: float | None = None
    env: Mapping[str, str] | None = None
    cwd: str | Path | None = None
    log_dir: str | Path | bool | None = None
    logs_root: str | Path = LOGS_DIR
    launcher: str = "horovodrun"
    cores: int | None = None
    gpus: int | None = None
    share: int | str | None = None
    timeline: bool | str | Path = False
    tf_threads: bool = True
    group: str | None = None
    sandbox: object | None = None

    @classmethod
    def of(cls, options: RunOptions | None = None, **fields) -> RunOptions:
        """`options` with `fields` replaced (np=None: not given), or new options of `fields`."""
        if fields.get("np", "") is None:
            del fields["np"]
        return replace(options, **fields) if options is not None else cls(**fields)


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
    remote_hosts: tuple[str, ...] = ()  # the hosts horovodrun reaches with ssh
    timeline_path: Path | None = None  # where Horovod writes its timeline, if it does

    @property
    def log_path(self) -> Path:
        return self.run_dir / RAW_LOG_NAME

    @property
    def marker(self) -> tuple[str, str]:
        """(name, value) of the environment variable every process of this run carries."""
        return RUN_MARKER, self.env[RUN_MARKER]

    @property
    def group_marker(self) -> tuple[str, str] | None:
        """(name, value) that the processes of this run's group carry, if it has one."""
        return (GROUP_MARKER, self.env[GROUP_MARKER]) if GROUP_MARKER in self.env else None

    @property
    def ssh_env(self) -> dict[str, str]:
        """The run's environment for the runner's own ssh calls, without the run's marker: the
        clean-up must not count them among the run's processes."""
        return {key: value for key, value in self.env.items() if key != RUN_MARKER}

    @property
    def unprefixed_rank(self) -> int | None:
        """Whose are output lines without a rank prefix: horovodrun's (None), or the script's."""
        return None if self.launcher == "horovodrun" else 0


# ---------------------------------------------------------------------------------------------
# The pieces of a plan, one decision each
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Script:
    """What the workers run: a .py file (with this kernel's Python) or another program."""

    program: str  # as given: `fashion_mnist.py`, or a program's name
    path: Path | None  # the .py file; None for another program
    args: tuple[str, ...]

    @classmethod
    def read(cls, words: list[str], cwd: Path) -> Script:
        """`script.py args`, also `python script.py args`; FileNotFoundError for a missing .py."""
        program, *args = words
        if program in ("python", "python3") and args and args[0].endswith(".py"):
            program, *args = args
        path = (cwd / program).resolve() if program.endswith(".py") else None
        if path is not None and not path.is_file():
            raise FileNotFoundError(f"no script {path}")
        return cls(program, path, tuple(args))

    @property
    def given_log_dir(self) -> str | None:
        """The script's own --log-dir argument (the last one, as argparse reads them)."""
        return option_value(list(self.args), ("--log-dir",))

    @property
    def stem(self) -> str:
        return Path(self.program).stem if self.path is not None else Path(self.program).name

    def takes_log_dir(self) -> bool:
        return self.path is not None and "--log-dir" in self.path.read_text(errors="replace")


def split_command(command: str | list[str]) -> tuple[list[str], list[str]]:
    """(horovodrun's options, the script and its arguments); ValueError without a script."""
    tokens = shlex.split(command) if isinstance(command, str) else [str(t) for t in command]
    launch_options, script_and_args = split_horovodrun_args(tokens)
    if not script_and_args:
        raise ValueError(f"no script to run in {command!r}")
    return launch_options, script_and_args


def given_hosts(launch_options: list[str], cwd: Path) -> str | None:
    """The hosts of -H, or of a -hostfile (read as horovodrun reads it); None: this machine."""
    hostfile = option_value(launch_options, HOSTFILE_OPTIONS)
    if hostfile:
        return hosts_of_hostfile(cwd / hostfile)
    return option_value(launch_options, HOSTS_OPTIONS)


def check_workers_fit(workers: int, hosts: str, options: list[str]) -> None:
    """-np against the slots of -H: horovodrun's own errors come late, or not at all."""
    if has_option(options, ELASTIC_OPTIONS):
        return  # elastic runs grow and shrink between --min-np and --max-np
    slots = slots_of_hosts(hosts)
    if workers > slots:
        raise ValueError(
            f"-np {workers} asks for more workers than the {slots} slots of -H {hosts}"
        )
    gloo = not has_option(options, ("--mpi", "--jsrun"))
    if gloo and workers < slots:
        # horovod/runner/gloo_run.py asks for an assignment of every slot (no maximum), so
        # `-np 1 -H localhost:2` starts 2 workers; mpirun starts -np of them.
        raise ValueError(
            f"-np {workers} with -H {hosts} would start {slots} workers: horovodrun 0.28.1 "
            f"(Gloo) starts one on every slot of -H, whatever -np says. Give -H only the slots "
            f"to use: -np {workers} -H {hosts_for_workers(hosts, workers)}"
        )


def default_run_name(stem: str, workers: int, logs_root: Path) -> str:
    name = f"{stem}-np{workers}-{datetime.now():%H%M}"
    # A new name per run: reusing one would make the script resume from its checkpoints.
    candidate, suffix = name, 2
    while (logs_root / candidate).exists():
        candidate, suffix = f"{name}-{suffix}", suffix + 1
    return candidate


def tensorboard_dir_for(script: Script, log_dir, default: Path, cwd: Path) -> Path | None:
    """The script's --log-dir: its own, else `log_dir` (a folder, or True for `default`), else
    `default` when the script takes --log-dir; None when it gets none (log_dir False)."""
    if script.given_log_dir is not None:
        return (cwd / script.given_log_dir).resolve()
    if log_dir is False:
        return None
    if log_dir not in (None, True):
        return Path(log_dir).resolve()
    return default if log_dir is True or script.takes_log_dir() else None


def _shown_path(path: str | Path, cwd: Path) -> str:
    relative = os.path.relpath(path, cwd)
    return str(path) if relative.startswith("..") else relative


def worker_command(
    layout: Layout, script: Script, cwd: Path, tensorboard_dir: Path | None
) -> tuple[list[str], list[str]]:
    """(argv, as shown) of one worker: the script, behind the pinning launcher when pinned."""
    args = list(script.args)
    if layout.pinned:
        pin = [str(PIN_LAUNCHER), str(layout.threads)]
        argv = [sys.executable, *pin, str(script.path), *args]
        # From the workbook's folders (notebooks/), the path a learner could type there.
        inside = cwd.is_relative_to(PIN_LAUNCHER.parents[2])
        shown_pin = os.path.relpath(PIN_LAUNCHER, cwd) if inside else str(PIN_LAUNCHER)
        shown = ["python", shown_pin, pin[1], script.program]
    elif script.path is not None:
        argv, shown = [sys.executable, str(script.path), *args], ["python", script.program]
    else:
        argv, shown = [script.program, *args], [script.program]
    shown += [
        _shown_path(a, cwd) if tensorboard_dir and a == str(tensorboard_dir) else a for a in args
    ]
    return argv, shown


def timeline_of(
    launch_options: list[str], options: RunOptions, run_dir: Path, cwd: Path
) -> tuple[Path | None, list[str]]:
    """(where Horovod writes its timeline, horovodrun's options asking for it)."""
    given = option_value(launch_options, TIMELINE_OPTIONS)
    if given:
        return (cwd / given).resolve(), launch_options
    if not options.timeline:
        return None, launch_options
    if options.launcher != "horovodrun":
        raise ValueError("timeline= records Horovod's timeline: it needs launcher='horovodrun'")
    timeline = options.timeline
    path = run_dir / TIMELINE_NAME if timeline is True else Path(timeline).resolve()
    return path, [*launch_options, TIMELINE_OPTIONS[0], str(path)]


# horovodrun itself, through workbook/runner/launcher.py, which answers its Gloo/MPI check.
HOROVODRUN = (sys.executable, "-m", "workbook.runner.launcher")


def _horovodrun_executable() -> str:
    beside = Path(sys.executable).with_name("horovodrun")
    found = str(beside) if beside.exists() else shutil.which("horovodrun")
    if not found:
        raise FileNotFoundError(
            "horovodrun is not installed in this environment "
            f"({Path(sys.executable).parent}); run `make env`"
        )
    return found


def launch_command(
    options: RunOptions,
    layout: Layout,
    launch_options: list[str],
    worker: tuple[list[str], list[str]],
    remote: bool,
    shown_paths: dict,
) -> tuple[list[str], list[str]]:
    """(argv, as shown) of the run: horovodrun with its options before the worker's command,
    or the worker's command alone (launcher="python"). `shown_paths`: paths to show short."""
    worker_argv, shown_worker = worker
    if options.launcher == "python":
        return worker_argv, shown_worker
    if options.launcher != "horovodrun":
        raise ValueError(f"launcher must be 'horovodrun' or 'python', not {options.launcher!r}")
    controller = [] if has_option(launch_options, CONTROLLER_FLAGS) else ["--gloo"]
    launch = [*controller, "-np", str(layout.workers), *launch_options]
    given_timeout = option_value(launch_options, START_TIMEOUT_OPTIONS) or {
        **os.environ,
        **(options.env or {}),
    }.get("HOROVOD_START_TIMEOUT")
    if remote and not given_timeout:
        # Other machines: horovodrun's start-up checks get a bound the command shows.
        launch += [START_TIMEOUT_OPTIONS[0], str(REMOTE_START_TIMEOUT_S)]
    shown = [shown_paths.get(a, a) for a in launch]
    _horovodrun_executable()  # installed, or a clear message
    return [*HOROVODRUN, *launch, *worker_argv], ["horovodrun", *shown, *shown_worker]


def run_env(
    layout: Layout, env: Mapping[str, str] | None, timeline: bool, group: str | None = None
) -> dict[str, str]:
    """The run's environment: safe for MPI, the layout's threads, unbuffered output, this
    kernel's Python first on PATH, `env` over all that, and the run's (and its group's) marker."""
    result = with_safe_env()  # e.g. no hang in hvd.init() while TensorBoard listens
    for key, value in layout.env().items():
        result.setdefault(key, value)  # a thread count the user set wins
    if layout.hidden_gpus:  # ...but not a CUDA_VISIBLE_DEVICES that shows too few GPUs
        result[HIDE_GPUS[0]] = HIDE_GPUS[1]
    # Output line by line as it happens, not in blocks when a buffer fills.
    result["PYTHONUNBUFFERED"] = "1"
    result["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), result.get("PATH", "")])
    if timeline:
        # Without Horovod's response cache, the timeline marks when each rank asked for every
        # allreduce of every step (with it, only the first step's): who waited for whom.
        result["HOROVOD_CACHE_CAPACITY"] = "0"
    result.update(env or {})
    result[RUN_MARKER] = uuid.uuid4().hex  # hex: safe on any command line
    if group is not None:
        result[GROUP_MARKER] = group
    return result


# ---------------------------------------------------------------------------------------------
# The plan
# ---------------------------------------------------------------------------------------------


def plan_run(
    command: str | list[str],
    np: int | str | None = None,
    *,
    options: RunOptions | None = None,
    **fields,
) -> RunPlan:
    """Decides the command line, environment, layout and log places of one run.

    options: how to run it (RunOptions), or its fields as keywords (np also second); keywords
        given beside `options` replace its fields.
    """
    options = RunOptions.of(options, np=np, **fields)
    launch_options, script_and_args = split_command(command)
    cwd = Path(options.cwd or os.getcwd()).resolve()
    logs_root = Path(options.logs_root).resolve()
    np = option_value(launch_options, NP_OPTIONS) or options.np
    launch_options = without_option(launch_options, NP_OPTIONS)
    hosts = given_hosts(launch_options, cwd)
    elsewhere = tuple(remote_hosts(hosts)) if hosts is not None else ()
    layout = choose_layout(
        np,
        share=options.share,
        launcher=options.launcher,
        cores=usable_cores() if options.cores is None else options.cores,
        gpus=options.gpus,
        hosts=hosts,
        remote=hosts if elsewhere else None,
        launch_options=launch_options,
    )
    if hosts is not None and str(np) != "auto":
        check_workers_fit(layout.workers, hosts, launch_options)

    script = Script.read(script_and_args, cwd)
    run_name = options.run_name or default_run_name(script.stem, layout.workers, logs_root)
    tensorboard_dir = tensorboard_dir_for(script, options.log_dir, logs_root / run_name, cwd)
    if tensorboard_dir is not None and script.given_log_dir is None:
        script = replace(script, args=(*script.args, "--log-dir", str(tensorboard_dir)))
    run_dir = tensorboard_dir or logs_root / run_name
    if not options.tf_threads:
        layout = without_threads(layout)
    if layout.pinned and script.path is None:
        layout = replace(layout, pinned=False)  # only a Python script can be pinned from inside

    timeline_path, launch_options = timeline_of(launch_options, options, run_dir, cwd)
    worker = worker_command(layout, script, cwd, tensorboard_dir)
    shown_paths = {str(timeline_path): _shown_path(timeline_path, cwd)} if timeline_path else {}
    argv, shown = launch_command(
        options, layout, launch_options, worker, bool(elsewhere), shown_paths
    )
    env = run_env(layout, options.env, timeline_path is not None, options.group)
    if options.sandbox is not None:
        argv = options.sandbox.wrap(argv, env, cwd=cwd, writable=[run_dir])
    return RunPlan(
        argv=argv,
        display_command=shlex.join(shown),
        env=env,
        cwd=cwd,
        layout=layout,
        np=layout.workers,
        hosts=hosts or f"localhost:{layout.workers}",
        run_name=run_name,
        run_dir=run_dir,
        tensorboard_dir=tensorboard_dir,
        timeout=options.timeout,
        launcher=options.launcher,
        ssh=ssh_settings(launch_options),
        remote_hosts=elsewhere if options.launcher == "horovodrun" else (),
        timeline_path=timeline_path,
    )

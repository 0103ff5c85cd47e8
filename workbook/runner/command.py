"""Command: everything about a run decided before anything starts.

- the layout: how many workers, and how many threads each;
- horovodrun's command line: its options, then the script and the script's own arguments;
- the plan: the command, its environment, the run's name and where its logs go.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
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

# ---------------------------------------------------------------------------------------------
# Layout
# ---------------------------------------------------------------------------------------------


def visible_gpus() -> int:
    """NVIDIA GPUs the workers would see, counted without importing TensorFlow."""
    listed = None
    if shutil.which("nvidia-smi"):
        try:
            reply = subprocess.run(
                ["nvidia-smi", "-L"],
                capture_output=True,
                text=True,
                timeout=10,
                env=with_safe_env(),
            )
            if reply.returncode == 0:
                listed = sum(line.startswith("GPU ") for line in reply.stdout.splitlines())
            else:
                listed = 0  # nvidia-smi without a working driver
        except (OSError, subprocess.TimeoutExpired):
            listed = 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return listed or 0
    devices = [d for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    # `-1` (or nothing) hides all GPUs; otherwise the list limits what nvidia-smi shows.
    return len(devices) if listed is None else min(len(devices), listed)


def plural(count: int, noun: str) -> str:
    """`2 workers`, `1 thread`, `3 processes`."""
    if count == 1:
        return f"1 {noun}"
    return f"{count} {noun}es" if noun.endswith("s") else f"{count} {noun}s"


@dataclass(frozen=True)
class Layout:
    """Workers and threads for one run; `threads` None means: leave TensorFlow's default."""

    workers: int
    threads: int | None
    cores: int
    gpus: int = 0
    hosts: str | None = None  # as for horovodrun -H, when the run spans other machines
    # Each worker pinned to its own block of `threads` cores (pin_cores.py), on this machine.
    pinned: bool = False

    def env(self) -> dict[str, str]:
        """Environment variables that give each worker its share of the cores."""
        if self.threads is None:
            return {}
        return {
            "TF_NUM_INTRAOP_THREADS": str(self.threads),
            "OMP_NUM_THREADS": str(self.threads),
            # One inter-op thread: more would only compete with the other workers.
            "TF_NUM_INTEROP_THREADS": "1",
        }

    def describe(self) -> str:
        workers = plural(self.workers, "worker")
        if self.hosts is not None:
            return f"{workers} on hosts {self.hosts}"
        threads = f" x {plural(self.threads, 'thread')}" if self.threads else ""
        cores = plural(self.cores, "CPU core")
        if self.pinned and self.workers == 1:
            text = f"{workers}{threads} pinned to {self.threads} of {cores}"
        else:
            text = f"{workers}{threads} on {cores}"
        if self.pinned and self.workers > 1:
            own = "a core" if self.threads == 1 else plural(self.threads, "core")
            text += f", each pinned to {own} of its own"
        if self.gpus:
            text += f", one GPU each ({plural(self.gpus, 'GPU')} visible)"
        if not self.gpus and self.workers > self.cores:
            text += " (more workers than cores: they take turns)"
        return text


def auto_layout(cores: int, gpus: int) -> Layout:
    """`-np auto`: one worker per GPU; on CPUs 2 workers sharing the cores (1 on 1 core)."""
    cores = max(1, cores)
    if gpus > 0:
        return Layout(workers=gpus, threads=max(1, cores // gpus), cores=cores, gpus=gpus)
    # Two workers show data parallelism; more, each with a sliver of a CPU, only add overhead.
    workers = 2 if cores >= 2 else 1
    return Layout(workers=workers, threads=cores // workers, cores=cores)


def explicit_layout(workers: int, cores: int, gpus: int, hosts: str | None = None) -> Layout:
    """A given -np: on this machine, split the cores between the workers; elsewhere, don't."""
    if hosts is not None:
        return Layout(workers=workers, threads=None, cores=cores, gpus=0, hosts=hosts)
    cores = max(1, cores)
    gpus = gpus if gpus >= workers else 0
    return Layout(workers=workers, threads=max(1, cores // workers), cores=cores, gpus=gpus)


def share_layout(workers: int, share: int | str, cores: int, gpus: int) -> Layout:
    """`share`: each worker gets the cores one worker of `-np auto` gets ("auto"), or that many.

    On CPUs, a worker's share of the cores is its "device": 1 worker with one share against N
    workers is the CPU analogue of 1 GPU against N GPUs.
    """
    per_worker = auto_layout(cores, gpus).threads if share == "auto" else int(share)
    if per_worker < 1 or workers * per_worker > max(1, cores):
        raise ValueError(
            f"{plural(workers, 'worker')} x {plural(per_worker, 'core')} do not fit in the "
            f"{plural(cores, 'CPU core')} this process may use"
        )
    gpus = gpus if gpus >= workers else 0
    layout = Layout(workers=workers, threads=per_worker, cores=cores, gpus=gpus)
    return replace(layout, pinned=pins_cores(layout))


def pins_cores(layout: Layout) -> bool:
    """Whether pinning the workers of this layout changes anything: a local CPU layout whose
    workers fit on the cores, unless one worker would get them all."""
    return (
        layout.hosts is None
        and not layout.gpus
        and layout.threads is not None
        and layout.workers * layout.threads <= layout.cores
        and not (layout.workers == 1 and layout.threads >= layout.cores)
    )


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
# the other processes that were busy meanwhile (workbook.comparison reads it).
RUN_RECORD_NAME = "run.json"
# The launcher that pins each worker of a pinned layout to its own cores (run by its path).
PIN_LAUNCHER = Path(__file__).with_name("pin_cores.py")
# Every process of a run carries this variable with the run's own id, so that the clean-up
# finds them all, also those that left the process tree (OpenMPI's orted daemonizes) and those
# on other hosts (horovodrun exports the environment on its ssh command line).
RUN_MARKER = "WORKBOOK_RUN_ID"


@dataclass(frozen=True)
class RunOptions:
    """How to start one run, apart from its command: built once (from the keywords of
    horovodrun(), start_in_background() or plan_run()) and handed down as it is.

    np: "auto" (one worker per GPU, else 2 CPU workers sharing the cores) or a number; a `-np`
        in the command wins.
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
    def record_path(self) -> Path:
        return self.run_dir / RUN_RECORD_NAME

    @property
    def marker(self) -> tuple[str, str]:
        """(name, value) of the environment variable every process of this run carries."""
        return RUN_MARKER, self.env[RUN_MARKER]

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


def _check_workers_fit(workers: int, hosts: str, options: list[str]) -> None:
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
    env, launcher, share, timeline = options.env, options.launcher, options.share, options.timeline
    tokens = shlex.split(command) if isinstance(command, str) else [str(t) for t in command]
    launch_options, script_and_args = split_horovodrun_args(tokens)
    if not script_and_args:
        raise ValueError(f"no script to run in {command!r}")
    cwd = Path(options.cwd or os.getcwd()).resolve()
    logs_root = Path(options.logs_root).resolve()
    np = option_value(launch_options, NP_OPTIONS) or options.np
    launch_options = without_option(launch_options, NP_OPTIONS)
    cores = usable_cores() if options.cores is None else options.cores
    gpus, log_dir = options.gpus, options.log_dir

    hosts = option_value(launch_options, HOSTS_OPTIONS)
    hostfile = option_value(launch_options, HOSTFILE_OPTIONS)
    if hostfile:
        hosts = hosts_of_hostfile(cwd / hostfile)
    elsewhere = tuple(remote_hosts(hosts)) if hosts is not None else ()
    remote = hosts if elsewhere else None  # the layout of a run that reaches other machines
    if launcher == "python":
        if launch_options:
            raise ValueError(f"horovodrun options {launch_options} need launcher='horovodrun'")
        if str(np) not in ("auto", "1"):
            raise ValueError("launcher='python' runs one process: use np=1")
        if share is None:
            layout = Layout(workers=1, threads=None, cores=cores)
        else:
            layout = share_layout(1, share, cores, visible_gpus() if gpus is None else gpus)
    elif share is not None:
        if hosts is not None:
            raise ValueError("share= splits this machine's cores: it is for runs without -H")
        gpus = visible_gpus() if gpus is None else gpus
        workers = auto_layout(cores, gpus).workers if str(np) == "auto" else int(np)
        layout = share_layout(workers, share, cores, gpus)
    elif str(np) == "auto":
        if hosts is not None:
            layout = explicit_layout(slots_of_hosts(hosts), cores, 0, remote)
        else:
            layout = auto_layout(cores, visible_gpus() if gpus is None else gpus)
            layout = replace(layout, pinned=pins_cores(layout))
    else:
        workers = int(np)
        if workers < 1:
            raise ValueError(f"-np must be at least 1, not {np}")
        if hosts is not None:
            _check_workers_fit(workers, hosts, launch_options)
        layout = explicit_layout(workers, cores, visible_gpus() if gpus is None else gpus, remote)

    # The script: a .py file runs with this kernel's Python (the environment with Horovod).
    program, *script_args = script_and_args
    if program in ("python", "python3") and script_args and script_args[0].endswith(".py"):
        program, *script_args = script_args
    script_path = (cwd / program).resolve() if program.endswith(".py") else None
    if script_path is not None and not script_path.is_file():
        raise FileNotFoundError(f"no script {script_path}")
    stem = Path(program).stem if script_path is not None else Path(program).name

    run_name = options.run_name or _default_run_name(stem, layout.workers, logs_root)
    given_log_dir = option_value(script_args, ("--log-dir",))  # the last one, as argparse
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

    if not options.tf_threads:
        layout = replace(layout, threads=None, pinned=False)
    if layout.pinned and script_path is None:
        layout = replace(layout, pinned=False)  # only a Python script can be pinned from inside
    if layout.pinned:
        pin = [str(PIN_LAUNCHER), str(layout.threads)]
        worker_command = [sys.executable, *pin, str(script_path), *script_args]
        # From the workbook's folders (notebooks/), the path a learner could type there.
        inside = cwd.is_relative_to(PIN_LAUNCHER.parents[2])
        shown_pin = os.path.relpath(PIN_LAUNCHER, cwd) if inside else str(PIN_LAUNCHER)
        shown_worker = ["python", shown_pin, pin[1], program]
    elif script_path is not None:
        worker_command = [sys.executable, str(script_path), *script_args]
        shown_worker = ["python", program]
    else:
        worker_command = [program, *script_args]
        shown_worker = [program]
    shown_worker += [
        _shown_path(a, cwd) if tensorboard_dir and a == str(tensorboard_dir) else a
        for a in script_args
    ]

    timeline_path = None
    if option_value(launch_options, TIMELINE_OPTIONS):
        timeline_path = (cwd / option_value(launch_options, TIMELINE_OPTIONS)).resolve()
    elif timeline:
        if launcher != "horovodrun":
            raise ValueError("timeline= records Horovod's timeline: it needs launcher='horovodrun'")
        timeline_path = run_dir / TIMELINE_NAME if timeline is True else Path(timeline).resolve()
        launch_options = [*launch_options, TIMELINE_OPTIONS[0], str(timeline_path)]

    if launcher == "python":
        argv, shown = worker_command, shown_worker
    elif launcher == "horovodrun":
        controller = [] if has_option(launch_options, CONTROLLER_FLAGS) else ["--gloo"]
        launch = [*controller, "-np", str(layout.workers), *launch_options]
        given_timeout = option_value(launch_options, START_TIMEOUT_OPTIONS) or {
            **os.environ,
            **(env or {}),
        }.get("HOROVOD_START_TIMEOUT")
        if elsewhere and not given_timeout:
            # Other machines: horovodrun's start-up checks get a bound the command shows.
            launch += [START_TIMEOUT_OPTIONS[0], str(REMOTE_START_TIMEOUT_S)]
        argv = [_horovodrun_executable(), *launch, *worker_command]
        shown_launch = [
            _shown_path(a, cwd) if timeline_path and a == str(timeline_path) else a for a in launch
        ]
        shown = ["horovodrun", *shown_launch, *shown_worker]
    else:
        raise ValueError(f"launcher must be 'horovodrun' or 'python', not {launcher!r}")

    run_env = with_safe_env()  # e.g. no hang in hvd.init() while TensorBoard listens
    for key, value in layout.env().items():
        run_env.setdefault(key, value)  # a thread count the user set wins
    # Output line by line as it happens, not in blocks when a buffer fills.
    run_env["PYTHONUNBUFFERED"] = "1"
    bin_dir = str(Path(sys.executable).parent)
    run_env["PATH"] = os.pathsep.join([bin_dir, run_env.get("PATH", "")])
    if timeline_path is not None:
        # Without Horovod's response cache, the timeline marks when each rank asked for every
        # allreduce of every step (with it, only the first step's): who waited for whom.
        run_env["HOROVOD_CACHE_CAPACITY"] = "0"
    run_env.update(env or {})
    run_env[RUN_MARKER] = uuid.uuid4().hex  # hex: safe on any command line

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
        timeout=options.timeout,
        launcher=launcher,
        ssh=ssh_settings(launch_options),
        remote_hosts=elsewhere if launcher == "horovodrun" else (),
        timeline_path=timeline_path,
    )

"""Sandbox: the learner's script, run for grading, in a box it cannot get out of.

    with Sandbox() as sandbox:                      # one per run; close() cleans up
        result = run_step(12, script, sandbox=sandbox)

Sandbox.wrap(argv, env) turns the run's command (horovodrun and everything it starts) into

    sh -c 'join the run's cgroups; exec "$@"' prlimit ... -- bwrap ... --
        python box_keeper.py LIMIT setpriv ... -- argv

- bubblewrap (Debian's `bubblewrap`) builds the box: new PID, network (loopback only, which
  bwrap brings up: the workers still talk over Gloo), IPC and UTS namespaces, a new session, and
  it dies with its parent. Its first process is grader/running/box_keeper.py (root's, as root:
  the script can't kill it): it bounds the output (Limits.output_bytes, the rest counted,
  never held) and kills any process the script detaches (a daemon) at once; when horovodrun
  ends, it ends, and the PID namespace with it.
- Files: only what a run needs is there, read-only (an allow-list, `shown_paths()`): /usr,
  /etc, /sys, /opt, this Python and its environment, the runner's package (workbook/: horovodrun
  starts through python -m workbook.runner.launcher), the probe, its callbacks and the keeper
  (three files of grader/running/), and `readable` (the script's folder, its data). Nothing else of the checkout
  (solutions, rosters, courses, gradebooks, notebooks), no /home, /root, /srv, /var. `hidden`
  folders inside any of those get an empty tmpfs over them. /tmp and /dev/shm are private
  (fresh for each launch): as root, two folders of one tmpfs of Limits.tmp_bytes and
  Limits.inodes files; not root, bwrap's tmpfs of Limits.tmp_bytes each (no inode limit).
- Writable: only the `writable` folders (the probe's records, the script's --log-dir). As root
  each gets a tmpfs mounted on it on this machine (Limits.disk_bytes and Limits.inodes; nosuid,
  nodev, nosymfollow), owned by the sandbox user, kept from one launch to the next: the grader
  reads its records while the run goes on and after it with a bounded reader
  (grader/running/kept.py), never following a link. close() unmounts it: what the script wrote
  goes with it, nothing is copied back.
- Environment: an allow-list (`allowed_variable`): PATH to this Python's environment and the
  system, HOME and TMPDIR in the box, the locale, and the run's own settings (HOROVOD_*,
  WORKBOOK_*, thread counts); every other variable of the run's environment and of this
  process's is taken out.
- The script runs as the account `workbook-sandbox` (made when missing: no login shell, no
  home), with no capabilities and no_new_privs (setpriv, util-linux).
- Limits: each launch in its own cgroups (v1 memory and pids controllers, under this process's
  own; removed by end_launch() or close(), which note a limit the launch hit in `hit()`),
  RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_NOFILE and no core files for each process (prlimit,
  util-linux). The wall time is the runner's timeout: it stops bwrap and so the whole namespace.

Not root: bwrap in a user namespace as the calling user, no tmpfs on the writable folders
(each file is bounded by RLIMIT_FSIZE, not their total), memory and processes by rlimits per
process and per user (RLIMIT_DATA, RLIMIT_NPROC) instead of cgroups: weaker, and `weaker` says
why. Without bwrap, or not root without user namespaces, wrap() raises SandboxUnavailable:
a run is never started outside the box by mistake.
"""

from __future__ import annotations

import atexit
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
USER = "workbook-sandbox"
CGROUPS = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids")
MiB = 1 << 20
GiB = 1 << 30
# Folders never shown, even inside a folder that is (the instructor's nbgrader course).
HIDDEN = (REPO / "course",)
RUNNING = Path(__file__).resolve().parent  # grader/running/
KEEPER = RUNNING / "box_keeper.py"  # the box's first process: bounded output, no daemons
# Of the checkout, the box shows the runner's package (horovodrun starts as
# python -m workbook.runner.launcher; the pinning launcher is there too) and two files of
# grader/running/: the probe each worker runs and the callbacks it loads beside it (they import only
# the standard library, NumPy, TensorFlow and Horovod) and the keeper.
CODE = (REPO / "workbook", RUNNING / "probe.py", RUNNING / "probe_callbacks.py", KEEPER)
# The system's files, read-only; /bin, /lib... are symlinks into /usr on Debian (merged /usr).
SYSTEM = ("/usr", "/etc", "/sys", "/opt")
# The run's environment names the probe's records folder here (grader/running/probe.py): writable.
PROBE_FOLDER = "WORKBOOK_PROBE_DIR"
# The variables a run may get (every other one is taken out): the locale and the run's own
# settings. PATH, HOME, TMPDIR, USER and LOGNAME are set by the box.
ALLOWED_NAMES = frozenset(
    {"LANG", "LANGUAGE", "TZ", "PYTHONUNBUFFERED", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE"}
)
ALLOWED_PREFIXES = (
    "LC_",
    "HOROVOD_",
    "WORKBOOK_",
    "OMP_",
    "TF_",
    "KMP_",
    "MKL_",
    "OPENBLAS_",
    "CUDA_",
    "HWLOC_",
)
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
# Set by the box (not root, USER and LOGNAME stay the caller's, whom the run runs as).
BOX_SETS = ("PATH", "HOME", "TMPDIR", "USER", "LOGNAME")


@dataclass(frozen=True)
class Limits:
    """What one sandboxed run may use (the defaults: 2 workers, a few steps of a tiny model).

    Measured on the reference (run_step(12): 2 workers, the script twice, about 25 s on 2
    cores): 629 MiB of memory at most, 58 tasks, 0.55 MB written. The defaults leave about 3x
    (memory), 9x (tasks), 10x (CPU: a worker's run takes under 30 s) and 400x (disk) of that,
    for slower machines and other correct scripts, while a runaway stops well before it hurts
    the machine (see grader/README.md, "The sandbox of a graded run").
    """

    memory_bytes: int = 2 * GiB  # the whole tree (cgroup), its tmpfs pages included
    processes: int = 512  # tasks of the whole tree, threads included (cgroup pids.max)
    cpu_seconds: int = 300  # CPU time of each process (RLIMIT_CPU): SIGXCPU, then SIGKILL
    disk_bytes: int = 256 * MiB  # each writable folder (the size of its tmpfs)
    inodes: int = 4096  # files and folders in each writable folder (its tmpfs's nr_inodes)
    output_bytes: int = 8 * MiB  # stdout and stderr of a launch, together (box_keeper.py)
    tmp_bytes: int = 256 * MiB  # the private /tmp and /dev/shm (together, as root)
    file_bytes: int = 256 * MiB  # any one file written (RLIMIT_FSIZE)
    open_files: int = 4096  # RLIMIT_NOFILE


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot be built here; the script must not run without it."""


@dataclass(frozen=True)
class Sandbox:
    """Wraps a run's command so that it runs in the box (see the module's text).

    limits: Limits. user: the account the script runs as (root only).
    hidden: folders inside the repository the box leaves out (default: its course/).
    readable: more folders shown read-only (the script's own folder).
    writable: the folders the script may write, each created if missing.
    with_folders() gives a copy for one run; close() (or the `with` block's end) releases what
    every copy made: the tmpfs mounts (what is in them goes) and the cgroups; end_launch()
    only the cgroups (the writable folders stay for the next launch). fresh() gives a copy that
    holds nothing yet (one per run). hit() names the limits a run reached.
    """

    limits: Limits = Limits()
    user: str = USER
    hidden: tuple[Path, ...] = HIDDEN
    readable: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    writable_variables: tuple[str, ...] = (PROBE_FOLDER,)
    _held: dict = field(default_factory=lambda: _nothing_held(), repr=False, compare=False)

    def fresh(self) -> Sandbox:
        """A copy like this one that holds nothing yet (its close() releases only its own)."""
        return replace(self, _held=_nothing_held())

    def with_folders(self, writable: Iterable = (), readable: Iterable = ()) -> Sandbox:
        """A copy with these folders writable and those readable too (close() on either
        releases what both made)."""
        writable = tuple(dict.fromkeys(Path(p).resolve() for p in (*self.writable, *writable)))
        readable = (Path(p).resolve() for p in (*self.readable, *readable))
        # A folder inside a writable one is shown as that one is: writable.
        readable = (p for p in readable if not any(p.is_relative_to(w) for w in writable))
        return replace(self, writable=writable, readable=tuple(dict.fromkeys(readable)))

    @property
    def outer_writable(self) -> tuple[Path, ...]:
        """The writable folders that are not inside another one (each gets its own tmpfs)."""
        return tuple(
            folder
            for folder in self.writable
            if not any(folder != other and folder.is_relative_to(other) for other in self.writable)
        )

    @property
    def as_root(self) -> bool:
        return os.geteuid() == 0

    @property
    def weaker(self) -> str:
        """Why this box is weaker than the full one ("" as root)."""
        if self.as_root:
            return ""
        return (
            "not root: the script runs as the calling user in a user namespace; memory and "
            "processes are limited per process and per user (rlimits), not for the whole "
            "run, and the writable folders only per file (RLIMIT_FSIZE)"
        )

    # --- the command -----------------------------------------------------------------------

    def wrap(
        self,
        argv: list[str],
        env: Mapping[str, str] | None = None,
        *,
        cwd: str | Path | None = None,
        writable: Iterable = (),
    ) -> list[str]:
        """The command that runs `argv` in the box, as the runner calls it (RunOptions.sandbox):
        `env` the environment it will get (only allowed variables reach the box; the folders
        named by `writable_variables` in it are writable), `cwd` the folder it starts in (shown
        read-only, unless inside a writable one), `writable` more folders it writes (the run's --log-dir). As root, mounts
        the writable folders' tmpfs and makes the run's cgroups: close() releases them.
        SandboxUnavailable when the box can't be built."""
        env = env or {}
        extra = [env[name] for name in self.writable_variables if env.get(name)]
        box = self.with_folders([*writable, *extra], [cwd] if cwd else [])
        return box._wrap(argv, env)

    def _wrap(self, argv: list[str], env: Mapping[str, str]) -> list[str]:
        bwrap = self._check()
        limits = self.limits
        rlimits = [
            f"--cpu={limits.cpu_seconds}",
            f"--fsize={limits.file_bytes}",
            f"--nofile={limits.open_files}",
            "--core=0",
        ]
        if self.as_root:
            release_orphans()
            uid, gid = ensure_user(self.user)
            for folder in self.outer_writable:
                if folder not in self._held["mounts"]:  # a second launch: the same tmpfs
                    self._held["mounts"].append(
                        mount_tmpfs(folder, limits.disk_bytes, limits.inodes, uid, gid)
                    )
            for folder in set(self.writable) - set(self.outer_writable):
                make_owned(folder, uid, gid)  # inside one of those: that tmpfs bounds it
            procs = make_cgroups(limits)
            self._held["cgroups"].append(procs)
            scratch = mount_scratch(limits, uid, gid)
            self._held["scratch"].append(scratch)
            enter = [
                "/bin/sh",
                "-c",
                'for p in $1; do echo $$ > "$p"; done; shift; exec "$@"',
                "workbook-sandbox",
                " ".join(str(p) for p in procs),
            ]
            drop = [
                "setpriv",
                f"--reuid={uid}",
                f"--regid={gid}",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--no-new-privs",
                "--",
            ]
        else:
            for folder in self.writable:
                Path(folder).mkdir(parents=True, exist_ok=True)
            rlimits += [f"--data={limits.memory_bytes}", f"--nproc={limits.processes}"]
            enter, drop, scratch = [], [], None
        box = [bwrap, *self._namespaces(), *self._files(scratch), *self._environment(env)]
        keeper = [sys.executable, "-I", "-S", str(KEEPER), str(limits.output_bytes)]
        # The keeper before the drop: as root, the script can neither kill nor trace it.
        return [*enter, "prlimit", *rlimits, "--", *box, "--", *keeper, *drop, *argv]

    def _namespaces(self) -> list[str]:
        user = [] if self.as_root else ["--unshare-user", "--disable-userns"]
        return [
            *user,
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--die-with-parent",
            "--new-session",
        ]

    def _files(self, scratch: Path | None) -> list[str]:
        """bwrap's arguments for the box's folders; /tmp and /dev/shm are folders of `scratch`
        (a tmpfs with an inode limit, as root) or, without it, bwrap's own tmpfs (a size
        limit only: bwrap has no option for nr_inodes)."""
        args = []
        folders = _Folders(args)
        for path in SYSTEM:
            if Path(path).is_dir():
                folders.bind("--ro-bind", Path(path))
        for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            target = Path("/", name)
            if target.is_symlink():
                args += ["--symlink", os.readlink(target), str(target)]
            elif target.is_dir():
                folders.bind("--ro-bind", target)
        args += ["--proc", "/proc", "--dev", "/dev"]
        folders.mounts += [(Path("/proc"), False), (Path("/dev"), False)]
        if scratch is None:
            folders.tmpfs(Path("/tmp"), "1777", self.limits.tmp_bytes)
            folders.tmpfs(Path("/dev/shm"), "1777", self.limits.tmp_bytes)
        else:
            args += ["--bind", str(scratch / "tmp"), "/tmp", "--bind", str(scratch / "shm")]
            args += ["/dev/shm"]
            folders.mounts += [(Path("/tmp"), False), (Path("/dev/shm"), False)]
        # Outer folders first, so that each mount lands on the ones around it: the course hidden
        # inside the repository, the student's folder shown again inside the course.
        shown = [*sorted(python_folders()), *CODE, *self.readable, *self.outer_writable]
        hidden = [
            Path(p) for p in self.hidden if any(Path(p).is_relative_to(folder) for folder in shown)
        ]
        mounts = [
            *((p, "--ro-bind") for p in sorted(python_folders())),
            *((p, "--ro-bind") for p in CODE),
            *((p, "hidden") for p in hidden),
            *((p, "--ro-bind") for p in self.readable),
            *((p, "--bind") for p in self.outer_writable),
        ]
        for path, how in sorted(mounts, key=lambda mount: len(mount[0].parts)):
            if how != "hidden":
                folders.bind(how, path)
            elif path.exists():  # an empty folder over it, root's: the box can't write it
                folders.tmpfs(path, "0555", MiB)
        return args

    def _environment(self, env: Mapping[str, str]) -> list[str]:
        """The allow-list: every variable of `env` and of this process's environment (which
        bwrap would pass on when `env` is not the one it is started with) that is not allowed
        is taken out; PATH, HOME and TMPDIR are the box's."""
        args = []
        for name in sorted({*env, *os.environ} - set(BOX_SETS)):
            if not allowed_variable(name):
                args += ["--unsetenv", name]
        path = f"{Path(sys.executable).parent}:{SYSTEM_PATH}"
        home = ["--setenv", "PATH", path, "--setenv", "HOME", "/tmp", "--setenv", "TMPDIR", "/tmp"]
        user = ["--setenv", "USER", self.user, "--setenv", "LOGNAME", self.user]
        return [*args, *home, *(user if self.as_root else [])]

    def _check(self) -> str:
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise SandboxUnavailable(
                "no bubblewrap (bwrap) here, so a learner's script can't be run sandboxed: "
                "install it (Debian: apt-get install bubblewrap; `sh tests/setup_sandbox.sh`)"
            )
        if not self.as_root and not user_namespaces_work(bwrap):
            raise SandboxUnavailable(
                "not root and no user namespaces here (bwrap --unshare-user fails), so a "
                "learner's script can't be run sandboxed: run the grader as root, or allow "
                "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)"
            )
        for tool in ("prlimit", "setpriv"):
            if shutil.which(tool) is None:
                raise SandboxUnavailable(f"no {tool} here (Debian: apt-get install util-linux)")
        return bwrap

    # --- releasing what wrap() made ---------------------------------------------------------

    def end_launch(self) -> None:
        """Removes the cgroups of the launches so far (killing anything still in them); the
        writable folders stay, with what the launch wrote, for the next launch."""
        while self._held["cgroups"]:
            procs = self._held["cgroups"].pop()
            self._held["hit"].update(cgroup_limits_hit(procs))
            remove_cgroups(procs)
        while self._held["scratch"]:  # each launch's /tmp and /dev/shm: fresh for the next
            scratch = self._held["scratch"].pop()
            self._held["hit"].update(tmpfs_limits_hit(scratch))
            unmount(scratch)

    def close(self) -> None:
        """end_launch(), then unmounts the writable folders' tmpfs: what the script wrote there
        goes with it (the grader took the records it needs before: grader/running/kept.py), and
        their empty mount points are removed."""
        self.end_launch()
        while self._held["mounts"]:
            folder = self._held["mounts"].pop()
            self._held["hit"].update(tmpfs_limits_hit(folder))
            unmount(folder)

    def note(self, limit: str) -> None:
        """Notes a limit the run reached that the box itself can't see (its time, its
        output)."""
        self._held["hit"].add(limit)

    def hit(self) -> list[str]:
        """The limits the runs of this box reached: "time", "memory", "tasks", "output",
        "disk", "files"."""
        return sorted(self._held["hit"])

    def __post_init__(self) -> None:
        _OPEN[id(self._held)] = self._held

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Folders:
    """The box's folders, in bwrap's order. A folder bound into the box needs the folders above
    it open to the sandbox user: those bwrap would make are made 0755 (bwrap makes them 0700,
    root's), and a real one closed to others (a 0700 temporary folder) gets an empty tmpfs
    over it (what else is in it stays out of the box)."""

    def __init__(self, args: list[str]):
        self.args = args
        self.mounts: list[tuple[Path, bool]] = [(Path("/"), False)]  # (where, a real folder?)

    def _real(self, path: Path) -> bool:
        """Whether `path` in the box is the machine's folder (else bwrap made it)."""
        where, real = max(
            ((w, r) for w, r in self.mounts if path.is_relative_to(w)),
            key=lambda mount: len(mount[0].parts),
        )
        return real and (path == where or path.exists())

    def tmpfs(self, path: Path, perms: str, size: int) -> None:
        self.args += ["--perms", perms, "--size", str(size), "--tmpfs", str(path)]
        self.mounts.append((Path(path), False))

    def bind(self, how: str, path: Path) -> None:
        path = Path(path)
        for above in reversed(path.parents):
            if above == Path("/") or any(above == where for where, _ in self.mounts):
                continue
            if not self._real(above):
                self.args += ["--perms", "0755", "--dir", str(above)]
                self.mounts.append((above, False))
            elif above.stat().st_mode & 0o005 != 0o005:
                self.tmpfs(above, "0755", MiB)
        self.args += [how, str(path), str(path)]
        self.mounts.append((path, True))


_OPEN: dict[int, dict] = {}  # what every sandbox holds: released at exit, if close() was not called


def _nothing_held() -> dict:
    return {"mounts": [], "cgroups": [], "scratch": [], "hit": set()}


def allowed_variable(name: str) -> bool:
    """Whether the run may get the variable `name` (the box sets PATH, HOME and TMPDIR)."""
    return name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)


@atexit.register
def _release_all() -> None:
    for held in list(_OPEN.values()):
        Sandbox(_held=held).close()


def python_folders() -> set[Path]:
    """This Python's environment and installation (a venv's python links to the latter), also
    by the path it is started from when that passes through a link (a linked .venv): the box
    starts sys.executable by that path."""
    prefixes = (sys.prefix, sys.base_prefix, sys.exec_prefix)
    return {Path(p).resolve() for p in prefixes} | {Path(p).absolute() for p in prefixes}


def user_namespaces_work(bwrap: str) -> bool:
    try:
        return (
            subprocess.run(
                [bwrap, "--unshare-user", "--ro-bind", "/", "/", "true"],
                capture_output=True,
                timeout=10,
            ).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


# --- the account -------------------------------------------------------------------------------


def ensure_user(name: str) -> tuple[int, int]:
    """(uid, gid) of the account, made when missing: a system account, no login shell, no home."""
    import pwd

    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        _run(
            [
                "useradd",
                "--system",
                "--user-group",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                name,
            ]
        )
        entry = pwd.getpwnam(name)
    if entry.pw_uid == 0:
        raise SandboxUnavailable(f"the sandbox account {name} is root")
    return entry.pw_uid, entry.pw_gid


# --- what a grader that died left -------------------------------------------------------------
# A grader killed with SIGKILL (or a machine's OOM killer) releases nothing: its tmpfs mounts and
# cgroups stay. Each is named after the process that made it (HELD_BY, then its pid and start
# time), so a later grader releases those whose maker is gone, and never another live grader's.

HELD_BY = "workbook-sandbox-of-"


def _start_ticks(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat, field 22)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def holder_tag(pid: int | None = None) -> str:
    """'PID-STARTTICKS' of this process (or `pid`): one process's, even after its pid is reused."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}-{_start_ticks(pid)}"


def holder_alive(tag: str) -> bool:
    """Whether the process a holder tag names still runs."""
    pid, _, ticks = tag.partition("-")
    return pid.isdigit() and _start_ticks(int(pid)) == ticks


def _orphan_tag(name: str) -> str | None:
    """The holder tag in a mount's source or a cgroup's name, when its holder is gone."""
    if not name.startswith(HELD_BY):
        return None
    pid, ticks = (name[len(HELD_BY) :].split("-") + ["", ""])[:2]
    tag = f"{pid}-{ticks}"
    return None if holder_alive(tag) else tag


def orphaned_mounts(mountinfo: str) -> list[Path]:
    """The sandbox tmpfs mounts in /proc/self/mountinfo's text whose grader is gone."""
    found = []
    for line in mountinfo.splitlines():
        fields = line.split(" - ", 1)
        if len(fields) != 2:
            continue
        where = fields[0].split()[4].encode().decode("unicode_escape")  # octal-escaped spaces
        kind, source = (fields[1].split() + ["", ""])[:2]
        if kind == "tmpfs" and _orphan_tag(source):
            found.append(Path(where))
    return found


def orphaned_cgroups() -> list[Path]:
    """The cgroup.procs files of the sandbox cgroups whose grader is gone."""
    found = []
    for controller in CONTROLLERS:
        try:
            parent = own_cgroup(controller)
            groups = [g for g in parent.iterdir() if g.is_dir() and _orphan_tag(g.name)]
        except (OSError, SandboxUnavailable):
            continue
        found += [group / "cgroup.procs" for group in groups]
    return found


def release_orphans() -> None:
    """Kills what is left in dead graders' cgroups and removes them; unmounts their tmpfs."""
    remove_cgroups(orphaned_cgroups())
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return
    for folder in orphaned_mounts(mountinfo):
        unmount(folder)


# --- the writable folders ----------------------------------------------------------------------


def mount_tmpfs(folder: Path, size: int, inodes: int, uid: int, gid: int) -> Path:
    """Mounts a tmpfs of `size` bytes and `inodes` files on `folder` (made if missing), owned by
    uid:gid, with what was in it (the grader's own files: moved, never a run's)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    kept = Path(tempfile.mkdtemp(prefix=".sandbox-", dir=folder.parent))
    try:
        for entry in folder.iterdir():
            shutil.move(str(entry), kept / entry.name)
        options = (
            f"size={size},nr_inodes={inodes},mode=0700,uid={uid},gid={gid},nosuid,nodev,nosymfollow"
        )
        _run(["mount", "-t", "tmpfs", "-o", options, f"{HELD_BY}{holder_tag()}", str(folder)])
        for entry in kept.iterdir():
            shutil.move(str(entry), folder / entry.name)
        for path in [folder, *folder.rglob("*")]:
            os.lchown(path, uid, gid)
    finally:
        shutil.rmtree(kept, ignore_errors=True)
    return folder


def mount_scratch(limits: Limits, uid: int, gid: int) -> Path:
    """A launch's /tmp and /dev/shm (its folders `tmp` and `shm`): one tmpfs of tmp_bytes and
    `inodes` files for both, in a new root-only folder of the host's temporary folder."""
    scratch = mount_tmpfs(
        Path(tempfile.mkdtemp(prefix="workbook-box-tmp-")),
        limits.tmp_bytes,
        limits.inodes,
        uid,
        gid,
    )
    for name in ("tmp", "shm"):
        (scratch / name).mkdir(mode=0o700)
        os.lchown(scratch / name, uid, gid)
    return scratch


def make_owned(folder: Path, uid: int, gid: int) -> None:
    """Makes `folder` (inside a writable folder's tmpfs) and the folders above it that are
    missing, owned by the sandbox account."""
    missing = [folder, *(p for p in folder.parents if not p.exists())]
    folder.mkdir(parents=True, exist_ok=True)
    for path in missing:
        os.lchown(path, uid, gid)


def unmount(folder: Path) -> None:
    """Unmounts the tmpfs on `folder` (what is in it goes) and removes the emptied mount point
    (when the grader removed its run's folder first, nothing is left to remove)."""
    try:
        _run(["umount", "--lazy", str(folder)])
    except SandboxUnavailable as error:
        print(f"sandbox: {error}", file=sys.stderr)
        return
    try:
        folder.rmdir()
    except OSError:
        pass


def tmpfs_limits_hit(folder: Path) -> set[str]:
    """ "disk" and/or "files" when the tmpfs on `folder` is (nearly) full."""
    try:
        info = os.statvfs(folder)
    except OSError:
        return set()
    hit = set()
    if info.f_blocks and info.f_bavail < info.f_blocks // 20:
        hit.add("disk")
    if info.f_files and info.f_favail < info.f_files // 20:
        hit.add("files")
    return hit


# --- cgroups (v1) ----------------------------------------------------------------------------


def own_cgroup(controller: str) -> Path:
    """This process's cgroup of a v1 controller (the run's goes below it)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return CGROUPS / controller / path.lstrip("/")
    raise SandboxUnavailable(f"no cgroup v1 {controller} controller here ({CGROUPS})")


def make_cgroups(limits: Limits) -> list[Path]:
    """A memory and a pids cgroup for one run; returns their cgroup.procs files."""
    name = f"{HELD_BY}{holder_tag()}-{uuid.uuid4().hex[:12]}"
    groups = {c: own_cgroup(c) / name for c in CONTROLLERS}
    made = []
    try:
        for group in groups.values():
            group.mkdir()
            made.append(group / "cgroup.procs")
        memory = groups["memory"]
        (memory / "memory.limit_in_bytes").write_text(str(limits.memory_bytes))
        swap = memory / "memory.memsw.limit_in_bytes"
        if swap.exists():
            swap.write_text(str(limits.memory_bytes))
        (groups["pids"] / "pids.max").write_text(str(limits.processes))
    except OSError as error:
        remove_cgroups(made)
        raise SandboxUnavailable(f"could not make the run's cgroups ({error})") from error
    return made


def cgroup_limits_hit(procs_files: list[Path]) -> set[str]:
    """ "memory" when the run's memory cgroup reached its limit, "tasks" when a fork failed at
    the pids cgroup's."""
    hit = set()
    for procs in procs_files:
        try:
            if procs.parent.parent.name == "memory" or (procs.parent / "memory.failcnt").exists():
                if int((procs.parent / "memory.failcnt").read_text()) > 0:
                    hit.add("memory")
            elif (procs.parent / "pids.events").exists():
                events = (procs.parent / "pids.events").read_text().split()
                if events[:1] == ["max"] and int(events[1]) > 0:
                    hit.add("tasks")
        except (OSError, ValueError, IndexError):
            continue
    return hit


def remove_cgroups(procs_files: list[Path]) -> None:
    """Kills what is still in the cgroups (nothing, after a run the runner stopped), removes
    them."""
    for procs in procs_files:
        deadline = time.monotonic() + 10
        while True:
            try:
                pids = [int(p) for p in procs.read_text().split()]
            except OSError:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                procs.parent.rmdir()
                break
            except OSError:
                if time.monotonic() > deadline:
                    print(f"sandbox: could not remove {procs.parent}", file=sys.stderr)
                    break
                time.sleep(0.1)


def _run(argv: list[str]) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SandboxUnavailable(f"{shlex.join(argv)} could not run: {error}") from error
    if done.returncode != 0:
        raise SandboxUnavailable(f"{shlex.join(argv)} failed: {done.stderr.strip()}")

"""Sandbox: the learner's script, run for grading, in a box it cannot get out of.

    with Sandbox() as sandbox:                      # one per class or per run; close() cleans up
        result = run_step(12, script, sandbox=sandbox)

Sandbox.wrap(argv, env) turns the run's command (horovodrun and everything it starts) into

    sh -c 'join the run's cgroups; exec "$@"' prlimit ... -- bwrap ... -- setpriv ... -- argv

- bubblewrap (Debian's `bubblewrap`) builds the box: new PID, network (loopback only, which
  bwrap brings up: the workers still talk over Gloo), IPC and UTS namespaces, a new session, and
  it dies with its parent; when horovodrun ends, the PID namespace ends, and every process
  left in it (a daemon too) is killed by the kernel.
- Files: only what a run needs is there, read-only: /usr and /etc, /sys, this Python and its
  environment, the repository (but `hidden`, e.g. its course/ folder), and `readable` (the
  script's folder). /home, /root, /srv (nbgrader's exchange), /var, the course, the gradebook
  and other students' folders are not in the box at all. /tmp and /dev/shm are private tmpfs
  of Limits.tmp_bytes.
- Writable: only the `writable` folders (the probe's records, the script's --log-dir). As root
  each gets a tmpfs of Limits.disk_bytes mounted on it on this machine (nosuid, nodev,
  nosymfollow), owned by the sandbox user: the grader reads it live while the run goes on, the
  kernel stops writes at the size (ENOSPC), its pages count against the run's memory, and root
  never follows a symlink the script left there. close() copies what is in it back to disk.
- The script runs as the account `workbook-sandbox` (made when missing: no login shell, no
  home), with no capabilities and no_new_privs (setpriv, util-linux).
- Limits: the whole tree in its own cgroup (v1 memory and pids controllers, under this
  process's own cgroups; removed by close()), RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_NOFILE and no core
  files for each process (prlimit, util-linux). The wall time is the runner's timeout: it stops
  bwrap and so the whole namespace.

Not root: bwrap in a user namespace as the calling user, no tmpfs on the writable folders
(each file is bounded by RLIMIT_FSIZE, not their total), memory and processes by rlimits per
process and per user (RLIMIT_DATA, RLIMIT_NPROC) instead of cgroups: weaker, and `weaker` says
why. Without bwrap, or not root without user namespaces, wrap() raises SandboxUnavailable:
a run is never started outside the box by mistake.
"""

from __future__ import annotations

import atexit
import os
import re
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
# The repository is in the box read-only, but for these (the instructor's nbgrader course).
HIDDEN = (REPO / "course",)
# The system's files, read-only; /bin, /lib... are symlinks into /usr on Debian (merged /usr).
SYSTEM = ("/usr", "/etc", "/sys", "/opt")
# The run's environment names the probe's records folder here (grader/live/probe.py): writable.
PROBE_FOLDER = "WORKBOOK_PROBE_DIR"
# Variables of the grader's environment the script must not see (JupyterHub's API token...).
SECRET = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|API_KEY|PRIVATE_KEY|^JUPYTERHUB_|^JPY_"
                    r"|^SSH_AUTH_SOCK$|^KRB5CCNAME$")  # fmt: skip


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
    tmp_bytes: int = 256 * MiB  # the private /tmp, and /dev/shm
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
    every copy made: the tmpfs mounts (their files copied back to disk) and the cgroups.
    """

    limits: Limits = Limits()
    user: str = USER
    hidden: tuple[Path, ...] = HIDDEN
    readable: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    writable_variables: tuple[str, ...] = (PROBE_FOLDER,)
    _held: dict = field(default_factory=lambda: {"mounts": [], "cgroups": []}, repr=False,
                        compare=False)  # fmt: skip

    def with_folders(self, writable: Iterable = (), readable: Iterable = ()) -> Sandbox:
        """A copy with these folders writable and those readable too (close() on either
        releases what both made)."""
        writable = tuple(dict.fromkeys(Path(p).resolve() for p in (*self.writable, *writable)))
        readable = (Path(p).resolve() for p in (*self.readable, *readable))
        return replace(self, writable=writable,
                       readable=tuple(dict.fromkeys(p for p in readable if p not in writable)))

    @property
    def outer_writable(self) -> tuple[Path, ...]:
        """The writable folders that are not inside another one (each gets its own tmpfs)."""
        return tuple(folder for folder in self.writable
                     if not any(folder != other and folder.is_relative_to(other)
                                for other in self.writable))  # fmt: skip

    @property
    def as_root(self) -> bool:
        return os.geteuid() == 0

    @property
    def weaker(self) -> str:
        """Why this box is weaker than the full one ("" as root)."""
        if self.as_root:
            return ""
        return ("not root: the script runs as the calling user in a user namespace; memory and "
                "processes are limited per process and per user (rlimits), not for the whole "
                "run, and the writable folders only per file (RLIMIT_FSIZE)")  # fmt: skip

    # --- the command -----------------------------------------------------------------------

    def wrap(self, argv: list[str], env: Mapping[str, str] | None = None, *,
             cwd: str | Path | None = None, writable: Iterable = ()) -> list[str]:
        """The command that runs `argv` in the box, as the runner calls it (RunOptions.sandbox):
        `env` the environment it will get (secret-looking variables are taken out; the folders
        named by `writable_variables` in it are writable), `cwd` the folder it starts in (shown
        read-only), `writable` more folders it writes (the run's --log-dir). As root, mounts
        the writable folders' tmpfs and makes the run's cgroups: close() releases them.
        SandboxUnavailable when the box can't be built."""
        env = env or {}
        extra = [env[name] for name in self.writable_variables if env.get(name)]
        box = self.with_folders([*writable, *extra], [cwd] if cwd else [])
        return box._wrap(argv, env)

    def _wrap(self, argv: list[str], env: Mapping[str, str]) -> list[str]:
        bwrap = self._check()
        limits = self.limits
        rlimits = [f"--cpu={limits.cpu_seconds}", f"--fsize={limits.file_bytes}",
                   f"--nofile={limits.open_files}", "--core=0"]  # fmt: skip
        if self.as_root:
            uid, gid = ensure_user(self.user)
            for folder in self.outer_writable:
                self._held["mounts"].append(mount_tmpfs(folder, limits.disk_bytes, uid, gid))
            for folder in set(self.writable) - set(self.outer_writable):
                make_owned(folder, uid, gid)  # inside one of those: that tmpfs bounds it
            procs = make_cgroups(limits)
            self._held["cgroups"].append(procs)
            enter = ["/bin/sh", "-c", 'for p in $1; do echo $$ > "$p"; done; shift; exec "$@"',
                     "workbook-sandbox", " ".join(str(p) for p in procs)]  # fmt: skip
            drop = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                    "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]  # fmt: skip
        else:
            for folder in self.writable:
                Path(folder).mkdir(parents=True, exist_ok=True)
            rlimits += [f"--data={limits.memory_bytes}", f"--nproc={limits.processes}"]
            enter, drop = [], []
        box = [bwrap, *self._namespaces(), *self._files(), *self._environment(env)]
        return [*enter, "prlimit", *rlimits, "--", *box, "--", *drop, *argv]

    def _namespaces(self) -> list[str]:
        user = [] if self.as_root else ["--unshare-user", "--disable-userns"]
        return [*user, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
                "--unshare-cgroup-try", "--die-with-parent", "--new-session"]  # fmt: skip

    def _files(self) -> list[str]:
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
        folders.tmpfs(Path("/tmp"), "1777", self.limits.tmp_bytes)
        folders.tmpfs(Path("/dev/shm"), "1777", self.limits.tmp_bytes)
        # Outer folders first, so that each mount lands on the ones around it: the course hidden
        # inside the repository, the student's folder shown again inside the course.
        mounts = [*((p, "--ro-bind") for p in sorted(python_folders()) if p != REPO),
                  (REPO, "--ro-bind"), *((Path(p), "hidden") for p in self.hidden),
                  *((p, "--ro-bind") for p in self.readable),
                  *((p, "--bind") for p in self.outer_writable)]  # fmt: skip
        for path, how in sorted(mounts, key=lambda mount: len(mount[0].parts)):
            if how != "hidden":
                folders.bind(how, path)
            elif path.exists():  # an empty folder over it, root's: the box can't write it
                folders.tmpfs(path, "0555", MiB)
        return args

    def _environment(self, env: Mapping[str, str]) -> list[str]:
        args = []
        for name in sorted(env):
            if SECRET.search(name.upper()):
                args += ["--unsetenv", name]
        home = ["--setenv", "HOME", "/tmp", "--setenv", "TMPDIR", "/tmp"]
        user = ["--setenv", "USER", self.user, "--setenv", "LOGNAME", self.user]
        return [*args, *home, *(user if self.as_root else [])]

    def _check(self) -> str:
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise SandboxUnavailable(
                "no bubblewrap (bwrap) here, so a learner's script can't be run sandboxed: "
                "install it (Debian: apt-get install bubblewrap; `sh tests/setup_sandbox.sh`)")
        if not self.as_root and not user_namespaces_work(bwrap):
            raise SandboxUnavailable(
                "not root and no user namespaces here (bwrap --unshare-user fails), so a "
                "learner's script can't be run sandboxed: run the grader as root, or allow "
                "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)")
        for tool in ("prlimit", "setpriv"):
            if shutil.which(tool) is None:
                raise SandboxUnavailable(f"no {tool} here (Debian: apt-get install util-linux)")
        return bwrap

    # --- releasing what wrap() made ---------------------------------------------------------

    def close(self) -> None:
        """Removes the runs' cgroups (killing anything still in them) and unmounts the
        writable folders' tmpfs, their files copied back to disk."""
        while self._held["cgroups"]:
            remove_cgroups(self._held["cgroups"].pop())
        emptied = []
        while self._held["mounts"]:
            folder = self._held["mounts"].pop()
            if unmount_keeping_files(folder):
                emptied.append(folder)
        remove_emptied(emptied)

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
        where, real = max(((w, r) for w, r in self.mounts if path.is_relative_to(w)),
                          key=lambda mount: len(mount[0].parts))  # fmt: skip
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


@atexit.register
def _release_all() -> None:
    for held in list(_OPEN.values()):
        Sandbox(_held=held).close()


def python_folders() -> set[Path]:
    """This Python's environment and installation (a venv's python links to the latter)."""
    return {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}


def user_namespaces_work(bwrap: str) -> bool:
    try:
        return subprocess.run([bwrap, "--unshare-user", "--ro-bind", "/", "/", "true"],
                              capture_output=True, timeout=10).returncode == 0  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False


# --- the account -------------------------------------------------------------------------------


def ensure_user(name: str) -> tuple[int, int]:
    """(uid, gid) of the account, made when missing: a system account, no login shell, no home."""
    import pwd

    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        _run(["useradd", "--system", "--user-group", "--no-create-home",
              "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name])  # fmt: skip
        entry = pwd.getpwnam(name)
    if entry.pw_uid == 0:
        raise SandboxUnavailable(f"the sandbox account {name} is root")
    return entry.pw_uid, entry.pw_gid


# --- the writable folders ----------------------------------------------------------------------


def mount_tmpfs(folder: Path, size: int, uid: int, gid: int) -> Path:
    """Mounts a tmpfs of `size` bytes on `folder` (made if missing), with what was in it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    kept = Path(tempfile.mkdtemp(prefix=".sandbox-", dir=folder.parent))
    try:
        for entry in folder.iterdir():
            shutil.move(str(entry), kept / entry.name)
        options = f"size={size},mode=0700,uid={uid},gid={gid},nosuid,nodev,nosymfollow"
        _run(["mount", "-t", "tmpfs", "-o", options, "workbook-sandbox", str(folder)])
        for entry in kept.iterdir():
            shutil.move(str(entry), folder / entry.name)
        for path in [folder, *folder.rglob("*")]:
            os.lchown(path, uid, gid)
    finally:
        shutil.rmtree(kept, ignore_errors=True)
    return folder


def make_owned(folder: Path, uid: int, gid: int) -> None:
    """Makes `folder` (inside a writable folder's tmpfs) and the folders above it that are
    missing, owned by the sandbox account."""
    missing = [folder, *(p for p in folder.parents if not p.exists())]
    folder.mkdir(parents=True, exist_ok=True)
    for path in missing:
        os.lchown(path, uid, gid)


def unmount_keeping_files(folder: Path) -> bool:
    """Copies the tmpfs's regular files and folders back to disk (not symlinks, pipes or
    devices) and unmounts it; True if it was empty."""
    kept = Path(tempfile.mkdtemp(prefix=".sandbox-", dir=folder.parent))
    try:
        empty = not any(folder.iterdir())
        shutil.copytree(folder, kept, symlinks=True, dirs_exist_ok=True, ignore=_not_plain)
        _run(["umount", "--lazy", str(folder)])
        for entry in kept.iterdir():
            shutil.move(str(entry), folder / entry.name)
    finally:
        shutil.rmtree(kept, ignore_errors=True)
    return empty


def remove_emptied(folders: list[Path]) -> None:
    """Removes the folders whose tmpfs was left empty: the grader deleted the run's files while
    the tmpfs was mounted there (its own rmtree could not remove the mount point)."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            pass


def _not_plain(folder: str, names: list[str]) -> list[str]:
    return [name for name in names
            if not (os.path.isfile(p := os.path.join(folder, name)) or os.path.isdir(p))
            or os.path.islink(p)]  # fmt: skip


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
    name = f"workbook-sandbox-{uuid.uuid4().hex[:12]}"
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

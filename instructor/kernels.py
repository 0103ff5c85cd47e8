"""Kernels for grading: one per student, from the instructor's installation only.

A check cell runs `from grader import check_step` in a kernel, and a Python or IPython kernel
picks up code and settings from many places: the working folder (first on `sys.path`, and
IPython's config files), `PYTHONPATH`, `PYTHONSTARTUP`, user site-packages, `~/.ipython`
startup files, Jupyter and matplotlib config. A submission could put a file in any of those
that lie in its folder. So a grading kernel

- starts in isolated mode (`python -I`: no environment variables of Python's, no user site,
  no script or working folder on `sys.path`) with IPython's `--ignore-cwd`, from the same
  Python that runs nbgrader (the instructor's environment, where `grader` is installed);
- gets a clean environment: PATH, LANG and fresh, empty HOME, IPYTHONDIR, JUPYTER_CONFIG_DIR,
  JUPYTER_DATA_DIR and MPLCONFIGDIR of its own (plus the instructor's WORKBOOK_* variables,
  which the tests use to find every process they started);
- starts in an empty folder of its own and only then moves into the student's folder, so no
  start-up file of the student's is ever read;
- serves one student's notebooks and is killed, with everything it started, before the next
  student's: no module, global, variable, folder, open file or process outlives a student.

Starting a kernel costs about a second of CPU; `KernelPool` starts the next student's kernel
while the current student is graded, so the wait is hidden.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import ensure_async, run_sync

from workbook.facts import SAFE_PROCESS_ENV

KERNEL_NAME = "workbook-grading"
READY_SECONDS = 60  # a kernel answers within a few seconds, even on a loaded machine


def kernel_argv(python: str = sys.executable) -> list:
    """The grading kernel's command line ({connection_file} is jupyter_client's)."""
    return [
        python,
        "-I",
        "-m",
        "ipykernel_launcher",
        "--ignore-cwd",
        "--HistoryManager.enabled=False",
        "-f",
        "{connection_file}",
    ]


class GradingSpecs(KernelSpecManager):
    """Knows one kernel, the grading kernel, whatever kernelspecs the machine has."""

    def get_kernel_spec(self, kernel_name, *args, **kwargs):
        return KernelSpec(
            argv=kernel_argv(),
            display_name="Workbook grading",
            language="python",
            metadata={"debugger": False},
        )


def kernel_env(home: Path) -> dict:
    """The whole environment of a grading kernel (nothing inherited but PATH and LANG)."""
    env = {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.defpath]),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "HOME": str(home),
        "IPYTHONDIR": str(home / "ipython"),
        "JUPYTER_CONFIG_DIR": str(home / "jupyter"),
        "JUPYTER_DATA_DIR": str(home / "jupyter-data"),
        "JUPYTER_PLATFORM_DIRS": "1",
        "MPLCONFIGDIR": str(home / "matplotlib"),
        "TMPDIR": str(home / "tmp"),
        "PYTHONHASHSEED": "0",
        **SAFE_PROCESS_ENV,
        **{name: value for name, value in os.environ.items() if name.startswith("WORKBOOK_")},
    }
    for name in ("ipython", "jupyter", "jupyter-data", "matplotlib", "tmp"):
        (home / name).mkdir(parents=True, exist_ok=True)
    return env


class GradingKernel:
    """One started kernel with its (asynchronous, as nbclient wants) client, for one student."""

    def __init__(self, home: Path):
        self.home = home
        # IPC (Unix sockets in the kernel's own folder): no TCP port for anyone else to reach.
        self.manager = AsyncKernelManager(
            kernel_name=KERNEL_NAME,
            kernel_spec_manager=GradingSpecs(),
            transport="ipc",
            ip=str(home / "kernel"),
        )
        run_sync(self.manager.start_kernel)(cwd=str(home), env=kernel_env(home))
        self.client = None
        self.student = None

    def is_alive(self) -> bool:
        return run_sync(self._is_alive)()

    async def _is_alive(self) -> bool:
        return await ensure_async(self.manager.is_alive())

    @property
    def pid(self) -> int | None:
        process = getattr(self.manager.provisioner, "process", None)
        return getattr(process, "pid", None)

    def connect(self) -> None:
        run_sync(self._connect)()

    async def _connect(self) -> None:
        """Waits until the kernel answers: a kernel_info reply, then any IOPub message (its
        status), which shows that IOPub is subscribed. jupyter_client's own wait_for_ready
        then also waits 0.2 s for an IOPub flush, once per notebook; this does not."""
        self.client = self.manager.client()
        self.client.start_channels()
        deadline = time.monotonic() + READY_SECONDS
        msg_id = None
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not await self._is_alive():
                raise RuntimeError(f"the grading kernel did not answer within {READY_SECONDS} s")
            if msg_id is None:
                msg_id = self.client.kernel_info()
            try:
                reply = await self.client.get_shell_msg(timeout=min(1.0, left))
            except Exception:  # queue.Empty: ask again
                msg_id = None
                continue
            if reply["parent_header"].get("msg_id") != msg_id:
                continue  # the late reply to an earlier request: the next one may be ours
            try:
                await self.client.get_iopub_msg(timeout=1.0)
            except Exception:  # IOPub not subscribed yet: ask again
                msg_id = None
                continue
            break
        while True:  # drop what IOPub still holds from the handshake
            try:
                await self.client.get_iopub_msg(timeout=0.05)
            except Exception:
                break

    def stop(self) -> None:
        """Kills the kernel and every process it started (its process group)."""
        pid = self.pid
        if self.client is not None:
            self.client.stop_channels()
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGKILL)  # jupyter_client starts it in a session of its own
            except (ProcessLookupError, PermissionError):
                pass
        try:
            run_sync(self.manager.shutdown_kernel)(now=True)
        except Exception:  # already dead: only its files are left
            run_sync(self.manager.cleanup_resources)()
        shutil.rmtree(self.home, ignore_errors=True)


class KernelPool:
    """A grading kernel per student, the next one always starting in the background."""

    def __init__(self):
        self._root = Path(tempfile.mkdtemp(prefix="workbook-grading-"))
        self._count = 0
        self._spare: GradingKernel | None = None
        self.current: GradingKernel | None = None
        self.starts: list = []  # seconds each kernel took to answer, for the benchmark
        atexit.register(self.close)

    def _new(self) -> GradingKernel:
        self._count += 1
        home = self._root / f"kernel-{self._count}"
        home.mkdir()
        return GradingKernel(home)

    def for_student(self, student: str) -> GradingKernel:
        """The kernel of `student`: the current one if it is theirs and alive, else a new one
        (the previous student's is killed first)."""
        current = self.current
        if current is not None and current.student == student and current.is_alive():
            return current
        if current is not None:
            current.stop()
        kernel, self._spare = (self._spare or self._new()), None
        started = time.monotonic()
        try:
            kernel.connect()
        except Exception:
            kernel.stop()
            raise
        self.starts.append(time.monotonic() - started)
        kernel.student = student
        self.current = kernel
        self._spare = self._new()  # boots on the other core while this student is graded
        return kernel

    def close(self) -> None:
        for kernel in (self.current, self._spare):
            if kernel is not None:
                kernel.stop()
        self.current = self._spare = None
        shutil.rmtree(self._root, ignore_errors=True)

"""The attendee's limits, named where they hit: in each attendee's kernel on the workshop hub.

When the memory or the process limit (hub/limits.py) stops something of the attendee's, the
cell says so below its output, naming the limit and how much was used:

- after a cell: a process killed at the memory limit during it (the memory cgroup's oom_kill
  count grew: a training worker, a child), or processes or threads refused at the process limit
  (the pids cgroup's "max" events grew: "Resource temporarily unavailable");
- at the first cell of a new kernel: what happened since the last kernel looked, which is how a
  kernel killed at the memory limit is named (JupyterLab only says "the kernel appears to have
  died"). What was last said is kept in ~/.cache/horovod-workbook/limits-seen.json.

Loaded by path from the kernel's PYTHONSTARTUP (startup_text, written by `make hub`), so none of
its names lands in the learner's namespace; standard library only. Never raises into a cell.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SEEN = Path.home() / ".cache" / "horovod-workbook" / "limits-seen.json"
GIB = 2**30


def own_groups(proc_cgroup: str, mounts: str) -> dict[str, Path]:
    """{"memory": folder, "pids": folder} of this process's cgroup v1 groups."""
    roots = {}
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[2] == "cgroup":
            for kind in ("memory", "pids"):
                if kind in fields[3].split(","):
                    roots[kind] = Path(fields[1])
    found = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[2].strip("/"):  # the root group is nobody's limit
            for kind in parts[1].split(","):
                if kind in roots:
                    found[kind] = roots[kind] / parts[2].lstrip("/")
    return found


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _field(text: str, name: str) -> int:
    for line in text.splitlines():
        words = line.split()
        if len(words) == 2 and words[0] == name and words[1].isdigit():
            return int(words[1])
    return 0


def _number(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


def counts(groups: dict[str, Path]) -> dict[str, int]:
    """How many times each limit stopped something, since the groups were made."""
    memory, pids = groups.get("memory"), groups.get("pids")
    return {
        "oom_kill": _field(_read(memory / "memory.oom_control"), "oom_kill") if memory else 0,
        "pids_max": _field(_read(pids / "pids.events"), "max") if pids else 0,
    }


def _gib(value: int | None) -> str:
    return "?" if value is None else f"{value / GIB:.1f} GiB"


def messages(
    before: dict[str, int], after: dict[str, int], groups: dict[str, Path], since: str
) -> list[str]:
    """What the learner reads when a limit stopped something between two counts."""
    said = []
    killed = after["oom_kill"] - before["oom_kill"]
    if killed > 0:
        memory = groups["memory"]
        limit = _number(_read(memory / "memory.limit_in_bytes"))
        peak = _number(_read(memory / "memory.max_usage_in_bytes"))
        said.append(
            f"Memory limit: {since}, {killed} of your processes "
            f"{'was' if killed == 1 else 'were'} killed for going over your memory limit of "
            f"{_gib(limit)} (your peak: {_gib(peak)}; your kernels, terminals and runs share it). "
            "If JupyterLab said the kernel died, this was it. Use less at once (a smaller "
            "batch or model, fewer workers), or shut down the kernels you no longer use."
        )
    refused = after["pids_max"] - before["pids_max"]
    if refused > 0:
        pids = groups["pids"]
        limit = _number(_read(pids / "pids.max"))
        now = _number(_read(pids / "pids.current"))
        said.append(
            f"Process limit: {since}, {refused} new process{'es' if refused != 1 else ''} or "
            f"thread{'s' if refused != 1 else ''} could not start: you reached your limit of "
            f'{limit} processes and threads ({now} running now), which gives "Resource '
            'temporarily unavailable" (and JupyterLab may fail to save meanwhile). End what '
            "you started (Kernel > Shut Down All Kernels, or the processes in a terminal)."
        )
    return said


def _seen() -> dict[str, int] | None:
    try:
        data = json.loads(SEEN.read_text())
        return {key: int(data[key]) for key in ("oom_kill", "pids_max")}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _remember(now: dict[str, int]) -> None:
    try:
        SEEN.parent.mkdir(parents=True, exist_ok=True)
        SEEN.write_text(json.dumps(now))
    except OSError:
        pass


class Watch:
    """The kernel's hooks: pre_run_cell counts, post_run_cell says what changed."""

    def __init__(self, groups: dict[str, Path]):
        self.groups = groups
        now = counts(groups)
        seen = _seen()
        self.pending = messages(seen, now, groups, "before this kernel started") if seen else []
        _remember(now)
        self.before = now

    def pre_run_cell(self, *_) -> None:
        try:
            for line in self.pending:
                print(line, file=sys.stderr, flush=True)
            self.pending = []
            self.before = counts(self.groups)
        except Exception:  # noqa: BLE001 (never into the learner's cell)
            pass

    def post_run_cell(self, *_) -> None:
        try:
            now = counts(self.groups)
            for line in messages(self.before, now, self.groups, "during this cell"):
                print(line, file=sys.stderr, flush=True)
            if now != self.before:
                _remember(now)
            self.before = now
        except Exception:  # noqa: BLE001
            pass


def install(shell) -> Watch | None:
    """The hooks on the kernel's shell, when this process is in a memory or pids group."""
    groups = own_groups(_read(Path("/proc/self/cgroup")), _read(Path("/proc/mounts")))
    groups = {kind: folder for kind, folder in groups.items() if (folder / "tasks").is_file()}
    if shell is None or not groups:
        return None
    watch = Watch(groups)
    shell.events.register("pre_run_cell", watch.pre_run_cell)
    shell.events.register("post_run_cell", watch.post_run_cell)
    return watch


def startup_text(module: Path = Path(__file__).resolve()) -> str:
    """The kernels' PYTHONSTARTUP: loads this file as a module of its own and installs it."""
    return (
        "# Written by `make hub` (hub/kernel_limits.py): names the memory and process limits\n"
        "# where they stop something of yours.\n"
        "def _workbook_limits():\n"
        "    import importlib.util\n"
        f"    spec = importlib.util.spec_from_file_location('workbook_kernel_limits', {str(module)!r})\n"
        "    module = importlib.util.module_from_spec(spec)\n"
        "    spec.loader.exec_module(module)\n"
        "    module.install(get_ipython())\n"
        "\n"
        "\n"
        "try:\n"
        "    _workbook_limits()\n"
        "except Exception:  # not in IPython, or the limits cannot be read: nothing to say\n"
        "    pass\n"
        "del _workbook_limits\n"
    )

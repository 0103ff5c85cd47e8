"""Layout: how many workers a run gets, how many threads each, and whether they are pinned.

choose_layout() decides it from -np, share=, the launcher and the hosts; the helpers below it
are its cases (np="auto", a given -np, a share of the cores per worker).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, replace

from workbook.facts import with_safe_env
from workbook.prose import plural
from workbook.runner.hosts import slots_of_hosts


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
    # GPUs this machine has that the workers do not see (CUDA_VISIBLE_DEVICES=""): fewer than
    # the workers, and the lesson's pinning, gpus[hvd.local_rank()], needs one per worker.
    hidden_gpus: int = 0

    def env(self) -> dict[str, str]:
        """Environment variables that give each worker its share of the cores (and hide the
        GPUs of a CPU layout on a machine that has some)."""
        hidden = {HIDE_GPUS[0]: HIDE_GPUS[1]} if self.hidden_gpus else {}
        if self.threads is None:
            return hidden
        return {
            "TF_NUM_INTRAOP_THREADS": str(self.threads),
            "OMP_NUM_THREADS": str(self.threads),
            # One inter-op thread: more would only compete with the other workers.
            "TF_NUM_INTEROP_THREADS": "1",
            **hidden,
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
            on = "on one GPU" if self.workers == 1 else "one GPU each"
            text += f", {on} ({plural(self.gpus, 'GPU')} visible)"
        if not self.gpus and self.workers > self.cores:
            text += " (more workers than cores: they take turns)"
        if self.hidden_gpus:
            text += "; " + hidden_gpus_reason(self.hidden_gpus, self.workers)
        return text


# What hides every GPU from a worker: CUDA shows none, TensorFlow lists none and runs on the CPU.
HIDE_GPUS = ("CUDA_VISIBLE_DEVICES", "")


def hidden_gpus_reason(gpus: int, workers: int) -> str:
    """Why a layout's workers run on the CPU on a machine with `gpus` GPUs, in one clause."""
    hidden = f'on the CPU, the {plural(gpus, "GPU")} hidden (CUDA_VISIBLE_DEVICES="")'
    if workers > gpus:
        return (
            f"{hidden}: the lesson's gpus[hvd.local_rank()] needs a GPU per worker, and "
            f"with {plural(workers, 'worker')} on {plural(gpus, 'GPU')} local rank {gpus} "
            "would find none (IndexError)"
        )
    return (
        f'{hidden}, like the CPU workers of np="auto" it is the reference for (with '
        f'{plural(gpus, "GPU")}, np="auto" runs 2 workers on the CPU)'
    )


def auto_layout(cores: int, gpus: int) -> Layout:
    """`-np auto`: one worker per GPU when there are 2 or more; otherwise 2 workers sharing the
    CPU cores (1 on 1 core), with a single GPU hidden: 1 worker on 1 GPU would compare one
    worker with one worker (the GPU gets a run of its own, np=1)."""
    cores = max(1, cores)
    if gpus >= 2:
        return Layout(workers=gpus, threads=max(1, cores // gpus), cores=cores, gpus=gpus)
    # Two workers show data parallelism; more, each with a sliver of a CPU, only add overhead.
    workers = 2 if cores >= 2 else 1
    return gpus_for(Layout(workers=workers, threads=cores // workers, cores=cores), gpus)


def gpus_for(layout: Layout, gpus: int) -> Layout:
    """`layout` on a machine with `gpus` GPUs: one per worker when there are enough, else none,
    hidden (the lesson's gpus[hvd.local_rank()] fails on a worker without a GPU of its own)."""
    if gpus >= layout.workers:
        return replace(layout, gpus=gpus, hidden_gpus=0)
    return replace(layout, gpus=0, hidden_gpus=gpus)


def explicit_layout(workers: int, cores: int, gpus: int, hosts: str | None = None) -> Layout:
    """A given -np: on this machine, split the cores between the workers; elsewhere, don't."""
    if hosts is not None:
        return Layout(workers=workers, threads=None, cores=cores, gpus=0, hosts=hosts)
    cores = max(1, cores)
    return gpus_for(Layout(workers=workers, threads=max(1, cores // workers), cores=cores), gpus)


def share_layout(workers: int, share: int | str, cores: int, gpus: int) -> Layout:
    """`share`: each worker gets the cores one worker of `-np auto` gets ("auto"), or that many.

    On CPUs, a worker's share of the cores is its "device": 1 worker with one share against N
    workers is the CPU analogue of 1 GPU against N GPUs.
    """
    auto = auto_layout(cores, gpus)
    per_worker = auto.threads if share == "auto" else int(share)
    if per_worker < 1 or workers * per_worker > max(1, cores):
        raise ValueError(
            f"{plural(workers, 'worker')} x {plural(per_worker, 'core')} do not fit in the "
            f"{plural(cores, 'CPU core')} this process may use"
        )
    layout = Layout(workers=workers, threads=per_worker, cores=cores)
    # share="auto" is the reference of np="auto": on the device its workers have (a 1-GPU
    # machine's 2 auto workers run on the CPU, so its reference does too).
    layout = (
        gpus_for(layout, gpus)
        if share != "auto" or auto.gpus
        else replace(layout, hidden_gpus=gpus)
    )
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


def choose_layout(
    np: int | str,
    *,
    share: int | str | None,
    launcher: str,
    cores: int,
    gpus: int | None,
    hosts: str | None,
    remote: str | None,
    launch_options: list[str],
) -> Layout:
    """The layout of a run from -np (a number or "auto"), share= (cores per worker), the
    launcher, this machine's cores and GPUs (gpus None: count them), the hosts of -H (None: this
    machine) and `remote`, those hosts when the run reaches other machines. A given -np against
    the slots of -H is checked by the command (command.check_workers_fit)."""

    def counted_gpus() -> int:
        return visible_gpus() if gpus is None else gpus

    if launcher == "python":
        return _python_layout(np, share, cores, counted_gpus, launch_options)
    if share is not None:
        if hosts is not None:
            raise ValueError("share= splits this machine's cores: it is for runs without -H")
        found = counted_gpus()
        workers = auto_layout(cores, found).workers if str(np) == "auto" else int(np)
        return share_layout(workers, share, cores, found)
    if str(np) == "auto":
        if hosts is not None:
            return explicit_layout(slots_of_hosts(hosts), cores, 0, remote)
        layout = auto_layout(cores, counted_gpus())
        return replace(layout, pinned=pins_cores(layout))
    workers = int(np)
    if workers < 1:
        raise ValueError(f"-np must be at least 1, not {np}")
    return explicit_layout(workers, cores, counted_gpus(), remote)


def _python_layout(np, share, cores: int, counted_gpus, launch_options: list[str]) -> Layout:
    """launcher="python": the script as one plain process, no horovodrun."""
    if launch_options:
        raise ValueError(f"horovodrun options {launch_options} need launcher='horovodrun'")
    if str(np) not in ("auto", "1"):
        raise ValueError("launcher='python' runs one process: use np=1")
    if share is None:
        return Layout(workers=1, threads=None, cores=cores)
    return share_layout(1, share, cores, counted_gpus())


def without_threads(layout: Layout) -> Layout:
    """TensorFlow's own thread counts: no TF_NUM_*_THREADS, nothing pinned."""
    return replace(layout, threads=None, pinned=False)

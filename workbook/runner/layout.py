"""Layout: how many workers, and how many threads each, for this machine or the given hosts."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

# The preflight's count, so that its "up to N CPU workers" and `-np auto` agree.
from workbook.preflight import usable_cores

__all__ = ["Layout", "auto_layout", "explicit_layout", "plural", "usable_cores", "visible_gpus"]


def visible_gpus() -> int:
    """NVIDIA GPUs the workers would see, counted without importing TensorFlow."""
    listed = None
    if shutil.which("nvidia-smi"):
        try:
            reply = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
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
    hosts: str | None = None  # as for horovodrun -H, when the run spans named hosts

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
        text = f"{workers}{threads} on {plural(self.cores, 'CPU core')}"
        if self.gpus:
            text += f", one GPU each ({plural(self.gpus, 'GPU')} visible)"
        if not self.gpus and self.workers > self.cores:
            text += " (more workers than cores: they take turns)"
        return text


def plural(count: int, noun: str) -> str:
    """`2 workers`, `1 thread`, `3 processes`."""
    if count == 1:
        return f"1 {noun}"
    return f"{count} {noun}es" if noun.endswith("s") else f"{count} {noun}s"


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

"""What the numbers were measured on: CPU, cores, memory, GPUs, versions, the commit."""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import datetime, timezone
from importlib import metadata

from workbook.paths import REPO
from workbook.prose import plural


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_gib() -> float | None:
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        return round(pages * page_size / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def gpus() -> list:
    """GPU names from nvidia-smi (without importing TensorFlow); [] when there is none."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def commit() -> str | None:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or None


def describe() -> dict:
    tensorflow = version("tensorflow-cpu") or version("tensorflow") or version("tensorflow-macos")
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": memory_gib(),
        "gpus": gpus(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "tensorflow": tensorflow,
        "horovod": version("horovod"),
        "nbgrader": version("nbgrader"),
        "commit": commit(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def one_line(machine: dict) -> str:
    gpus = machine["gpus"]
    gpu = f", {plural(len(gpus), 'GPU')} ({gpus[0]})" if gpus else ", no GPU"
    return (
        f"{machine['cores']} cores ({machine['cpu']}), {machine['memory_gib']} GiB{gpu}; "
        f"TensorFlow {machine['tensorflow']}, Horovod {machine['horovod']}; {machine['date']}"
    )

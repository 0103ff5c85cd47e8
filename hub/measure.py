"""Sizing a workshop VM: peak memory and CPU time of one command and everything it starts.

    python -m hub.measure [--interval 0.5] -- COMMAND...

Samples the resident memory (RSS) of the command's whole process tree every `interval` seconds
and prints the peak of the sum, the CPU time used (user + system, all processes) and the wall
time: the figures of INSTALL.md's sizing table ("Workshop VM") came from this.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import psutil


def tree(root: psutil.Process) -> list[psutil.Process]:
    try:
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def measure(command: list[str], interval: float = 0.5) -> dict:
    started = time.monotonic()
    process = subprocess.Popen(command)
    root = psutil.Process(process.pid)
    peak, cpu = 0, {}
    while process.poll() is None:
        rss = 0
        for member in tree(root):
            try:
                rss += member.memory_info().rss
                times = member.cpu_times()
                cpu[member.pid] = times.user + times.system  # its last sample counts
            except psutil.Error:
                pass
        peak = max(peak, rss)
        time.sleep(interval)
    return {
        "exit": process.returncode,
        "peak_rss_mib": round(peak / 2**20),
        "cpu_s": round(sum(cpu.values()), 1),
        "wall_s": round(time.monotonic() - started, 1),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hub.measure", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    result = measure(command, args.interval)
    print(
        f"peak memory {result['peak_rss_mib']} MiB, CPU {result['cpu_s']} s, "
        f"wall {result['wall_s']} s, exit {result['exit']}"
    )
    return result["exit"]


if __name__ == "__main__":
    sys.exit(main())

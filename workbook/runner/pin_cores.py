"""Runs a script on this worker's own block of CPU cores: the runner's launcher for a CPU layout.

    python pin_cores.py CORES_PER_WORKER script.py [args...]

Worker i (its local rank: HOROVOD_LOCAL_RANK from horovodrun, OMPI_COMM_WORLD_LOCAL_RANK from
mpirun; WORKBOOK_CORE_BLOCK for independent processes side by side, as the benchmarks start
them; 0 for a lone process) is pinned to the i-th block of CORES_PER_WORKER of the cores it
may use, before TensorFlow starts, so that every thread it makes (compute, tf.data, Horovod's)
stays there: a thread limit alone lets a lone worker's input pipeline borrow the idle cores.
Run by path, so the standard library only; the script then runs as `python script.py` would.
"""

import os
import runpy
import sys

LOCAL_RANK_VARIABLES = ("HOROVOD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "WORKBOOK_CORE_BLOCK")


def local_rank(env=os.environ) -> int:
    for name in LOCAL_RANK_VARIABLES:
        if env.get(name, "").strip().isdigit():
            return int(env[name])
    return 0


def cores_of_worker(allowed, per_worker: int, rank: int) -> list:
    """The rank-th block of per_worker cores of `allowed`; all of them if there is no such block."""
    allowed = sorted(allowed)
    block = allowed[rank * per_worker : (rank + 1) * per_worker]
    return block if len(block) == per_worker else allowed


def main(argv) -> None:
    if len(argv) < 2 or not argv[0].isdigit() or int(argv[0]) < 1:
        sys.exit("usage: python pin_cores.py CORES_PER_WORKER script.py [args...]")
    per_worker, script, args = int(argv[0]), argv[1], argv[2:]
    if hasattr(os, "sched_setaffinity"):  # Linux; elsewhere the threads limit alone applies
        cores = cores_of_worker(os.sched_getaffinity(0), per_worker, local_rank())
        os.sched_setaffinity(0, cores)
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))  # as `python script.py` sets it
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])

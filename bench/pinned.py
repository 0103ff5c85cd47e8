"""Runs a script on this worker's own share of the CPU cores (the scaling benchmark's launcher):

    python bench/pinned.py CORES_PER_WORKER script.py [args...]

Worker i (HOROVOD_LOCAL_RANK; else BENCH_CORE_BLOCK, for separate processes; else 0) is
pinned to the i-th block of CORES_PER_WORKER cores before TensorFlow starts, so every thread
it makes (compute, tf.data, Horovod's) stays there. An intra-op thread limit alone lets the input pipeline of a lone worker
run on the idle cores, which flatters the 1-worker baseline.
"""

import os
import runpy
import sys


def main() -> None:
    per_worker, script, args = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    allowed = sorted(os.sched_getaffinity(0))
    rank = int(os.environ.get("HOROVOD_LOCAL_RANK") or os.environ.get("BENCH_CORE_BLOCK", "0"))
    cores = allowed[rank * per_worker : (rank + 1) * per_worker] or allowed
    os.sched_setaffinity(0, cores)
    sys.argv = [script, *args]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()

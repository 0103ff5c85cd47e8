"""A worker script for tests/system/test_runner_runs.py: rank 1 raises, rank 0 waits to be
stopped.

No TensorFlow, so it starts in a second; horovodrun sets HOROVOD_RANK for every worker.
"""

import os
import sys
import time

rank = int(os.environ["HOROVOD_RANK"])
print(f"worker {rank} started with arguments {sys.argv[1:]}", flush=True)
if rank == 1:
    time.sleep(1)
    raise RuntimeError("rank 1 fails on purpose")
# Rank 0 would run far longer: horovodrun has to stop it when rank 1 fails.
time.sleep(60)

"""A worker script for tests/system/test_runner_cleanup.py: hvd.init(), one line, then an
optional wait.

`--wait S` keeps the worker (and, in a single process, OpenMPI's orted) alive for S seconds, so
that a test can stop the run while they are there.
"""

import argparse
import time

import horovod.tensorflow as hvd

parser = argparse.ArgumentParser()
parser.add_argument("--wait", type=float, default=0)
args = parser.parse_args()

hvd.init()
print(f"initialized rank {hvd.rank()} of {hvd.size()}", flush=True)
time.sleep(args.wait)

"""A script for tests/smoke/test_runner_processes.py: writes a recorded output again, cut and
delayed at random.

    python replay_output.py OUTPUT_FILE SEED

Pieces of 1 to 200 bytes go to stdout with pauses of 0 to 20 ms in between, the way a pipe can
deliver them; the seed makes each cut repeatable.
"""

import os
import random
import sys
import time

data = open(sys.argv[1], "rb").read()
rng = random.Random(int(sys.argv[2]))
at = 0
while at < len(data):
    size = rng.choice([1, 2, 5, 17, 64, 200])
    os.write(1, data[at : at + size])
    at += size
    time.sleep(rng.choice([0, 0, 0, 0.001, 0.005, 0.02]))

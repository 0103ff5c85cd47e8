"""Elastic training's discovery script (solutions/bonus/discover_hosts.sh) names this machine
twice.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BONUS = REPO / "solutions" / "bonus"
DISCOVER_HOSTS = BONUS / "discover_hosts.sh"

# Besides everything the solution defines before its training part (`args = parse_args()`),
# these helpers of its training part are shared too.

# 6 epochs of 24 steps (12 per worker while there are two, 24 with one): long enough to kill a
# worker in epoch 2 and see several epochs after it, about a minute on a busy 2-core machine.
# Generous: on a 2-core machine shared with other jobs (load average 22), epoch 2 started after
# 260 s and the run ended 52 s after the kill; at a quieter moment, after about 30 s and 16-25 s.


# --- fast ------------------------------------------------------------------------------------


def test_discovery_script_lists_this_machine_under_two_names():
    assert os.access(DISCOVER_HOSTS, os.X_OK), f"{DISCOVER_HOSTS} must be executable"
    output = subprocess.run(
        [str(DISCOVER_HOSTS)], capture_output=True, text=True, timeout=10, check=True
    ).stdout
    assert output.split() == ["localhost:1", "127.0.0.1:1"]

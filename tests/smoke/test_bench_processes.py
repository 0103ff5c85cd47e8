"""The benchmarks' processes: the pinned launcher gives each local rank its own cores."""

from __future__ import annotations

import os
import subprocess
import sys

from workbook.runner.command import PIN_LAUNCHER


def test_pinned_launcher_gives_each_local_rank_its_own_cores(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import os, sys; print(sorted(os.sched_getaffinity(0)), sys.argv[1:])")
    allowed = sorted(os.sched_getaffinity(0))
    for rank in range(min(2, len(allowed))):
        # Under horovodrun the local rank says which cores; separate processes get an index.
        for variable in ("HOROVOD_LOCAL_RANK", "WORKBOOK_CORE_BLOCK"):
            env = {k: v for k, v in os.environ.items() if k != "HOROVOD_LOCAL_RANK"}
            done = subprocess.run(
                [sys.executable, str(PIN_LAUNCHER), "1", str(probe), "--x", "1"],
                capture_output=True,
                text=True,
                env={**env, variable: str(rank)},
                check=True,
            )
            assert done.stdout.strip() == f"[{allowed[rank]}] ['--x', '1']"

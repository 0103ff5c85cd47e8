"""The environment a Slurm job gives the lesson's sbatch script, for its smoke and system
tests."""

from __future__ import annotations

import os
import sys

from workbook.paths import REPO


def job_env(tmp_path, train_args, **slurm):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(
        SLURM_JOB_ID="4242",
        SLURM_SUBMIT_DIR=str(REPO),
        WORKBOOK_VENV=sys.prefix,
        TRAIN_ARGS=train_args,
        # Two workers on this machine's cores: one thread each, or they fight over them.
        TF_NUM_INTRAOP_THREADS="1",
        TF_NUM_INTEROP_THREADS="1",
        PYTHONUNBUFFERED="1",
        **slurm,
    )
    return env

"""What Horovod was built with (Gloo, MPI), asked once per build and kept on disk.

Before it starts any worker, horovodrun 0.28.1 asks whether Horovod was built with Gloo (or
MPI) by importing horovod.tensorflow, and with it TensorFlow, in a forked process: 3-6 s on a
2-core machine, at every launch, for an answer that changes only when Horovod is rebuilt. The
runner asks once (built_controllers(): a subprocess, its answer kept on disk per Horovod
build) and starts horovodrun through workbook/runner/launcher.py with the answer in
WORKBOOK_HOROVOD_BUILT, which gives it to horovodrun's launcher. A controller the answer does
not name is checked by horovodrun as before.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

BUILT_VARIABLE = "WORKBOOK_HOROVOD_BUILT"  # "gloo", "gloo,mpi", ...: what was found built
CONTROLLERS = ("gloo", "mpi")
CHECK_TIMEOUT_S = 120
_CHECK = (
    "import json; from horovod.common.util import gloo_built, mpi_built; "
    "print(json.dumps({'gloo': bool(gloo_built()), 'mpi': bool(mpi_built())}))"
)


def _build_key() -> str:
    """What changes when Horovod is rebuilt or another environment is used."""
    import horovod

    library = Path(horovod.__file__).parent
    stamps = sorted((p.name, p.stat().st_mtime_ns) for p in library.glob("*/mpi_lib*.so"))
    return json.dumps([sys.executable, str(library), stamps])


def _cache_file() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "horovod-workbook" / "horovod-built.json"


@functools.cache
def built_controllers() -> str:
    """The controllers this environment's Horovod was built with, "gloo,mpi" style ("" when
    the check failed: horovodrun then checks for itself)."""
    try:
        key = _build_key()
    except (ImportError, OSError):
        return ""
    path = _cache_file()
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved.get("key") == key:
            return saved["built"]
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHECK], capture_output=True, text=True, timeout=CHECK_TIMEOUT_S
        )
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return ""
    built = ",".join(name for name in CONTROLLERS if found.get(name))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"key": key, "built": built}), encoding="utf-8")
    except OSError:
        pass  # no cache here: the next process asks again
    return built

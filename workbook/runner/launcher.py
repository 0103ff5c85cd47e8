"""horovodrun, without repeating its slowest start-up check once the answer is known.

    python -m workbook.runner.launcher [horovodrun's options] COMMAND...    (the runner does it)

It gives horovodrun's launcher the answer to its Gloo/MPI build check that the runner found
(workbook.runner.horovod_build, in WORKBOOK_HOROVOD_BUILT) and runs it unchanged otherwise.
Nothing imports this module: it is only run with -m (imported by the package first, `python -m`
would warn that it found it in sys.modules).
"""

from __future__ import annotations

import os
import sys

from workbook.runner.horovod_build import BUILT_VARIABLE


def main() -> int | None:
    from horovod.runner import launch

    built = set(os.environ.pop(BUILT_VARIABLE, "").split(","))
    if "gloo" in built:
        launch.gloo_built = lambda verbose=False: True
    if "mpi" in built:
        launch.mpi_built = lambda verbose=False: True
    sys.argv[0] = "horovodrun"
    return launch.run_commandline()


if __name__ == "__main__":
    sys.exit(main())

"""Make the environment itself safe from OpenMPI's X-display hang, whatever shell starts it.

With Horovod built with MPI, OpenMPI's hwloc probes X displays through its GL component, and
anything listening on 127.0.0.1:6000-6063 (TensorBoard's 6006, or each attendee's TensorBoard
on a workshop hub) looks like a display: `hvd.init()` in a plain `python` run, `horovodrun`
and `mpirun` then wait forever for a reply (open-mpi/ompi#10025). HWLOC_COMPONENTS=-gl turns
that probe off. Two files make every process of the environment get it, with nothing exported
by hand:

    site-packages/workbook_safe_env.pth   run by the environment's Python at start-up (python,
                                          horovodrun, jupyter, kernels: all are that Python),
                                          before any user code: sets the variable unless set;
                                          what they start (orted, mpirun, workers) inherits it
    bin/mpirun, bin/mpiexec               wrappers that set it, then run OpenMPI's own program
                                          (the next one on PATH): the environment's mpirun

A value the user set, even empty, is kept. The same setting is workbook.facts.SAFE_PROCESS_ENV
(the bootstrap imports nothing of the workbook; tests/unit/test_safe_env.py checks the two agree).
Standard library only.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

VARIABLE, VALUE = "HWLOC_COMPONENTS", "-gl"
PTH_NAME = "workbook_safe_env.pth"
# A .pth line that starts with `import` is executed by site.py when the interpreter starts.
PTH_TEXT = (
    f"# Written by the workbook's bootstrap (bootstrap/safe_env.py): {VARIABLE}={VALUE} for every\n"
    "# process of this environment, so that OpenMPI never hangs on TensorBoard's port.\n"
    f"import os; os.environ.setdefault({VARIABLE!r}, {VALUE!r})\n"
)
WRAPPED = ("mpirun", "mpiexec")
WRAPPER_MARK = "# horovod-workbook: mpirun wrapper"


def wrapper_text(name: str) -> str:
    return f"""#!/bin/sh
{WRAPPER_MARK}
# Written by the workbook's bootstrap (bootstrap/safe_env.py): OpenMPI's {name} with
# {VARIABLE}={VALUE} unless already set, so that a listener on 127.0.0.1:6000-6063 (TensorBoard)
# cannot hang it (open-mpi/ompi#10025). Runs the next {name} on PATH after this folder.
export {VARIABLE}="${{{VARIABLE}-{VALUE}}}"
here=$(cd "$(dirname "$0")" && pwd -P)
IFS=:
for dir in $PATH:/usr/bin:/usr/local/bin; do
    [ -n "$dir" ] && [ -x "$dir/{name}" ] || continue
    [ "$(cd "$dir" && pwd -P)" = "$here" ] && continue
    exec "$dir/{name}" "$@"
done
echo "{name}: OpenMPI is not installed (Debian/Ubuntu: apt-get install openmpi-bin libopenmpi-dev)" >&2
exit 127
"""


def site_packages(venv: Path) -> list[Path]:
    """The environment's site-packages folders (lib/pythonX.Y/site-packages)."""
    return sorted(path for path in (venv / "lib").glob("python3*/site-packages") if path.is_dir())


def is_ours(path: Path) -> bool:
    try:
        return WRAPPER_MARK in path.read_text(errors="replace")[:200]
    except OSError:
        return False


def real_program(name: str, venv: Path, environ: dict | None = None) -> str | None:
    """OpenMPI's own program on PATH, not a wrapper of ours in the environment."""
    path = (os.environ if environ is None else environ).get("PATH", "")
    here = (venv / "bin").resolve()
    kept = os.pathsep.join(d for d in path.split(os.pathsep) if d and Path(d).resolve() != here)
    found = shutil.which(name, path=kept)
    return found if found and not is_ours(Path(found)) else None


def install(venv: Path, environ: dict | None = None) -> list[str]:
    """Write the start-up hook and the wrappers (idempotent); what was done, for the log."""
    done = []
    packages = site_packages(venv)
    if not packages:
        raise FileNotFoundError(f"no lib/python3*/site-packages in {venv}")
    for folder in packages:
        hook = folder / PTH_NAME
        if not hook.exists() or hook.read_text() != PTH_TEXT:
            hook.write_text(PTH_TEXT)
            done.append(f"wrote {hook}")
    for name in WRAPPED:
        target = venv / "bin" / name
        if target.exists() and not is_ours(target):
            done.append(f"kept {target} (not ours: it is not made safe; export {VARIABLE}={VALUE})")
            continue
        if real_program(name, venv, environ) is None:
            if target.exists():
                target.unlink()  # OpenMPI is gone: no wrapper that only fails
                done.append(f"removed {target} (no {name} on PATH)")
            continue
        text = wrapper_text(name)
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
            target.chmod(0o755)
            done.append(f"wrote {target}")
    return done

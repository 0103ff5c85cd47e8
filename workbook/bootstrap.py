"""Create or update the workbook's virtual environment (`.venv`), building Horovod if needed.

Runs with any Python 3 (standard library only), because it is what creates the environment:

    python3 -m workbook.bootstrap [--device cpu|gpu] [--rebuild-horovod]

Order matters: TensorFlow first, then the other pins, then Horovod compiled against that
TensorFlow (Horovod's sdist links to the TensorFlow it finds at build time). A stamp file records
what was installed, so a second run with unchanged requirements returns in well under a second.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from workbook.paths import REPO

REQUIREMENTS = REPO / "requirements"
DEFAULT_VENV = REPO / ".venv"
STAMP_NAME = "workbook-env.json"
PYTHON_VERSION = (3, 11)

# Build variables for Horovod: TensorFlow + Gloo always; NCCL for GPU allreduce on CUDA machines.
# MPI is opt-in (HOROVOD_WITH_MPI=1 in the environment) because it needs OpenMPI installed first.
HOROVOD_BUILD_ENV = {
    "cpu": {
        "HOROVOD_WITH_TENSORFLOW": "1",
        "HOROVOD_WITH_GLOO": "1",
        "HOROVOD_WITHOUT_MPI": "1",
        "HOROVOD_WITHOUT_PYTORCH": "1",
        "HOROVOD_WITHOUT_MXNET": "1",
    },
    "gpu": {
        "HOROVOD_WITH_TENSORFLOW": "1",
        "HOROVOD_WITH_GLOO": "1",
        "HOROVOD_WITHOUT_MPI": "1",
        "HOROVOD_WITHOUT_PYTORCH": "1",
        "HOROVOD_WITHOUT_MXNET": "1",
        "HOROVOD_GPU_OPERATIONS": "NCCL",
    },
}
HOROVOD_BUILD_ENV["macos"] = HOROVOD_BUILD_ENV["cpu"]


def default_device() -> str:
    return os.environ.get("WORKBOOK_DEVICE") or ("macos" if sys.platform == "darwin" else "cpu")


class SetupError(Exception):
    """A problem the user can fix; the message says how."""


def requirement_files(device: str) -> list[Path]:
    return [
        REQUIREMENTS / "build.txt",
        REQUIREMENTS / f"tensorflow-{device}.txt",
        REQUIREMENTS / "workbook.txt",
        REQUIREMENTS / "horovod.txt",
        *constraint_files(device),
        REPO / "pyproject.toml",
    ]


def constraint_files(device: str) -> list[Path]:
    """The full lock of the tested CPU environment; other variants resolve their own wheels."""
    return [REQUIREMENTS / "constraints.txt"] if device == "cpu" else []


def files_sha256(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def wanted_state(device: str) -> dict:
    """What the stamp must say for the environment to count as up to date."""
    build_env = dict(HOROVOD_BUILD_ENV[device])
    if os.environ.get("HOROVOD_WITH_MPI") == "1":
        build_env.update(HOROVOD_WITH_MPI="1", HOROVOD_WITHOUT_MPI="0")
    return {
        "device": device,
        "requirements_sha256": files_sha256(requirement_files(device)),
        # Horovod must be recompiled only when TensorFlow, Horovod or the build flags change.
        "horovod_inputs_sha256": files_sha256([REQUIREMENTS / f"tensorflow-{device}.txt",
                                               REQUIREMENTS / "horovod.txt"]),
        "horovod_build": build_env,
    }


def read_stamp(venv: Path) -> dict | None:
    try:
        return json.loads((venv / STAMP_NAME).read_text())
    except (OSError, ValueError):
        return None


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def find_base_python() -> str:
    """A Python 3.11 interpreter to create the venv with."""
    if sys.version_info[:2] == PYTHON_VERSION:
        return sys.executable
    name = "python%d.%d" % PYTHON_VERSION
    found = shutil.which(name)
    if found:
        return found
    raise SetupError(
        f"Python {name[6:]} is required (found {sys.version.split()[0]}). Fix: install it "
        "(Debian/Ubuntu: `apt-get install python3.11 python3.11-venv`, macOS: `brew install "
        "python@3.11`, or `conda env create -f environment.yml`), then re-run."
    )


def run_logged(cmd: list[str], log: Path, env: dict | None = None, what: str = "") -> None:
    """Run a command, appending its output to the log; on failure show the log's tail."""
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        result = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    if result.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise SetupError(f"{what or cmd[0]} failed (exit {result.returncode}).\n{tail}\n"
                         f"Full log: {log}")


def pip_install(venv: Path, log: Path, args: list[str], env: dict | None = None,
                what: str = "") -> None:
    cmd = [str(venv_python(venv)), "-m", "pip", "install", "--disable-pip-version-check",
           "--progress-bar", "off", *args]
    run_logged(cmd, log, env=env, what=what)


def check_compilers() -> list[str]:
    """Problems that would stop Horovod's C++ build, each with its fix."""
    problems = []
    if not shutil.which("cmake"):
        problems.append("cmake not found. Fix: `apt-get install cmake` (Debian/Ubuntu), "
                        "`brew install cmake` (macOS) or `conda install cmake`.")
    if not (shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")):
        problems.append("no C++ compiler (g++) found. Fix: `apt-get install g++` (Debian/Ubuntu), "
                        "`xcode-select --install` (macOS) or `conda install cxx-compiler`.")
    return problems


def horovod_check_build(venv: Path) -> str | None:
    """`horovodrun --check-build` output, or None when Horovod is missing or broken."""
    horovodrun = venv / "bin" / "horovodrun"
    if not horovodrun.exists():
        return None
    result = subprocess.run([str(horovodrun), "--check-build"], capture_output=True, text=True)
    return result.stdout if result.returncode == 0 else None


def horovod_error(venv: Path) -> str:
    """Why `horovodrun --check-build` fails: the last line of its error output."""
    result = subprocess.run([str(venv / "bin" / "horovodrun"), "--check-build"],
                            capture_output=True, text=True)
    lines = (result.stderr or result.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit code {result.returncode}"


def horovod_has(check_build: str, name: str) -> bool:
    return any(line.strip() == f"[X] {name}" for line in check_build.splitlines())


def build_horovod(venv: Path, log: Path, state: dict, fresh: bool) -> None:
    problems = check_compilers()
    if problems:
        raise SetupError("Cannot build Horovod:\n  " + "\n  ".join(problems))
    env = dict(os.environ, **state["horovod_build"])
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    # The old build must go first: a reinstall that is "already satisfied" would keep it.
    run_logged([str(venv_python(venv)), "-m", "pip", "uninstall", "-y", "horovod"], log,
               what="pip uninstall horovod")
    # pip caches the wheel it builds, keyed by the sdist only. That is safe for the default
    # CPU build (TensorFlow is pinned), but a forced rebuild or other build flags (GPU, MPI)
    # must neither reuse nor pollute that cache.
    cache = [] if state["horovod_build"] == HOROVOD_BUILD_ENV["cpu"] and not fresh else \
        ["--no-cache-dir"]
    locked = [arg for path in constraint_files(state["device"]) for arg in ("-c", str(path))]
    pip_install(venv, log, ["--no-build-isolation", *cache, *locked,
                            "-r", str(REQUIREMENTS / "horovod.txt")],
                env=env, what="Building Horovod")


def ensure_environment(venv: Path, device: str, rebuild_horovod: bool) -> str:
    """Bring the venv up to date; return a one-line summary of what was done."""
    state = wanted_state(device)
    stamp = read_stamp(venv)
    if stamp == state and venv_python(venv).exists() and not rebuild_horovod:
        return f"Environment {venv} is up to date ({device})."

    started = time.monotonic()
    log = venv.parent / f"{venv.name}-setup.log"
    if not venv_python(venv).exists():
        python = find_base_python()
        step(f"Creating virtual environment {venv} with {python}")
        run_logged([python, "-m", "venv", str(venv)], log, what="python -m venv")
    step(f"Installing Python packages ({device}); log: {log}")
    locked = [arg for path in constraint_files(device) for arg in ("-c", str(path))]
    pip_install(venv, log, ["-r", str(REQUIREMENTS / "build.txt")], what="pip (build tools)")
    pip_install(venv, log, ["-r", str(REQUIREMENTS / f"tensorflow-{device}.txt"), *locked],
                what="pip (TensorFlow)")
    pip_install(venv, log, ["-r", str(REQUIREMENTS / "workbook.txt"), *locked],
                what="pip (workbook)")
    # The workbook's own packages, editable: kernels started in notebooks/ import them too.
    pip_install(venv, log, ["--no-build-isolation", "--no-deps", "-e", str(REPO)],
                what="pip (workbook packages)")

    # Rebuild Horovod when asked, when missing or broken, or when TensorFlow, Horovod or the
    # build settings changed (Horovod records the TensorFlow it was compiled against).
    check_build = horovod_check_build(venv)
    stamp = stamp or {}
    needs_build = (rebuild_horovod or check_build is None
                   or stamp.get("horovod_inputs_sha256") != state["horovod_inputs_sha256"]
                   or stamp.get("horovod_build") != state["horovod_build"]
                   or not horovod_has(check_build, "TensorFlow"))
    if needs_build:
        step("Building Horovod 0.28.1 against TensorFlow (about 7 minutes on 2 cores, "
             "seconds when pip's cache has it)")
        build_horovod(venv, log, state, fresh=rebuild_horovod)
        check_build = horovod_check_build(venv)
    if check_build is None:
        raise SetupError(f"Horovod was installed but `horovodrun --check-build` fails: "
                         f"{horovod_error(venv)}. Build log: {log}")
    for name in ("TensorFlow", "Gloo"):
        if not horovod_has(check_build, name):
            raise SetupError(
                f"Horovod was built without {name}. Fix: `make env REBUILD_HOROVOD=1` "
                f"(see INSTALL.md, Troubleshooting). Build log: {log}")

    (venv / STAMP_NAME).write_text(json.dumps(state, indent=2) + "\n")
    minutes = (time.monotonic() - started) / 60
    return f"Environment {venv} ready ({device}) in {minutes:.1f} min."


def step(message: str) -> None:
    print(f"==> {message}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=sorted(HOROVOD_BUILD_ENV), default=default_device(),
                        help="TensorFlow variant: cpu (Linux default), gpu (CUDA + NCCL) or "
                             "macos (macOS default)")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV,
                        help="where to create the virtual environment")
    parser.add_argument("--rebuild-horovod", action="store_true",
                        help="recompile Horovod even if it looks fine")
    args = parser.parse_args(argv)
    try:
        print(ensure_environment(args.venv.resolve(), args.device, args.rebuild_horovod))
    except SetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

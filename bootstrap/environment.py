"""Create or update the workbook's virtual environment (`.venv`), building Horovod if needed.

Runs with any Python 3 (standard library only), because it is what creates the environment:

    python3 -m bootstrap [--device cpu|gpu] [--rebuild-horovod]

Order matters: TensorFlow first, then the other pins, then Horovod compiled against that
TensorFlow (Horovod's sdist links to the TensorFlow it finds at build time). A stamp file records
what was installed, so a second run with unchanged requirements returns in well under a second.

Horovod always gets the Gloo controller; it also gets MPI when OpenMPI's compiler wrapper
`mpicxx` is on PATH (HOROVOD_WITHOUT_MPI=1 or HOROVOD_WITH_MPI=1 decide instead). The compiled
wheel is kept in a cache folder named after everything it was built from (build flags,
TensorFlow, Python, MPI), so a rebuilt environment with the same settings installs it in seconds.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bootstrap import safe_env

REPO = (
    Path(__file__).resolve().parents[1]
)  # not workbook.paths: nothing but the standard library here

REQUIREMENTS = REPO / "requirements"
DEFAULT_VENV = REPO / ".venv"
STAMP_NAME = "workbook-env.json"
PYTHON_VERSION = (3, 11)

# Build variables for Horovod: TensorFlow + Gloo always; NCCL for GPU allreduce on CUDA machines.
# MPI is decided per machine by mpi_decision() and adds one of the two variables below.
HOROVOD_BUILD_ENV = {
    "cpu": {
        "HOROVOD_WITH_TENSORFLOW": "1",
        "HOROVOD_WITH_GLOO": "1",
        "HOROVOD_WITHOUT_PYTORCH": "1",
        "HOROVOD_WITHOUT_MXNET": "1",
    },
    "gpu": {
        "HOROVOD_WITH_TENSORFLOW": "1",
        "HOROVOD_WITH_GLOO": "1",
        "HOROVOD_WITHOUT_PYTORCH": "1",
        "HOROVOD_WITHOUT_MXNET": "1",
        "HOROVOD_GPU_OPERATIONS": "NCCL",
    },
}
HOROVOD_BUILD_ENV["macos"] = HOROVOD_BUILD_ENV["cpu"]
# HOROVOD_WITH_MPI=1 makes Horovod's build fail when it cannot find MPI, rather than quietly
# leaving it out; HOROVOD_WITHOUT_MPI=1 stops it from picking up an MPI it happens to find.
WITH_MPI = {"HOROVOD_WITH_MPI": "1"}
WITHOUT_MPI = {"HOROVOD_WITHOUT_MPI": "1"}
INSTALL_OPENMPI = "apt-get install openmpi-bin libopenmpi-dev"
WHEEL_CACHE_VARIABLE = "WORKBOOK_WHEEL_CACHE"


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


@dataclass(frozen=True)
class MpiDecision:
    """Whether Horovod gets the MPI controller, and why (shown to the user, kept in the stamp)."""

    build: bool
    reason: str

    def controllers(self) -> list[str]:
        return ["Gloo", "MPI"] if self.build else ["Gloo"]

    def describe(self) -> str:
        built = " and ".join(self.controllers())
        return f"Horovod controllers: {built} ({self.reason})"


def horovod_inputs_sha256(device: str) -> str:
    # Horovod must be recompiled only when TensorFlow, Horovod or the build flags change.
    return files_sha256([REQUIREMENTS / f"tensorflow-{device}.txt", REQUIREMENTS / "horovod.txt"])


def mpi_decision(
    device: str,
    previous: dict | None = None,
    rebuild: bool = False,
    environ: dict | None = None,
    want_mpi: bool = False,
) -> MpiDecision:
    """MPI or not: the user's variable, else keep a working build as it is, else look for mpicxx.

    want_mpi (`make test`, which has just installed OpenMPI): a build without MPI is redone
    with it when mpicxx is there now, instead of being kept."""
    environ = os.environ if environ is None else environ
    if environ.get("HOROVOD_WITHOUT_MPI") == "1":
        return MpiDecision(False, "HOROVOD_WITHOUT_MPI=1 is set")
    if environ.get("HOROVOD_WITH_MPI") == "1":
        return MpiDecision(True, "HOROVOD_WITH_MPI=1 is set")
    mpicxx = shutil.which("mpicxx", path=environ.get("PATH"))
    previous = previous or {}
    same_build = (
        not rebuild
        and previous.get("device") == device
        and previous.get("horovod_inputs_sha256") == horovod_inputs_sha256(device)
        and isinstance(previous.get("horovod_build"), dict)
    )
    if same_build:
        # Installing OpenMPI later must not trigger a surprise 7-minute rebuild: say how instead.
        built = previous["horovod_build"].get("HOROVOD_WITH_MPI") == "1"
        if built and not mpicxx:
            return MpiDecision(
                True, "built with MPI earlier; mpicxx is no longer on PATH, so mpirun may not work"
            )
        if not built and mpicxx and want_mpi:
            return MpiDecision(
                True,
                f"built without MPI earlier; {mpicxx} is there now and "
                "the tests need MPI: rebuilding Horovod with it",
            )
        if not built and mpicxx:
            return MpiDecision(
                False,
                f"built without MPI earlier; {mpicxx} is there now: "
                "`make env REBUILD_HOROVOD=1` adds MPI",
            )
    if mpicxx:
        return MpiDecision(True, f"OpenMPI's compiler wrapper was found: {mpicxx}")
    return MpiDecision(
        False,
        f"no mpicxx on PATH; to add MPI: `{INSTALL_OPENMPI}`, then `make env REBUILD_HOROVOD=1`",
    )


def wanted_state(device: str, mpi: MpiDecision | None = None) -> dict:
    """What the stamp must say for the environment to count as up to date."""
    mpi = mpi_decision(device) if mpi is None else mpi
    build_env = {**HOROVOD_BUILD_ENV[device], **(WITH_MPI if mpi.build else WITHOUT_MPI)}
    return {
        "device": device,
        "requirements_sha256": files_sha256(requirement_files(device)),
        "horovod_inputs_sha256": horovod_inputs_sha256(device),
        "horovod_build": build_env,
    }


def stamp_matches(stamp: dict | None, state: dict) -> bool:
    """The stamp's keys beyond the wanted state (what was built and why) are informational."""
    return stamp is not None and all(stamp.get(key) == value for key, value in state.items())


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
        raise SetupError(
            f"{what or cmd[0]} failed (exit {result.returncode}).\n{tail}\nFull log: {log}"
        )


def pip_install(
    venv: Path, log: Path, args: list[str], env: dict | None = None, what: str = ""
) -> None:
    cmd = [
        str(venv_python(venv)),
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
        *args,
    ]
    run_logged(cmd, log, env=env, what=what)


def check_compilers() -> list[str]:
    """Problems that would stop Horovod's C++ build, each with its fix."""
    problems = []
    if not shutil.which("cmake"):
        problems.append(
            "cmake not found. Fix: `apt-get install cmake` (Debian/Ubuntu), "
            "`brew install cmake` (macOS) or `conda install cmake`."
        )
    if not (shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")):
        problems.append(
            "no C++ compiler (g++) found. Fix: `apt-get install g++` (Debian/Ubuntu), "
            "`xcode-select --install` (macOS) or `conda install cxx-compiler`."
        )
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
    result = subprocess.run(
        [str(venv / "bin" / "horovodrun"), "--check-build"], capture_output=True, text=True
    )
    lines = (result.stderr or result.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit code {result.returncode}"


def horovod_has(check_build: str, name: str) -> bool:
    return any(line.strip() == f"[X] {name}" for line in check_build.splitlines())


def wheel_cache_root() -> Path:
    if os.environ.get(WHEEL_CACHE_VARIABLE):
        return Path(os.environ[WHEEL_CACHE_VARIABLE])
    cache_home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache_home) / "horovod-workbook" / "wheels"


def installed_build_inputs(venv: Path) -> dict:
    """What a compiled Horovod depends on besides its flags: the venv's Python and TensorFlow."""
    probe = (
        "import json, platform, sys\n"
        "from importlib import metadata\n"
        "tf = sorted(f\"{d.metadata['Name']}=={d.version}\" for d in metadata.distributions()\n"
        "            if (d.metadata['Name'] or '').lower().startswith('tensorflow')\n"
        "            and 'addons' not in d.metadata['Name'].lower())\n"
        "print(json.dumps({'python': sys.version.split()[0], 'machine': platform.machine(),\n"
        "                  'system': platform.system(), 'tensorflow': tf}))"
    )
    result = subprocess.run([str(venv_python(venv)), "-c", probe], capture_output=True, text=True)
    return json.loads(result.stdout) if result.returncode == 0 else {"probe_error": result.stderr}


def mpi_identity() -> str:
    """Which MPI a build links to: the wrapper's real path and mpirun's version line."""
    mpicxx = shutil.which("mpicxx")
    mpirun = shutil.which("mpirun")
    version = ""
    if mpirun:
        result = subprocess.run([mpirun, "--version"], capture_output=True, text=True)
        version = (result.stdout.strip().splitlines() or [""])[0]
    return f"{os.path.realpath(mpicxx) if mpicxx else None} {version}"


def wheel_cache_dir(venv: Path, state: dict) -> Path:
    """The cache folder for exactly this build: a hash of every input that changes the wheel."""
    build = state["horovod_build"]
    inputs = {
        "build": build,
        "horovod": (REQUIREMENTS / "horovod.txt").read_text(),
        "installed": installed_build_inputs(venv),
        "mpi": mpi_identity() if build.get("HOROVOD_WITH_MPI") == "1" else None,
    }
    key = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]
    return wheel_cache_root() / key


def compile_horovod_wheel(venv: Path, log: Path, state: dict, cache_dir: Path) -> Path:
    """`pip wheel` Horovod with the build flags into cache_dir; return the wheel."""
    problems = check_compilers()
    if problems:
        raise SetupError("Cannot build Horovod:\n  " + "\n  ".join(problems))
    env = dict(os.environ, **state["horovod_build"])
    for name in ("HOROVOD_WITH_MPI", "HOROVOD_WITHOUT_MPI"):
        if name not in state["horovod_build"]:
            env.pop(name, None)  # the decision was made; the other variable must not undo it
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    partial = cache_dir.with_name(cache_dir.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    # --no-cache-dir: pip's own cache is keyed by the sdist alone, not by the build flags, so a
    # wheel in it could be another build's; the folder here is keyed by everything.
    run_logged(
        [
            str(venv_python(venv)),
            "-m",
            "pip",
            "wheel",
            "--disable-pip-version-check",
            "--progress-bar",
            "off",
            "--no-deps",
            "--no-build-isolation",
            "--no-cache-dir",
            "-w",
            str(partial),
            "-r",
            str(REQUIREMENTS / "horovod.txt"),
        ],
        log,
        env=env,
        what="Building Horovod",
    )
    if cache_dir.is_dir():
        shutil.rmtree(cache_dir)
    elif cache_dir.exists():
        cache_dir.unlink()  # a stray file in its place (seen after two builds raced)
    partial.rename(cache_dir)  # only a finished build counts as cached
    return cached_wheel(cache_dir)


def cached_wheel(cache_dir: Path) -> Path | None:
    wheels = sorted(cache_dir.glob("horovod-*.whl"))
    return wheels[0] if len(wheels) == 1 else None


@contextmanager
def cache_lock(cache_dir: Path):
    """One build of a wheel at a time: another bootstrap (a second checkout, `make data` beside
    `make env`) that needs the same wheel waits here, then finds it built."""
    lock_path = cache_dir.with_name(cache_dir.name + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def build_horovod(venv: Path, log: Path, state: dict, fresh: bool) -> bool:
    """Install Horovod built with the state's flags; True when the wheel came from the cache."""
    cache_dir = wheel_cache_dir(venv, state)
    with cache_lock(cache_dir):
        wheel = None if fresh else cached_wheel(cache_dir)
        from_cache = wheel is not None
        if from_cache:
            step(f"Installing Horovod from the wheel built earlier with the same settings: {wheel}")
        else:
            step(
                "Compiling Horovod 0.28.1 against TensorFlow (about 7 minutes on 2 cores); "
                f"the wheel is kept in {cache_dir}"
            )
            wheel = compile_horovod_wheel(venv, log, state, cache_dir)
            if wheel is None:
                raise SetupError(
                    f"Building Horovod left no single wheel in {cache_dir}. Log: {log}"
                )
    # The old build must go first: a reinstall that is "already satisfied" would keep it.
    run_logged(
        [str(venv_python(venv)), "-m", "pip", "uninstall", "-y", "horovod"],
        log,
        what="pip uninstall horovod",
    )
    locked = [arg for path in constraint_files(state["device"]) for arg in ("-c", str(path))]
    pip_install(venv, log, ["--no-build-isolation", *locked, str(wheel)], what="Installing Horovod")
    return from_cache


def missing_parts(check_build: str | None, state: dict) -> list[str]:
    """What `horovodrun --check-build` should list but does not."""
    if check_build is None:
        return ["a working horovodrun"]
    wanted = ["TensorFlow", "Gloo"] + (
        ["MPI"] if state["horovod_build"].get("HOROVOD_WITH_MPI") == "1" else []
    )
    return [name for name in wanted if not horovod_has(check_build, name)]


def make_safe(venv: Path) -> None:
    """HWLOC_COMPONENTS=-gl for every process of the environment (bootstrap/safe_env.py)."""
    for done in safe_env.install(venv):
        step(f"MPI without the X-display hang: {done}")


def ensure_environment(
    venv: Path, device: str, rebuild_horovod: bool, want_mpi: bool = False
) -> str:
    """Bring the venv up to date; return a one-line summary of what was done."""
    stamp = read_stamp(venv)
    mpi = mpi_decision(device, stamp, rebuild_horovod, want_mpi=want_mpi)
    state = wanted_state(device, mpi)
    if stamp_matches(stamp, state) and venv_python(venv).exists() and not rebuild_horovod:
        step(mpi.describe())
        make_safe(venv)
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
    pip_install(
        venv,
        log,
        ["-r", str(REQUIREMENTS / f"tensorflow-{device}.txt"), *locked],
        what="pip (TensorFlow)",
    )
    pip_install(
        venv, log, ["-r", str(REQUIREMENTS / "workbook.txt"), *locked], what="pip (workbook)"
    )
    # The workbook's own packages, editable: kernels started in notebooks/ import them too.
    pip_install(
        venv,
        log,
        ["--no-build-isolation", "--no-deps", "-e", str(REPO)],
        what="pip (workbook packages)",
    )

    # Rebuild Horovod when asked, when missing or broken, or when TensorFlow, Horovod or the
    # build settings changed (Horovod records the TensorFlow it was compiled against).
    step(mpi.describe())
    check_build = horovod_check_build(venv)
    stamp = stamp or {}
    needs_build = (
        rebuild_horovod
        or missing_parts(check_build, state)
        or stamp.get("horovod_inputs_sha256") != state["horovod_inputs_sha256"]
        or stamp.get("horovod_build") != state["horovod_build"]
    )
    if needs_build:
        from_cache = build_horovod(venv, log, state, fresh=rebuild_horovod)
        check_build = horovod_check_build(venv)
        if from_cache and missing_parts(check_build, state):
            step("The cached Horovod wheel does not work here; compiling a fresh one")
            build_horovod(venv, log, state, fresh=True)
            check_build = horovod_check_build(venv)
    if check_build is None:
        raise SetupError(
            f"Horovod was installed but `horovodrun --check-build` fails: "
            f"{horovod_error(venv)}. Build log: {log}"
        )
    for name in missing_parts(check_build, state):
        fix = (
            f"install OpenMPI (`{INSTALL_OPENMPI}`), then `make env REBUILD_HOROVOD=1`, or "
            "set HOROVOD_WITHOUT_MPI=1"
            if name == "MPI"
            else "`make env REBUILD_HOROVOD=1`"
        )
        raise SetupError(
            f"Horovod was built without {name}. Fix: {fix} "
            f"(see INSTALL.md, Troubleshooting). Build log: {log}"
        )

    make_safe(venv)
    record = {**state, "horovod_controllers": mpi.controllers(), "horovod_mpi_reason": mpi.reason}
    (venv / STAMP_NAME).write_text(json.dumps(record, indent=2) + "\n")
    minutes = (time.monotonic() - started) / 60
    return f"Environment {venv} ready ({device}) in {minutes:.1f} min."


def step(message: str) -> None:
    print(f"==> {message}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--device",
        choices=sorted(HOROVOD_BUILD_ENV),
        default=default_device(),
        help="TensorFlow variant: cpu (Linux default), gpu (CUDA + NCCL) or macos (macOS default)",
    )
    parser.add_argument(
        "--venv", type=Path, default=DEFAULT_VENV, help="where to create the virtual environment"
    )
    parser.add_argument(
        "--rebuild-horovod", action="store_true", help="recompile Horovod even if it looks fine"
    )
    parser.add_argument(
        "--want-mpi",
        action="store_true",
        help="build Horovod with MPI when mpicxx is there, rebuilding one built "
        "without it (make test, after installing OpenMPI)",
    )
    args = parser.parse_args(argv)
    try:
        print(
            ensure_environment(
                args.venv.resolve(), args.device, args.rebuild_horovod, args.want_mpi
            )
        )
    except SetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Preflight check: can the workbook run on this machine, and if not, what fixes it?

    python -m workbook.preflight        (or `make preflight`, or the first notebook)

Prints one line per check. Every problem names the command that fixes it. Exits 1 when the
workbook cannot run (a FAIL), 0 otherwise (warnings included).

TensorFlow and Horovod are imported in a child process: a broken build can crash or hang an
import, and the report must still come out.
"""

from __future__ import annotations

import html
import json
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from workbook.facts import usable_cores
from workbook.machine_load import Load, Meter

OK, WARN, FAIL = "ok", "warn", "FAIL"
EXPECTED_PYTHON = (3, 11)
EXPECTED_TF = "2.15."
EXPECTED_HOROVOD = "0.28.1"
PROBE_TIMEOUT_S = 180
REBUILD_HOROVOD = "make env REBUILD_HOROVOD=1"

# Runs in a child process; prints one JSON object. Each import is attempted on its own so one
# failure does not hide the others.
PROBE = r"""
import json, os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
found = {}
def attempt(key, fn):
    try:
        found[key] = fn()
    except BaseException as error:
        found[key + "_error"] = f"{type(error).__name__}: {error}"

def tensorflow_info():
    from importlib import metadata
    import tensorflow as tf
    # tf.keras has no __version__ in 2.15; the keras distribution says which Keras tf.keras is.
    keras = getattr(tf.keras, "__version__", None) or metadata.version("keras")
    return {"version": tf.__version__, "keras": keras,
            "gpus": [d.name for d in tf.config.list_physical_devices("GPU")]}

def horovod_info():
    import horovod
    import horovod.tensorflow.keras as hvd
    return {"version": horovod.__version__, "nccl": bool(hvd.nccl_built()),
            "gloo": bool(hvd.gloo_built()), "mpi": bool(hvd.mpi_built())}

def addons_info():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import tensorflow_addons as tfa
    return tfa.__version__

attempt("tensorflow", tensorflow_info)
attempt("horovod", horovod_info)
attempt("tensorflow_addons", addons_info)
print("PROBE-JSON " + json.dumps(found))
"""


@dataclass
class Check:
    name: str
    status: str
    detail: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.status:>4}  {self.name:<18} {self.detail}"
        return text + (f" -- fix: {self.fix}" if self.fix else "")


@dataclass
class Report:
    checks: list[Check]
    seconds: float | None = None  # how long the preflight took
    load: Load | None = None  # what other programs took of the CPU meanwhile

    def took(self) -> str:
        """`It took 106 s; other programs were taking 85% of the CPU (...) meanwhile.`"""
        if self.seconds is None:
            return ""
        text = f"It took {self.seconds:.0f} s"
        if self.load is not None and self.load.busy:
            text += (
                f"; {self.load.describe(past=True)} meanwhile, which slows every import and run "
                f"(up to {self.load.slowdown:.1f}x)"
            )
        return text + "."

    @property
    def can_run(self) -> bool:
        return all(check.status != FAIL for check in self.checks)

    def text(self) -> str:
        lines = [check.line() for check in self.checks]
        verdict = (
            "Ready: the workbook can run here."
            if self.can_run
            else "Not ready: fix the FAIL lines above, then run the preflight again."
        )
        return "\n".join(lines + ["", verdict] + ([self.took()] if self.took() else []))

    def _repr_html_(self) -> str:
        colour = {OK: "#1a7f37", WARN: "#9a6700", FAIL: "#cf222e"}
        rows = "".join(
            f"<tr><td style='color:{colour[c.status]};font-weight:bold'>{c.status}</td>"
            f"<td>{html.escape(c.name)}</td><td>{html.escape(c.detail)}</td>"
            f"<td><code>{html.escape(c.fix)}</code></td></tr>"
            for c in self.checks
        )
        verdict = "Ready to go." if self.can_run else "Not ready: fix the red lines first."
        took = f"<p>{html.escape(self.took())}</p>" if self.took() else ""
        return (
            f"<table><tr><th></th><th>check</th><th>result</th><th>fix</th></tr>{rows}"
            f"</table><p><b>{verdict}</b></p>{took}"
        )

    def __str__(self) -> str:
        return self.text()


def start(cmd: list[str]) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen) -> tuple[int | None, str, str]:
    """(exit code, stdout, stderr); exit code None when it ran out of time."""
    try:
        out, err = process.communicate(timeout=PROBE_TIMEOUT_S)
        return process.returncode, out, err
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        return None, out, err


def read_probe(process: subprocess.Popen) -> dict:
    """What the import probe found about TensorFlow, Horovod and TF Addons."""
    code, out, err = finish(process)
    if code is None:
        return {"crash": f"importing TensorFlow/Horovod took over {PROBE_TIMEOUT_S} s"}
    for line in out.splitlines():
        if line.startswith("PROBE-JSON "):
            return json.loads(line[len("PROBE-JSON ") :])
    last = (err.strip().splitlines() or ["no output"])[-1]
    return {"crash": f"the import crashed (exit {code}): {last}"}


def check_python() -> Check:
    version = platform.python_version()
    if sys.version_info[:2] == EXPECTED_PYTHON:
        return Check("Python", OK, f"{version} ({sys.executable})")
    return Check(
        "Python",
        WARN,
        f"{version}; the workbook is tested with 3.11",
        "make env  (creates .venv with Python 3.11)",
    )


def check_tensorflow(probe: dict) -> Check:
    if "tensorflow" not in probe:
        error = probe.get("tensorflow_error") or probe.get("crash", "not importable")
        return Check("TensorFlow", FAIL, f"cannot import: {first_line(error)}", "make env")
    info = probe["tensorflow"]
    if info["keras"].startswith("3."):
        return Check(
            "TensorFlow",
            FAIL,
            f"{info['version']} ships Keras 3, which horovod.tensorflow.keras does not support",
            "make env  (installs tensorflow-cpu==2.15.1 with Keras 2)",
        )
    if not info["version"].startswith(EXPECTED_TF):
        return Check(
            "TensorFlow", WARN, f"{info['version']}; the workbook is tested with 2.15.1", "make env"
        )
    return Check("TensorFlow", OK, f"{info['version']} (Keras {info['keras']})")


def check_horovod(probe: dict) -> Check:
    if "horovod" in probe:
        info = probe["horovod"]
        if info["version"] != EXPECTED_HOROVOD:
            return Check(
                "Horovod",
                WARN,
                f"{info['version']}; the workbook is tested with {EXPECTED_HOROVOD}",
                "make env",
            )
        return Check("Horovod", OK, f"{info['version']} (horovod.tensorflow.keras imports)")
    error = probe.get("horovod_error") or probe.get("crash", "not importable")
    if "No module named 'horovod'" in error:
        return Check("Horovod", FAIL, "not installed", "make env")
    if "has not been built" in error or "undefined symbol" in error:
        return Check(
            "Horovod",
            FAIL,
            "installed, but built without TensorFlow support or "
            f"against another TensorFlow ({first_line(error)[:120]})",
            REBUILD_HOROVOD,
        )
    return Check(
        "Horovod",
        FAIL,
        f"cannot import horovod.tensorflow.keras: {first_line(error)[:160]}",
        REBUILD_HOROVOD,
    )


def check_addons(probe: dict) -> Check:
    if "tensorflow_addons" in probe:
        return Check("TF Addons", OK, f"{probe['tensorflow_addons']} (NovoGrad, step 12)")
    error = probe.get("tensorflow_addons_error") or probe.get("crash", "not importable")
    return Check("TF Addons", FAIL, f"cannot import: {first_line(error)}", "make env")


def horovodrun_path() -> str | None:
    beside = Path(sys.executable).parent / "horovodrun"
    return str(beside) if beside.exists() else shutil.which("horovodrun")


def parse_check_build(output: str) -> dict[str, list[str]]:
    """Sections of `horovodrun --check-build` -> the names ticked [X] in each."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in output.splitlines():
        stripped = line.strip()
        if stripped.startswith("Available ") and stripped.endswith(":"):
            current = stripped[len("Available ") : -1]
            sections[current] = []
        elif current and stripped.startswith("[X] "):
            sections[current].append(stripped[4:])
    return sections


def start_check_build() -> subprocess.Popen | None:
    horovodrun = horovodrun_path()
    return start([horovodrun, "--check-build"]) if horovodrun else None


def check_build(process: subprocess.Popen | None) -> Check:
    if process is None:
        return Check("horovodrun", FAIL, "not found on PATH", "make env")
    code, out, err = finish(process)
    if code != 0:
        reason = (err.strip().splitlines() or [f"exit code {code}"])[-1]
        return Check("horovodrun", FAIL, f"--check-build failed: {reason}", REBUILD_HOROVOD)
    sections = parse_check_build(out)
    # Only TensorFlow matters here (0.28.1 may tick PyTorch even when torch is not installed).
    frameworks = [name for name in sections.get("Frameworks", []) if name == "TensorFlow"]
    controllers = sections.get("Controllers", [])
    operations = sections.get("Tensor Operations", [])
    detail = (
        f"TensorFlow: {'yes' if frameworks else 'NO'}; controllers: "
        f"{', '.join(controllers) or 'none'}; operations: {', '.join(operations) or 'none'}"
    )
    if "TensorFlow" not in frameworks:
        return Check(
            "horovodrun",
            FAIL,
            "Horovod was built without TensorFlow (" + detail + ")",
            REBUILD_HOROVOD,
        )
    if not controllers:
        return Check(
            "horovodrun",
            FAIL,
            "no controller (Gloo or MPI) built (" + detail + ")",
            REBUILD_HOROVOD,
        )
    return Check("horovodrun", OK, detail)


def check_gpus(probe: dict) -> Check:
    gpus = probe.get("tensorflow", {}).get("gpus")
    if gpus is None:
        return Check("GPUs", WARN, "unknown (TensorFlow did not import)")
    if not gpus:
        return Check("GPUs", OK, "none: training runs on the CPU (the small CPU preset)")
    if not probe.get("horovod", {}).get("nccl"):
        return Check(
            "GPUs",
            WARN,
            f"{len(gpus)} seen, but Horovod has no NCCL: GPU allreduce goes through the CPU",
            "make env DEVICE=gpu REBUILD_HOROVOD=1",
        )
    return Check("GPUs", OK, f"{len(gpus)} seen ({', '.join(gpus)}), NCCL built")


def check_cores() -> Check:
    cores = usable_cores()
    if cores < 2:
        return Check("CPU cores", WARN, "1: two workers will share one core (slow, but it runs)")
    return Check("CPU cores", OK, f"{cores} (up to {cores} single-threaded CPU workers)")


def data_checks(name: str, problems: list[str], fine: str) -> list[Check]:
    """One Check per problem; `verify` ends each problem with ". Fix: <command>"."""
    if not problems:
        return [Check(name, OK, fine)]
    checks = []
    for problem in problems:
        detail, _, fix = problem.partition(". Fix: ")
        checks.append(Check(name, FAIL, detail, fix))
    return checks


def check_data() -> list[Check]:
    try:
        from workbook import fashion_data
    except ImportError as error:
        return [Check("data", FAIL, f"cannot load the data module: {error}", "make env")]
    sample = fashion_data.SAMPLE_DIR
    checks = data_checks(
        "data (sample)", fashion_data.verify(sample), f"{sample} verified (quick runs)"
    )
    full = fashion_data.DEFAULT_DIR
    if not full.exists():
        return checks + [
            Check(
                "data (full)",
                WARN,
                f"{full} not prepared yet (quick runs use the sample)",
                "make data",
            )
        ]
    problems = fashion_data.verify(full)
    if problems:
        return checks + data_checks("data (full)", problems, "")
    about = fashion_data.describe(fashion_data.read_manifest(full))
    if not fashion_data.is_official(full):  # e.g. a sample written there
        return checks + [
            Check("data (full)", WARN, f"{full} holds {about}, not the official files", "make data")
        ]
    return checks + [Check("data (full)", OK, f"{full} verified: {about}")]


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def run_preflight() -> Report:
    meter = Meter()
    # Both import TensorFlow: run them side by side.
    probe_process = start([sys.executable, "-c", PROBE])
    build_process = start_check_build()
    probe = read_probe(probe_process)
    checks = [
        check_python(),
        check_tensorflow(probe),
        check_horovod(probe),
        check_addons(probe),
        check_build(build_process),
        check_gpus(probe),
        check_cores(),
        *check_data(),
    ]
    return Report(checks, meter.seconds, meter.load())


def main() -> int:
    report = run_preflight()
    print(report.text())
    return 0 if report.can_run else 1


if __name__ == "__main__":
    sys.exit(main())

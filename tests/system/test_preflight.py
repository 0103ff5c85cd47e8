"""The preflight check, run for real, in this environment and in deliberately broken ones."""

import os
import subprocess
import sys
import textwrap

import pytest

from workbook import preflight
from workbook.paths import REPO

CHECK_BUILD_WITHOUT_TF = """\
Horovod v0.28.1:

Available Frameworks:
    [ ] TensorFlow
    [ ] PyTorch
    [ ] MXNet

Available Controllers:
    [ ] MPI
    [X] Gloo

Available Tensor Operations:
    [ ] NCCL
    [ ] DDL
    [ ] CCL
    [ ] MPI
    [X] Gloo
"""


def run_preflight(extra_pythonpath=None):
    env = dict(os.environ)
    if extra_pythonpath:
        # Shadow installed packages with broken stand-ins, the way a bad build looks.
        env["PYTHONPATH"] = os.pathsep.join([str(extra_pythonpath), str(REPO)])
    return subprocess.run(
        [sys.executable, "-m", "workbook.preflight"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=300,
    )


def line_for(output, name):
    return next(line for line in output.splitlines() if line[6:].startswith(name))


def write_module(root, dotted, body):
    path = root.joinpath(*dotted.split("."))
    path.mkdir(parents=True, exist_ok=True)
    (path / "__init__.py").write_text(textwrap.dedent(body))


@pytest.fixture(scope="module")
def healthy_run():
    return run_preflight()


def test_this_environment_passes_and_reports_everything(healthy_run):
    assert healthy_run.returncode == 0, healthy_run.stdout + healthy_run.stderr
    out = healthy_run.stdout
    assert "Ready" in out
    assert "2.15.1" in line_for(out, "TensorFlow")
    assert "0.28.1" in line_for(out, "Horovod")
    build = line_for(out, "horovodrun")
    assert "TensorFlow" in build and "Gloo" in build
    assert line_for(out, "GPUs").startswith("  ok")
    assert f"{len(os.sched_getaffinity(0))}" in line_for(out, "CPU cores")
    assert "verified" in line_for(out, "data (sample)")


def test_horovod_built_without_tensorflow_is_a_clear_error_with_its_fix(tmp_path):
    write_module(tmp_path, "horovod", "__version__ = '0.28.1'\n")
    # The message Horovod itself raises when its TensorFlow extension was not compiled.
    write_module(
        tmp_path,
        "horovod.tensorflow",
        """\
        raise ImportError("Extension horovod.tensorflow has not been built: "
                          "mpi_lib.cpython-311-x86_64-linux-gnu.so not found")
    """,
    )
    result = run_preflight(tmp_path)
    assert result.returncode == 1
    line = line_for(result.stdout, "Horovod")
    assert line.startswith("FAIL") and "built without TensorFlow" in line
    assert "fix: make env REBUILD_HOROVOD=1" in line
    assert "Traceback" not in result.stdout + result.stderr


def test_a_missing_package_is_a_clear_error_with_its_fix(tmp_path):
    write_module(
        tmp_path,
        "tensorflow_addons",
        "raise ModuleNotFoundError(\"No module named 'tensorflow_addons'\")\n",
    )
    result = run_preflight(tmp_path)
    assert result.returncode == 1
    line = line_for(result.stdout, "TF Addons")
    assert line.startswith("FAIL") and "fix: make env" in line
    assert "Not ready" in result.stdout


def test_keras_3_is_refused(tmp_path):
    write_module(
        tmp_path,
        "tensorflow",
        """\
        __version__ = "2.16.1"
        class keras:
            __version__ = "3.3.3"
        class config:
            @staticmethod
            def list_physical_devices(kind):
                return []
    """,
    )
    result = run_preflight(tmp_path)
    assert result.returncode == 1
    line = line_for(result.stdout, "TensorFlow")
    assert line.startswith("FAIL") and "Keras 3" in line and "tensorflow-cpu==2.15.1" in line


def test_check_build_without_tensorflow_fails(tmp_path, monkeypatch):
    fake = tmp_path / "horovodrun"
    fake.write_text(f"#!/bin/sh\ncat <<'EOF'\n{CHECK_BUILD_WITHOUT_TF}EOF\n")
    fake.chmod(0o755)
    monkeypatch.setattr(preflight, "horovodrun_path", lambda: str(fake))
    check = preflight.check_build(preflight.start_check_build())
    assert check.status == preflight.FAIL
    assert "built without TensorFlow" in check.detail and check.fix == preflight.REBUILD_HOROVOD


def test_parse_check_build():
    sections = preflight.parse_check_build(CHECK_BUILD_WITHOUT_TF)
    assert sections == {"Frameworks": [], "Controllers": ["Gloo"], "Tensor Operations": ["Gloo"]}


def test_report_renders_as_html_for_notebooks():
    report = preflight.Report(
        [
            preflight.Check("GPUs", preflight.OK, "none <cpu>"),
            preflight.Check("data", preflight.FAIL, "bad", "make data"),
        ]
    )
    html = report._repr_html_()
    assert "none &lt;cpu&gt;" in html and "<code>make data</code>" in html
    assert not report.can_run

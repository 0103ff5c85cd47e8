"""The pins have one source of truth (requirements/*.txt); everything else must agree with it."""

import re
from importlib import metadata

import pytest
import yaml

from bootstrap import environment as bootstrap
from workbook.paths import REPO

PIN = re.compile(r"^([A-Za-z0-9_.\-\[\]]+)==([^\s;#]+)$")


def read_pins(path):
    pins = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = PIN.match(line)
        assert match, f"{path.name}: '{line}' is not pinned with =="
        pins[match.group(1).lower()] = match.group(2)
    return pins


def environment_yml():
    return yaml.safe_load((REPO / "environment.yml").read_text())


def yml_pip_pins():
    pip_section = next(d["pip"] for d in environment_yml()["dependencies"] if isinstance(d, dict))
    return dict(PIN.match(entry).groups() for entry in pip_section)


def test_every_requirement_is_pinned_exactly():
    for path in (REPO / "requirements").glob("*.txt"):
        if path.name != "constraints.txt":
            assert read_pins(path), f"{path.name} pins nothing"


def test_environment_yml_mirrors_the_cpu_requirements():
    expected = {}
    for name in ("build.txt", "tensorflow-cpu.txt", "workbook.txt"):
        expected.update(read_pins(REPO / "requirements" / name))
    actual = {name.lower(): version for name, version in yml_pip_pins().items()}
    assert actual == expected


def test_environment_yml_python_and_build_tools():
    deps = [d for d in environment_yml()["dependencies"] if isinstance(d, str)]
    assert "python=3.11" in deps
    assert any(d.startswith("cmake") for d in deps) and "cxx-compiler" in deps


def test_environment_yml_sets_the_horovod_build_variables_of_the_bootstrap():
    assert environment_yml()["variables"] == bootstrap.HOROVOD_BUILD_ENV["cpu"]


def test_every_variant_pins_the_same_tensorflow():
    cpu = read_pins(REPO / "requirements" / "tensorflow-cpu.txt")
    gpu = read_pins(REPO / "requirements" / "tensorflow-gpu.txt")
    assert cpu == {"tensorflow-cpu": "2.15.1"}
    assert gpu == {"tensorflow[and-cuda]": "2.15.1"}
    assert read_pins(REPO / "requirements" / "tensorflow-macos.txt") == {"tensorflow": "2.15.1"}
    assert read_pins(REPO / "requirements" / "horovod.txt") == {"horovod": "0.28.1"}


@pytest.mark.parametrize("requirements", ["tensorflow-cpu.txt", "workbook.txt", "horovod.txt"])
def test_installed_versions_match_the_pins(requirements):
    """The environment the tests run in is the pinned one, not whatever pip resolved."""
    for name, version in read_pins(REPO / "requirements" / requirements).items():
        assert metadata.version(name) == version, f"{name}: installed {metadata.version(name)}"


def test_the_lock_agrees_with_every_pin():
    lock = read_pins(REPO / "requirements" / "constraints.txt")
    for name in ("tensorflow-cpu.txt", "workbook.txt"):
        for package, version in read_pins(REPO / "requirements" / name).items():
            assert lock.get(package.replace("_", "-")) == version, f"{package} in {name}"

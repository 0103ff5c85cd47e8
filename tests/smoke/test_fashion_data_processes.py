"""`make data`'s installer of Debian's package (data/setup_debian_package.sh) run for real: without
apt-get it says so and lets make go on; with the package or the data there it does nothing.
"""

import shutil
import subprocess

import pytest

# isolated (autouse) keeps every test off the real data sources; official stands in for them
from fashion_stand_ins import isolated, official  # noqa: F401
from workbook import fashion_data as fd
from workbook.fashion_data import prepared as layout
from workbook.paths import REPO

SETUP_SCRIPT = REPO / "data" / "setup_debian_package.sh"


# --- the real official files and the committed sample -------------------------------------


@pytest.fixture
def prepared(tmp_path, official):
    source, _ = official
    return fd.prepare(tmp_path / "data" / "fm", source_dir=source, offline=True, verbose=False)


def run_setup_script(tmp_path, **env):
    """data/setup_debian_package.sh with only `sh`, `id` and `grep` on PATH (so no apt-get)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("sh", "id", "grep"):
        if not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(shutil.which(tool))
    return subprocess.run(
        [str(bin_dir / "sh"), str(SETUP_SCRIPT)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={"PATH": str(bin_dir), **env},
    )


def test_setup_script_without_apt_get_says_so_and_lets_make_go_on(tmp_path):
    result = run_setup_script(tmp_path, FASHION_MNIST_DEBIAN_DIR=str(tmp_path / "none"))
    assert result.returncode == 0, result.stderr
    assert "dataset-fashion-mnist (the official Fashion-MNIST) is not installed" in result.stdout
    assert "trying the other sources" in result.stdout


def test_setup_script_does_nothing_when_the_package_or_the_data_is_there(tmp_path, official):
    result = run_setup_script(tmp_path, FASHION_MNIST_DEBIAN_DIR=str(official[0]))
    assert result.returncode == 0 and result.stdout == ""
    prepared = fd.prepare(tmp_path / "fm", source_dir=official[0], offline=True, verbose=False)
    result = run_setup_script(
        tmp_path,
        FASHION_MNIST_DEBIAN_DIR=str(tmp_path / "none"),
        FASHION_MNIST_PREPARED=str(prepared / layout.MANIFEST),
    )
    assert result.returncode == 0 and result.stdout == ""

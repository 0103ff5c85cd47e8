"""`make data`'s installer of Debian's package (data/setup_debian_package.sh) run for real: without
apt-get it says so and lets make go on; with the package or the data there it does nothing.
"""

import functools
import gzip
import hashlib
import http.server
import shutil
import subprocess
import threading

import numpy as np
import pytest

from workbook import fashion_data as fd
from workbook.fashion_data import preparation, sources
from workbook.fashion_data import official as idx
from workbook.fashion_data import prepared as layout
from workbook.paths import REPO

SETUP_SCRIPT = REPO / "data" / "setup_debian_package.sh"
TRAIN_PER_CLASS, TEST_PER_CLASS = 5, 2


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """Keep every test away from the real Keras cache, Debian package and network."""
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras-home-empty"))
    monkeypatch.delenv(sources.SOURCE_DIR_ENV, raising=False)
    monkeypatch.setattr(sources, "DEBIAN_DIR", tmp_path / "no-debian-package")
    monkeypatch.setattr(sources, "MIRRORS", ("http://127.0.0.1:9/",))  # discard port: refused
    monkeypatch.setattr(sources, "NETWORK_TIMEOUT", 2)
    monkeypatch.setattr(preparation, "CACHE_DIR", tmp_path / "cache")


def labelled_images(labels, seed):
    """Random images whose first pixel encodes their label, so pairs can be checked later."""
    images = np.random.default_rng(seed).integers(0, 256, (len(labels), 28, 28), dtype=np.uint8)
    images[:, 0, 0] = np.asarray(labels) * 20
    return images


def idx_bytes(array):
    header = bytes([0, 0, 0x08, array.ndim]) + np.array(array.shape, ">u4").tobytes()
    return header + array.tobytes()


@pytest.fixture
def official(tmp_path, monkeypatch):
    """A directory with 4 tiny stand-ins of the official .gz files, accepted by the patched
    checksums of their decompressed content."""
    directory = tmp_path / "official"
    directory.mkdir()
    y_train = np.tile(np.arange(10, dtype=np.uint8), TRAIN_PER_CLASS)
    y_test = np.tile(np.arange(10, dtype=np.uint8), TEST_PER_CLASS)
    arrays = {
        ("train", "images"): labelled_images(y_train, 1),
        ("train", "labels"): y_train,
        ("test", "images"): labelled_images(y_test, 2),
        ("test", "labels"): y_test,
    }
    sums = {}
    for key, name in idx.IDX_NAMES.items():
        raw = idx_bytes(arrays[key])
        (directory / f"{name}.gz").write_bytes(gzip.compress(raw, mtime=0))
        sums[name] = hashlib.sha256(raw).hexdigest()
    monkeypatch.setattr(idx, "IDX_SHA256", sums)
    return directory, arrays


# --- the real official files and the committed sample -------------------------------------


@pytest.fixture
def prepared(tmp_path, official):
    source, _ = official
    return fd.prepare(tmp_path / "data" / "fm", source_dir=source, offline=True, verbose=False)


@pytest.fixture
def mirror(official):
    """A local HTTP server serving the stand-in .gz files, in place of an official mirror."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(official[0]))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


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

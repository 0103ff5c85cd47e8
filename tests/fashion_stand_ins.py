"""Fashion-MNIST's official files stood in for by tiny valid IDX files, for the tests of
workbook.fashion_data in every tier: the module's pinned checksums are monkeypatched to match
them, and every test is kept away from the real Keras cache, Debian package and network."""

import gzip
import hashlib

import numpy as np
import pytest

from workbook.fashion_data import official as idx
from workbook.fashion_data import preparation, sources

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

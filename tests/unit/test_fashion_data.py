"""Tests of workbook.fashion_data and authoring.sample: the official files from every source,
verification, atomic writes, the committed sample, and `make data`'s installer of Debian's package.

The real Debian package dataset-fashion-mnist is used where it is installed. Everywhere else the
official files are stood in for by tiny valid IDX files written here, with the module's pinned
checksums monkeypatched to match them.
"""

import functools
import gzip
import http.server
import json
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from authoring import sample as sampling

# isolated (autouse) keeps every test off the real data sources; official stands in for them
from fashion_stand_ins import idx_bytes, isolated, official  # noqa: F401
from workbook import fashion_data as fd
from workbook import preflight
from workbook.fashion_data import cli, sources
from workbook.fashion_data import official as idx
from workbook.fashion_data import prepared as layout

REAL_DEBIAN_DIR = sources.DEBIAN_DIR


def manifest(path):
    return json.loads((path / layout.MANIFEST).read_text())


def labels_match_images(images, labels):
    return np.array_equal(images[:, 0, 0], labels * 20)


def nothing_written(dest):
    return not dest.exists() and not list(dest.parent.glob(layout.TEMP_PREFIX + "*"))


# --- the real official files and the committed sample -------------------------------------


def test_committed_sample_is_a_balanced_sample_of_the_official_files():
    assert fd.verify(fd.SAMPLE_DIR) == []
    (x_train, y_train), (x_test, y_test) = fd.load(fd.SAMPLE_DIR)
    assert x_train.shape == (3000, 28, 28) and x_test.shape == (1000, 28, 28)
    assert x_train.dtype == y_train.dtype == np.uint8
    assert np.bincount(y_train).tolist() == [300] * 10
    assert np.bincount(y_test).tolist() == [100] * 10
    info = manifest(fd.SAMPLE_DIR)
    assert info["source"].startswith("sample of the official Fashion-MNIST")
    assert info["split"]["official_idx_sha256"] == idx.IDX_SHA256
    assert info["class_names"] == list(fd.CLASS_NAMES)
    assert sum(f.stat().st_size for f in fd.SAMPLE_DIR.iterdir()) < 3_000_000


@pytest.mark.skipif(
    not REAL_DEBIAN_DIR.is_dir(),
    reason=f"Debian's {sources.DEBIAN_PACKAGE} is not installed (make data installs it if it can)",
)
def test_debian_package_gives_the_official_split_and_the_committed_sample(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(sources, "DEBIAN_DIR", REAL_DEBIAN_DIR)
    dest = fd.prepare(tmp_path / "data" / "fm", offline=True)
    out = capsys.readouterr().out
    assert (
        "Prepared the official split, 60,000 training and 10,000 test images, "
        f"from Debian package {sources.DEBIAN_PACKAGE}" in out
    )
    info = manifest(dest)
    assert info["split"] == layout.OFFICIAL_SPLIT
    assert info["counts"] == {"train": 60000, "test": 10000}
    (x_train, y_train), (x_test, y_test) = fd.load(dest)
    assert np.bincount(y_train).tolist() == [6000] * 10
    assert np.bincount(y_test).tolist() == [1000] * 10
    assert fd.verify(dest) == []
    # The committed sample is what make-sample draws from the official files, and its images
    # are official images with their official labels.
    sample = sampling.make_sample(dest, tmp_path / "sample", verbose=False)
    for (x_new, y_new), (x_committed, y_committed) in zip(fd.load(sample), fd.load(fd.SAMPLE_DIR)):
        assert np.array_equal(x_new, x_committed) and np.array_equal(y_new, y_committed)
    official = {image.tobytes(): label for image, label in zip(x_test, y_test)}
    (_, _), (x_sample, y_sample) = fd.load(fd.SAMPLE_DIR)
    assert all(official.get(x.tobytes()) == y for x, y in zip(x_sample, y_sample))


def test_debian_package_comes_before_the_keras_cache_and_the_download(
    tmp_path, official, monkeypatch, capsys
):
    source, arrays = official
    monkeypatch.setattr(sources, "DEBIAN_DIR", source)
    keras_home = tmp_path / "keras"
    (keras_home / "datasets").mkdir(parents=True)
    (keras_home / "datasets" / "fashion-mnist").symlink_to(source)
    monkeypatch.setenv("KERAS_HOME", str(keras_home))
    monkeypatch.setattr(urllib.request, "urlopen", pytest.fail)  # must not reach the network
    dest = fd.prepare(tmp_path / "data" / "fm")
    info = manifest(dest)
    assert info["source"] == f"Debian package {sources.DEBIAN_PACKAGE}"
    assert info["split"] == layout.OFFICIAL_SPLIT and info["counts"] == {"train": 50, "test": 20}
    assert info["official_idx_sha256"] == idx.IDX_SHA256
    (x_train, y_train), (x_test, y_test) = fd.load(dest)
    assert np.array_equal(x_train, arrays[("train", "images")])
    assert np.array_equal(y_test, arrays[("test", "labels")])
    out = capsys.readouterr().out
    assert "Prepared the official split, 50 training and 20 test images" in out


def test_recompressed_files_are_verified_by_their_content(tmp_path, official):
    source, _ = official
    for gz in source.glob("*.gz"):  # like Debian's package: other gzip bytes, same content
        gz.write_bytes(gzip.compress(gzip.decompress(gz.read_bytes()), compresslevel=1, mtime=1))
    dest = fd.prepare(tmp_path / "fm", source_dir=source, offline=True, verbose=False)
    assert manifest(dest)["source"] == "local directory" and fd.verify(dest) == []


def test_a_given_directory_comes_first_and_may_hold_gunzipped_files(
    tmp_path, official, monkeypatch
):
    source, _ = official
    for gz in source.glob("*.gz"):  # an instructor may have gunzipped them
        gz.with_suffix("").write_bytes(gzip.decompress(gz.read_bytes()))
        gz.unlink()
    monkeypatch.setenv(sources.SOURCE_DIR_ENV, str(source))
    monkeypatch.setattr(sources, "DEBIAN_DIR", Path("/nonexistent-so-never-used"))
    dest = fd.prepare(tmp_path / "fm", offline=True, verbose=False)
    assert manifest(dest)["source"] == "local directory"
    assert manifest(dest)["source_detail"] == str(source.resolve())


def test_keras_cache_is_used_when_there_is_no_debian_package(tmp_path, official, monkeypatch):
    source, _ = official
    keras_home = tmp_path / "keras"
    (keras_home / "datasets").mkdir(parents=True)
    (keras_home / "datasets" / "fashion-mnist").symlink_to(source)
    monkeypatch.setenv("KERAS_HOME", str(keras_home))
    dest = fd.prepare(tmp_path / "fm", offline=True, verbose=False)
    assert manifest(dest)["source"] == "Keras cache"


def test_a_damaged_source_is_skipped_with_its_reason(tmp_path, official, monkeypatch, capsys):
    source, _ = official
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    for gz in source.glob("*.gz"):
        (damaged / gz.name).write_bytes(gz.read_bytes())
    (damaged / "t10k-labels-idx1-ubyte.gz").unlink()
    monkeypatch.setattr(sources, "DEBIAN_DIR", source)
    dest = fd.prepare(tmp_path / "fm", source_dir=damaged, offline=True)
    out = capsys.readouterr().out
    assert f"skipped local directory: {damaged}/t10k-labels-idx1-ubyte.gz: missing" in out
    assert manifest(dest)["source"] == f"Debian package {sources.DEBIAN_PACKAGE}"


def only_source_fails(tmp_path, source):
    """The DataError of prepare() when `source` is the only source; checks nothing was left."""
    dest = tmp_path / "data" / "fm"
    with pytest.raises(fd.DataError) as error:
        fd.prepare(dest, source_dir=source, offline=True, verbose=False)
    assert nothing_written(dest)
    return str(error.value)


def test_a_truncated_gz_is_named(tmp_path, official):
    source, _ = official
    gz = source / "train-images-idx3-ubyte.gz"
    gz.write_bytes(gz.read_bytes()[:-50])
    message = only_source_fails(tmp_path, source)
    assert f"{gz}: truncated or not gzip data" in message


def test_changed_content_is_a_checksum_mismatch(tmp_path, official):
    source, arrays = official
    labels = arrays[("train", "labels")].copy()
    labels[[0, 1]] = labels[[1, 0]]  # two labels swapped: same size, a valid file, wrong data
    gz = source / "train-labels-idx1-ubyte.gz"
    gz.write_bytes(gzip.compress(idx_bytes(labels)))
    message = only_source_fails(tmp_path, source)
    assert (
        f"{gz}: checksum mismatch, its content is not the official train-labels-idx1-ubyte"
        in message
    )


def test_a_file_cut_short_before_compression_is_named(tmp_path, official):
    source, arrays = official
    gz = source / "t10k-images-idx3-ubyte.gz"
    gz.write_bytes(gzip.compress(idx_bytes(arrays[("test", "images")])[:-28]))
    message = only_source_fails(tmp_path, source)
    assert f"{gz}: truncated or padded (15,668 bytes, its header implies 15,696)" in message


def test_malformed_idx_is_rejected():
    raw = idx_bytes(np.zeros((3, 28, 28), np.uint8))
    with pytest.raises(fd.DataError, match="x.idx: truncated or padded"):
        idx.parse_idx(raw[:-1], "x.idx")
    with pytest.raises(fd.DataError, match="bad magic number"):
        idx.parse_idx(b"\x00\x00\x0d\x03" + raw[4:], "x.idx")
    assert idx.parse_idx(raw, "x.idx").shape == (3, 28, 28)


def test_no_source_is_one_error_with_every_reason_and_the_fix(tmp_path, capsys):
    code = cli.main(["prepare", "--dest", str(tmp_path / "fm"), "--offline"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert err.startswith("error: no source of Fashion-MNIST worked")
    assert "local directory: none given (--from DIR or FASHION_MNIST_SOURCE_DIR=DIR)" in err
    assert f"Debian package {sources.DEBIAN_PACKAGE}: not installed" in err
    assert "download: not tried (--offline)" in err
    assert f"Fix: sudo apt-get install {sources.DEBIAN_PACKAGE}" in err
    assert nothing_written(tmp_path / "fm")


@pytest.fixture
def prepared(tmp_path, official):
    source, _ = official
    return fd.prepare(tmp_path / "data" / "fm", source_dir=source, offline=True, verbose=False)


def test_already_prepared_is_a_fast_no_op(prepared, capsys):
    mtimes = {p.name: p.stat().st_mtime_ns for p in prepared.iterdir()}
    start = time.perf_counter()
    assert fd.prepare(prepared, offline=True) == prepared
    assert time.perf_counter() - start < 1.0
    assert (
        "already prepared, the official split, 50 training and 20 test images, from local "
        "directory; verified" in capsys.readouterr().out
    )
    assert {p.name: p.stat().st_mtime_ns for p in prepared.iterdir()} == mtimes


def test_a_sample_in_the_destination_is_replaced_by_the_official_files(
    prepared, official, tmp_path, capsys
):
    sampling.make_sample(prepared, tmp_path / "sample", n_train=20, n_test=10, verbose=False)
    dest = tmp_path / "sample"
    assert not fd.is_official(dest)
    fd.prepare(dest, source_dir=official[0], offline=True)
    out = capsys.readouterr().out
    assert "holds a sample of the official split, 20 training and 10 test images" in out
    assert manifest(dest)["split"] == layout.OFFICIAL_SPLIT and fd.is_official(dest)


def test_checksum_mismatch_is_reported_with_the_fix(prepared, capsys):
    train = prepared / "train.npz"
    data = bytearray(train.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, different content
    train.write_bytes(bytes(data))
    [problem] = fd.verify(prepared)
    assert "train.npz: checksum mismatch (file corrupt or truncated)" in problem
    assert problem.endswith("--force")
    assert cli.main(["prepare", "--dest", str(prepared), "--offline"]) == 1
    err = capsys.readouterr().err
    assert "Fix: python -m workbook.fashion_data prepare --dest" in err
    assert train.read_bytes() == bytes(data)  # not silently overwritten
    assert cli.main(["verify", str(prepared)]) == 1


def test_force_rebuilds_a_damaged_copy(prepared, official):
    (prepared / "test.npz").unlink()
    fd.prepare(prepared, source_dir=official[0], offline=True, force=True, verbose=False)
    assert fd.verify(prepared) == []
    assert not list(prepared.parent.glob(layout.TEMP_PREFIX + "*"))


def test_truncated_npz_is_detected(prepared):
    test_file = prepared / "test.npz"
    test_file.write_bytes(test_file.read_bytes()[:100])
    [problem] = fd.verify(prepared)
    assert "test.npz" in problem and "truncated" in problem


def test_truncated_npz_with_matching_manifest_is_still_detected(prepared):
    test_file = prepared / "test.npz"
    test_file.write_bytes(test_file.read_bytes()[:300])
    info = manifest(prepared)  # someone "fixed" the manifest by hand
    info["files"]["test.npz"] = {"sha256": layout.sha256_of_file(test_file), "bytes": 300}
    (prepared / layout.MANIFEST).write_text(json.dumps(info))
    [problem] = fd.verify(prepared)
    assert "test.npz: cannot be read" in problem


def test_interrupted_write_leaves_nothing_behind(tmp_path, official, monkeypatch):
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
        fd.prepare(dest, source_dir=official[0], offline=True, verbose=False)
    assert nothing_written(dest)


def test_stale_temp_dir_is_removed_by_the_next_run(tmp_path, official):
    stale = tmp_path / "data" / (layout.TEMP_PREFIX + "killed")
    stale.mkdir(parents=True)
    (stale / "train.npz").write_bytes(b"half a file")
    dest = fd.prepare(tmp_path / "data" / "fm", source_dir=official[0], offline=True, verbose=False)
    assert not stale.exists() and fd.verify(dest) == []


def test_unreachable_mirror_fails_fast_with_a_reason(tmp_path, official, monkeypatch, capsys):
    monkeypatch.setattr(sources, "DEBIAN_DIR", official[0])
    download_first = sources.SOURCES[3:] + sources.SOURCES[1:2]
    monkeypatch.setattr(sources, "SOURCES", download_first)
    start = time.perf_counter()
    dest = fd.prepare(tmp_path / "fm")
    assert time.perf_counter() - start < 5
    out = capsys.readouterr().out
    [line] = [line for line in out.splitlines() if "skipped download" in line]
    assert "http://127.0.0.1:9/: unreachable (Connection refused)" in line
    assert manifest(dest)["source"] == f"Debian package {sources.DEBIAN_PACKAGE}"
    assert not list((tmp_path / "cache").glob("downloads/.part-*"))


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


def test_download_from_the_first_working_mirror(tmp_path, mirror, monkeypatch):
    monkeypatch.setattr(sources, "MIRRORS", ("http://127.0.0.1:9/", mirror))
    dest = fd.prepare(tmp_path / "fm", verbose=False)
    info = manifest(dest)
    assert info["source"] == "download" and info["source_detail"] == mirror
    assert info["split"] == layout.OFFICIAL_SPLIT and fd.verify(dest) == []


def test_download_with_wrong_content_is_discarded(tmp_path, mirror, monkeypatch):
    monkeypatch.setattr(sources, "MIRRORS", (mirror,))
    monkeypatch.setitem(idx.IDX_SHA256, "t10k-labels-idx1-ubyte", "0" * 64)
    dest = tmp_path / "fm"
    with pytest.raises(fd.DataError) as error:
        fd.prepare(dest, verbose=False)
    assert (
        f"download: {mirror}t10k-labels-idx1-ubyte.gz: checksum mismatch, its content is not "
        "the official t10k-labels-idx1-ubyte" in str(error.value)
    )
    downloads = tmp_path / "cache" / "downloads"
    assert not (downloads / "t10k-labels-idx1-ubyte.gz").exists()
    assert not list(downloads.glob(".part-*")) and nothing_written(dest)


@pytest.mark.network
def test_the_pinned_checksums_are_those_of_the_published_files(tmp_path):
    """The labels (35 kB) from the official mirrors match the checksums pinned from Debian."""
    for mirror in sources.MIRRORS:
        try:
            for name in ("train-labels-idx1-ubyte", "t10k-labels-idx1-ubyte"):
                sources.download(f"{mirror}{name}.gz", tmp_path / f"{name}.gz", name)
            return
        except OSError as error:
            reason = sources.unreachable_reason(error)
    pytest.skip(f"no official mirror reachable ({reason})")


def test_make_sample_is_balanced_and_drawn_from_the_official_files(prepared, tmp_path):
    dest = sampling.make_sample(prepared, tmp_path / "sample", n_train=20, n_test=10, verbose=False)
    (x_train, y_train), (x_test, y_test) = fd.load(dest)
    assert np.bincount(y_train).tolist() == [2] * 10 and np.bincount(y_test).tolist() == [1] * 10
    assert labels_match_images(x_train, y_train) and labels_match_images(x_test, y_test)
    info = manifest(dest)
    assert info["source"] == "sample of the official Fashion-MNIST, from local directory"
    assert info["split"]["seed"] == sampling.SAMPLE_SEED and fd.verify(dest) == []


def test_make_sample_refuses_data_that_is_not_official(prepared, tmp_path):
    info = manifest(prepared)
    info["split"] = {"seed": 1}
    (prepared / layout.MANIFEST).write_text(json.dumps(info))
    with pytest.raises(fd.DataError, match="not the official files. Fix: python -m"):
        sampling.make_sample(prepared, tmp_path / "sample", verbose=False)


@pytest.mark.parametrize(
    "main, argv",
    [(sampling.main, ["--train", "15"]), (cli.main, ["unknown"]), (cli.main, ["prepare", "--x"])],
)
def test_usage_errors_exit_2(main, argv):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2


def test_make_sample_is_no_command_of_the_learners_tool():
    with pytest.raises(SystemExit):
        cli.main(["make-sample"])


def test_verify_of_unprepared_dir_says_how_to_prepare(tmp_path, capsys):
    assert cli.main(["verify", str(tmp_path / "nothing")]) == 1
    assert (
        "not prepared. Fix: python -m workbook.fashion_data prepare --dest"
        in capsys.readouterr().out
    )


def test_preflight_reports_the_source_and_warns_about_unofficial_data(prepared, monkeypatch):
    monkeypatch.setattr(fd, "DEFAULT_DIR", prepared)
    [sample, full] = preflight.check_data()
    assert sample.status == preflight.OK and full.status == preflight.OK
    assert "the official split, 50 training and 20 test images, from local directory" in full.detail
    info = manifest(prepared)
    info["split"] = {"seed": 20190101}
    (prepared / layout.MANIFEST).write_text(json.dumps(info))
    [_, full] = preflight.check_data()
    assert full.status == preflight.WARN and full.fix == "make data"
    assert "not the official files" in full.detail

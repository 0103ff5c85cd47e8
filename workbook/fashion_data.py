"""Fashion-MNIST for the Horovod workbook: find the official files, verify them, convert them.

    python -m workbook.fashion_data prepare [--dest DIR] [--from DIR] [--offline] [--force]
    python -m workbook.fashion_data verify [DIR]
    python -m workbook.fashion_data make-sample [--src DIR] [--dest DIR] [--train N] [--test M]

Every source holds the four files of Zalando's release (60,000 training and 10,000 test images,
MIT licence); they are checked against the SHA-256 of their decompressed content. A prepared
directory holds train.npz and test.npz (arrays `images` uint8 (n, 28, 28) and `labels` uint8 (n,))
plus manifest.json with their checksums and the source; see data/README.md.
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
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zlib
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from workbook.paths import REPO

DEFAULT_DIR = REPO / "data" / "fashion_mnist"
SAMPLE_DIR = REPO / "data" / "sample"
CACHE_DIR = REPO / "data" / ".cache"  # downloads and the lock; gitignored
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
SPLIT_FILES = {"train": "train.npz", "test": "test.npz"}
OFFICIAL_SPLIT = "official"  # the manifest's "split" when the arrays are the official files

# The four files of the release (stored as NAME.gz, or gunzipped as NAME), by split and array.
IDX_NAMES = {
    ("train", "images"): "train-images-idx3-ubyte",
    ("train", "labels"): "train-labels-idx1-ubyte",
    ("test", "images"): "t10k-images-idx3-ubyte",
    ("test", "labels"): "t10k-labels-idx1-ubyte",
}
# SHA-256 of the DECOMPRESSED files, not of the .gz: gzip bytes differ between copies (Debian
# recompressed them) while the content is the same everywhere. Computed from Debian's
# dataset-fashion-mnist 0.0~git20200523.55506a9-1, whose headers say 60,000 and 10,000 images of
# 28x28, 6,000 and 1,000 per class. Tests monkeypatch this dict.
IDX_SHA256 = {
    "train-images-idx3-ubyte": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    "train-labels-idx1-ubyte": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
    "t10k-images-idx3-ubyte": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    "t10k-labels-idx1-ubyte": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
}

DEBIAN_PACKAGE = "dataset-fashion-mnist"
DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
SOURCE_DIR_ENV = "FASHION_MNIST_SOURCE_DIR"
MIRRORS = (  # the official files: Keras's copy, then Zalando's
    "https://storage.googleapis.com/tensorflow/tf-keras-datasets/",
    "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
)
NETWORK_TIMEOUT = 10  # seconds; classrooms are often offline, so fail fast
SAMPLE_SEED = 20190101


class DataError(Exception):
    """An expected data problem: the message says what is wrong and how to fix it."""


class SourceUnavailable(Exception):
    """This source cannot be used; the message is the one-line reason."""


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


def prepare_command(dest: Path, *flags: str) -> str:
    """The command that (re)builds `dest`, for "Fix:" hints."""
    parts = ["python -m workbook.fashion_data prepare"]
    if Path(dest).resolve() != DEFAULT_DIR:
        parts.append(f"--dest {shown(dest)}")
    return " ".join(parts + list(flags))


def repair_hint(path: Path) -> str:
    if Path(path).resolve() == SAMPLE_DIR:
        return "Fix: git checkout -- data/sample (it is committed)"
    return f"Fix: {prepare_command(path, '--force')}"


def log(verbose: bool, message: str) -> None:
    if verbose:
        print(message, flush=True)


def describe(manifest: dict) -> str:
    """E.g. "the official split, 60,000 training and 10,000 test images, from Debian's ..."."""
    counts, split = manifest.get("counts", {}), manifest.get("split")
    if split == OFFICIAL_SPLIT:
        split = "the official split"
    elif isinstance(split, dict) and "drawn_from" in split:  # written by make_sample
        split = "a sample of the official split"
    else:  # e.g. the npm copy that older versions of the workbook fell back to
        split = "a split of its own"
    return (
        f"{split}, {counts.get('train', 0):,} training and {counts.get('test', 0):,} test "
        f"images, from {manifest.get('source')}"
    )


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
    for name in SPLIT_FILES.values():
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
        for split, name in SPLIT_FILES.items():
            problems += array_problems(path / name, counts.get(split))
    return [f"{problem}. {repair_hint(path)}" for problem in problems]


def is_official(path: Path) -> bool:
    """True when the prepared directory was made from the official files (not, e.g., from
    the npm copy that earlier versions of the workbook fell back to)."""
    try:
        return read_manifest(path).get("split") == OFFICIAL_SPLIT
    except DataError:
        return False


def load(
    path: Path = DEFAULT_DIR,
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """((x_train, y_train), (x_test, y_test)) as uint8 numpy arrays from a prepared directory."""
    path = Path(path)
    try:
        splits = []
        for name in SPLIT_FILES.values():
            with np.load(path / name, allow_pickle=False) as npz:
                splits.append((npz["images"], npz["labels"]))
    except FileNotFoundError:
        raise DataError(f"{shown(path)}: not prepared. Fix: {prepare_command(path)}") from None
    except Exception as exc:
        raise DataError(f"{shown(path)}: cannot be read ({exc}). {repair_hint(path)}") from None
    return splits[0], splits[1]


# --- reading and verifying the official files ---------------------------------------------


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
            f"{name}: truncated or padded ({len(raw):,} bytes, its header implies {expected:,})"
        )
    return np.frombuffer(raw, np.uint8, offset=header).reshape(dims)


def idx_path(directory: Path, name: str) -> Path | None:
    """NAME.gz or the gunzipped NAME in directory, whichever is there (.gz first)."""
    for path in (directory / f"{name}.gz", directory / name):
        if path.is_file():
            return path
    return None


def gunzip(data: bytes, where: str) -> bytes:
    try:
        return gzip.decompress(data)
    except (EOFError, OSError, zlib.error):
        raise DataError(f"{where}: truncated or not gzip data") from None


def checked_idx(data: bytes, name: str, where: str) -> np.ndarray:
    """The array in the decompressed content of official file `name`, verified."""
    array = parse_idx(data, where)
    if hashlib.sha256(data).hexdigest() != IDX_SHA256[name]:
        raise DataError(
            f"{where}: checksum mismatch, its content is not the official {name} "
            "(corrupt, or another data set)"
        )
    return array


def official_array(path: Path, name: str) -> np.ndarray:
    """The array in one official file (NAME.gz or NAME), verified by its decompressed content."""
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gunzip(data, shown(path))
    return checked_idx(data, name, shown(path))


def read_official_dir(directory: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{split: (images, labels)} from a directory with the four official files; DataError
    names the first file that is missing or wrong."""
    if not any(idx_path(directory, name) for name in IDX_NAMES.values()):
        raise DataError(f"no Fashion-MNIST files in {shown(directory)}")
    arrays = {}
    for key, name in IDX_NAMES.items():
        path = idx_path(directory, name)
        if path is None:
            raise DataError(f"{shown(directory / name)}.gz: missing")
        arrays[key] = official_array(path, name)
    return {split: (arrays[(split, "images")], arrays[(split, "labels")]) for split in SPLIT_FILES}


# --- the sources, in the order they are tried ---------------------------------------------
# Each returns (directory holding the four files, detail for the manifest) or raises
# SourceUnavailable with the reason.


def given_dir(options: dict) -> tuple[Path, str]:
    given = options["source_dir"] or os.environ.get(SOURCE_DIR_ENV)
    if not given:
        raise SourceUnavailable(f"none given (--from DIR or {SOURCE_DIR_ENV}=DIR)")
    directory = Path(given).expanduser()
    if not directory.is_dir():
        raise SourceUnavailable(f"{shown(directory)}: no such directory")
    return directory, str(directory.resolve())


def debian_dir(options: dict) -> tuple[Path, str]:
    if not DEBIAN_DIR.is_dir():
        raise SourceUnavailable(
            f"not installed ({DEBIAN_DIR} is missing). Fix on Debian or Ubuntu: "
            f"sudo apt-get install {DEBIAN_PACKAGE} (`make data` does it when it can)"
        )
    return DEBIAN_DIR, str(DEBIAN_DIR)


def keras_cache_dir(options: dict) -> tuple[Path, str]:
    """Where tf.keras.datasets.fashion_mnist.load_data() keeps its downloads."""
    keras_home = os.environ.get("KERAS_HOME") or Path.home() / ".keras"
    directory = Path(keras_home) / "datasets" / "fashion-mnist"
    if not directory.is_dir():
        raise SourceUnavailable(f"{shown(directory)}: no such directory")
    return directory, str(directory)


def unreachable_reason(exc: Exception) -> str:
    """One line for a failed download."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return f"unreachable ({getattr(exc.reason, 'strerror', None) or exc.reason})"
    if isinstance(exc, TimeoutError):
        return f"no answer within {NETWORK_TIMEOUT} s"
    return f"{type(exc).__name__}: {exc}"


def download(url: str, dest: Path, name: str) -> None:
    """Download url to dest through a temp file, kept only if its content is the official one."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    handle, part = tempfile.mkstemp(dir=dest.parent, prefix=".part-")
    try:
        with (
            os.fdopen(handle, "wb") as out,
            urllib.request.urlopen(url, timeout=NETWORK_TIMEOUT) as response,
        ):
            shutil.copyfileobj(response, out, 1 << 16)
        checked_idx(gunzip(Path(part).read_bytes(), url), name, url)
        os.replace(part, dest)
    finally:
        Path(part).unlink(missing_ok=True)


def downloaded_dir(options: dict) -> tuple[Path, str]:
    if options["offline"]:
        raise SourceUnavailable("not tried (--offline)")
    directory = options["cache_dir"] / "downloads"
    failures = []
    for mirror in MIRRORS:
        try:
            for name in IDX_NAMES.values():
                target = directory / f"{name}.gz"
                try:  # a copy from an earlier run is used when it still verifies
                    official_array(target, name)
                except (OSError, DataError):
                    log(options["verbose"], f"  downloading {mirror}{name}.gz")
                    download(f"{mirror}{name}.gz", target, name)
        except DataError as exc:
            failures.append(str(exc))
        except (OSError, http.client.HTTPException, ValueError) as exc:  # ValueError: bad URL
            failures.append(f"{mirror}: {unreachable_reason(exc)}")
        else:
            return directory, mirror
    raise SourceUnavailable("; ".join(failures))


SOURCES = (
    ("local directory", given_dir),
    (f"Debian package {DEBIAN_PACKAGE}", debian_dir),
    ("Keras cache", keras_cache_dir),
    ("download", downloaded_dir),
)


# --- writing a prepared directory -------------------------------------------------------


def remove_stale_temp_dirs(parent: Path) -> None:
    """Delete temp directories left by an interrupted run."""
    for stale in parent.glob(TEMP_PREFIX + "*"):
        shutil.rmtree(stale, ignore_errors=True)


@contextmanager
def preparation_lock():
    """Serialise preparations (e.g. several notebook kernels calling prepare() at once)."""
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with open(CACHE_DIR / "prepare.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def write_prepared(splits: dict, dest: Path, about: dict) -> dict:
    """Write the split files and manifest (`about` + checksums and counts) into a temp dir,
    renamed to dest only when complete; returns the manifest."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=dest.parent))
    temp.chmod(0o755)  # mkdtemp makes it private; the prepared data is for every user
    try:
        files = {}
        for split, name in SPLIT_FILES.items():
            images, labels = splits[split]
            path = temp / name
            np.savez_compressed(path, images=images, labels=labels)
            files[name] = {"sha256": sha256_of_file(path), "bytes": path.stat().st_size}
        manifest = {
            "format": FORMAT,
            **about,
            "files": files,
            "counts": {split: int(len(labels)) for split, (_, labels) in splits.items()},
            "class_names": list(CLASS_NAMES),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        (temp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        if dest.exists():  # replacing: move the old copy aside, then swap in the new one
            os.replace(
                dest, Path(tempfile.mkdtemp(prefix=TEMP_PREFIX + "old-", dir=dest.parent)) / "old"
            )
        os.replace(temp, dest)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    remove_stale_temp_dirs(dest.parent)
    return manifest


def already_prepared(dest: Path, force: bool, verbose: bool) -> bool:
    """True when dest is already prepared from the official files and verified; DataError
    when it is damaged."""
    if not dest.exists() or (dest.is_dir() and not any(dest.iterdir())):
        return False
    if force:
        log(verbose, f"  --force: rebuilding {shown(dest)}")
        return False
    problems = verify(dest, deep=False)
    if problems:
        raise DataError("\n".join(problems))
    manifest = read_manifest(dest)
    if manifest.get("split") != OFFICIAL_SPLIT:
        log(verbose, f"  {shown(dest)} holds {describe(manifest)}: replacing it")
        return False
    log(verbose, f"{shown(dest)}: already prepared, {describe(manifest)}; verified")
    return True


def prepare(
    dest: Path = DEFAULT_DIR,
    source_dir: Path | None = None,
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
            "offline": offline,
            "verbose": verbose,
            "cache_dir": CACHE_DIR,
        }
        log(verbose, f"Preparing Fashion-MNIST in {shown(dest)}")
        reasons = []
        for name, source in SOURCES:
            try:
                directory, detail = source(options)
                splits = read_official_dir(directory)
            except (SourceUnavailable, DataError) as exc:
                log(verbose, f"  skipped {name}: {exc}")
                reasons.append(f"{name}: {exc}")
                continue
            about = {"source": name, "source_detail": detail, "split": OFFICIAL_SPLIT}
            manifest = write_prepared(splits, dest, {**about, "official_idx_sha256": IDX_SHA256})
            log(verbose, f"Prepared {describe(manifest)} ({detail}), in {shown(dest)}")
            return dest
    raise DataError(
        "no source of Fashion-MNIST worked:\n  "
        + "\n  ".join(reasons)
        + f"\nFix: sudo apt-get install {DEBIAN_PACKAGE} (Debian, Ubuntu), or connect to the "
        "internet, or copy the 4 official .gz files to a directory and pass --from DIR"
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
    seed: int = SAMPLE_SEED,
    verbose: bool = True,
) -> Path:
    """Write a class-balanced sample of the official data prepared in src to dest; returns dest.

    Reproducible: the same official data and seed give the same arrays.
    """
    src, dest = Path(src).absolute(), Path(dest).absolute()
    problems = verify(src)
    if problems:
        raise DataError("\n".join(problems))
    parent = read_manifest(src)
    if parent.get("split") != OFFICIAL_SPLIT:
        raise DataError(
            f"{shown(src)} holds {describe(parent)}, not the official files. "
            f"Fix: {prepare_command(src)}"
        )
    (x_train, y_train), (x_test, y_test) = load(src)
    rng = np.random.default_rng(seed)
    per_class = {"train": n_train // len(CLASS_NAMES), "test": n_test // len(CLASS_NAMES)}
    splits = {
        "train": balanced_sample(x_train, y_train, per_class["train"], rng),
        "test": balanced_sample(x_test, y_test, per_class["test"], rng),
    }
    about = {
        "source": f"sample of the official Fashion-MNIST, from {parent['source']}",
        "source_detail": parent["source_detail"],
        "split": {
            "method": "python -m workbook.fashion_data make-sample: per class, a seeded numpy "
            "default_rng choice from the official training set, then from the official test set",
            "seed": seed,
            "per_class_train": per_class["train"],
            "per_class_test": per_class["test"],
            "drawn_from": parent["counts"],
            "official_idx_sha256": parent.get("official_idx_sha256", IDX_SHA256),
        },
    }
    with preparation_lock():
        remove_stale_temp_dirs(dest.parent)
        write_prepared(splits, dest, about)
    log(
        verbose,
        f"Wrote a sample of {n_train:,} training and {n_test:,} test images "
        f"({per_class['train']} + {per_class['test']} per class) to {shown(dest)}",
    )
    return dest


# --- command line -----------------------------------------------------------------------


def multiple_of_classes(text: str) -> int:
    """An argparse type: a positive multiple of 10, so every class gets the same share."""
    value = int(text)
    if value <= 0 or value % len(CLASS_NAMES):
        raise argparse.ArgumentTypeError(f"{text} is not a positive multiple of {len(CLASS_NAMES)}")
    return value


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(
        prog="python -m workbook.fashion_data",
        description="Prepare, verify and sample the official Fashion-MNIST for the workbook.",
    )
    commands = cli.add_subparsers(dest="command", required=True)

    p = commands.add_parser("prepare", help="prepare the data from the first source that works")
    p.add_argument("--dest", type=Path, default=DEFAULT_DIR, help="default data/fashion_mnist")
    p.add_argument(
        "--from",
        dest="source_dir",
        type=Path,
        help=f"a directory with the 4 official files, .gz or not (or set {SOURCE_DIR_ENV})",
    )
    p.add_argument("--offline", action="store_true", help="do not try the download")
    p.add_argument(
        "--force", action="store_true", help="rebuild even if prepared (repairs a damaged copy)"
    )

    v = commands.add_parser("verify", help="check a prepared directory's checksums and shapes")
    v.add_argument("dir", nargs="?", type=Path, default=DEFAULT_DIR)

    s = commands.add_parser("make-sample", help="draw the committed sample from the official data")
    s.add_argument("--src", type=Path, default=DEFAULT_DIR)
    s.add_argument("--dest", type=Path, default=SAMPLE_DIR)
    s.add_argument("--train", type=multiple_of_classes, default=3000, help="training images")
    s.add_argument("--test", type=multiple_of_classes, default=1000, help="test images")
    s.add_argument("--seed", type=int, default=SAMPLE_SEED)
    return cli


def run(args: argparse.Namespace) -> int:
    if args.command == "prepare":
        start = time.perf_counter()
        prepare(args.dest, args.source_dir, args.offline, args.force)
        print(f"({time.perf_counter() - start:.1f} s)")
    elif args.command == "verify":
        problems = verify(args.dir)
        for problem in problems:
            print(problem)
        if problems:
            return 1
        print(f"{shown(args.dir)}: ok, {describe(read_manifest(args.dir))}")
    elif args.command == "make-sample":
        make_sample(args.src, args.dest, args.train, args.test, args.seed)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return run(args)
    except (DataError, OSError) as exc:  # OSError: disk full, permissions
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted; nothing half-written was left behind", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

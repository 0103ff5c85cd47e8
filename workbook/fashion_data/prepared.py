"""A prepared directory: the format the training scripts read, verified, loaded and written.

    DIR/train.npz, DIR/test.npz   arrays `images` uint8 (n, 28, 28) and `labels` uint8 (n,)
    DIR/manifest.json             their checksums and counts, the source, the split

A directory is written into a temp directory beside it and renamed into place when complete,
so an interrupted run never leaves half-written data (data/README.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from workbook.fashion_data.messages import DataError, shown
from workbook.paths import REPO

DEFAULT_DIR = REPO / "data" / "fashion_mnist"
SAMPLE_DIR = REPO / "data" / "sample"
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
# The manifest's "split": this for the official files; a sample records how it was drawn.
OFFICIAL_SPLIT = "official"


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


def describe(manifest: dict) -> str:
    """E.g. "the official split, 60,000 training and 10,000 test images, from Debian's ..."."""
    counts = manifest.get("counts", {})
    split = "the official split"
    if not is_official_manifest(manifest):  # make-sample's (authoring/sample.py)
        split = "a sample of the official split"
    return (
        f"{split}, {counts.get('train', 0):,} training and {counts.get('test', 0):,} test "
        f"images, from {manifest.get('source')}"
    )


def is_official_manifest(manifest: dict) -> bool:
    return manifest.get("split") == OFFICIAL_SPLIT


# --- reading and verifying ------------------------------------------------------------------


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
    """True when the prepared directory holds the official split (not a sample of it)."""
    try:
        return is_official_manifest(read_manifest(path))
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


# --- writing --------------------------------------------------------------------------------


def remove_stale_temp_dirs(parent: Path) -> None:
    """Delete temp directories left by an interrupted run."""
    for stale in parent.glob(TEMP_PREFIX + "*"):
        shutil.rmtree(stale, ignore_errors=True)


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

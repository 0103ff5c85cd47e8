"""The official files of Zalando's release: their names, their checksums, and reading them.

Four IDX files (stored as NAME.gz, or gunzipped as NAME), checked against the SHA-256 of their
decompressed content, whatever their source.
"""

from __future__ import annotations

import gzip
import hashlib
import zlib
from pathlib import Path

import numpy as np

from workbook.fashion_data.messages import DataError, shown

# The four files of the release, by split and array.
IDX_NAMES = {
    ("train", "images"): "train-images-idx3-ubyte",
    ("train", "labels"): "train-labels-idx1-ubyte",
    ("test", "images"): "t10k-images-idx3-ubyte",
    ("test", "labels"): "t10k-labels-idx1-ubyte",
}
SPLITS = tuple(dict.fromkeys(split for split, _ in IDX_NAMES))  # ("train", "test")
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
    return {split: (arrays[(split, "images")], arrays[(split, "labels")]) for split in SPLITS}

"""The data the run check trains on: images whose identity survives the script's transforms.

Image i of a split is one grey level of its own, the same on every pixel; the labels are the
committed sample's. A flip, a shift of a few pixels (padding stays a minority) or a per-pixel
affine normalization keeps the median pixel a function of the level alone, so the probe can
name every image a rank trains or validates on by that median (probe.image_keys), and the
check can see whether the ranks' epochs overlap, cover the data once, or cover it N times.
Written in the format the lesson's script loads (train.npz and test.npz, as data/sample).
"""

from __future__ import annotations

from pathlib import Path

from workbook.paths import REPO

SAMPLE = REPO / "data" / "sample"
LEVELS = 256  # uint8: at most this many images can have a level of their own


def write_keyed_data(folder: Path, train_images: int, test_images: int) -> Path:
    """Writes train.npz and test.npz of keyed images into `folder` (created); returns it."""
    import numpy as np  # here: importing the grader stays light

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, count in (("train", train_images), ("test", test_images)):
        if not 0 < count <= LEVELS:
            raise ValueError(f"{count} {name} images: keyed data holds 1..{LEVELS}")
        with np.load(SAMPLE / f"{name}.npz") as sample:
            labels = sample["labels"][:count]
            height, width = sample["images"].shape[1:]
        # Levels spread over 0..255, so that a rescaling keeps neighbours apart.
        levels = (np.arange(count) * (LEVELS - 1) // max(count - 1, 1)).astype(np.uint8)
        images = np.repeat(levels, height * width).reshape(count, height, width)
        np.savez(folder / f"{name}.npz", images=images, labels=labels)
    return folder

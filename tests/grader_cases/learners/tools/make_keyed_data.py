"""Writes a keyed copy of the sample data: image i is one constant grey level, so that its
identity survives the scripts' flips and shifts (the centre pixel keeps the level) and the
(level, label) pair names the image. 512 training and 128 test images.

    python tests/grader_cases/learners/tools/make_keyed_data.py /tmp/keyed
"""

import sys
from pathlib import Path

import numpy as np

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
for name, count in [("train", 512), ("test", 128)]:
    index = np.arange(count)
    levels = (10 + index // 10 * 4).astype(np.uint8)  # 10..214, distinct per 10 images
    labels = (index % 10).astype(np.uint8)
    images = np.repeat(levels[:, None, None], 28 * 28, axis=1).reshape(count, 28, 28)
    np.savez(out / f"{name}.npz", images=images, labels=labels)
print("keyed data in", out)

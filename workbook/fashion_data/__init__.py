"""Fashion-MNIST for the Horovod workbook: find the official files, verify them, convert them.

    python -m workbook.fashion_data prepare [--dest DIR] [--from DIR] [--offline] [--force]
    python -m workbook.fashion_data verify [DIR]

Every source holds the four files of Zalando's release (60,000 training and 10,000 test images,
MIT licence); they are checked against the SHA-256 of their decompressed content. A prepared
directory holds train.npz and test.npz plus manifest.json; see data/README.md.

    messages     DataError (what is wrong and the fix), paths as typed, progress lines
    official     the four official files: names, checksums, reading and verifying them
    sources      where they come from, in order: --from DIR, Debian's package, Keras, download
    prepared     a prepared directory: its format, verify(), load(), writing one atomically
    preparation  prepare(): the first source that works, into a prepared directory, under a lock
    cli          the command line

The committed sample (data/sample) is drawn by an authors' tool, authoring/sample.py.
"""

from workbook.fashion_data.messages import DataError
from workbook.fashion_data.preparation import prepare
from workbook.fashion_data.prepared import (
    CLASS_NAMES,
    DEFAULT_DIR,
    SAMPLE_DIR,
    describe,
    is_official,
    load,
    read_manifest,
    verify,
)

__all__ = [
    "CLASS_NAMES",
    "DEFAULT_DIR",
    "SAMPLE_DIR",
    "DataError",
    "describe",
    "is_official",
    "load",
    "prepare",
    "read_manifest",
    "verify",
]

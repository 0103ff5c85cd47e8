"""Where the official files come from, in the order prepare() tries them.

Each source returns (directory holding the four files, detail for the manifest) or raises
SourceUnavailable with the reason: a directory given with --from, Debian's package, the Keras
cache, a download (Keras's copy, then Zalando's).
"""

from __future__ import annotations

import http.client
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from workbook.fashion_data.messages import DataError, log, shown
from workbook.fashion_data.official import IDX_NAMES, checked_idx, gunzip, official_array

DEBIAN_PACKAGE = "dataset-fashion-mnist"
DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
SOURCE_DIR_ENV = "FASHION_MNIST_SOURCE_DIR"
MIRRORS = (  # the official files: Keras's copy, then Zalando's
    "https://storage.googleapis.com/tensorflow/tf-keras-datasets/",
    "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
)
NETWORK_TIMEOUT = 10  # seconds; classrooms are often offline, so fail fast


class SourceUnavailable(Exception):
    """This source cannot be used; the message is the one-line reason."""


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

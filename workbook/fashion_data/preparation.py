"""prepare(): make a prepared directory from the first source of the official files that works."""

from __future__ import annotations

import fcntl
from contextlib import contextmanager
from pathlib import Path

from workbook.fashion_data import official, sources
from workbook.fashion_data.messages import DataError, log, shown
from workbook.fashion_data.prepared import (
    DEFAULT_DIR,
    OFFICIAL_SPLIT,
    describe,
    is_official_manifest,
    read_manifest,
    remove_stale_temp_dirs,
    verify,
    write_prepared,
)
from workbook.paths import REPO

CACHE_DIR = REPO / "data" / ".cache"  # downloads and the lock; gitignored


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
    if not is_official_manifest(manifest):  # a sample written there
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
        for name, source in sources.SOURCES:
            try:
                directory, detail = source(options)
                splits = official.read_official_dir(directory)
            except (sources.SourceUnavailable, DataError) as exc:
                log(verbose, f"  skipped {name}: {exc}")
                reasons.append(f"{name}: {exc}")
                continue
            about = {
                "source": name,
                "source_detail": detail,
                "split": OFFICIAL_SPLIT,
                "official_idx_sha256": official.IDX_SHA256,
            }
            manifest = write_prepared(splits, dest, about)
            log(verbose, f"Prepared {describe(manifest)} ({detail}), in {shown(dest)}")
            return dest
    raise DataError(
        "no source of Fashion-MNIST worked:\n  "
        + "\n  ".join(reasons)
        + f"\nFix: sudo apt-get install {sources.DEBIAN_PACKAGE} (Debian, Ubuntu), or connect "
        "to the internet, or copy the 4 official .gz files to a directory and pass --from DIR"
    )

"""grader/running/kept.py, the bounded reader of what a run left: only records and names, as the
grader's own plain files, whatever the run made of its folder (links, pipes, a setuid copy,
700 nested folders, thousands of files, a huge file, names with control characters). The same
attacks through a real sandboxed run: tests/system/test_sandbox.py."""

from __future__ import annotations

import os
import stat

import pytest

from grader.running import kept
from grader.running.evidence import Evidence
from grader.running.kept import keep_log, keep_names, keep_records, keep_run


def modes_and_owners(folder):
    """{relative path: (mode, uid)} of everything under `folder`."""
    found = {}
    for path in folder.rglob("*"):
        info = path.lstat()
        found[path.relative_to(folder).as_posix()] = (
            stat.S_IMODE(info.st_mode),
            info.st_uid,
            stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode),
        )
    return found


@pytest.fixture
def box(tmp_path):
    """A run's writable folder as a hostile script leaves it."""
    box = tmp_path / "box"
    records = box / "records"
    records.mkdir(parents=True)
    (records / "run1-rank0.json").write_text('{"run": 1, "rank": 0, "pid": 7, "finished": true}')
    (records / "run1-rank0-first-update.npy").write_bytes(b"\x93NUMPY")
    secret = tmp_path / "gradebook.db"
    secret.write_text("everyone's grades")
    (records / "run1-rank1.json").symlink_to(secret)  # a link among the records
    os.link(secret, records / "run2-rank0.json")  # a hard link to a file outside
    os.mkfifo(records / "run2-rank1.json")  # a pipe the grader would wait on
    setuid = records / "run3-rank0.json"
    setuid.write_text("{}")
    setuid.chmod(0o6777)  # a setuid, world-writable copy
    (records / "run3-rank1.json").write_bytes(b" " * (kept.MAX_RECORD_BYTES + 1))
    (records / "notes.txt").write_text("not a record")
    logs = box / "logs"
    deep = logs.joinpath(*["d"] * 700)  # 700 nested folders: copytree's RecursionError
    deep.mkdir(parents=True)
    (deep / "bottom.txt").write_text("x")
    (logs / "events.out.tfevents.1.host.7.0.v2").write_text("event")
    (logs / "name\nwith\x1b[31mcontrol").write_text("x")
    (logs / "link").symlink_to("/etc/passwd")
    many = box / "logs-rank1-run1"
    many.mkdir()
    for number in range(kept.MAX_LISTED + 100):
        (many / f"f{number}").write_text("")
    (box / "elsewhere").mkdir()  # not a folder the grader asked for
    (box / "elsewhere" / "run1-rank0.json").write_text("{}")
    return box


def test_only_plain_records_are_kept_as_the_graders_own_files(box, tmp_path):
    target = tmp_path / "kept"
    target.mkdir()
    keep_run(box, target, "logs")
    assert sorted(p.name for p in (target / "records").iterdir()) == [
        "run1-rank0-first-update.npy",
        "run1-rank0.json",
        "run3-rank0.json",
    ]
    # No link, pipe or huge file came along; nothing kept has a mode of the run's.
    assert {mode for mode, _, _ in modes_and_owners(target).values()} <= {0o600, 0o700}
    assert all(uid == os.getuid() and plain for _, uid, plain in modes_and_owners(target).values())
    assert "everyone's grades" not in "".join(
        p.read_text() for p in (target / "records").glob("*.json")
    )
    assert not (target / "elsewhere").exists()
    evidence = Evidence.read(target / "records", 2)
    assert evidence.ranks(1)[0].finished


def test_the_log_folders_come_back_as_names_bounded_in_depth_and_number(box, tmp_path):
    target = tmp_path / "kept"
    target.mkdir()
    keep_run(box, target, "logs")
    names = sorted(
        p.relative_to(target / "logs").as_posix()
        for p in (target / "logs").rglob("*")
        if p.is_file()
    )
    assert "events.out.tfevents.1.host.7.0.v2" in names
    assert "name?with?[31mcontrol" in names  # printable
    assert "link" not in names and not any(n.endswith("bottom.txt") for n in names)
    assert max(n.count("/") for n in names) <= kept.MAX_DEPTH
    assert all((target / "logs" / n).stat().st_size == 0 for n in names)  # names, not contents
    assert len(list((target / "logs-rank1-run1").iterdir())) == kept.MAX_LISTED


def test_a_huge_log_keeps_its_head_and_tail(tmp_path):
    log = tmp_path / "horovodrun.log"
    log.write_bytes(b"# the command\n" + b"x" * (4 << 20) + b"\nTraceback: the end\n")
    keep_log(log, tmp_path / "launch-1.log")
    text = (tmp_path / "launch-1.log").read_text()
    assert text.startswith("# the command") and text.endswith("Traceback: the end\n")
    assert "bytes of the log cut here" in text
    assert len(text) <= kept.LOG_HEAD_BYTES + kept.LOG_TAIL_BYTES + 100
    link = tmp_path / "linked.log"
    link.symlink_to(log)
    assert (
        not keep_log(link, tmp_path / "launch-2.log") and not (tmp_path / "launch-2.log").exists()
    )


def test_a_missing_folder_keeps_nothing_and_a_kept_file_is_never_written_through_a_link(tmp_path):
    assert keep_records(tmp_path / "none", tmp_path / "a") == 0
    assert keep_names(tmp_path / "none", tmp_path / "b") == 0
    (tmp_path / "c").symlink_to(tmp_path / "target")
    with pytest.raises(OSError):
        kept.write_plain(tmp_path / "c", b"data")
    assert not (tmp_path / "target").exists()

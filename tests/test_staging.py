"""All-or-none writes (scripts/store/staging.py): a write that fails leaves no temporary
file, and the next run removes only what a run that is gone staged. The failed move and a
signal during the commit are in tests/test_faults.py."""
import errno
import os

import pytest

from conftest import ended_pid
from scripts.store import staging
from scripts.store.staging import StagingError, remove_stray_temps, staged_write, write_atomically


def test_a_write_that_fails_midway_is_one_line_and_leaves_no_temporary_file(tmp_path,
                                                                             monkeypatch):
    class FullDisk:
        def __init__(self, fd, mode):
            os.close(fd)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(staging.os, "fdopen", FullDisk)
    target = tmp_path / "x.cpu.json"
    with pytest.raises(StagingError, match=r"x.cpu.json: cannot be written \(No space"):
        write_atomically(target, "{}")
    assert list(tmp_path.iterdir()) == []


def test_a_write_under_a_file_is_one_line(tmp_path):
    (tmp_path / "figures").write_text("not a folder")
    with pytest.raises(StagingError, match="cannot be written"):
        write_atomically(tmp_path / "figures" / "x.svg", "<svg/>")


def test_only_staged_files_whose_run_is_gone_are_removed(tmp_path):
    gone = ended_pid()
    mine = staged_write(tmp_path / "a.json", "{}")  # this process is still running
    assert f".a.json.{os.getpid()}." in mine.name
    kept = [mine, tmp_path / f".b.json.{os.getpid()}.old.tmp",
            tmp_path / ".c.json.nopid.tmp",  # whose it is cannot be told: left alone
            tmp_path / "d.json.tmp"]  # not a staged name at all
    removed = [tmp_path / f".e.json.{gone}.x8y7z6w5.tmp", tmp_path / f".f.svg.{gone}.old.tmp"]
    for path in kept[1:] + removed:
        path.write_text("x")
    remove_stray_temps([tmp_path])
    assert all(path.exists() for path in kept)
    assert not any(path.exists() for path in removed)

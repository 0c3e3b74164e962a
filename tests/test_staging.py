"""All-or-none writes (scripts/store/staging.py). Signals during staging: test_faults.py."""
import errno
import os
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings, strategies as st

from conftest import ended_pid
from harness import FullDisk
from scripts.store import staging
from scripts.store.staging import (Staging, StagingError, remove_stray_temps, staged_write,
                                   write_atomically)


def test_a_write_that_fails_midway_is_one_line_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    monkeypatch.setattr(staging.os, "fdopen", FullDisk)
    target = tmp_path / "x.cpu.json"
    with pytest.raises(StagingError, match=r"x.cpu.json: cannot be written \(No space"):
        write_atomically(target, "{}")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "figures").write_text("not a folder")  # and a write under a file
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
    assert all(path.exists() for path in kept) and not any(path.exists() for path in removed)


@settings(max_examples=60, deadline=None)
@given(olds=st.lists(st.booleans(), min_size=1, max_size=6), failing=st.integers(0, 6))
def test_whichever_move_fails_every_file_is_as_it_was_and_else_all_are_new(olds, failing):
    """If the move of file `failing` fails (past the last: none), the folder is byte for
    byte as before; otherwise every file is new. No staged or kept file is left."""
    real_replace = os.replace
    with tempfile.TemporaryDirectory() as folder:
        files = [Path(folder) / f"output{number}.json" for number in range(len(olds))]
        for number, old in enumerate(olds):
            if old:
                files[number].write_text(f"old {number}")
        before = {path.name: path.read_text() for path in Path(folder).iterdir()}

        def replace(source, target):
            if failing < len(files) and Path(target) == files[failing] and \
                    Path(source).name.startswith(f".{files[failing].name}.{os.getpid()}."):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real_replace(source, target)

        with mock.patch.object(os, "replace", replace):
            try:
                with Staging() as staged:
                    for number, path in enumerate(files):
                        staged.add(path, f"new {number}")
                    staged.commit()
            except StagingError as error:
                assert failing < len(files) and "every file is as it was" in str(error)
        after = {path.name: path.read_text() for path in Path(folder).iterdir()}
        assert after == (before if failing < len(files) else
                         {path.name: f"new {number}" for number, path in enumerate(files)})

"""All-or-none writes: every output of a run is staged beside its target and moved into
place together, or not at all. A staged file is `.<name>.<pid>.<random>.tmp`, so the next
run removes what a SIGKILLed one left without touching a live run's files. Nothing is
written through a link (on the way to the target inside the checkout, or at the target) or
over what is no regular file: every writer of the project comes through here.
"""
import os
import re
import shutil
import tempfile
from contextlib import suppress
from pathlib import Path

import psutil

from scripts import ROOT, display
from scripts.plumbing import interrupts
from scripts.plumbing.interrupts import signals_deferred

STAGED_NAME = re.compile(r"\..+\.(\d+)\.[^.]+\.tmp")


class StagingError(Exception):
    """A file that cannot be written or moved into place; str() is one line naming it."""


def refuse_unsafe_target(path, root=ROOT):
    """StagingError, one line, for a link on the way to `path` (each folder below `root`, if
    `path` is in it) or at `path`, or a `path` that is there but is no regular file: a commit
    could make any of them lead outside the checkout, or onto a device."""
    path, root = Path(os.path.abspath(path)), Path(root)
    parts = path.relative_to(root).parts if path.is_relative_to(root) else ()
    for step in [root.joinpath(*parts[:n]) for n in range(1, len(parts))] + [path]:
        if step.is_symlink():
            raise StagingError(f"{display(step)} is a symbolic link (to "
                               f"{os.readlink(step)[:120]!r}), and nothing is written through "
                               f"one: replace it with a file or folder of its own; nothing "
                               f"was changed")
    if path.exists() and not path.is_file():
        raise StagingError(f"{display(path)} is not a regular file, and only a regular file is "
                           f"replaced: move it away, or write elsewhere; nothing was changed")


def staged_write(path, data, staged=None, mode=0o644, root=ROOT):
    """Write `data` to a temporary file beside `path` (os.replace is then atomic); return
    it. `staged`: a list it joins in the step that makes it, so no signal finds it unlisted.
    `mode`: the file's, which mkstemp's private 0600 would otherwise follow into git."""
    path, entry = Path(path), None
    staged = [] if staged is None else staged
    refuse_unsafe_target(path, root)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with signals_deferred():
            fd, temp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.",
                                        suffix=".tmp", dir=path.parent)
            entry = (Path(temp), path)
            staged.append(entry)
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as out:
            out.write(data.encode() if isinstance(data, str) else data)
    except BaseException as error:
        if entry is not None:
            entry[0].unlink(missing_ok=True)
            staged.remove(entry)
        if isinstance(error, OSError):
            raise StagingError(f"{display(path)}: cannot be written ({error.strerror}); "
                               f"nothing was changed") from None
        raise
    return entry[0]


def remove_stray_temps(directories):
    """Delete the staged files of runs that are gone (only SIGKILL or a power cut leaves one)."""
    for directory in directories:
        for temp in Path(directory).rglob(".*.tmp"):  # recordings/analysis/ is in there
            owner = STAGED_NAME.fullmatch(temp.name)
            if owner and not psutil.pid_exists(int(owner[1])) and not temp.is_dir():
                temp.unlink(missing_ok=True)


class Staging:
    """Files staged beside their targets, moved by commit(); left by an exception, deleted."""

    def __init__(self, root=ROOT):
        self.staged, self.root = [], root

    def add(self, path, data, mode=0o644):
        staged_write(path, data, self.staged, mode, self.root)

    def commit(self, report=lambda path: None):
        """Move every staged file into place, or none (the moved ones put back from links to
        their old files); signals wait until the moves are done."""
        # (target, a link to its old file), listed before the move: putting back a file
        # whose move failed puts back the file it still is.
        moved = []
        with signals_deferred():  # raises at once for a signal swallowed before now
            try:
                for temp, final in self.staged:
                    moved.append((final, keep_old(final)))
                    os.replace(temp, final)
            except OSError as error:
                put_back(moved)
                raise StagingError(f"{display(final)}: cannot be moved into place "
                                   f"({error.strerror}); every file is as it was") from None
            finally:
                for _, old in moved:
                    if old is not None:
                        old.unlink(missing_ok=True)
            self.staged = []
            interrupts.files_in_place = True  # a signal held until now says so
            for final, _ in moved:
                report(final)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for temp, _ in self.staged:
            temp.unlink(missing_ok=True)
        self.staged = []


def keep_old(path):
    """A hard link to the file about to be replaced (None if none), named as staged files are."""
    if not path.exists():
        return None
    old = path.with_name(f".{path.name}.{os.getpid()}.old.tmp")
    old.unlink(missing_ok=True)
    try:
        os.link(path, old)
    except OSError:
        shutil.copy2(path, old)  # a file system without hard links
    return old


def put_back(moved):
    for final, old in reversed(moved):
        with suppress(OSError):  # the error already raised names the file; nothing more to do
            if old is None:
                final.unlink(missing_ok=True)
            else:
                os.replace(old, final)


def write_atomically(path, data, root=ROOT):
    """Replace `path` with `data`: a reader sees the old file or the new one, never half."""
    with Staging(root) as staging:
        staging.add(path, data)
        staging.commit()

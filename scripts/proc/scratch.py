"""Scratch folders that a killed run does not leave behind for good.

A run's scratch folder (a kernel's sockets, the ranks' output files, Open MPI's session
folder) is `<prefix>-<pid>-<random>` in the system's temporary folder, removed when the
run ends, however it ends, except by SIGKILL, which gives a process no chance to clean
up. So each run first removes every such folder whose process is gone, whatever its
prefix: a plain `record.py` also removes the `ranks-*` folder a killed multi-process run
left.
"""
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path


# Written into each scratch folder: only a folder holding it is ever removed by another
# run, never a stranger's folder that happens to have a similar name.
MARK = ".scratch-of-scripts"
NAME = re.compile(r"(.+)-(\d+)-\w+")


@contextmanager
def scratch_folder(prefix):
    remove_abandoned()
    with tempfile.TemporaryDirectory(prefix=f"{prefix}-{os.getpid()}-") as folder:
        (Path(folder) / MARK).write_text(f"{os.getpid()}\n")
        yield Path(folder)


def remove_abandoned(prefix=None, directory=None):
    """Remove this user's scratch folders (`<prefix>-<pid>-*`; any prefix by default)
    whose process no longer runs."""
    for folder in Path(directory or tempfile.gettempdir()).glob(f"{prefix or '*'}-*-*"):
        match = NAME.fullmatch(folder.name)
        if match and prefix in (None, match[1]) and folder.is_dir() \
                and not folder.is_symlink() and (folder / MARK).is_file() \
                and folder.stat().st_uid == os.getuid() and not running(int(match[2])):
            shutil.rmtree(folder, ignore_errors=True)


def running(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True

"""Scratch folders that a killed run does not leave behind for good.

A run's scratch folder (a kernel's sockets, the ranks' output files) is
`<prefix>-<pid>-<random>` in the system's temporary folder, removed when the run ends,
however it ends, except by SIGKILL, which gives a process no chance to clean up. So each
run first removes the folders of its prefix whose process is gone.
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


@contextmanager
def scratch_folder(prefix):
    remove_abandoned(prefix)
    with tempfile.TemporaryDirectory(prefix=f"{prefix}-{os.getpid()}-") as folder:
        (Path(folder) / MARK).write_text(f"{os.getpid()}\n")
        yield Path(folder)


def remove_abandoned(prefix, directory=None):
    """Remove this user's `<prefix>-<pid>-*` folders whose process no longer runs."""
    name = re.compile(rf"{re.escape(prefix)}-(\d+)-\w+")
    for folder in Path(directory or tempfile.gettempdir()).glob(f"{prefix}-*-*"):
        match = name.fullmatch(folder.name)
        if match and folder.is_dir() and not folder.is_symlink() \
                and (folder / MARK).is_file() and folder.stat().st_uid == os.getuid() \
                and not running(int(match[1])):
            shutil.rmtree(folder, ignore_errors=True)


def running(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True

"""What a SIGKILLed run leaves behind, cleared by the next run: scratch folders and the
processes that carry its mark.

A run's scratch folder (a kernel's sockets, the ranks' output files, Open MPI's session
folder) is `<prefix>-<pid>-<random>` in the system's temporary folder, removed when the
run ends, however it ends, except by SIGKILL, which gives a process no chance to clean
up. Ranks under mpirun may then outlive it too: mpirun, sent SIGTERM as record.py dies,
exits and leaves ranks that wait in a collective. So each run first kills every process
whose RUN_MARK names a run that is gone, and removes every such folder, whatever its
prefix.
"""
import os
import re
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import psutil

# Written into each scratch folder: only a folder holding it is ever removed by another
# run, never a stranger's folder that happens to have a similar name.
MARK = ".scratch-of-scripts"
NAME = re.compile(r"(.+)-(\d+)-\w+")
# In the environment of a run's processes that may outlive it: its scratch folder's name.
RUN_MARK = "LESSON_RUN_MARK"


@contextmanager
def scratch_folder(prefix):
    kill_marked()  # the processes first: they may still write into their folder
    remove_abandoned()
    with tempfile.TemporaryDirectory(prefix=f"{prefix}-{os.getpid()}-") as folder:
        (Path(folder) / MARK).write_text(f"{os.getpid()}\n")
        yield Path(folder)


def running(pid):
    """Whether process `pid` exists (another user's, or a zombie, counts)."""
    return psutil.pid_exists(pid)


def gone(name):
    """Whether the run that named a folder or a mark `name` no longer runs."""
    match = NAME.fullmatch(name)
    return bool(match) and not running(int(match[2]))


def remove_abandoned(prefix=None, directory=None):
    """Remove this user's scratch folders (`<prefix>-<pid>-*`; any prefix by default)
    whose process no longer runs."""
    for folder in Path(directory or tempfile.gettempdir()).glob(f"{prefix or '*'}-*-*"):
        match = NAME.fullmatch(folder.name)
        if match and prefix in (None, match[1]) and folder.is_dir() \
                and not folder.is_symlink() and (folder / MARK).is_file() \
                and folder.stat().st_uid == os.getuid() and gone(folder.name):
            shutil.rmtree(folder, ignore_errors=True)


def kill_marked(mark=None, timeout_s=10):
    """SIGKILL every process of this user that carries `mark` (None: the mark of any run
    that is gone), again until none runs. A stranger's environment cannot be read, and a
    zombie's is empty: it has finished, whoever reaps it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [process for process in psutil.process_iter(["environ"])
                 if (carried := (process.info["environ"] or {}).get(RUN_MARK))
                 and (carried == mark if mark else gone(carried))
                 and process.pid != os.getpid()]
        if not found:
            return
        for process in found:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        time.sleep(0.02)

"""What a SIGKILLed run leaves behind, cleared by the next run: its scratch folder
(`<prefix>-<pid>-<random>` in the temporary folder) and the processes that carry its mark
(ranks mpirun left waiting in a collective).
"""
import os
import re
import shutil
import tempfile
import time
from contextlib import contextmanager, suppress
from pathlib import Path

import psutil

MARK = ".scratch-of-scripts"  # only a folder holding it is ever removed by another run
NAME = re.compile(r"(.+)-(\d+)-\w+")
RUN_MARK = "LESSON_RUN_MARK"  # the scratch folder's name, in its run's processes' environment


@contextmanager
def scratch_folder(prefix):
    kill_marked()  # the processes first: they may still write into their folder
    remove_abandoned()
    with tempfile.TemporaryDirectory(prefix=f"{prefix}-{os.getpid()}-") as folder:
        (Path(folder) / MARK).write_text(f"{os.getpid()}\n")
        yield Path(folder)


def gone(name):
    """Whether the run that named a folder or a mark `name` no longer runs."""
    match = NAME.fullmatch(name)
    return bool(match) and not psutil.pid_exists(int(match[2]))  # another user's: still runs


def remove_abandoned(prefix=None):
    """Remove this user's scratch folders (of any prefix by default) whose run is gone."""
    for folder in Path(tempfile.gettempdir()).glob(f"{prefix or '*'}-*-*"):
        match = NAME.fullmatch(folder.name)
        if match and prefix in (None, match[1]) and folder.is_dir() \
                and not folder.is_symlink() and (folder / MARK).is_file() \
                and folder.stat().st_uid == os.getuid() and gone(folder.name):
            shutil.rmtree(folder, ignore_errors=True)


def kill_marked(mark=None, timeout_s=10):
    """SIGKILL this user's processes carrying `mark` (None: any gone run's) until none runs."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [process for process in psutil.process_iter(["environ"])
                 if (carried := (process.info["environ"] or {}).get(RUN_MARK))
                 and (carried == mark if mark else gone(carried))
                 and process.pid != os.getpid()]
        if not found:
            return
        for process in found:
            with suppress(psutil.NoSuchProcess):
                process.kill()
        time.sleep(0.02)

"""One writing run per checkout: record.py and bench.py hold an exclusive lock while they run.

Two runs at once would move and clean up each other's files. `fcntl.flock` is released
when its process ends, SIGKILL included, so the lock is never stale; the file (gitignored)
names the holder, for the refusal.
"""
import errno
import fcntl
import os
from contextlib import contextmanager

from scripts import ROOT

LOCK_NAME = ".run.lock"


class RunLocked(Exception):
    """The checkout's lock cannot be held; str() is one line naming the holder or why."""


def open_lock(path, command):
    """The lock's descriptor: never through a link, never inherited by a kernel or rank."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as error:
        refused = (f"{error.strerror}; run `{command}` in a checkout this user can write, or "
                   f"remove a .run.lock that another user left")
        why = {errno.ELOOP: "it is a symbolic link; `git rm .run.lock` (it is never committed)",
               errno.EISDIR: "it is a directory; remove it", errno.EACCES: refused,
               errno.EPERM: refused, errno.EROFS: refused}.get(error.errno, error.strerror)
        raise RunLocked(f"{LOCK_NAME}, the lock that keeps two runs of this checkout apart, "
                        f"cannot be opened: {why}") from None


@contextmanager
def exclusive_run(command, root=ROOT):
    """Hold the checkout's run lock for the `with` block, or raise RunLocked at once."""
    fd = open_lock(root / LOCK_NAME, command)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").split()
            pid = holder[0] if holder and holder[0].isdigit() else "unknown"
            raise RunLocked(f"another run, pid {pid}, is writing this checkout's "
                            f"recordings and figures; wait for it to end, or stop it, then "
                            f"run `{command}` again") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {command}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock

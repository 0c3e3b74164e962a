"""One writing run per checkout: record.py and bench.py hold an exclusive lock while they run.

Two runs at once would stage, move and clean up each other's files (a `--render-only`
started while `record.py` staged lost the whole recording). The lock is `fcntl.flock` on
a file at the repository root: the kernel releases it when its process ends, however it
ends, SIGKILL included, so a lock is never stale and never needs removing by hand. The
file itself stays (gitignored); it only says which process holds it, for the refusal.
"""
import errno
import fcntl
import os
from contextlib import contextmanager

from scripts import ROOT

LOCK_NAME = ".run.lock"


class RunLocked(Exception):
    """The checkout's lock cannot be held: another run holds it (str() names its pid), or
    the lock file cannot be opened (str() says why); one line either way."""


def open_lock(path, command):
    """The lock file's descriptor. O_NOFOLLOW: a committed `.run.lock` that links to a
    file elsewhere would be truncated and written. O_CLOEXEC: a kernel or rank this run
    starts must not inherit the lock and hold it after a SIGKILLed run is gone."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as error:
        if error.errno == errno.ELOOP:
            why = "it is a symbolic link; `git rm .run.lock` (it is never committed)"
        elif error.errno == errno.EISDIR:
            why = "it is a directory; remove it"
        elif error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            why = (f"{error.strerror}; run `{command}` in a checkout this user can write, "
                   f"or remove a .run.lock that another user left")
        else:
            why = error.strerror
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

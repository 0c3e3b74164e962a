"""The processes a run starts, for every launcher: each dies with the run, even a SIGKILLed
one, is killed with all it started once done with, and says in one line how it ended.
"""
import ctypes
import os
import signal
import time
from contextlib import suppress

import psutil

from scripts.plumbing.interrupts import raise_if_interrupted

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
try:  # looked up before any fork
    prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    prctl = None  # not Linux


def dies_with(parent, signum=signal.SIGKILL):
    """A preexec_fn that has Linux send `signum` to the child when its starter dies, even by
    SIGKILL (ranks would otherwise wait for each other forever). Linux counts the starting
    thread as the parent: start it from one that outlives it. None where there is no prctl."""
    if prctl is None:
        return None

    def preexec():
        prctl(PR_SET_PDEATHSIG, signum)
        if os.getppid() != parent:  # the starter died before prctl: nobody to wait for
            raise ChildProcessError("the process that started this one has died")
    return preexec


def running_in(groups):
    """Whether a process of these process groups still runs (a zombie has finished)."""
    for process in psutil.process_iter(["status"]):
        with suppress(ProcessLookupError):  # it exited while we looked
            if process.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(process.pid) in groups:
                return True
    return False


def kill_all(children, settle_s=10.0):
    """Kill each child's whole process group, and what it started outside the group (a
    session of its own), and return once none of the groups runs."""
    strays = []
    for child in [child for child in children if child.returncode is None]:  # reaped: its
        with suppress(psutil.NoSuchProcess):  # pid may be another's, its strays init's
            strays += psutil.Process(child.pid).children(recursive=True)
    for child in children:
        with suppress(ProcessLookupError):  # the whole group has already exited
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()  # reap, so no zombie outlives the run
    for stray in strays:
        with suppress(psutil.NoSuchProcess):
            stray.kill()  # psutil checks it is still that process
    # What the child started dies a moment after it; bounded, as one may hang in the kernel.
    groups = {child.pid for child in children}
    deadline = time.monotonic() + settle_s
    while running_in(groups) and time.monotonic() < deadline:
        time.sleep(0.01)


def poll_until(check, timeout_s, poll_s=0.02):
    """check()'s first value that is not None, or None at the deadline; a signal Python
    discarded (in a garbage-collection callback) still stops the wait."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        raise_if_interrupted()
        if (found := check()) is not None:
            return found
        time.sleep(poll_s)
    return None


def describe(status):
    """How a child ended, from its exit status (negative: the signal that killed it)."""
    if status < 0:
        return f"was killed by {signal.Signals(-status).name}"
    return f"exited with status {status}"


def stderr_tail(path, lines=3, limit=400):
    """The last few non-empty stderr lines as one line: a traceback ends with its cause."""
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(kept[-lines:])[-limit:] or "(empty)"

"""The processes a run starts: each dies with the run, even when the run is SIGKILLed, is
killed with all it started once the run is done with it, and says in one line how it ended.

One module for every launcher (the lesson's kernel, the ranks, mpirun, the reaper), so a
child's lifetime follows one rule whoever starts it.
"""
import ctypes
import os
import signal
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def libc_prctl():
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


prctl = libc_prctl()  # None where there is none (not Linux); looked up before any fork


def dies_with(parent, signum=signal.SIGKILL):
    """A preexec_fn that has Linux send `signum` to the child when its starter dies, even
    by SIGKILL, which leaves the starter no chance to kill its children itself (ranks
    would wait for each other, a kernel for its next cell, forever). Linux counts the
    thread that started the child as its parent: start it from a thread that outlives it.
    None (nothing to do) where there is no prctl.
    """
    if prctl is None:
        return None

    def preexec():
        prctl(PR_SET_PDEATHSIG, signum)
        if os.getppid() != parent:  # the starter died before prctl: nobody to wait for
            # subprocess ends a child whose preexec_fn raised (exit 255) before its exec,
            # and tells the starter, were it still there to hear.
            raise ChildProcessError("the process that started this one has died")
    return preexec


FINISHED = ("Z", "X")  # a zombie, or dead: it runs no more, whoever reaps it


def state_and_group(stat_path):
    """(state, process group) from a /proc/<pid>/stat file; None once the process is gone."""
    try:
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
        state, _ppid, group = Path(stat_path).read_text().rsplit(")", 1)[1].split()[:3]
    except (OSError, ValueError):
        return None  # it exited while we looked
    return state, int(group)


def running_groups():
    """The process groups with at least one member still running, read from /proc (an
    empty set where there is none). A zombie (state Z) has finished: it only waits for its
    parent to reap it, which for an orphan is init, on init's schedule."""
    found = (state_and_group(stat) for stat in Path("/proc").glob("[0-9]*/stat"))
    return {group for state, group in filter(None, found) if state not in FINISHED}


def kill_all(children, settle_s=10.0):
    """Kill each child's whole process group (each was started in a session of its own)
    and return once none of it runs."""
    for child in children:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # the whole group has already exited
        child.wait()  # reap, so no zombie outlives the run
    # SIGKILL reaches a whole group at once, but only the child itself is ours to wait
    # for: a child it had started (platform.platform() runs `uname -p`) dies on its own
    # schedule, a moment later. Wait for that too, so that once a run has returned or
    # raised, nothing of it is left running (bounded: a process stuck in the kernel
    # cannot hold the launcher forever).
    groups = {child.pid for child in children}
    deadline = time.monotonic() + settle_s
    while groups & running_groups() and time.monotonic() < deadline:
        time.sleep(0.01)


def describe(status):
    """How a child ended, from its exit status (negative: the signal that killed it)."""
    if status < 0:
        return f"was killed by {signal.Signals(-status).name}"
    return f"exited with status {status}"


def stderr_tail(path, lines=3, limit=400):
    """The last few non-empty stderr lines as one line: a traceback ends with its cause."""
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    tail = " | ".join(kept[-lines:])
    return tail[-limit:] or "(empty)"


# --- everything below this process ------------------------------------------------------
# Every process below this one, however it was started, found and killed.
#
# Code this process runs for someone else (a learner's exercise) may start processes that
# leave its session (setsid), so a process-group kill misses them, or that outlive their
# parent (a double fork), so they are nobody's child. Linux hands an orphan to its nearest
# ancestor that asked to be a subreaper (PR_SET_CHILD_SUBREAPER) instead of to init, so
# once this process has asked, everything its children start stays below it in /proc's
# parent links until it is reaped here.

PR_SET_CHILD_SUBREAPER = 36  # from <linux/prctl.h>


def become_subreaper():
    """Keep every orphan below this process (Linux 3.4+). False where that is not
    possible; then only a process-group kill is left, which a new session escapes."""
    return prctl is not None and prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def parent_links():
    """{pid: its parent's pid}, for every process /proc lists (none without /proc)."""
    links = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return links
    for name in filter(str.isdigit, names):
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                # "pid (command) state ppid ...": a command may hold spaces and brackets
                links[int(name)] = int(stat.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return links


def descendants(root=None):
    """Pids below `root` (this process), its children first; zombies included."""
    children = {}
    for pid, parent in parent_links().items():
        children.setdefault(parent, []).append(pid)
    found, below = [], [os.getpid() if root is None else root]
    while below:
        for child in children.get(below.pop(0), []):
            found.append(child)
            below.append(child)
    return found


def reap_orphans():
    """Collect the exit of every child that has ended (orphans handed to this process)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_everything_below(timeout_s=10):
    """SIGKILL every process below this one and reap what comes to it, until none is
    left. Call it once the children this process waits for itself (Popen) are waited
    for: reaping here takes any child's exit."""
    deadline = time.monotonic() + timeout_s
    while (pids := descendants()) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)  # their exits reach their parents, then orphans come here
        reap_orphans()

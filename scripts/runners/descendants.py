"""Every process below this one, however it was started, found and killed.

Code this process runs for someone else (a learner's exercise) may start processes that
leave its session (setsid), so a process-group kill misses them, or that outlive their
parent (a double fork), so they are nobody's child. Linux hands an orphan to its nearest
ancestor that asked to be a subreaper (PR_SET_CHILD_SUBREAPER) instead of to init, so
once this process has asked, everything its children start stays below it in /proc's
parent links until it is reaped here.
"""
import os
import signal
import time

from scripts.runners.processes import prctl

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

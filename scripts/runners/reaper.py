"""Clean-up that outlives the process it cleans up for: once the process that started this
one dies, by SIGKILL too, kill every process on this machine that carries a run's mark
(RUN_MARK in its environment: scripts/runners/mpirun.py marks its ranks), then exit.

    python -m scripts.runners.reaper MARK PARENT_PID

Why a process of its own: record.py, SIGKILLed, runs no clean-up, and mpirun (Open MPI
4.1.4), sent SIGTERM as record.py dies, exits without killing ranks that already wait in
a collective. Those ranks would wait for each other forever. Linux tells this process when
its parent dies (PR_SET_PDEATHSIG). It asks for that first, then checks that its parent
is still the one named: a parent that died before the request was made is never
reported. A run that ends any other way kills this process itself (stop()), once it has
killed the marked processes on its own.
"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# Run as `python -m scripts.runners.reaper` from the repository's root: the imports are
# the package's own, and nothing here imports JAX.
from scripts import ROOT
from scripts.proc.children import PR_SET_PDEATHSIG, prctl

RUN_MARK = "LESSON_MPIRUN_MARK"  # set to the run's scratch folder in every rank's environment


def marked_processes(mark):
    """Pids of every process on this machine whose environment carries `mark`."""
    needle = f"{RUN_MARK}={mark}\0".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue  # gone since the listing, or not ours to read
    return found


def kill_marked(mark, timeout_s=10):
    """SIGKILL every process that carries the run's mark, until none is left."""
    deadline = time.monotonic() + timeout_s
    while (pids := marked_processes(mark)) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def start(mark):
    """The reaper of the run marked `mark`, started by this process and watching it. In a
    session of its own, so that a Ctrl-C or a signal to this process's group (which this
    process handles, killing the marked processes itself) does not reach it."""
    return subprocess.Popen([sys.executable, "-m", "scripts.runners.reaper", mark,
                             str(os.getpid())], cwd=ROOT, start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)


def stop(reaper):
    """The run ended while its starter lived: the reaper has nothing left to do."""
    reaper.kill()
    reaper.wait()


def main(argv):
    mark, parent = argv[1], int(argv[2])
    # Held, not handled: the one signal this process waits for is taken by sigwait below.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    if prctl is not None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    while os.getppid() == parent:  # else it died already: clean up at once
        signal.sigwait({signal.SIGTERM})  # a SIGTERM from anyone else changes nothing
    kill_marked(mark)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

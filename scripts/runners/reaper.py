"""Clean-up that outlives the process it cleans up for: once the process that started this
one dies, by SIGKILL too, kill every process on this machine that carries a run's mark
(scripts/runners/mpirun.py), then exit.

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

# Run as `python -m scripts.runners.reaper` from the repository's root: the imports are
# the package's own, and nothing here imports JAX.
from scripts import ROOT
from scripts.runners.processes import PR_SET_PDEATHSIG, prctl


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
    # mpirun.py starts this module, so it is imported here, not at the top; and now, not
    # once the parent has died, when the ranks should go at once.
    from scripts.runners.mpirun import kill_marked
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

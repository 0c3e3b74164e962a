"""Ctrl-C, SIGTERM and SIGHUP as one exception, a reader that goes away, and the few
steps that must not be cut in two.

A command line calls `stop_on_signals()` first: from then on SIGINT, SIGTERM and SIGHUP
(the terminal or the ssh session closed) raise Interrupted wherever the program is, so
every `finally` and context manager (staged files, scratch folders, the notebook kernel,
the ranks) cleans up on the way out, and main() turns it into one line and the shell's
exit status for that signal: 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP (128 + the
signal's number, what a shell reports for a process it killed).

Its `sys.exit(main())` is `sys.exit(run_command(main))`: when the reader of its output
goes away (`record.py --check | head -1`), the command ends with 141, as a shell reports
a process SIGPIPE killed, and no traceback; and a progress line on stderr that nobody
reads any more changes nothing about the run (`--render-only 2>&1 | head -1` still
finishes, and exits as it would have).
"""
import os
import signal
import sys
import threading
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
CLOSED_PIPE = 128 + signal.SIGPIPE  # 141


class Interrupted(BaseException):
    """SIGINT, SIGTERM or SIGHUP arrived. A BaseException, like KeyboardInterrupt, so that no
    `except Exception` on the way up can swallow it."""

    def __init__(self, signum):
        self.signum = signum
        self.name = signal.Signals(signum).name
        self.exit_status = 128 + signum
        self.written = files_in_place  # the run's staged files were already moved
        super().__init__(f"interrupted by {self.name}")

    @property
    def outcome(self):
        """What the files are now, for the command's one line."""
        return ("after every new file was in place" if self.written
                else "every earlier file is as it was")


# Set by the commit once its files are in place (store/staging.py, Staging.commit): a signal
# that arrives after that, wherever it is raised, says so in the command's one line.
files_in_place = False

# Every signal _raise saw. Python discards an exception raised while it runs a garbage-
# collection callback ("Exception ignored in ..."), so a signal landing there would be
# lost; the commit asks this list before it moves anything (raise_if_interrupted).
received = []


def _raise(signum, _frame):
    received.append(signum)
    # The first signal stops the run; the clean-up it starts (killing the kernel or the
    # ranks, removing staged files) must not be cut short by a second Ctrl-C.
    for other in SIGNALS:
        signal.signal(other, signal.SIG_IGN)
    raise Interrupted(signum)


def raise_if_interrupted():
    """Raise the first signal again if its Interrupted was swallowed on the way up.

    Only while _raise's own SIG_IGN is in place (it sets that when it fires, for the
    rest of the run): a caller that set handlers back (a test, say) has dealt with it.
    """
    if received and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        raise Interrupted(received[0])


def _quiet_when_lost(unraisable, default=sys.unraisablehook):
    """Python prints "Exception ignored in ..." and a traceback for the Interrupted it
    discards; that one is already in `received` and is raised again before anything
    moves, so the run still ends in its one line."""
    if not isinstance(unraisable.exc_value, Interrupted):
        default(unraisable)


def stop_on_signals():
    global files_in_place
    received.clear()  # a new run: no earlier run's signal in this process counts
    files_in_place = False
    sys.unraisablehook = _quiet_when_lost
    for signum in SIGNALS:
        if signum == signal.SIGHUP and signal.getsignal(signum) is signal.SIG_IGN:
            continue  # started under nohup: asked to outlive the terminal
        signal.signal(signum, _raise)


@contextmanager
def signals_deferred():
    """Hold SIGINT, SIGTERM and SIGHUP until the block is done, then deliver the first.

    For the moves that put staged files into place: stopping half way would leave new
    files beside old ones. Handlers, not a signal mask, because a mask is per thread and
    CPython may take a signal on any thread.
    """
    raise_if_interrupted()
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread can set handlers, and only it receives signals
        return
    caught = []
    previous = {signum: signal.signal(signum, lambda signum, _: caught.append(signum))
                for signum in SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if caught:
            signal.raise_signal(caught[0])


class UnreadStderr:
    """sys.stderr, whose writes never fail: once its reader is gone (a closed pipe, a
    terminal hung up), what the command says there goes to /dev/null instead, and the
    run carries on. A command's outcome is its files and its exit status, never whether
    someone still reads its progress lines."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text):
        return self._forgiving(self.stream.write, text)

    def flush(self):
        return self._forgiving(self.stream.flush)

    def _forgiving(self, call, *args):
        try:
            return call(*args)
        except OSError:  # EPIPE, or EIO from a terminal that hung up
            nobody_reads(self.stream)
        try:
            return call(*args)  # what was still buffered goes to /dev/null with it
        except OSError:
            return None

    def __getattr__(self, name):
        return getattr(self.stream, name)


def nobody_reads(stream):
    """Point the stream's file descriptor at /dev/null: what is written there, and what
    Python flushes at exit, is then dropped instead of failing again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, stream.fileno())
    os.close(devnull)


def run_command(main, *args):
    """main(*args)'s exit status; 141 once the reader of its stdout has gone away."""
    if not isinstance(sys.stderr, UnreadStderr):
        sys.stderr = UnreadStderr(sys.stderr)
    try:
        status = main(*args)
        sys.stdout.flush()  # a line still buffered meets the closed pipe here, not at exit
        return status
    except BrokenPipeError:
        nobody_reads(sys.stdout)
        return CLOSED_PIPE

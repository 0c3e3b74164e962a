"""Ctrl-C, SIGTERM and SIGHUP as one exception, a reader that goes away, and the few
steps that must not be cut in two.

After `stop_on_signals()` the three signals raise Interrupted wherever the program is, so
every `finally` on the way out cleans up; run_command ends with 141 and no traceback when
stdout's reader goes away, and a lost stderr reader changes nothing about the run.
"""
import os
import signal
import sys
import threading
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
CLOSED_PIPE = 128 + signal.SIGPIPE  # 141


class Interrupted(BaseException):
    """SIGINT, SIGTERM or SIGHUP arrived; a BaseException, so no `except Exception` swallows it."""

    def __init__(self, signum):
        self.name = signal.Signals(signum).name
        self.exit_status = 128 + signum
        self.written = files_in_place  # the run's staged files were already moved
        super().__init__(f"interrupted by {self.name}")

    @property
    def outcome(self):
        return ("after every new file was in place" if self.written
                else "every earlier file is as it was")


files_in_place = False  # set by Staging.commit: a later signal's line says so
# Every signal _raise saw: Python discards an exception raised in a garbage-collection
# callback, so a signal landing there is raised again from here (raise_if_interrupted).
received = []


def _raise(signum, _frame):
    received.append(signum)
    # The clean-up the first signal starts must not be cut short by a second Ctrl-C.
    for other in SIGNALS:
        signal.signal(other, signal.SIG_IGN)
    raise Interrupted(signum)


def raise_if_interrupted():
    """Raise the first signal again if its Interrupted was swallowed on the way up (only
    while _raise's SIG_IGN is in place: a caller that set handlers back has dealt with it)."""
    if received and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        raise Interrupted(received[0])


def _quiet_when_lost(unraisable, default=sys.unraisablehook):
    """No traceback for a discarded Interrupted: it is in `received` and raised again."""
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
def signals_deferred(ignore=False):
    """Hold SIGINT, SIGTERM and SIGHUP until the block is done, then deliver the first
    (handlers, not a mask: a mask is per thread, and CPython may take a signal on any).
    `ignore`: drop them, as SIG_IGN, which a child started in the block inherits too."""
    if not ignore:
        raise_if_interrupted()
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread can set handlers, and only it receives signals
        return
    caught = []
    previous = {signum: signal.signal(signum, signal.SIG_IGN if ignore else
                                      lambda signum, _: caught.append(signum))
                for signum in SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if caught:
            signal.raise_signal(caught[0])


class UnreadStderr:
    """sys.stderr, whose writes go to /dev/null once its reader is gone: the run carries on."""

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
    """Point the stream's file descriptor at /dev/null, so later writes cannot fail."""
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

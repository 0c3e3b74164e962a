"""The lessons' code, and the only JAX in the repository (lesson_code/CONTRACT.md).

Started as a program, `python -m lesson_code.<module>`, this package is imported before
the module's first line runs, so it does what no module can do for itself before its
`import jax`: a JAX_NUM_CPU_DEVICES that is not a whole number is one line, exit 2, where
JAX would print a traceback; and Ctrl-C, SIGTERM or SIGHUP during an import (JAX's takes
about a second) ends the program in one line, 128 + the signal, where Python would raise
inside JAX's import (a traceback, or jaxlib's ImportError). Outside an import a signal
keeps Python's own behaviour until the program installs handlers of its own.
"""
import os
import signal
import sys


def _in_an_import(frame):
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _stop_while_starting(signum, frame):
    if _in_an_import(frame):
        print(f"error: interrupted by {signal.Signals(signum).name} while starting; nothing "
              f"ran", file=sys.stderr, flush=True)
        os._exit(128 + signum)  # nothing to clean up yet; unwinding would land inside JAX
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    signal.signal(signum, signal.SIG_DFL)  # as if this handler had never been there
    os.kill(os.getpid(), signum)


if sys.argv[:1] == ["-m"]:  # python -m lesson_code.<module>, before the module's own code
    _devices = os.environ.get("JAX_NUM_CPU_DEVICES", "0")
    if not _devices.strip().isdigit():
        print(f"error: JAX_NUM_CPU_DEVICES={_devices!r} is not a whole number; unset it (the "
              f"program sets the device count itself: --devices N)", file=sys.stderr)
        sys.exit(2)
    for _signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if not (_signum == signal.SIGHUP and signal.getsignal(_signum) is signal.SIG_IGN):
            signal.signal(_signum, _stop_while_starting)

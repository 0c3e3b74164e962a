"""What every command line here shares: usage errors on one line, progress on stderr, and
one exit ladder: 0 done; 1 a failure in one line; 2 refused before anything ran; 130, 143,
129 for SIGINT, SIGTERM, SIGHUP after every clean-up; 141 when stdout's reader went away.
"""
import argparse
import sys

from scripts.plumbing.interrupts import (Interrupted, raise_if_interrupted, run_command,
                                         stop_on_signals)


class CommandError(Exception):
    """A failure the command names in one line, the fix included; exit status 1."""

    exit_status = 1


class UsageError(CommandError):
    """A request refused before anything ran or any file was touched; exit status 2."""

    exit_status = 2


class OneLineParser(argparse.ArgumentParser):
    """argparse, with its usage errors on one line (the usage is in --help)."""

    def error(self, message):
        self.exit(2, f"error: {message}; see `python {self.prog} --help`\n")


def progress(name, message):
    print(f"{name}: {message}", file=sys.stderr, flush=True)


def command(body, failures=(), prefix="error", stopped=None):
    """`main(argv)` for `body(argv)`: `failures`, CommandError and a signal each end in one
    line on stderr, `prefix: ...`, with their exit status. `stopped`: what a signal's line
    says is left (default: the state of the command's files)."""
    failures = (CommandError, *failures)

    def main(argv=None):
        stop_on_signals()
        try:
            status = body(sys.argv[1:] if argv is None else argv)
            raise_if_interrupted()  # a signal whose exception Python discarded still counts
            return status or 0
        except failures as error:
            print(f"{prefix}: {error}", file=sys.stderr)
            return getattr(error, "exit_status", 1)
        except Interrupted as signal_:
            print(f"{prefix}: {signal_}; {stopped or signal_.outcome}", file=sys.stderr)
            return signal_.exit_status

    return main


def without_the_pins(kind, error, trace):
    """`python3 scripts/record.py`, not .venv's python: a missing pin is one line, exit 1;
    so each command imports this module before any pinned package."""
    if not issubclass(kind, ModuleNotFoundError) or sys.prefix != sys.base_prefix:
        return sys.__excepthook__(kind, error, trace)  # in a venv, a missing module is a bug
    print(f"error: {error} in {sys.executable}, which lacks the project's pins: run it with "
          f"the checkout's .venv/bin/python (`make setup` makes it)", file=sys.stderr)


sys.excepthook = without_the_pins
run = run_command  # main()'s exit status; 141, and no traceback, once stdout's reader is gone

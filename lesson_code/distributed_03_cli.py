"""The command line of distributed-03's program: what `python -m lesson_code.distributed_03`
runs (its `__main__` guard hands over here). No step of the lesson is here, so the
lesson's file stays its steps; this file is the options and the guarantees of a program
a reader runs from a shell:

- `--platform cpu|tpu|gpu` and `--devices N`: a count this machine cannot give, or a
  platform it has no backend for, is one `error:` line and exit 2;
- `--data-out PATH`: the figure data, timings and environment as JSON, written beside the
  path and renamed onto it, replacing only a regular file;
- Ctrl-C, SIGTERM and SIGHUP end it in one line, exit 130, 143 and 129, never a
  traceback (started under nohup, it takes no SIGHUP); a closed stdout ends it silently,
  exit 141.

It runs the lesson and its going-further steps, as the recording does (scripts/record.py
runs the notebook's cells, not this).
"""
import argparse
import errno
import json
import os
import signal
import stat
import sys

import jax

from lesson_code import distributed_03 as lesson
from lesson_code import distributed_03_going_further as going_further

# The most logical CPU devices the program will make. The problem grows with p (4p x 2p):
# 512 devices still pass in ~7 s, but at 1024 the float32 sums of 1024 shares drift past
# the checks' tolerance and start-up alone takes half a minute.
MAX_CPU_DEVICES = 256


class SetupError(Exception):
    """A platform or device count this machine cannot provide; the message says why."""


def select_devices(platform, count):
    if count < 1:
        raise SetupError(f"--devices must be at least 1 (got {count}); try --devices 4")
    if platform == "cpu" and count > MAX_CPU_DEVICES:
        raise SetupError(f"--devices {count} is more than the {MAX_CPU_DEVICES} logical CPU "
                         f"devices this program makes (see MAX_CPU_DEVICES); try --devices 8")
    try:
        devices = lesson.configure_devices(platform, count)
    except RuntimeError as error:
        # JAX's own reason, minus its generic advice about JAX_PLATFORMS.
        reason = str(error).strip().splitlines()[0].split(" (set JAX_PLATFORMS")[0]
        extra = {"tpu": "jax[tpu]", "gpu": "jax[cuda12]"}.get(platform, "jax")
        raise SetupError(f"no {platform.upper()} backend on this machine ({reason}); "
                         f"run with --platform cpu, or on a {platform.upper()} machine "
                         f"with {extra}=={jax.__version__} installed") from None
    if len(devices) < count:
        raise SetupError(f"--devices {count} asks for {count} {platform.upper()} devices "
                         f"but this machine has {len(devices)}; pass --devices "
                         f"{len(devices)} or use a machine with {count}")
    return devices


class OneLineParser(argparse.ArgumentParser):
    """argparse, ending a usage error in the program's one `error:` line."""

    def error(self, message):
        self.exit(2, f"error: {message}\n")


def device_count(text):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; "
                                         f"try --devices 4") from None


def data_out_path(path):
    """--data-out, refused before the lesson runs when its folder cannot take the file."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{path} is a folder; give a file path, such as "
                                         f"{os.path.join(path, 'data.json')}")
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot write {path}: {folder} is not a writable "
                                         f"folder; create it, or pick another path")
    if not replaceable(path):
        raise argparse.ArgumentTypeError(f"{path} is not a regular file, and only a regular "
                                         f"file is replaced; give a new file path, such as "
                                         f"{os.path.join(folder, 'data.json')}")
    return path


def replaceable(path):
    """A new path or a regular file: the rename below would put a file in place of a
    device node (/dev/full), a symlink or a socket just as readily."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return True


def write_json(path, data):
    """Beside `path`, then renamed onto it: a failed write leaves no half-written file."""
    temp = f"{path}.{os.getpid()}.tmp"
    # O_EXCL: never written through a file or link already at the temporary name.
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(data, out, indent=2)
        if not replaceable(path):  # checked again: it may have changed while the lesson ran
            raise OSError(errno.EEXIST, "not a regular file, so it was left alone")
        os.replace(temp, path)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


def parse_args(argv):
    parser = OneLineParser(description=lesson.__doc__.splitlines()[0])
    parser.add_argument("--platform", choices=("cpu", "tpu", "gpu"), default="cpu",
                        help="cpu: logical devices on this host; tpu/gpu: physical chips")
    parser.add_argument("--devices", type=device_count, default=4,
                        help=f"mesh size p (default 4; at most {MAX_CPU_DEVICES} on cpu)")
    parser.add_argument("--data-out", metavar="PATH", type=data_out_path,
                        help="also write figure data, timings and environment as JSON")
    return parser.parse_args(argv)


# Ctrl-C, `kill`, and the terminal closing under the run (ssh dropped).
STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def main(argv=None):
    """The program: exit 0 after PASS; 2 for a setup error; 130, 143 or 129 (128 + the
    signal, as a shell reports it) for Ctrl-C, SIGTERM or SIGHUP (unless started under
    nohup), in one line, never a traceback; 141, silently, when the reader of its output
    has gone away (`| head`)."""
    args = parse_args(argv)
    signals = []

    def stop(number, frame):
        signals.append(number)
        raise KeyboardInterrupt  # unwinds through write_json's clean-up

    # Started under nohup, SIGHUP is ignored on purpose: the run outlives the terminal.
    previous = {number: signal.signal(number, stop) for number in STOPPING_SIGNALS
                if not (number == signal.SIGHUP
                        and signal.getsignal(number) is signal.SIG_IGN)}
    try:
        status = run_program(args)
        sys.stdout.flush()  # a line still buffered meets a closed pipe here, not at exit
    except KeyboardInterrupt:
        if not signals:  # raised by Python's own handler, before ours was installed
            signals.append(signal.SIGINT)
    except BrokenPipeError:
        # Nobody reads stdout any more: point it at /dev/null, so the flush at exit does
        # not fail again, and end as a process SIGPIPE killed would.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 128 + signal.SIGPIPE
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    # A signal counts even where some library caught its KeyboardInterrupt and carried on.
    if signals:
        print(f"error: interrupted by {signal.Signals(signals[0]).name}; the lesson did not "
              f"finish", file=sys.stderr, flush=True)
        if running_as_the_program():
            # Everything is cleaned up; what is left is Python's own finalization, which
            # can crash inside XLA while the interrupted computation's threads are still
            # there (SIGSEGV, seen once in CI). Leave without it, with the signal's status.
            try:
                sys.stdout.flush()
            except OSError:  # its reader went away too: nothing more to say
                pass
            os._exit(128 + signals[0])
        return 128 + signals[0]
    return status


def running_as_the_program():
    """Started as `python -m lesson_code.distributed_03` (or this file), not called in-process."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return spec is not None and spec.name in (lesson.__name__, __name__)


def run_program(args):
    try:
        devices = select_devices(args.platform, args.devices)
    except SetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    data = lesson.run_lesson(devices, going_further.run_going_further)
    if args.data_out:
        try:
            write_json(args.data_out, data)
        except OSError as error:
            print(f"error: cannot write {args.data_out} ({error.strerror}); the lesson "
                  f"passed, but its data was not written", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The program every lesson shares: what `python -m lesson_code.<module>` runs.

`python -m` imports the package first, which starts here (lesson_code/__init__.py calls
`guard_the_start`): a registered lesson is imported once, as itself, and run by `main`, so
no recording of it depends on this file; its `__main__` guard only runs the file alone (a
reader's download). Written once, for every lesson: `--platform`, `--devices` (default:
its `devices` in lessons.toml, refused outside its `device_counts`), `--data-out PATH`
written whole; a setup error in one line, exit 2; Ctrl-C, SIGTERM and SIGHUP in one line,
128 + the signal, from its `import jax` on, but no SIGHUP under nohup. For every program
here (a simulation, a rank): a closed stdout (`| head`) silently, 141; a stdout the disk
refuses in one line, 1; a Python without JAX in one line, 2. And a rank module's flags
and `launch_of`. No scripts/ and, as the package imports it first, no JAX at import.
"""
import argparse
import atexit
import contextlib
import errno
import importlib
import ipaddress
import json
import os
import signal
import socket
import stat
import sys
import tomllib
import zlib
from pathlib import Path

# The most logical CPU devices a program makes, as lessons.schema.json allows a lesson.
MAX_CPU_DEVICES = 256
# Ctrl-C, `kill`, and the terminal closing under the run (ssh dropped).
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def take_signals(handler):
    """`handler` for each stopping signal, but not a SIGHUP that nohup ignores on purpose
    (the run outlives its terminal); returns the handlers it replaced."""
    return {number: signal.signal(number, handler) for number in STOPPING
            if not (number == signal.SIGHUP and signal.getsignal(number) is signal.SIG_IGN)}


def guard_the_start():
    """Before the program's first line, one line for what would end in a traceback: a
    JAX_NUM_CPU_DEVICES that is not a number, a signal during an import (JAX's takes a
    second), and until the end what `said` names. Outside an import Python's own signal
    behaviour stays, until `main` takes over."""
    devices = os.environ.get("JAX_NUM_CPU_DEVICES", "0")
    if not devices.strip().isdigit():
        print(f"error: JAX_NUM_CPU_DEVICES={devices!r} is not a whole number; unset it (the "
              f"program sets the device count itself: --devices N)", file=sys.stderr)
        sys.exit(2)
    take_signals(stop_while_starting)
    end_in_one_line()
    # During the package's import sys.argv is ["-m", *the program's arguments].
    module = sys.orig_argv[len(sys.orig_argv) - len(sys.argv)].removeprefix("-m")
    if module in (entry.get("module") for entry in registry(Path(__file__))):
        sys.exit(main(module))


def stop_while_starting(number, frame):
    while frame is not None and not frame.f_code.co_filename.startswith("<frozen importlib"):
        frame = frame.f_back
    if frame is not None:  # inside an import
        print(f"error: interrupted by {signal.Signals(number).name} while starting; nothing "
              f"ran", file=sys.stderr, flush=True)
        os._exit(128 + number)  # nothing to clean up yet; unwinding would land inside JAX
    if number == signal.SIGINT:
        raise KeyboardInterrupt
    signal.signal(number, signal.SIG_DFL)  # as if this handler had never been there
    os.kill(os.getpid(), number)


# What ends a program without being its bug: a Python without what every lesson imports;
# a disk that refuses a write where no file is named, so stdout's (> /dev/full).
RUNTIME, FULL = ("jax", "jaxlib", "numpy"), (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def said(error):
    """(its one line, or "" for none; the exit status) for `error` when it is one of those,
    else None: a bug keeps its traceback."""
    if isinstance(error, BrokenPipeError):
        return "", 128 + signal.SIGPIPE  # as a process SIGPIPE killed
    if isinstance(error, ModuleNotFoundError) and error.name in RUNTIME:
        return (f"error: {sys.executable} has no {error.name}, which every lesson program "
                f"needs; run it with the checkout's .venv/bin/python (`make setup` makes "
                f"it)", 2)
    if isinstance(error, OSError) and error.errno in FULL and error.filename is None:
        return (f"error: cannot write the output ({error.strerror}); free space on its "
                f"disk, or send it elsewhere (> a file on another disk)", 1)
    return None


def end_in_one_line():
    """From here on, what `said` names ends the process in its line, even at exit."""
    sys.excepthook = one_line_or_traceback
    atexit.unregister(flush_stdout)  # once, however often asked
    atexit.register(flush_stdout)  # before Python's own flush, which could only complain


def one_line_or_traceback(kind, error, trace):  # sys.excepthook: what no code caught
    if (ending := said(error)) is None:
        return sys.__excepthook__(kind, error, trace)
    line, status = ending
    if line:
        print(line, file=sys.stderr, flush=True)
    os._exit(status)  # unwinding further would meet stdout again at Python's own flush


def flush_stdout():  # atexit: a stdout still buffered meets a closed pipe or full disk here
    try:
        sys.stdout.flush()
    except OSError as error:
        if said(error):
            one_line_or_traceback(type(error), error, None)


def select_devices(configure_devices, platform, count, counts, refuse):
    """`count` devices of `platform` from the lesson's `configure_devices`; `counts`: the
    only device counts the lesson runs on (its `device_counts`), or None for any; else
    `refuse(why)`, which exits."""
    if count < 1:
        refuse(f"--devices must be at least 1 (got {count}); try --devices 4")
    if platform == "cpu" and count > MAX_CPU_DEVICES:
        refuse(f"--devices {count} is more than the {MAX_CPU_DEVICES} logical CPU devices a "
               f"lesson program makes; try --devices 8")
    if counts and count not in counts:
        *some, last = map(str, counts)  # [1, 3, 9]: "1, 3 or 9"
        refuse(f"--devices {count}: this lesson runs on "
               f"{', '.join(some) + ' or ' if some else ''}{last} devices only (its "
               f"device_counts in lessons.toml); pass --devices {counts[0]}")
    try:
        devices = configure_devices(platform, count)
    except RuntimeError as error:
        import jax  # the lesson imported it already: only its version is read here

        # JAX's own reason, minus its generic advice about JAX_PLATFORMS.
        reason = str(error).strip().splitlines()[0].split(" (set JAX_PLATFORMS")[0]
        extra = {"tpu": "jax[tpu]", "gpu": "jax[cuda12]"}.get(platform, "jax")
        refuse(f"no {platform.upper()} backend on this machine ({reason}); run with "
               f"--platform cpu, or on a {platform.upper()} machine with "
               f"{extra}=={jax.__version__} installed")
    if len(devices) < count:
        refuse(f"--devices {count} asks for {count} {platform.upper()} devices but this "
               f"machine has {len(devices)}; pass --devices {len(devices)} or use a machine "
               f"with {count}")
    return devices


class OneLineParser(argparse.ArgumentParser):
    """argparse, ending a usage or setup error in the program's one `error:` line, exit 2."""

    def error(self, message):
        self.exit(2, f"error: {message}\n")


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
        kind = "a symbolic link" if os.path.islink(path) else "not a regular file"
        raise argparse.ArgumentTypeError(f"{path} is {kind}, and only a regular file is "
                                         f"replaced; give a new file path, such as data.json")
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
            out.write("\n")
        if not replaceable(path):  # checked again: it may have changed while the lesson ran
            raise OSError(errno.EEXIST, "not a regular file, so it was left alone")
        os.replace(temp, path)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


def save(path, data, what):
    """--data-out's exit status: 0 once `data` is written whole to `path` (or none was
    asked for), 1 after one line when it could not be; `what` passed regardless."""
    if path:
        try:
            write_json(path, data)
        except OSError as error:
            print(f"error: cannot write {path} ({error.strerror}); {what} passed, but its "
                  f"data was not written", file=sys.stderr)
            return 1
    return 0


def registry(beside):
    """The [[lesson]] entries of the lessons.toml beside the file `beside`, unchecked: a
    broken registry is record.py's to report, in one line (scripts/store/lessons.py)."""
    try:
        lessons = tomllib.loads(beside.with_name("lessons.toml").read_text())["lesson"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return []
    return [entry for entry in lessons if isinstance(entry, dict)]


def main(module):
    """The lesson `module` as a program, on its entry in the registry beside it (as
    record.py runs it): 0 after PASS, 2 for a setup error, 1 if its data could not be
    written, or as `shell` ends it."""
    lesson = importlib.import_module(module)
    entry = next((entry for entry in registry(Path(lesson.__file__))
                  if entry.get("module") == module), {})
    devices = int(entry.get("devices", 4))  # 4.0 is 4
    parser = OneLineParser(prog=f"python -m {module}",
                           description=lesson.__doc__.splitlines()[0])
    parser.add_argument("--platform", choices=("cpu", "tpu", "gpu"), default="cpu",
                        help="cpu: logical devices on this host; tpu/gpu: physical chips")
    parser.add_argument("--devices", type=int, default=devices,
                        help=f"how many devices (default {devices}; at most "
                             f"{MAX_CPU_DEVICES} on cpu)")
    parser.add_argument("--data-out", metavar="PATH", type=data_out_path,
                        help="also write the lesson's data (figure data, timings and "
                             "environment) as JSON")
    args = parser.parse_args()

    def run():
        devices = select_devices(lesson.configure_devices, args.platform, args.devices,
                                 entry.get("device_counts"), parser.error)
        # The going-further steps run inside the lesson, as recorded.
        further = [importlib.import_module(entry["going_further"]).run_going_further] \
            if entry.get("going_further") else []
        return save(args.data_out, lesson.run_lesson(devices, *further), "the lesson")
    return shell(run, "the lesson")


def shell(work, what="the program"):
    """`work()`'s status, under the promises above (absl's app.run, for this course): a
    stopping signal ends the process in one line once `work` has cleaned up."""
    end_in_one_line()  # also for a caller that did not start here
    signals = []

    def stop(number, frame):
        signals.append(number)
        raise KeyboardInterrupt  # unwinds through write_json's clean-up

    previous = take_signals(stop)
    try:
        status = work()
    except KeyboardInterrupt:  # the first signal counts: Python's own SIGINT if ours was late
        signals.append(signal.SIGINT)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    if not signals:  # one counts even where some library caught its KeyboardInterrupt
        return status
    print(f"error: interrupted by {signal.Signals(signals[0]).name}; {what} did not "
          f"finish", file=sys.stderr, flush=True)
    # Everything is cleaned up; what is left is Python's own finalization, which can crash
    # inside XLA while the interrupted computation's threads are still there (SIGSEGV, seen
    # once in CI). Leave without it, with the signal's status.
    with contextlib.suppress(OSError):  # its reader went away too: nothing more to say
        sys.stdout.flush()
    os._exit(128 + signals[0])


# --- one rank of a multi-process run (a lesson's rank_module) ------------------------------

def whole(low, high=None):
    """An argparse type: a whole number from `low` (to `high`), else the usage line."""
    def number(text):
        value = int(text)  # a ValueError: argparse's "invalid number value: 'x'"
        if value < low or high is not None and value > high:
            raise argparse.ArgumentTypeError(
                f"{value} is not from {low} to {high}" if high is not None
                else f"must be at least {low} (got {value})")
        return value
    return number


def rank_parser(description):
    """The flags every rank module takes (lesson_code/CONTRACT.md); add the module's own."""
    parser = OneLineParser(
        description=description,
        epilog="Under mpirun or srun, give none of --process-id, --processes, --port or "
               "--coordinator: JAX reads them from the launcher's environment.")
    parser.add_argument("--process-id", type=whole(0), help="this process's rank")
    parser.add_argument("--processes", type=whole(1), help="how many ranks the run has")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--port", type=whole(1, 65535),
                       help="coordinator port on 127.0.0.1 (the single-machine launcher)")
    where.add_argument("--coordinator", metavar="HOST:PORT", type=address,
                       help="rank 0's address, for a launcher JAX does not detect")
    parser.add_argument("--calls", type=whole(1), default=100,
                        help="how many times each measurement repeats (default 100)")
    parser.add_argument("--data-out", metavar="PATH", type=data_out_path,
                        help="process 0 writes the run's data here, as JSON")
    return parser


def parse_rank_args(parser, argv=None):
    """`parser`'s arguments, with the rank flags given all together or not at all."""
    args = parser.parse_args(argv)
    given = [args.process_id is not None, args.processes is not None,
             args.port is not None or args.coordinator is not None]
    if any(given) and not all(given):
        parser.error("give --process-id, --processes and --port (or --coordinator) "
                     "together, or none of them under mpirun or srun")
    if all(given) and args.process_id >= args.processes:
        parser.error(f"--process-id {args.process_id} is no rank of {args.processes} "
                     f"processes; give 0 to {args.processes - 1}")
    return args


def address(text):
    """--coordinator's HOST:PORT, else the usage line."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT with a port from 1 to "
                                         f"65535, such as 10.0.0.2:8476")
    return text


# A variable each launcher sets in every process it starts, and the launcher's name.
LAUNCHERS = (("OMPI_COMM_WORLD_SIZE", "mpirun"), ("SLURM_PROCID", "srun"),
             ("JOB_COMPLETION_INDEX", "kubernetes"))


def launch_of(coordinator_address, platform="cpu"):
    """How this run was put together: its launcher (Open MPI's mpirun, SLURM's srun, a
    Kubernetes Indexed Job; on a TPU slice its workers, a GKE pod's when Kubernetes says
    so; else this repository's single-machine launcher), processes, hosts, and the
    coordinator's host: a loopback address, as another's is private to its network."""
    import jax
    import numpy as np
    from jax.experimental import multihost_utils

    tpu = "gke-tpu" if "KUBERNETES_SERVICE_HOST" in os.environ else "cloud-tpu"
    launcher = next((name for variable, name in LAUNCHERS if variable in os.environ),
                    tpu if platform == "tpu" else "processes.py")
    # Hosts are counted by a checksum of each process's host name: no name leaves its host.
    name = zlib.crc32(socket.gethostname().encode()) & 0x7FFFFFFF
    names = multihost_utils.process_allgather(np.asarray(name, np.int32))  # i32[p]
    return {"launcher": launcher, "processes": jax.process_count(),
            "hosts": len(set(names.tolist())),
            "coordinatorHost": coordinator_address
            if ipaddress.ip_address(coordinator_address).is_loopback
            else "rank 0's host (its IP address is not recorded)"}

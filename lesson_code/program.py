"""The program every lesson shares: what `python -m lesson_code.<module>` runs.

A lesson's file is its steps; its `__main__` guard hands over here by name, so no recording
of the lesson depends on this file, and the file alone (a reader's download) still runs.
Written once, for every lesson: `--platform`, `--devices` (default: its `devices` in
lessons.toml), `--data-out PATH` written whole; a setup error in one line, exit 2; Ctrl-C,
SIGTERM and SIGHUP in one line, 128 + the signal, from the lesson's `import jax` on
(lesson_code/__init__.py calls `guard_the_start`), but no SIGHUP under nohup; a closed
stdout (`| head`) silently, 141. And for a rank module: its flags and `launch_of`.

No scripts/ and, as the package imports it first, no JAX at import.
"""
import argparse
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
    """Before the lesson's first line, one line for what JAX would end in a traceback: a
    JAX_NUM_CPU_DEVICES that is not a number, a signal during an import (JAX's takes a
    second). Outside an import Python's own behaviour stays, until `main` takes over."""
    devices = os.environ.get("JAX_NUM_CPU_DEVICES", "0")
    if not devices.strip().isdigit():
        print(f"error: JAX_NUM_CPU_DEVICES={devices!r} is not a whole number; unset it (the "
              f"program sets the device count itself: --devices N)", file=sys.stderr)
        sys.exit(2)
    take_signals(stop_while_starting)


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


class SetupError(Exception):
    """A platform or device count this machine cannot provide; the message says why."""


def select_devices(configure_devices, platform, count):
    if count < 1:
        raise SetupError(f"--devices must be at least 1 (got {count}); try --devices 4")
    if platform == "cpu" and count > MAX_CPU_DEVICES:
        raise SetupError(f"--devices {count} is more than the {MAX_CPU_DEVICES} logical CPU "
                         f"devices a lesson program makes; try --devices 8")
    try:
        devices = configure_devices(platform, count)
    except RuntimeError as error:
        import jax  # the lesson imported it already: only its version is read here

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


def registered(module):
    """(devices, going-further module) of `module` in lessons.toml, as record.py runs it."""
    try:
        lessons = tomllib.loads(Path(__file__).with_name("lessons.toml").read_text())["lesson"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):  # record.py's to report
        lessons = []
    entry = next((lesson for lesson in lessons if lesson.get("module") == module), {})
    return entry.get("devices", 4), entry.get("going_further")


def parse_args(argv, module, description, devices):
    parser = OneLineParser(prog=f"python -m {module}", description=description)
    parser.add_argument("--platform", choices=("cpu", "tpu", "gpu"), default="cpu",
                        help="cpu: logical devices on this host; tpu/gpu: physical chips")
    parser.add_argument("--devices", type=int, default=devices,
                        help=f"how many devices (default {devices}; at most "
                             f"{MAX_CPU_DEVICES} on cpu)")
    parser.add_argument("--data-out", metavar="PATH", type=data_out_path,
                        help="also write the lesson's data (figure data, timings and "
                             "environment) as JSON")
    return parser.parse_args(argv)


def main(module, argv=None):
    """The lesson `module` as a program: 0 after PASS, 2 for a setup error, 1 if its data
    could not be written, 128 + a stopping signal, 141 for a closed stdout. Given no `argv`
    (the process's own command line), a signal ends the process once its line is out."""
    lesson = importlib.import_module(module)
    devices, going_further = registered(module)
    args = parse_args(argv, module, lesson.__doc__.splitlines()[0], devices)
    signals = []

    def stop(number, frame):
        signals.append(number)
        raise KeyboardInterrupt  # unwinds through write_json's clean-up

    previous = take_signals(stop)
    try:
        status = run_program(lesson, going_further, args)
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
    if not signals:  # one counts even where some library caught its KeyboardInterrupt
        return status
    print(f"error: interrupted by {signal.Signals(signals[0]).name}; the lesson did not "
          f"finish", file=sys.stderr, flush=True)
    if argv is None:
        # Everything is cleaned up; what is left is Python's own finalization, which can
        # crash inside XLA while the interrupted computation's threads are still there
        # (SIGSEGV, seen once in CI). Leave without it, with the signal's status.
        try:
            sys.stdout.flush()
        except OSError:  # its reader went away too: nothing more to say
            pass
        os._exit(128 + signals[0])
    return 128 + signals[0]


def run_program(lesson, going_further, args):
    try:
        devices = select_devices(lesson.configure_devices, args.platform, args.devices)
    except SetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    # The going-further steps run inside the lesson, as recorded.
    further = [importlib.import_module(going_further).run_going_further] if going_further else []
    data = lesson.run_lesson(devices, *further)
    if args.data_out:
        try:
            write_json(args.data_out, data)
        except OSError as error:
            print(f"error: cannot write {args.data_out} ({error.strerror}); the lesson "
                  f"passed, but its data was not written", file=sys.stderr)
            return 1
    return 0


# --- one rank of a multi-process run (a lesson's rank_module) ------------------------------

def rank_parser(description):
    """The flags every rank module takes (lesson_code/CONTRACT.md); add the module's own."""
    parser = OneLineParser(
        description=description,
        epilog="Under mpirun or srun, give none of --process-id, --processes, --port or "
               "--coordinator: JAX reads them from the launcher's environment.")
    parser.add_argument("--process-id", type=int, help="this process's rank")
    parser.add_argument("--processes", type=int, help="how many ranks the run has")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--port", type=int,
                       help="coordinator port on 127.0.0.1 (the single-machine launcher)")
    where.add_argument("--coordinator", metavar="HOST:PORT",
                       help="rank 0's address, for a launcher JAX does not detect")
    parser.add_argument("--calls", type=int, default=100,
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
    return args


# A variable each launcher sets in every process it starts, and the launcher's name.
LAUNCHER_VARIABLES = (("OMPI_COMM_WORLD_SIZE", "mpirun"), ("SLURM_PROCID", "srun"),
                      ("JOB_COMPLETION_INDEX", "kubernetes"))


def launcher_name(platform="cpu"):
    """What started this process, by the variables launchers set: Open MPI's mpirun,
    SLURM's srun, a Kubernetes Indexed Job; on a TPU slice, its workers (a GKE pod's, when
    Kubernetes says so); else this repository's single-machine launcher."""
    for variable, name in LAUNCHER_VARIABLES:
        if variable in os.environ:
            return name
    if platform == "tpu":
        return "gke-tpu" if "KUBERNETES_SERVICE_HOST" in os.environ else "cloud-tpu"
    return "processes.py"


def coordinator_host(address):
    """The coordinator's IP address as a reader could use it: a loopback address; that of
    another interface is private to its network, so not recorded."""
    if ipaddress.ip_address(address).is_loopback:
        return address
    return "rank 0's host (its IP address is not recorded)"


def launch_of(coordinator_address, platform="cpu"):
    """How this run was put together: launcher, processes, hosts, coordinator's host."""
    import jax
    import numpy as np
    from jax.experimental import multihost_utils

    # Hosts are counted by a checksum of each process's host name: no name leaves its host.
    name = zlib.crc32(socket.gethostname().encode()) & 0x7FFFFFFF
    names = multihost_utils.process_allgather(np.asarray(name, np.int32))  # i32[p]
    return {"launcher": launcher_name(platform), "processes": jax.process_count(),
            "hosts": len(set(names.tolist())),
            "coordinatorHost": coordinator_host(coordinator_address)}

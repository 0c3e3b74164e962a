"""Run each lesson once, record what it printed, and draw the figures from that recording.

    python scripts/record.py                    # 4 logical CPU devices -> <lesson>.cpu.json,
                                                #   the notebook companion, the simulation
    python scripts/record.py --platform tpu     # the physical chips  -> <lesson>.tpu.json
    python scripts/record.py --processes 4      # 4 JAX processes     -> <lesson>.cpu-processes.json
    python scripts/record.py --render-only      # redraw figures from the existing recordings
    python scripts/record.py --check            # is every recording, figure and notebook current?

The lessons, and what each produces, are listed in lesson_code/lessons.toml. Nothing is
moved into place until the lesson printed PASS and the recording validated: a failure,
Ctrl-C (exit 130) or SIGTERM (exit 143) leaves every earlier file as it was, in one line.
A request that cannot work (`--processes 3`, `--devices 8`) is refused first, exit 2.
"""
import sys
from pathlib import Path

# `python scripts/record.py` puts scripts/ on sys.path; the package lives one level up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import json
import subprocess
import time
from collections import Counter
from importlib.metadata import version

from scripts import display
from scripts.hashes import digest_bytes
from scripts.interrupts import Interrupted, raise_if_interrupted, stop_on_signals
from scripts.lessons import RegistryError, load_lessons
from scripts.outputs import (LockError, figure_outputs, lock_entry, lock_path, lock_text,
                             notebook_output, read_lock)
from scripts.recordings import (RecordingError, Staging, dumps, header, load_recording,
                                remove_stray_temps, validate)
from scripts.run_lock import RunLocked, exclusive_run
from scripts.scratch import scratch_folder

LESSON_TIMEOUT_S = 600


class RecordError(Exception):
    """Recording stopped; str() is the one line to show, the earlier files are intact."""

    exit_status = 1


class SetupFailure(RecordError):
    """This machine cannot give the platform or device count asked for."""

    exit_status = 2


def progress(message):
    print(f"record: {message}", file=sys.stderr, flush=True)


# What a page can show of a lesson's output: the schema's stdout maxLength, and lines.
MAX_STDOUT_CHARACTERS = 1_000_000
MAX_STDOUT_LINES = 2_000


def check_stdout(lesson_id, stdout):
    lines = stdout.splitlines()
    if len(stdout) > MAX_STDOUT_CHARACTERS or len(lines) > MAX_STDOUT_LINES:
        raise RecordError(f"the lesson printed {len(lines)} lines, {len(stdout)} characters; "
                          f"a recording holds at most {MAX_STDOUT_LINES} lines and "
                          f"{MAX_STDOUT_CHARACTERS} characters, so print less; nothing was "
                          f"written")
    if not lines or lines[-1] != f"PASS: {lesson_id}":
        raise RecordError(f"the lesson did not end with 'PASS: {lesson_id}'; "
                          f"nothing was written")
    counts = Counter(lines)  # one pass: lines.count() per line was quadratic
    repeated = sorted(line for line, count in counts.items() if count > 1)
    if repeated:
        raise RecordError(f"the lesson printed {repeated[0]!r} more than once; "
                          f"nothing was written")


def lesson_environment(lesson, data):
    """run_lesson's `environment`, which lesson_code/CONTRACT.md requires of every lesson."""
    environment = data.get("environment") if isinstance(data, dict) else None
    if not isinstance(environment, dict) or "deviceCount" not in environment:
        raise RecordError(f"{lesson.id}: run_lesson() returned no `environment` with a "
                          f"`deviceCount`; lesson_code/CONTRACT.md requires it; nothing was "
                          f"written")
    return environment


def executed_recording(lesson, module_path, stdout, data, duration, command):
    environment = dict(lesson_environment(lesson, data))
    data = {key: value for key, value in data.items() if key != "environment"}
    environment["matplotlib"] = version("matplotlib")
    environment["jaxlib"] = version("jaxlib")
    recording = header(lesson.id, "executed", module_path, environment, lesson.root)
    recording.update(stdout=stdout, data=data, durationS=round(duration, 2), command=command)
    return recording


def variant_of(environment):
    suffix = "-processes" if environment.get("processCount", 1) > 1 else ""
    return f"{environment['backend']}{suffix}"


def run_in_kernel(lesson, platform, devices, scratch):
    from scripts.runners import kernel as notebook  # nbclient and a kernel: only to record

    progress(f"running {lesson.id} on {devices} {platform.upper()} device(s), in a kernel")
    try:
        return notebook.run(lesson.path(), lesson.id, scratch, platform, devices)
    except notebook.ExecutionFailed as error:
        if error.setup:
            raise SetupFailure(f"cannot set up {devices} {platform.upper()} devices: "
                               f"{error}") from None
        raise RecordError(f"{lesson.id} failed in its notebook: {error}; nothing was "
                          f"written") from None


def record_lesson(lesson, platform, devices, staging, scratch):
    """The single run: its notebook (CPU only), and its recording, from one kernel."""
    run = run_in_kernel(lesson, platform, devices, scratch)
    check_stdout(lesson.id, run.stdout)
    found = lesson_environment(lesson, run.data)["deviceCount"]
    if found != devices:
        raise SetupFailure(f"asked for {devices} {platform.upper()} devices, this machine "
                           f"gave {found}; record on a machine with {devices}")
    command = ["python", "scripts/record.py"] + (
        [] if platform == "cpu" else ["--platform", platform])
    recording = executed_recording(lesson, lesson.path(), run.stdout, run.data,
                                   run.duration_s, command)
    progress(f"{lesson.id} printed PASS in {run.duration_s:.1f} s; validating")
    arriving = stage_recording(lesson, recording, staging)
    if platform == "cpu":
        from scripts.runners.kernel import notebook_text

        text = notebook_text(run.notebook)
        output = notebook_output(lesson)
        staging.add(lesson.root / output.path, text)
        (recorded,) = arriving.values()
        return arriving, {output.path: lock_entry(output, text, lesson.root,
                                                  source_digest=digest_bytes(recorded))}
    return arriving, {}


def stage_recording(lesson, recording, staging):
    name = f"recordings/{lesson.id}.{variant_of(recording['environment'])}.json"
    if recording["kind"] == "simulation":
        name = f"recordings/{lesson.id}.simulation.json"
    validate(recording, f"new recording {name}")
    text = dumps(recording)
    staging.add(lesson.root / name, text)
    return {name: text}


def run_module(module, root, scratch):
    """`python -m module --data-out PATH` in a fresh interpreter: (stdout, data, seconds)."""
    data_path = Path(scratch) / f"{module}.json"
    started = time.perf_counter()
    try:
        run = subprocess.run([sys.executable, "-m", module, "--data-out", str(data_path)],
                             cwd=root, capture_output=True, text=True,
                             timeout=LESSON_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise RecordError(f"{module} ran past {LESSON_TIMEOUT_S} s and was stopped; "
                          f"nothing was written") from None
    if run.returncode != 0 or not data_path.exists():
        tail = " | ".join(run.stderr.strip().splitlines()[-3:])
        raise RecordError(f"{module} failed (exit {run.returncode}): {tail}; nothing was "
                          f"written")
    try:
        data = json.loads(data_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise RecordError(f"{module} wrote {data_path.name} (--data-out) that cannot be read "
                          f"as JSON ({error}); nothing was written") from None
    return run.stdout, data, time.perf_counter() - started


def record_simulation(lesson, staging, scratch):
    progress(f"recording the simulation {lesson.simulation}")
    stdout, data, duration = run_module(lesson.simulation, lesson.root, scratch)
    import numpy

    recording = header(lesson.id, "simulation", lesson.path(lesson.simulation),
                       {"backend": "cpu", "jax": version("jax"), "numpy": numpy.__version__},
                       lesson.root)
    recording.update(stdout=stdout, data=data, durationS=round(duration, 2),
                     command=["python", "-m", lesson.simulation])
    return stage_recording(lesson, recording, staging)


def simulation_current(lesson):
    """A simulation is deterministic: while its inputs are unchanged, rerunning it would
    write the same trace, so its recording stays."""
    from scripts.freshness import recording_state
    from scripts.outputs import recording_outputs

    output = next(o for o in recording_outputs(lesson, lesson.root)
                  if o.path.endswith(".simulation.json"))
    return recording_state(output, lesson.root)[1] == []


def record_processes(lesson, processes, staging):
    from scripts.runners.processes import ProcessRunError, run_processes  # only this path needs it

    if not lesson.rank_module:
        raise RecordError(f"{lesson.id} has no rank_module in lesson_code/lessons.toml; "
                          f"it cannot run as {processes} processes")
    progress(f"running {lesson.id} as {processes} JAX processes")
    try:
        run = run_processes(lesson.rank_module, ranks=processes, cwd=lesson.root)
    except ProcessRunError as error:
        raise RecordError(f"{error}; nothing was written") from None
    check_stdout(lesson.id, run.stdout)
    recording = executed_recording(lesson, lesson.path(lesson.rank_module), run.stdout,
                                   run.data, run.duration_s,
                                   ["python", "scripts/record.py", "--processes",
                                    str(processes)])
    return stage_recording(lesson, recording, staging)


def stage_figures(lesson, staging, arriving, lock):
    """Draw every figure of a lesson that is not current; return their new lock entries.

    `arriving` maps a recording path to its text, not yet moved into place, so the figures
    are drawn from the recording about to land. A figure whose inputs and bytes are what
    the lock says is current, as `--check` would find it, and is left alone.
    """
    from scripts.freshness import derived_problems

    entries = {}
    for output in figure_outputs(lesson):
        text = arriving.get(output.source)
        if text is None and not (lesson.root / output.source).exists():
            continue  # `--check` names the missing input and the command that makes it
        if text is None and not derived_problems(output, lock, lesson.root):
            continue
        data = json.loads(text) if text else load_source(lesson, output.source)
        svg = render(output, data)
        staging.add(lesson.root / output.path, svg)
        source_digest = digest_bytes(text) if text else None
        entries[output.path] = lock_entry(output, svg, lesson.root, source_digest)
    return entries


def load_source(lesson, source):
    from scripts.outputs import recording_outputs

    path = lesson.root / source
    fixes = {output.path: output.fix for output in recording_outputs(lesson, lesson.root)}
    if source in fixes:  # validated; a corrupt one is one line with its own fix
        return load_recording(path, fixes[source])
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise RecordError(f"{display(path)}: unreadable ({error}); fix the file") from None


def render(output, data):
    kind = output.kind
    try:
        return kind.render(data)
    except (KeyError, IndexError, TypeError, ValueError) as error:
        raise RecordError(f"{output.path}: {kind.renderer} renderer failed on "
                          f"{output.source} ({type(error).__name__}: {error})") from None


def record(lessons, platform="cpu", processes=None, render_only=False, chosen=False):
    """`chosen`: the lessons were named (--lesson), so one without a rank module is an
    error for --processes rather than skipped."""
    root = next(iter(lessons.values())).root
    remove_stray_temps([root / "recordings", root / "figures", root / "docs" / "notebooks"])
    with Staging() as staging, scratch_folder("record") as scratch:
        try:
            lock = read_lock(root)
        except LockError:
            lock = {}  # rewritten below from what is drawn now
        for lesson in lessons.values():
            arriving = {}
            if processes and not lesson.rank_module and not chosen:
                progress(f"skipping {lesson.id}: it has no rank_module in "
                         f"lesson_code/lessons.toml")
                continue
            if processes:
                arriving.update(record_processes(lesson, processes, staging))
            elif not render_only:
                recorded, entries = record_lesson(lesson, platform, lesson.devices, staging,
                                                  scratch)
                arriving.update(recorded)
                lock.update(entries)
                if lesson.simulation and platform == "cpu" and not simulation_current(lesson):
                    arriving.update(record_simulation(lesson, staging, scratch))
            progress(f"drawing the figures of {lesson.id}")
            lock.update(stage_figures(lesson, staging, arriving, lock))
        staging.add(lock_path(root), lock_text(lock))
        staging.commit(lambda path: progress(f"wrote {display(path, root)}"))


def check(lessons):
    from scripts.freshness import check as problems

    lines = problems(lessons, next(iter(lessons.values())).root)
    for line in lines:
        print(line)
    return 1 if lines else 0


class UsageError(RecordError):
    """A request record.py refuses before it runs anything."""

    exit_status = 2


# Process counts a multi-process run can record. Each rank checks its shards bit for bit
# against NumPy, which holds when p is a power of two (p = 3 fails on float rounding);
# and each rank is a whole JAX process of about 300 MB (64 ranks took 18.5 GB) sharing
# this machine's cores, so past 16 the run measures the scheduler, not the collectives.
PROCESS_COUNTS = (2, 4, 8, 16)
RANK_MEMORY_BYTES = 300 * 2**20


def refuse_what_cannot_work(args, lessons):
    """One line, exit 2, before anything runs or any file is touched."""
    if args.processes is not None:
        if args.processes not in PROCESS_COUNTS:
            why = ("a multi-process run needs 2 or more; `python scripts/record.py` records "
                   "the single-process one" if args.processes < 2 else
                   f"at most {PROCESS_COUNTS[-1]}: each rank is a whole JAX process of about "
                   f"{RANK_MEMORY_BYTES // 2**20} MB" if args.processes > PROCESS_COUNTS[-1]
                   else "the ranks check their shards bit for bit against NumPy, which holds "
                   f"for {', '.join(map(str, PROCESS_COUNTS))}")
            raise UsageError(f"--processes {args.processes} cannot be recorded ({why}); "
                             f"run `python scripts/record.py --processes 4`")
        needed, available = args.processes * RANK_MEMORY_BYTES, available_memory()
        if available is not None and needed > available:
            raise UsageError(f"--processes {args.processes} needs about {needed / 2**30:.1f} "
                             f"GiB and this machine has {available / 2**30:.1f} GiB free; "
                             f"run `python scripts/record.py --processes 4` or free memory")
        if args.platform != "cpu" or args.devices is not None or args.render_only:
            raise UsageError("--processes runs N processes with one CPU device each; it takes "
                             "no --platform, --devices or --render-only: run "
                             f"`python scripts/record.py --processes {args.processes}`")
    for lesson in lessons.values():
        if args.devices is not None and args.devices != lesson.devices:
            # The recording's name says its platform, not its device count: a second count
            # would replace the one the lesson's page describes.
            raise UsageError(
                f"--devices {args.devices}: {lesson.id} is recorded on {lesson.devices} "
                f"devices, the count its page describes (`devices` in "
                f"lesson_code/lessons.toml); to try {args.devices} without recording, run "
                f"`python -m {lesson.module} --devices {args.devices}`")


def available_memory():
    """MemAvailable from /proc/meminfo, in bytes; None where there is no such file."""
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


class OneLineParser(argparse.ArgumentParser):
    """argparse, with its usage errors on one line (the usage is in --help)."""

    def error(self, message):
        self.exit(2, f"error: {message}; see `python scripts/record.py --help`\n")


def parse_args(argv):
    parser = OneLineParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="exit 1 listing every stale, invalid or missing output")
    mode.add_argument("--render-only", action="store_true",
                      help="redraw the figures from the existing recordings, without JAX")
    parser.add_argument("--platform", choices=("cpu", "tpu", "gpu"), default="cpu")
    parser.add_argument("--devices", type=int,
                        help="the lesson's device count (lessons.toml `devices`); no other is "
                             "recorded")
    parser.add_argument("--processes", type=int, metavar="N",
                        help="run as N JAX processes with one CPU device each")
    parser.add_argument("--lesson", help="one lesson id (default: every lesson)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    stop_on_signals()  # Ctrl-C and SIGTERM unwind through every clean-up on the way
    try:
        lessons = load_lessons()
        if args.lesson:
            if args.lesson not in lessons:
                raise RegistryError(f"no lesson {args.lesson!r} in lesson_code/lessons.toml; "
                                    f"known: {', '.join(lessons)}")
            lessons = {args.lesson: lessons[args.lesson]}
        if args.check:
            return check(lessons)
        refuse_what_cannot_work(args, lessons)
        with exclusive_run(" ".join(["python scripts/record.py", *(argv or sys.argv[1:])])):
            record(lessons, args.platform, args.processes, args.render_only,
                   chosen=bool(args.lesson))
        raise_if_interrupted()  # a signal whose exception Python discarded still counts
    except RegistryError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (RecordError, RecordingError, RunLocked, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return getattr(error, "exit_status", 1)
    except Interrupted as signal_:
        print(f"error: {signal_}; {signal_.outcome}", file=sys.stderr)
        return signal_.exit_status
    return 0


if __name__ == "__main__":
    sys.exit(main())

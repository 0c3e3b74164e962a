"""Run each lesson whose recording is stale, record what it printed, draw its figures.

    python scripts/record.py                    # each stale lesson, on its registered
                                                #   devices -> <lesson>.cpu.json, the
                                                #   notebook companion, the simulation
    python scripts/record.py --lesson ID        # only that lesson (any mode below, too)
    python scripts/record.py --all              # every lesson, current or not
    python scripts/record.py --platform tpu     # the physical chips  -> <lesson>.tpu.json
    python scripts/record.py --processes 4      # 4 JAX processes     -> <lesson>.cpu-processes.json
    python scripts/record.py --processes 4 --launcher mpirun   # the same, started by Open MPI
    python scripts/record.py --render-only      # redraw figures from the existing recordings
    python scripts/record.py --check            # is every recording, figure and notebook current?

Like a cache (Quarto's `freeze: auto`), a run executes only the lessons whose recording
(or, with --processes, process recording) is stale or missing; a recording is keyed on its
code as executed, so a comment or docstring edit re-renders the notebook that shows it
and runs no JAX. --platform tpu or gpu always runs: a hardware run is asked for by name.
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
from scripts.host import host_at_start, host_while_starting
from scripts.interrupts import Interrupted, raise_if_interrupted, stop_on_signals
from scripts.lessons import RegistryError, load_lessons
from scripts.derive import DeriveError, stage_derived
from scripts.outputs import (LockError, for_lesson, lock_entry, lock_path, lock_text,
                             notebook_output, read_lock)
from scripts.recordings import (RecordingError, Staging, dumps, header, remove_stray_temps,
                                validate)
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


def executed_recording(lesson, module_path, stdout, data, duration, command, start=None):
    """`start`: the host as it was before the run began (scripts/host.py): whether other
    work kept the cores busy, which the analysis says on the page."""
    environment = dict(lesson_environment(lesson, data))
    data = {key: value for key, value in data.items() if key != "environment"}
    environment["matplotlib"] = version("matplotlib")
    environment["jaxlib"] = version("jaxlib")
    if start is not None:
        environment["loadAverage1m"] = start["loadAverage1m"]
        environment["busyCoresAtStart"] = start["window"].busy_cores if "window" in start \
            else start["busyCores"]
    recording = header(lesson.id, "executed", module_path, environment, lesson.root)
    recording.update(stdout=stdout, data=data, durationS=round(duration, 2), command=command)
    return recording


def variant_of(environment):
    suffix = "-processes" if environment.get("processCount", 1) > 1 else ""
    return f"{environment['backend']}{suffix}"


def run_cells(lesson, platform, devices, scratch, start):
    from scripts.runners import cells  # the notebook's cells in a fresh kernel

    progress(f"running {lesson.id} on {devices} {platform.upper()} device(s), as its "
             f"notebook's cells in a fresh Jupyter kernel")
    # The host's reading may still be open (host_while_starting): the kernel is ours.
    on_start = start["window"].include if "window" in start else None
    try:
        return cells.run(lesson.path(), lesson.id, scratch, platform, devices, on_start)
    except cells.ExecutionFailed as error:
        if error.setup:
            raise SetupFailure(f"cannot set up {devices} {platform.upper()} devices: "
                               f"{error}") from None
        raise RecordError(f"{lesson.id} failed in its notebook: {error}; nothing was "
                          f"written") from None


def record_lesson(lesson, platform, devices, staging, scratch, start):
    """The single run: its notebook (CPU only), and its recording, from one kernel.
    `start`: the host's reading (scripts/host.py); its window may still be open, and the
    lesson's process is then named to it as soon as it runs."""
    run = run_cells(lesson, platform, devices, scratch, start)
    check_stdout(lesson.id, run.stdout)
    found = lesson_environment(lesson, run.data)["deviceCount"]
    if found != devices:
        raise SetupFailure(f"asked for {devices} {platform.upper()} devices, this machine "
                           f"gave {found}; record on a machine with {devices}")
    command = ["python", "scripts/record.py"] + (
        [] if platform == "cpu" else ["--platform", platform])
    recording = executed_recording(lesson, lesson.path(), run.stdout, run.data,
                                   run.duration_s, command, start)
    progress(f"{lesson.id} printed PASS in {run.duration_s:.1f} s; validating")
    arriving = stage_recording(lesson, recording, staging)
    if platform == "cpu":
        from scripts.runners.notebook import notebook_text

        text = notebook_text(run.notebook)
        output = notebook_output(lesson)
        staging.add(lesson.root / output.path, text)
        (recorded,) = arriving.values()
        return arriving, {output.path: lock_entry(output, text, lesson.root,
                                                  source_digest=digest_bytes(recorded))}
    return arriving, {}


def stage_recording(lesson, recording, staging):
    variant = "simulation" if recording["kind"] == "simulation" else \
        variant_of(recording["environment"])
    name = for_lesson(lesson).recording(variant)
    validate(recording, f"new recording {name}", lesson=lesson)
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

    path = for_lesson(lesson).recording("simulation")
    output = next(o for o in recording_outputs(lesson, lesson.root) if o.path == path)
    return recording_state(output, lesson.root)[1] == []


def import_runner(processes):
    """Import what runs the lesson (its cells, or N processes) before anything else."""
    if processes:
        from scripts.runners import processes as _  # noqa: F401
    else:
        from scripts.runners import cells as _  # noqa: F401,F811


def launch_processes(launcher):
    """The function that starts a rank module as N processes, for `--launcher`."""
    if launcher == "mpirun":  # Open MPI starts the ranks; JAX reads who is who from it
        from scripts.runners.mpirun import run_mpirun
        return run_mpirun
    from scripts.runners.processes import run_processes  # this repository's own launcher
    return run_processes


def record_processes(lesson, processes, staging, start, launcher="processes", calls=None):
    """`start`: the host as read before anything of this run began (scripts/host.py).
    `calls`: repeated calls per measurement in each rank (None: the rank's default)."""
    from scripts.host import warn_if_busy
    warn_if_busy("record", start)  # the rounds timing is read with the load; say so up front
    from scripts.runners.processes import ProcessRunError  # only this path needs it

    if not lesson.rank_module:
        raise RecordError(f"{lesson.id} has no rank_module in lesson_code/lessons.toml; "
                          f"it cannot run as {processes} processes")
    progress(f"running {lesson.id} as {processes} JAX processes"
             + (" under mpirun" if launcher == "mpirun" else ""))
    try:
        run = launch_processes(launcher)(lesson.rank_module, ranks=processes, cwd=lesson.root,
                                         **({"calls": calls} if calls else {}))
    except ProcessRunError as error:
        raise RecordError(f"{error}; nothing was written") from None
    check_stdout(lesson.id, run.stdout)
    command = ["python", "scripts/record.py", "--processes", str(processes)] + (
        ["--launcher", launcher] if launcher != "processes" else []) + (
        ["--calls", str(calls)] if calls else [])
    recording = executed_recording(lesson, lesson.path(lesson.rank_module), run.stdout,
                                   run.data, run.duration_s, command, start)
    return stage_recording(lesson, recording, staging)


def lessons_to_run(lessons, args):
    """The ids of the lessons this run executes, like a cache: for --render-only none; for
    --all, and on hardware (asked for by name), every one; otherwise each whose recording
    (with --processes, its process recording) is stale or missing, or whose notebook only a
    run can remake. A lesson whose notebook merely shows edited text is re-rendered, not run."""
    if args.render_only:
        return set()
    if args.all or args.platform != "cpu":
        return set(lessons)
    from scripts.freshness import recording_state
    from scripts.outputs import recording_outputs

    root = next(iter(lessons.values())).root
    try:
        lock = read_lock(root)
    except LockError:
        lock = {}
    wanted = "cpu-processes" if args.processes else "cpu"
    runs = set()
    for lesson in lessons.values():
        path = for_lesson(lesson).recording(wanted)
        output = next((o for o in recording_outputs(lesson, root) if o.path == path), None)
        if output is None:  # no rank module: record() skips it, or refuses it when named
            runs.add(lesson.id)
            continue
        if recording_state(output, root)[1] or (
                not args.processes and notebook_change(lesson, lock) == "run"):
            runs.add(lesson.id)
        else:
            progress(f"{lesson.id}: {output.path} is current, not re-run (--all re-runs it)")
    return runs


def notebook_change(lesson, lock):
    """What the notebook companion needs: None (current), "rerender" (only the module's
    text changed since it was made: a comment, a docstring), or "run"."""
    from scripts.freshness import derived_problems
    from scripts.hashes import changed_files, digest

    output = notebook_output(lesson)
    if not derived_problems(output, lock, lesson.root):
        return None
    entry = lock.get(output.path)
    path = lesson.root / output.path
    if entry is None or digest(path) != entry.get("sha256"):
        return "run"  # missing, or edited by hand: nothing trustworthy to re-render from
    changed = changed_files(entry.get("inputs", {}), output.current_inputs(lesson.root))
    return "rerender" if set(changed) <= {output.shows} else "run"


def notebook_rerendered(lesson, staging, lock):
    """For a lesson that is not re-run: stage its notebook re-rendered from today's text
    when that is all it needs, and update `lock`. False when only a run can make it."""
    change = notebook_change(lesson, lock)
    if change != "rerender":
        return change is None
    from scripts.runners.notebook import notebook_text, rerender

    output = notebook_output(lesson)
    executed = (lesson.root / output.path).read_text(encoding="utf-8")
    notebook = rerender(executed, lesson.path(), lesson.id, "cpu", lesson.devices)
    if notebook is None:
        return False
    progress(f"{lesson.id}: {output.shows} changed only in its text; re-rendering "
             f"{output.path} from the executed cells, no run")
    text = notebook_text(notebook)
    staging.add(lesson.root / output.path, text)
    lock[output.path] = lock_entry(output, text, lesson.root)
    return True


def record(lessons, platform="cpu", processes=None, render_only=False, chosen=False,
           runs=None, launcher="processes", calls=None):
    """`chosen`: the lessons were named (--lesson), so one without a rank module is an
    error for --processes rather than skipped. `runs`: the ids of the lessons to execute
    (lessons_to_run; None: every one); the others only get their figures and notebook
    brought up to date. `calls`: --calls of a multi-process run (None: the default)."""
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
            run = runs is None or lesson.id in runs
            start = None
            if run and not render_only:
                # Other work on the cores is read first. A multi-process run waits for the
                # reading; a single run starts meanwhile, and what it uses of the cores in
                # the window (the imports, the lesson's process) is taken off.
                start = host_at_start() if processes else host_while_starting()
                import_runner(processes)
            if processes:
                if run:
                    arriving.update(record_processes(lesson, processes, staging, start,
                                                     launcher, calls))
            elif not render_only:
                if run or not notebook_rerendered(lesson, staging, lock):
                    recorded, entries = record_lesson(lesson, platform, lesson.devices,
                                                      staging, scratch,
                                                      start or host_at_start())
                    arriving.update(recorded)
                    lock.update(entries)
                if lesson.simulation and platform == "cpu" and not simulation_current(lesson):
                    arriving.update(record_simulation(lesson, staging, scratch))
            progress(f"analysing and drawing the figures of {lesson.id}")
            lock.update(stage_derived(lesson, staging, arriving, lock))
        staging.add(lock_path(root), lock_text(lock))
        staging.commit(lambda path: progress(f"wrote {display(path, root)}"))


def check(lessons):
    """Print one line per stale, missing or invalid output; 1 if there is any."""
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
    if args.calls is not None and (args.processes is None or args.calls < 1):
        raise UsageError("--calls sets the repeated calls of a multi-process run, 1 or more: "
                         "run `python scripts/record.py --processes 4 --calls 5`")
    if args.launcher != "processes" and args.processes is None:
        raise UsageError(f"--launcher {args.launcher} starts the processes of a multi-process "
                         f"run; run `python scripts/record.py --processes 4 --launcher "
                         f"{args.launcher}`")
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
    mode.add_argument("--all", action="store_true",
                      help="re-run every lesson, even those whose recordings are current")
    parser.add_argument("--platform", choices=("cpu", "tpu", "gpu"), default="cpu")
    parser.add_argument("--devices", type=int,
                        help="the lesson's device count (lessons.toml `devices`); no other is "
                             "recorded")
    parser.add_argument("--processes", type=int, metavar="N",
                        help="run as N JAX processes with one CPU device each")
    parser.add_argument("--launcher", choices=("processes", "mpirun"), default="processes",
                        help="with --processes: what starts the N processes (default: this "
                             "repository's own launcher; mpirun: Open MPI, on loopback)")
    parser.add_argument("--calls", type=int, metavar="N",
                        help="with --processes: repeated calls per measurement in each rank "
                             "(default 100); fewer make a quick run, and its intervals wider")
    parser.add_argument("--lesson", help="one lesson id (default: every lesson)")
    return parser.parse_args(argv)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
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
        # The lock belongs to the checkout the lessons are written into.
        root = next(iter(lessons.values())).root
        with exclusive_run(" ".join(["python scripts/record.py", *(argv or sys.argv[1:])]),
                           root):
            record(lessons, args.platform, args.processes, args.render_only,
                   chosen=bool(args.lesson), runs=lessons_to_run(lessons, args),
                   launcher=args.launcher, calls=args.calls)
        raise_if_interrupted()  # a signal whose exception Python discarded still counts
    except RegistryError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (RecordError, RecordingError, DeriveError, RunLocked, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return getattr(error, "exit_status", 1)
    except Interrupted as signal_:
        print(f"error: {signal_}; {signal_.outcome}", file=sys.stderr)
        return signal_.exit_status
    return 0


if __name__ == "__main__":
    sys.exit(main())

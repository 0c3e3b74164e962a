"""Run each lesson whose recording is stale, record what it printed, draw its figures
(its options: `--help`, and MAINTAINING.md's "Commands", one row each).

A run first decides what it remakes (scripts/plan.py), then carries that out. Nothing moves
into place until the lesson printed PASS and the recording validated: a failure or a signal
leaves every earlier file as it was, in one line.
"""
import sys
from functools import partial
from pathlib import Path

# `python scripts/record.py` puts scripts/ on sys.path; the package lives one level up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from scripts.cli import OneLineParser, UsageError, command, progress as say, run

from collections import Counter
from importlib.metadata import version

import psutil

from scripts import display
from scripts.plumbing.checkout import LinkInCheckout, refuse_links
from scripts.store.derive import DeriveError, stage_derived
from scripts.store.freshness import check as check_problems
from scripts.store.hashes import digest_bytes
from scripts.host import host_at_start, warn_if_busy
from scripts.store.lessons import RegistryError, chosen_lessons, load_lessons
from scripts.store.outputs import for_lesson, lock_entry, lock_path, lock_text, notebook_output
from scripts.store.recordings import (MAX_STDOUT_CHARACTERS, MAX_STDOUT_LINES, RecordingError,
                                      dumps, header, validate)
from scripts.store.staging import Staging, StagingError, remove_stray_temps
from scripts.plumbing.run_lock import RunLocked, exclusive_run
from scripts.runners.module import RecordError, SetupFailure, run_module
from scripts.plumbing.scratch import scratch_folder

# What runs a lesson (nbclient, the launchers) is imported by the run that needs it, so
# that --check imports only what it checks with.

progress = partial(say, "record")


def check_stdout(lesson_id, stdout):
    lines = stdout.splitlines()
    if len(stdout) > MAX_STDOUT_CHARACTERS or len(lines) > MAX_STDOUT_LINES:
        raise RecordError(f"the lesson printed {len(lines)} lines, {len(stdout)} characters; "
                          f"a recording holds at most {MAX_STDOUT_LINES} lines and "
                          f"{MAX_STDOUT_CHARACTERS} characters, so print less")
    if not lines or lines[-1] != f"PASS: {lesson_id}":
        raise RecordError(f"the lesson did not end with 'PASS: {lesson_id}'")
    if repeated := sorted(line for line, count in Counter(lines).items() if count > 1):
        raise RecordError(f"the lesson printed {repeated[0]!r} more than once")


def lesson_environment(lesson, data):
    """run_lesson's `environment`, which lesson_code/CONTRACT.md requires of every lesson."""
    environment = data.get("environment") if isinstance(data, dict) else None
    if not isinstance(environment, dict) or "deviceCount" not in environment:
        raise RecordError(f"{lesson.id}: run_lesson() returned no `environment` with a "
                          f"`deviceCount`; lesson_code/CONTRACT.md requires it")
    return environment


def executed_recording(lesson, module, stdout, data, duration, command, start, inputs=None):
    """`start`: the host read before the run; `inputs`: the contentFiles the plan read."""
    environment = {**lesson_environment(lesson, data), "matplotlib": version("matplotlib"),
                   "jaxlib": version("jaxlib"), "loadAverage1m": start["loadAverage1m"],
                   "busyCoresAtStart": start["busyCores"]}
    data = {key: value for key, value in data.items() if key != "environment"}
    recording = header(lesson.id, "executed", lesson.path(module), environment, lesson.root,
                       lesson.also_run_with(module), inputs)
    recording.update(stdout=stdout, data=data, durationS=round(duration, 2), command=command)
    return recording


def run_cells(lesson, platform, devices, scratch):
    from scripts.runners import cells

    progress(f"running {lesson.id} on {devices} {platform.upper()} device(s), as its "
             f"notebook's cells in a fresh Jupyter kernel")
    try:
        return cells.run(lesson, scratch, platform, devices)
    except cells.ExecutionFailed as error:
        if error.setup:
            raise SetupFailure(f"cannot set up {devices} {platform.upper()} devices: "
                               f"{error}") from None
        raise RecordError(f"{lesson.id} failed in its notebook: {error}") from None


def record_lesson(lesson, platform, devices, staging, scratch, start, inputs=None):
    """The single run: its notebook (CPU only), and its recording, from one kernel."""
    run = run_cells(lesson, platform, devices, scratch)
    check_stdout(lesson.id, run.stdout)
    if (found := lesson_environment(lesson, run.data)["deviceCount"]) != devices:
        raise SetupFailure(f"asked for {devices} {platform.upper()} devices, this machine "
                           f"gave {found}; record on a machine with {devices}")
    command = ["python", "scripts/record.py"] + (
        [] if platform == "cpu" else ["--platform", platform])
    recording = executed_recording(lesson, lesson.module, run.stdout, run.data,
                                   run.duration_s, command, start, inputs)
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
    environment = recording["environment"]
    variant = "simulation" if recording["kind"] == "simulation" else environment["backend"] \
        + ("-processes" if environment.get("processCount", 1) > 1 else "")
    name = for_lesson(lesson).recording(variant)
    validate(recording, f"new recording {name}", lesson=lesson)
    text = dumps(recording)
    staging.add(lesson.root / name, text)
    return {name: text}


def record_simulation(lesson, staging, scratch, inputs=None):
    progress(f"recording the simulation {lesson.simulation}")
    stdout, data, duration = run_module(lesson.simulation, lesson.root, scratch)
    recording = header(lesson.id, "simulation", lesson.path(lesson.simulation),
                       {"backend": "cpu", "jax": version("jax"), "numpy": version("numpy")},
                       lesson.root, files=inputs)
    recording.update(stdout=stdout, data=data, durationS=round(duration, 2),
                     command=["python", "-m", lesson.simulation])
    return stage_recording(lesson, recording, staging)


def record_processes(lesson, processes, staging, start, launcher, calls, inputs):
    """`calls`: repeated calls per measurement in each rank (None: the rank's default)."""
    from scripts.runners.mpirun import run_mpirun
    from scripts.runners.processes import ProcessRunError, run_processes

    warn_if_busy("record", start)  # the rounds timing is read with the load; say so up front
    if not lesson.rank_module:
        raise RecordError(f"{lesson.id} has no rank_module in lesson_code/lessons.toml; "
                          f"it cannot run as {processes} processes")
    progress(f"running {lesson.id} as {processes} JAX processes"
             + (" under mpirun" if launcher == "mpirun" else ""))
    try:
        launch = run_mpirun if launcher == "mpirun" else run_processes
        run = launch(lesson.rank_module, ranks=processes, cwd=lesson.root,
                     **({"calls": calls} if calls else {}))
    except ProcessRunError as error:
        raise RecordError(str(error)) from None
    check_stdout(lesson.id, run.stdout)
    command = ["python", "scripts/record.py", "--processes", str(processes)] + (
        ["--launcher", launcher] if launcher != "processes" else []) + (
        ["--calls", str(calls)] if calls else [])
    recording = executed_recording(lesson, lesson.rank_module, run.stdout,
                                   run.data, run.duration_s, command, start, inputs)
    return stage_recording(lesson, recording, staging)


def record(plan, platform="cpu", processes=None, launcher="processes", calls=None):
    """Carry out `plan`; then every file moves into place at once, or none."""
    from scripts.plan import RERENDER, RUN, SIMULATE

    remove_stray_temps([plan.root / "recordings", plan.root / "figures",
                        plan.root / "docs" / "notebooks"])
    lock = dict(plan.lock)
    if plan.lock_note:
        progress(plan.lock_note)
    with Staging() as staging, scratch_folder("record") as scratch:
        for planned in plan.lessons:
            lesson = planned.lesson
            if planned.note:
                progress(planned.note)
            if planned.skipped:
                continue
            for step in planned.steps:
                progress(step.state)
            arriving, execute = {}, planned.step(RUN)
            if execute and processes:
                arriving = record_processes(lesson, processes, staging, host_at_start(),
                                            launcher, calls, execute.inputs)
            elif execute:
                arriving, entries = record_lesson(lesson, platform, lesson.devices, staging,
                                                  scratch, host_at_start(), execute.inputs)
                lock.update(entries)
            elif rerender := planned.step(RERENDER):
                output = notebook_output(lesson)
                progress(f"{lesson.id}: {output.shows} changed only in its text; "
                         f"re-rendering {output.path} from the executed cells, no run")
                staging.add(plan.root / output.path, rerender.text)
                lock[output.path] = lock_entry(output, rerender.text, plan.root)
            if simulate := planned.step(SIMULATE):
                arriving.update(record_simulation(lesson, staging, scratch, simulate.inputs))
            progress(f"analysing and drawing the figures of {lesson.id}")
            lock.update(stage_derived(lesson, staging, arriving, lock))
        staging.add(lock_path(plan.root), lock_text(lock))
        staging.commit(lambda path: progress(f"wrote {display(path, plan.root)}"))


# The ranks check their shards bit for bit against NumPy, which holds for powers of two;
# past 16 ranks of about 300 MB each, the run measures the scheduler, not the collectives.
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
        if needed > available:
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
            # A recording's name says its platform, not its device count.
            raise UsageError(
                f"--devices {args.devices}: {lesson.id} is recorded on {lesson.devices} "
                f"devices, the count its page describes (`devices` in "
                f"lesson_code/lessons.toml); to try {args.devices} without recording, run "
                f"`python -m {lesson.module} --devices {args.devices}`")


def available_memory():
    return psutil.virtual_memory().available


def parse_args(argv):
    parser = OneLineParser(prog="scripts/record.py", description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="exit 1 listing every stale, invalid or missing output")
    mode.add_argument("--render-only", action="store_true",
                      help="redraw the figures from the existing recordings, without JAX")
    mode.add_argument("--all", action="store_true",
                      help="re-run every lesson, even those whose recordings are current")
    parser.add_argument("--platform", choices=("cpu", "tpu", "gpu"), default="cpu",
                        help="tpu: the physical chips, recorded as <lesson>.tpu.json")
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


def record_command(argv):
    args = parse_args(argv)
    refuse_links()  # before any file of the checkout is read or written
    lessons = load_lessons()
    chosen = {lesson.id: lesson for lesson in chosen_lessons(lessons, args.lesson)}
    if args.check:  # one line per stale, missing or invalid output; 1 if any
        lines = check_problems(lessons, next(iter(lessons.values())).root, args.lesson)
        print("".join(f"{line}\n" for line in lines), end="")
        return 1 if lines else 0
    refuse_what_cannot_work(args, chosen)
    from scripts.plan import make_plan

    # The plan is made once the lock is held: no other run changes what it was made from.
    with exclusive_run(" ".join(["python scripts/record.py", *argv]),
                       next(iter(lessons.values())).root):
        record(make_plan(chosen, args.platform, args.processes, args.render_only,
                         args.all, chosen=bool(args.lesson)),
               args.platform, args.processes, args.launcher, args.calls)
    return 0


main = command(record_command, (RegistryError, RecordError, RecordingError, StagingError,
                                DeriveError, RunLocked, LinkInCheckout, ValueError))


if __name__ == "__main__":
    sys.exit(run(main))

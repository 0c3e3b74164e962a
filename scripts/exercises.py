"""Check a lesson's exercises: one line each, decided where the learner's code never runs.

    python scripts/exercises.py                                  # every lesson with exercises
    python scripts/exercises.py --lesson ID                      # one lesson's scaffolds
    python scripts/exercises.py --lesson ID --reference          # its own solutions
    python scripts/exercises.py --lesson ID --exercise NAME [--devices N]   # one of them

The registry (lesson_code/lessons.toml) names each lesson's checks module (`exercises`),
whose `EXERCISES` lists its exercises (lesson_code/exercise.py), and its device count
(`devices`). For each exercise this process works out the right answer, then runs the
learner's function in a child process (scripts/runners/exercise.py) on that many logical
CPU devices, in a copy of lesson_code/ where the lesson's solutions and the checks'
answers are stubs that raise. The child hands back only what the function produced; the
comparison is made here. The child and all it starts run under limits on time, memory,
output and processes, and are killed once the exercise is judged: a `sys.exit`, a crash,
an endless loop or a process left behind is that exercise's failure, in one line, and the
others still run. Exit 0 when every exercise is ok, 1 while one is unfinished or wrong, 2
for a request that cannot work; Ctrl-C exits 130, SIGTERM 143 and SIGHUP 129, with no
exercise left running; a closed stdout (`| head -1`) ends the check with exit 141.
"""
import sys
from pathlib import Path

# `python scripts/exercises.py` puts scripts/ on sys.path; the package lives one level up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import importlib
import os
import signal
import traceback

from lesson_code.exercise import SIGNALS, Exercise
from scripts import display
from scripts.proc.interrupts import Interrupted, run_command, signals_deferred, stop_on_signals
from scripts.judge_exercise import judge_exercise, one_line
from scripts.learner_copy import ChecksError, stand_ins
from scripts.store.lessons import RegistryError, load_lessons
from scripts.proc.children import become_subreaper
from scripts.proc.scratch import scratch_folder

TIME_LIMIT_S = 120  # one exercise: JAX start-up, the lesson's mesh, the learner's code


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, f"error: {message}\n")


def parse_args(argv):
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lesson", metavar="ID", help="one lesson (default: every lesson "
                        "whose registry entry names its exercises)")
    parser.add_argument("--exercise", metavar="NAME", help="one exercise of --lesson")
    parser.add_argument("--reference", action="store_true",
                        help="check the lesson's own solutions instead of the scaffolds")
    parser.add_argument("--devices", type=int, metavar="N",
                        help="logical CPU devices for --exercise (default: the lesson's)")
    parser.add_argument("--time-limit", type=float, default=TIME_LIMIT_S, metavar="S",
                        help=f"seconds per exercise (default {TIME_LIMIT_S})")
    args = parser.parse_args(argv)
    if args.exercise is not None and args.lesson is None:
        parser.error(f"--exercise {args.exercise} needs --lesson ID")
    if args.devices is not None and args.exercise is None:
        parser.error("--devices needs --exercise NAME: a lesson's exercises run on its own "
                     "device count (`devices` in lesson_code/lessons.toml)")
    if args.devices is not None and not 1 <= args.devices <= 256:
        parser.error(f"--devices {args.devices} must be between 1 and 256; try --devices 4")
    if not 0 < args.time_limit <= 3600:
        parser.error(f"--time-limit {args.time_limit:g} must be between 0 and 3600 seconds; "
                     f"try --time-limit {TIME_LIMIT_S}")
    return args


# ------------------------------------------------------------- the lesson's checks --

def load_exercises(lesson):
    """The checks module's EXERCISES. Imported here: it is the lesson's code, and the
    learner's (the scaffolds) is imported only in the children."""
    checks = display(lesson.path(lesson.exercises), lesson.root)
    fix = "; fix the checks module (lesson_code/CONTRACT.md, \"Exercises\")"
    try:
        module = importlib.import_module(lesson.exercises)
    except SyntaxError as error:
        raise ChecksError(f"{checks}:{error.lineno}: {error.msg}{fix}") from None
    except (Exception, SystemExit) as error:
        frames = [frame for frame in traceback.extract_tb(error.__traceback__)
                  if Path(frame.filename).resolve() == lesson.path(lesson.exercises).resolve()]
        where = f"{checks}:{frames[-1].lineno}" if frames else checks
        raise ChecksError(f"{where}: {type(error).__name__}: {one_line(error)}{fix}") \
            from None
    exercises = getattr(module, "EXERCISES", None)
    if not isinstance(exercises, list) or not exercises \
            or not all(isinstance(exercise, Exercise) for exercise in exercises):
        raise ChecksError(f"{checks}: EXERCISES must be a list of lesson_code.exercise."
                          f"Exercise(...){fix}")
    names = [exercise.name for exercise in exercises]
    if twice := sorted({name for name in names if names.count(name) > 1}):
        raise ChecksError(f"{checks}: two exercises are named {twice[0]}; rename one{fix}")
    return exercises


# ---------------------------------------------------------------- the command line --

def stop_on_every_signal():
    """SIGINT, SIGTERM and SIGHUP raise Interrupted (scripts/proc/interrupts.py); then the
    signals a scaffold's run_checker held across its exec arrive."""
    stop_on_signals()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)


def choose(args):
    """[(lesson, its exercises)] the arguments ask for; ChecksError or RegistryError."""
    lessons = load_lessons()
    if args.lesson is not None and args.lesson not in lessons:
        raise RegistryError(f"no lesson {args.lesson!r} in lesson_code/lessons.toml; try "
                            f"--lesson {next(iter(lessons), 'ID')}")
    chosen = [lessons[args.lesson]] if args.lesson else list(lessons.values())
    chosen = [lesson for lesson in chosen if lesson.exercises]
    if not chosen:
        raise RegistryError(f"{args.lesson or 'no lesson'} names no `exercises` module in "
                            f"lesson_code/lessons.toml; add one (lesson_code/CONTRACT.md)")
    picked = []
    for lesson in chosen:
        # The checks import JAX. A signal whose handler raises while jaxlib's extension
        # initialises is turned into an ImportError ("fix the checks module"), or crashes
        # the process (SIGSEGV): a Ctrl-C as the checker starts did both. So signals wait
        # for the import, and the first is raised once it is done.
        with signals_deferred():
            exercises = load_exercises(lesson)
        if args.exercise is not None:
            exercises = [e for e in exercises if e.name == args.exercise]
            if not exercises:
                raise ChecksError(f"no exercise {args.exercise!r} in {lesson.exercises}; try "
                                  f"--exercise {load_exercises(lesson)[0].name}")
        picked.append((lesson, exercises))
    return picked


def check(args):
    # The checks' own JAX (imported with them) never makes a device; the children get
    # their settings from child_environment, and a stray value here must not break it.
    for key in [key for key in os.environ if key.startswith(("JAX_", "XLA_"))]:
        del os.environ[key]
    try:
        picked = choose(args)
        replaced = [(lesson, stand_ins(exercises, lesson.root)) for lesson, exercises in picked]
    except (RegistryError, ChecksError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    become_subreaper()
    passed = True
    with scratch_folder("exercises") as scratch:
        for (lesson, exercises), (_, stubs) in zip(picked, replaced):
            for exercise in exercises:
                ok, line = judge_exercise(exercise, lesson.root, scratch / lesson.id,
                                          stubs, args.reference,
                                          args.devices or lesson.devices, args.time_limit)
                passed &= ok
                print(line if len(picked) == 1 else f"{lesson.id}: {line}", flush=True)
    return 0 if passed else 1


def main(argv=None):
    try:
        stop_on_every_signal()  # a signal held since a scaffold's exec arrives here
        return check(parse_args(sys.argv[1:] if argv is None else argv))
    except Interrupted as stopped:
        print(f"error: {stopped}; no exercise is left running", file=sys.stderr)
        return stopped.exit_status


if __name__ == "__main__":
    sys.exit(run_command(main))  # 141 once `| head -1` has all it wanted

"""Check a lesson's exercises, each in a process of its own, one line each: every lesson's
scaffolds, or one lesson's, or one exercise, or the lesson's own solutions (`--help`).

Each `attempt` runs the learner's function in a child process under a time limit, then its
process group is killed, and what it handed back is compared here with the check's
`answer`. Like pytest, it runs the learner's code as the learner: it is no sandbox. Exit 0
when every exercise is ok, 1 while one is unfinished or wrong (scripts/cli.py).
"""
import sys
from pathlib import Path

# `python scripts/exercises.py` puts scripts/ on sys.path; the package lives one level up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from scripts.cli import OneLineParser, UsageError, command, run

import ast
import importlib
import json
import os
import signal
import subprocess
import traceback
from pkgutil import resolve_name

import numpy as np

from lesson_code.exercise import Exercise
from scripts import display
from scripts.plumbing.children import describe, dies_with, kill_all, poll_until, stderr_tail
from scripts.plumbing.interrupts import SIGNALS, signals_deferred
from scripts.plumbing.scratch import scratch_folder
from scripts.store.lessons import RegistryError, chosen_lessons, load_lessons

TIME_LIMIT_S = 120  # one exercise: JAX start-up, the lesson's mesh, the learner's code
CONTRACT = "lesson_code/CONTRACT.md, \"Exercises\""
CHILD = "import sys; from scripts.exercises import run_attempt; run_attempt(*sys.argv[1:])"


class ChecksError(UsageError):
    """A lesson's checks module cannot be used as it is: one line naming the fix."""


def one_line(text, limit=500):
    text = " ".join(str(text).split())
    return "".join(c if c.isprintable() else "?" for c in text)[:limit]


def spec(function):
    return f"{function.__module__}:{function.__name__}"


# ------------------------------------------------ the child: the learner's code runs --

def plain(value):
    """An array (NumPy, JAX) as nested lists, for json.dumps; nothing else is data."""
    if not hasattr(value, "__array__"):
        raise TypeError(f"the result holds a {type(value).__name__}, which the checker cannot "
                        f"read; return numbers, arrays, lists or dicts")
    return np.asarray(value).tolist()


def where(error):
    """` (file:line)` of the learner's innermost line under lesson_code/, outside todo()."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__)
              if os.path.relpath(frame.filename).startswith("lesson_code" + os.sep)
              and frame.name != "todo"]
    return f" ({os.path.relpath(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""


def stopped_by(error):
    """{"unfinished" or "wrong": the rest of the line} for what stopped an attempt."""
    if isinstance(error, SyntaxError):
        return {"wrong": f"syntax error ({error.msg}) at "
                         f"{os.path.relpath(error.filename or '?')}:{error.lineno}; fix it"}
    if isinstance(error, NotImplementedError):
        return {"unfinished": f"{one_line(error)}{where(error)}"}
    kind = "" if isinstance(error, AssertionError) else f"{type(error).__name__}: "
    return {"wrong": f"{kind}{one_line(error)}{where(error)}"}


def run_attempt(implementation, attempt, report):
    """The child's run: `attempt`'s result, or what stopped it, as JSON in `report`."""
    try:
        text = json.dumps({"result": resolve_name(attempt)(resolve_name(implementation))},
                          default=plain)
    except Exception as error:  # a learner's bug is a line, not a crash
        text = json.dumps(stopped_by(error))
    Path(report).write_text(text)


# --------------------------------------------------- the checker: one line each --

def solution_called(exercise, lesson):
    """"module.function" of the lesson's solution if the scaffold's function names it."""
    module, function = exercise.scaffold.split(":")
    home, name = exercise.reference.__module__, exercise.reference.__name__
    try:
        tree = ast.parse(lesson.path(module).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return None
    names = {f"{home}.{name}"}  # what the scaffold may call the solution
    for node in ast.walk(tree):
        for alias in node.names if isinstance(node, (ast.Import, ast.ImportFrom)) else ():
            full = alias.name if isinstance(node, ast.Import) else f"{node.module}.{alias.name}"
            bound = alias.asname or alias.name
            names |= {f"{bound}.{name}"} if full == home else \
                {bound} if full == f"{home}.{name}" else set()
    body = [node for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name == function]
    named = (ast.unparse(node) for node in (ast.walk(body[0]) if body else ())
             if isinstance(node, (ast.Name, ast.Attribute)))
    return f"{home}.{name}" if any(each in names for each in named) else None


def judge(exercise, lesson, reference, devices, time_limit, scratch):
    """(ok, line) for one exercise, whatever its code does to its own process."""
    name = exercise.name
    if not reference and (solution := solution_called(exercise, lesson)):
        return False, f"wrong {name}: calls the lesson's own solution {solution}; write " \
            "the answer in the scaffold instead"
    report, errors = (scratch / f"{lesson.id}.{name}{suffix}" for suffix in (".json", ".err"))
    implementation = spec(exercise.reference) if reference else exercise.scaffold
    with open(errors, "wb") as stderr:  # a file: a process left holding it cannot block us
        child = subprocess.Popen(  # check() took every JAX_ and XLA_ setting out of os.environ
            [sys.executable, "-c", CHILD, implementation, spec(exercise.attempt), str(report)],
            cwd=lesson.root, env={**os.environ, "JAX_PLATFORMS": "cpu",
                                  "JAX_NUM_CPU_DEVICES": str(devices)},
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
            start_new_session=True, preexec_fn=dies_with(os.getpid()))
    try:
        finished = poll_until(child.poll, time_limit, 0.05) is not None
    finally:
        kill_all([child])
    if not finished:
        return False, f"wrong {name}: still running after {time_limit:g} s, stopped " \
            "(an endless loop? a blocking call?)"
    if not report.exists():
        tail = stderr_tail(errors)
        hint = f": {one_line(tail, 300)}" if tail != "(empty)" else \
            "; remove the sys.exit / os._exit call" if child.returncode >= 0 else ""
        return False, f"wrong {name}: the exercise's process {describe(child.returncode)} " \
            f"before its check finished{hint}"
    got = json.loads(report.read_text())
    if "result" not in got:
        [(kind, line)] = got.items()  # unfinished or wrong
        return False, f"{kind} {name}: {line}"
    answer = exercise.answer(devices)  # the lesson's code: a bug there is a traceback
    try:
        exercise.compare(got["result"], answer)
    except AssertionError as error:
        return False, f"wrong {name}: {one_line(error)}"
    except Exception as error:  # the learner's function returned something else entirely
        return False, f"wrong {name}: its result is not what the check reads " \
            f"({type(error).__name__}: {one_line(error, 200)})"
    return True, f"ok {name}"


# ------------------------------------------------------------- the lesson's checks --

def load_exercises(lesson):
    """The checks module's EXERCISES: the lesson's code, never the learner's."""
    path = lesson.path(lesson.exercises)
    checks, fix = display(path, lesson.root), f"; fix the checks module ({CONTRACT})"
    raw = path.read_bytes()
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[:error.start].count(b"\n") + 1
        raise ChecksError(f"{checks}:{line}: byte {raw[error.start]:#04x} is not UTF-8; save "
                          f"the checks module as UTF-8 ({CONTRACT})") from None
    try:
        module = importlib.import_module(lesson.exercises)
    except SyntaxError as error:
        raise ChecksError(f"{display(error.filename or path, lesson.root)}:{error.lineno}: "
                          f"{error.msg}{fix}") from None
    except (Exception, SystemExit) as error:
        frames = [frame for frame in traceback.extract_tb(error.__traceback__)
                  if Path(frame.filename).resolve() == path.resolve()]
        at = f"{checks}:{frames[-1].lineno}" if frames else checks
        raise ChecksError(f"{at}: {type(error).__name__}: {one_line(error)}{fix}") from None
    exercises = getattr(module, "EXERCISES", None)
    if not isinstance(exercises, list) or not exercises \
            or not all(isinstance(exercise, Exercise) for exercise in exercises):
        raise ChecksError(f"{checks}: EXERCISES must be a list of lesson_code.exercise."
                          f"Exercise(...){fix}")
    names = [exercise.name for exercise in exercises]
    if twice := sorted({name for name in names if names.count(name) > 1}):
        raise ChecksError(f"{checks}: two exercises are named {twice[0]}; rename one{fix}")
    return exercises


def choose(args):
    """[(lesson, its exercises)] the arguments ask for; ChecksError or RegistryError."""
    picked = []
    for lesson in chosen_lessons(load_lessons(), args.lesson, "exercises"):
        # A signal raised while jaxlib initialises would be an ImportError or a SIGSEGV.
        with signals_deferred():
            exercises = load_exercises(lesson)
        if not (named := [e for e in exercises if args.exercise in (None, e.name)]):
            raise ChecksError(f"no exercise {args.exercise!r} in {lesson.exercises}; try "
                              f"--exercise {exercises[0].name}")
        picked.append((lesson, named))
    return picked


# ---------------------------------------------------------------- the command line --

def parse_args(argv):
    parser = OneLineParser(prog="scripts/exercises.py", description=(
        "Check a lesson's exercises, each in a process of its own, one line each. It runs "
        "your code as you, with your rights: it is no sandbox."))
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


def check(argv):
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)  # held by a scaffold's run_checker
    args = parse_args(argv)
    # The checks' own JAX makes no device; a stray setting must not break its import.
    for key in [key for key in os.environ if key.startswith(("JAX_", "XLA_"))]:
        del os.environ[key]
    picked = choose(args)
    passed = True
    with scratch_folder("exercises") as scratch:
        for lesson, exercises in picked:
            for exercise in exercises:
                ok, line = judge(exercise, lesson, args.reference,
                                 args.devices or lesson.devices, args.time_limit, scratch)
                passed &= ok
                print(line if len(picked) == 1 else f"{lesson.id}: {line}", flush=True)
    return 0 if passed else 1


main = command(check, (RegistryError,), stopped="no exercise is left running")


if __name__ == "__main__":
    sys.exit(run(main))

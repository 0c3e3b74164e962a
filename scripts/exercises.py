"""Check a lesson's exercises: one line per exercise, each run in a process of its own.

    python scripts/exercises.py                                  # every lesson with exercises
    python scripts/exercises.py --lesson ID          # one lesson's scaffolds
    python scripts/exercises.py --lesson ID --reference   # its own solutions

The registry (lesson_code/lessons.toml) names each lesson's checks module (`exercises`)
and its device count (`devices`): every exercise runs on that many logical CPU devices,
set up before JAX starts, so an 8-device lesson's exercises see 8. Each runs in a child
process (scripts/runners/exercise.py) with a time limit, and its verdict counts only when
the child hands it back with this run's token: a `sys.exit` or `os._exit` in the
learner's code, a crash, a syntax error or a run past the limit is that exercise's
failure, in one line, and the others still run. Exit 0 when every exercise is ok, 1 while
one is unfinished or wrong, 2 for a request that cannot work; Ctrl-C exits 130 and
SIGTERM 143, with the running exercise's process stopped.
"""
import sys
from pathlib import Path

# `python scripts/exercises.py` puts scripts/ on sys.path; the package lives one level up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import json
import os
import secrets
import signal
import subprocess

from scripts import ROOT
from scripts.interrupts import Interrupted, stop_on_signals
from scripts.lessons import RegistryError, load_lessons

TIME_LIMIT_S = 120  # one exercise: JAX start-up, the lesson's mesh, the learner's code
MAX_RESULT_BYTES = 64 * 1024


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, f"error: {message}\n")


def parse_args(argv):
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lesson", metavar="ID", help="one lesson (default: every lesson "
                        "whose registry entry names its exercises)")
    parser.add_argument("--reference", action="store_true",
                        help="check the lesson's own solutions instead of the scaffolds")
    parser.add_argument("--time-limit", type=float, default=TIME_LIMIT_S, metavar="S",
                        help=f"seconds per exercise (default {TIME_LIMIT_S})")
    if any(arg == "--devices" or arg.startswith("--devices=") for arg in argv):
        parser.error("the checker runs each lesson on its own device count (`devices` in "
                     "lesson_code/lessons.toml); drop --devices")
    args = parser.parse_args(argv)
    if not 0 < args.time_limit <= 3600:
        parser.error(f"--time-limit {args.time_limit:g} must be between 0 and 3600 seconds; "
                     f"try --time-limit {TIME_LIMIT_S}")
    return args


def exercise_names(lesson):
    """The checks module's exercise names, read from its source: no import, no JAX."""
    import ast
    tree = ast.parse(lesson.path(lesson.exercises).read_text(encoding="utf-8"))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Exercise" \
                and node.args and isinstance(node.args[0], ast.Constant):
            names.append(node.args[0].value)
    return names


def child_environment(devices):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))}
    return {**env, "JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": str(devices),
            "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}


def run_one(lesson, name, use_reference, time_limit):
    """(ok, line) for one exercise, whatever its code does to its own process."""
    token = secrets.token_hex(16)
    read_end, write_end = os.pipe()
    command = [sys.executable, "-m", "scripts.runners.exercise", lesson.exercises, name,
               str(write_end), *(["--reference"] if use_reference else [])]
    child = subprocess.Popen(command, cwd=ROOT, env=child_environment(lesson.devices),
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, pass_fds=(write_end,),
                             start_new_session=True, text=True)
    os.close(write_end)
    try:
        try:
            _, stderr = child.communicate(token + "\n", timeout=time_limit)
        except subprocess.TimeoutExpired:
            return False, f"wrong {name}: still running after {time_limit:g} s, stopped " \
                "(an endless loop? a blocking call?)"
        with os.fdopen(read_end, "rb") as result_pipe:
            read_end = None
            raw = result_pipe.read(MAX_RESULT_BYTES + 1)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)  # its session: the learner's children too
            child.wait()
        if read_end is not None:
            os.close(read_end)
    return judge(name, child.returncode, raw, token, stderr)


def judge(name, returncode, raw, token, stderr):
    if not raw:
        last = next((line for line in reversed((stderr or "").splitlines()) if line.strip()),
                    "")
        if returncode < 0:
            how = f"was killed by {signal.Signals(-returncode).name}"
        else:
            how = f"ended with exit status {returncode}"
        hint = "; remove the sys.exit / os._exit call" if returncode >= 0 and not last \
            else (f": {last.strip()[:200]}" if last else "")
        return False, f"wrong {name}: the exercise's process {how} before its check " \
            f"finished{hint}"
    try:
        result = json.loads(raw[:MAX_RESULT_BYTES])
        valid = result.get("token") == token and result.get("state") in (
            "ok", "unfinished", "wrong") and isinstance(result.get("line"), str)
    except (ValueError, AttributeError):
        valid = False
    if not valid:
        return False, f"wrong {name}: its verdict did not come from the checker " \
            "(tampered with); run the checker on an unmodified checks module"
    return result["state"] == "ok", result["line"][:500]


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        lessons = load_lessons()
    except RegistryError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.lesson is not None and args.lesson not in lessons:
        print(f"error: no lesson {args.lesson!r} in lesson_code/lessons.toml; try "
              f"--lesson {next(iter(lessons), 'ID')}", file=sys.stderr)
        return 2
    chosen = [lessons[args.lesson]] if args.lesson else list(lessons.values())
    chosen = [lesson for lesson in chosen if lesson.exercises]
    if not chosen:
        print(f"error: {args.lesson or 'no lesson'} names no `exercises` module in "
              f"lesson_code/lessons.toml; add one (lesson_code/CONTRACT.md)", file=sys.stderr)
        return 2
    stop_on_signals()
    passed = True
    try:
        for lesson in chosen:
            for name in exercise_names(lesson):
                ok, line = run_one(lesson, name, args.reference, args.time_limit)
                passed &= ok
                print(line if len(chosen) == 1 else f"{lesson.id}: {line}", flush=True)
    except Interrupted as stopped:
        print(f"error: {stopped}; the running exercise was stopped", file=sys.stderr)
        return stopped.exit_status
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())

"""What the course costs as it grows: a benchmark (issue 46), not a test.

    python benchmarks/course_scale.py [--lessons 1,10,30] [--rounds 3] [--ci] [--keep]

A course's maintainers pay for every lesson in recording, building, checking, serving and
CI; what one more lesson costs must not grow with the course. For each N, a copy of this
tree (as the Makefile's COPY_TREE makes it) grows to N lessons with lessons of their own
(benchmarks/course_lessons.py), is committed (the TPU job's tests clone it), and is timed
with this checkout's Python, each time as a ratio to the one-lesson course of the same run:

- `record.py --all` (every lesson recorded from scratch), then `bench.py` for each added
  lesson that measures (a sweep of 3 blocks: course_lessons.py makes every fifth one so);
  the first such lesson's sweep is compared with its own in the two-lesson course;
- `mkdocs build --strict`, `record.py --check`, and `mkdocs serve`'s edit-to-rebuild time
  for a sentence added to the first lesson's page: the median of --rounds, in turns;
- the tests a lesson adds (`pytest --collect-only -m ''`, less the one-lesson course's, per
  added lesson), and the time the first added lesson's own tests take (`-k <its id>`)
  against the same lesson's in the two-lesson course, which is therefore always measured;
- with --ci, `CI=true bash .ci/run` in the smallest course and the largest (many minutes
  each: a fresh .venv, `make test`).

It prints a table and writes benchmarks/course_scale.json (--out, checked before anything
is measured). Every step has a time limit and runs in a process group of its own, killed
whole when the step ends; Ctrl-C or SIGTERM ends the run in one line, its copies removed.
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.course_lessons import write_lessons  # noqa: E402
from benchmarks.serve_edit import edit_to_rebuild_seconds  # noqa: E402
from scripts.store.lessons import load_lessons  # noqa: E402

ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
# What COPY_TREE leaves out: outputs, environments, caches.
EXCLUDED = ["./.git", "./build", "./site", "./.venv", "./node_modules", "./benchmarks/node_modules",
            "./test-artifacts", "__pycache__", "./.pytest_cache", "./.hypothesis", "./.cache"]
# Each step's time limit: seconds, plus seconds per lesson.
LIMITS = {"record": (600, 60), "bench": (600, 0), "build": (300, 20), "check": (120, 10),
          "serve": (300, 20), "collect": (300, 10), "lesson tests": (1800, 30),
          "ci": (5400, 300)}
# The blocks of an added lesson's sweep: enough for a verdict (scripts/intervals.py).
BENCH_BLOCKS = 3


class StepFailed(Exception):
    pass


class Terminated(Exception):
    """SIGTERM, raised where the run is, so that it unwinds as Ctrl-C does."""


def terminated(signum, frame):
    raise Terminated


def limit(step, lessons):
    return LIMITS[step][0] + LIMITS[step][1] * lessons


def run(step, command, cwd, lessons, env=None, ok=(0,)):
    """Seconds `command` took in `cwd`, and its output; StepFailed with the output's tail if
    it exits otherwise than `ok` or runs past its limit. Its whole process group is killed
    once it ends, whatever it left running."""
    limit_s = limit(step, lessons)
    with tempfile.TemporaryFile("w+") as log:
        start = time.perf_counter()
        child = subprocess.Popen(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                 env=env or ENV, start_new_session=True)
        try:
            code = child.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            code = f"no end within {limit_s} s"
        finally:
            kill_group(child)
        seconds = time.perf_counter() - start
        log.seek(0)
        output = log.read()
    if code not in ok:
        raise StepFailed(f"{step}: {' '.join(map(str, command))} ({code}):\n{output[-3000:]}")
    return seconds, output


def kill_group(child):
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the group has already ended
    child.wait()


def copy_course(folder, lessons):
    """This tree copied into `folder`, node_modules linked, grown to `lessons` lessons and
    committed; the ids of the lessons added."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    excluded = [f"--exclude={path}" for path in EXCLUDED]
    tar = subprocess.Popen(["tar", "-c", *excluded, "."], cwd=ROOT, stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(folder)], stdin=tar.stdout, check=True, timeout=600)
    if tar.wait():
        raise StepFailed("tar could not copy the tree")
    (folder / "node_modules").symlink_to(ROOT / "node_modules")
    added = write_lessons(folder, lessons - len(load_lessons(folder)))
    commit(folder, "the grown course")
    return added


def commit(folder, message):
    git = ["git", "-C", str(folder)]
    for command in (["init", "-q"], ["add", "-A"], ["-c", "user.name=bench", "-c",
                    "user.email=bench@localhost", "commit", "-qm", message]):
        subprocess.run([*git, *command], check=True, timeout=600)


def measure(folders, rounds, ci):
    """Each course's results. The quick steps (build, --check, serve) run `rounds` times,
    the courses in turns, and keep their medians: a load that comes and goes on a shared
    machine then reaches every course alike. Recording, the tests and CI run once each."""
    python, courses = sys.executable, {}
    for count, folder in folders.items():
        print(f"course of {count} lessons: copying, recording", file=sys.stderr, flush=True)
        courses[count] = {"loadBefore": os.getloadavg(), "added": copy_course(folder, count)}
        courses[count]["recordS"], _ = run("record", [python, "scripts/record.py", "--all"],
                                           folder, count)
        measured = [lesson.id for lesson in load_lessons(folder).values()
                    if lesson.sweep and lesson.id in courses[count]["added"]]
        courses[count]["benchS"] = {lesson: run("bench", [
            python, "scripts/bench.py", "--lesson", lesson, "--blocks", str(BENCH_BLOCKS)],
            folder, count)[0] for lesson in measured}
        commit(folder, "its recordings")
    quick = {"buildS": ("build", [python, "-m", "mkdocs", "build", "--strict"]),
             "checkS": ("check", [python, "scripts/record.py", "--check"])}
    samples = {count: {key: [] for key in [*quick, "serveEditS"]} for count in folders}
    for turn in range(rounds):
        print(f"build, --check, serve: round {turn + 1} of {rounds}", file=sys.stderr, flush=True)
        for count, folder in folders.items():
            for key, (step, command) in quick.items():
                samples[count][key].append(run(step, command, folder, count)[0])
            samples[count]["serveEditS"].append(
                edit_to_rebuild_seconds(folder, rounds=1, timeout=limit("serve", count)))
    pytest = [python, "-m", "pytest", "-m", "", "tests", "-p", "no:cacheprovider"]
    for count, folder in folders.items():
        print(f"course of {count} lessons: tests", file=sys.stderr, flush=True)
        course = courses[count]
        course.update({key: statistics.median(values) for key, values in samples[count].items()},
                      samples=samples[count])
        _, listing = run("collect", [*pytest, "--collect-only", "-q"], folder, count)
        course["tests"] = int(re.search(r"(\d+) tests? collected", listing)[1])
        if course["added"]:  # its id names its tests, or its files' (the id, - as _)
            lesson = course["added"][0]
            named = f"{lesson} or {lesson.replace('-', '_')}"
            course["lessonTestsS"], output = run("lesson tests", [*pytest, "-q", "-k", named],
                                                 folder, count, ok=(0, 1))  # timed either way
            course["lessonTests"] = f"{lesson}: {output.strip().splitlines()[-1]}"
        if ci and count in (min(folders), max(folders)):
            course["ciS"], _ = run("ci", ["bash", ".ci/run"], folder, count, {**ENV, "CI": "true"})
        del course["added"]
    return courses


def ratios(courses):
    """Each course's times as a ratio to the one-lesson course's (the first measured); its
    first added lesson's tests and sweep to the same lesson's in the two-lesson course;
    tests per added lesson."""
    smallest = min(courses)
    base, two = courses[smallest], courses.get(smallest + 1, {})
    for count, course in courses.items():
        first = next(iter(course.get("benchS", {})), None)
        if first in two.get("benchS", {}):
            course["firstBenchS"] = course["benchS"][first]
        course["ratios"] = {key: course[key] / base[key] for key in
                            ("recordS", "buildS", "checkS", "serveEditS", "ciS") if key in course}
        for key in ("lessonTestsS", "firstBenchS"):
            if key in course and key in two:
                course["ratios"][key] = course[key] / two[key]
        if count > smallest:
            course["testsPerAddedLesson"] = (course["tests"] - base["tests"]) / (count - smallest)


def table(courses):
    columns = [("record", "recordS"), ("a lesson's sweep", "firstBenchS"), ("build", "buildS"),
               ("check", "checkS"), ("serve edit", "serveEditS"),
               ("lesson tests", "lessonTestsS"), ("CI", "ciS")]
    lines = [f"{'lessons':>7} " + "".join(f"{name:>18}" for name, _ in columns) +
             f"{'tests':>8}{'per lesson':>12}"]
    for count, course in courses.items():
        cells = [f"{course[key]:8.1f} s ×{course['ratios'].get(key, 1):5.2f}" if key in course
                 else "-" for _, key in columns]
        per_lesson = course.get("testsPerAddedLesson")
        lines.append(f"{count:>7} " + "".join(f"{cell:>18}" for cell in cells) +
                     f"{course['tests']:>8}{'' if per_lesson is None else f'{per_lesson:.1f}':>12}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="benchmarks/course_scale.py",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--lessons", default="1,10,30",
                        help="course sizes, comma-separated (the two-lesson course is added)")
    parser.add_argument("--ci", action="store_true", help="also time CI=true bash .ci/run")
    parser.add_argument("--rounds", type=int, default=3,
                        help="times each quick step runs per course, in turns (the median)")
    parser.add_argument("--keep", action="store_true", help="keep the copies under build/")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "course_scale.json")
    args = parser.parse_args(argv)
    if why := unwritable(args.out):  # before minutes of measuring, not after
        parser.error(f"--out {args.out}: {why}; name a file in a folder you can write")
    seed = len(load_lessons(ROOT))
    counts = sorted({seed, seed + 1, *map(int, args.lessons.split(","))})
    if counts[0] < seed:
        parser.error(f"--lessons: this course has {seed} lessons already; ask for at least that")
    if args.rounds < 1:
        parser.error("--rounds: at least 1")
    started, load = datetime.now(timezone.utc), os.getloadavg()
    scratch = ROOT / "build" / "course-scale"
    signal.signal(signal.SIGTERM, terminated)
    try:
        courses = measure({count: scratch / str(count) for count in counts}, args.rounds, args.ci)
    except (StepFailed, TimeoutError, RuntimeError) as failure:  # the last two: serve_edit's
        sys.exit(f"course_scale: {failure}")
    except (KeyboardInterrupt, Terminated) as stop:  # each step's group is killed on the way
        print(f"course_scale: {'terminated' if isinstance(stop, Terminated) else 'interrupted'}; "
              f"nothing written, the copies removed", file=sys.stderr)
        return 143 if isinstance(stop, Terminated) else 130
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the copies go, whatever comes next
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    ratios(courses)
    print(table(courses))
    git = ["git", "-C", str(ROOT)]
    commit_id = subprocess.run([*git, "rev-parse", "HEAD"], text=True,
                               capture_output=True).stdout.strip()
    out = os.path.relpath(args.out.resolve(), ROOT)
    changed = [line for line in subprocess.run([*git, "status", "--porcelain"], text=True,
                                               capture_output=True).stdout.splitlines()
               if line[3:] != out]  # what the last run wrote aside
    report = {"date": started.isoformat(timespec="seconds"), "commit": commit_id,
              "uncommittedChanges": bool(changed),
              "cores": os.cpu_count(), "loadStart": load, "loadEnd": os.getloadavg(),
              "lessons": counts, "rounds": args.rounds, "ci": args.ci,
              "courses": {str(count): course for count, course in courses.items()}}
    temp = args.out.with_name(f".{args.out.name}.{os.getpid()}.tmp")
    temp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(temp, args.out)  # whole or not at all
    return 0


def unwritable(out):
    """Why `out` cannot take the report, or None."""
    folder = out.resolve().parent
    if out.is_symlink() or out.is_dir() or (out.exists() and not out.is_file()):
        return "not a regular file"
    if not folder.is_dir():
        return f"no folder {folder}"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"the folder {folder} is not writable"
    return None


if __name__ == "__main__":
    sys.exit(main())

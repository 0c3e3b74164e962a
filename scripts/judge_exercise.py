"""One exercise judged: the learner's function run in a process of its own, under
limits, and what it returned compared here, with an answer worked out here.

The child (scripts/runners/exercise.py) runs in a copy of lesson_code/
(scripts/learner_copy.py) and hands back a report: the plain data the function produced,
or the exception that stopped it. This process never imports the learner's code; it
reads that report as data (size-capped JSON), and the exercise's `compare` decides.
Limits: the child's own (memory, output: see the runner), a time limit, and a count of
the processes below this one, polled; this process is their subreaper, so whatever the
child starts, in a session of its own too, is killed and reaped before the next
exercise (scripts/proc/children.py). None of this is a sandbox: the child runs as this user,
so an absolute path still reaches the checkout; the copy keeps only its own writes, to
the files it runs beside, out of it.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from scripts.proc.interrupts import raise_if_interrupted
from scripts.learner_copy import learner_copy
from scripts.runners import exercise as runner
from scripts.proc.children import descendants, kill_everything_below
from scripts.proc.children import dies_with

MAX_PROCESSES = 16  # at once, below this one: the exercise's own and whatever it starts
POLL_S = 0.1
LINE_LIMIT = 500  # characters of a line that may quote what the learner's code returned


def one_line(text, limit=LINE_LIMIT):
    """`text` on one line of printable characters, cut at `limit`."""
    text = " ".join(str(text).split())
    return "".join(c if c.isprintable() else "?" for c in text)[:limit]


def child_environment(devices):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))}
    return {**env, "JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": str(devices)}


def spec(function):
    return f"{function.__module__}:{function.__name__}"


def watch(child, time_limit):
    """None once the child has exited; else why it had to be stopped."""
    deadline = time.monotonic() + time_limit
    while True:
        raise_if_interrupted()  # a signal Python discarded in a callback still stops this
        try:
            child.wait(timeout=POLL_S)
            return None
        except subprocess.TimeoutExpired:
            pass
        if time.monotonic() > deadline:
            return "time"
        if len(descendants()) > MAX_PROCESSES:
            return "processes"


def stop(child):
    """The child and everything below this process, killed and reaped. The child first,
    and waited for here (its exit is Popen's to collect), then whatever is left below."""
    if child.poll() is None:
        try:
            os.killpg(child.pid, signal.SIGKILL)  # its session, where /proc is missing
        except (ProcessLookupError, PermissionError):
            pass
        child.kill()  # and the child itself, should it have left its process group
    child.wait()
    kill_everything_below()


def read_report(path):
    """The child's report, or None when it wrote none this checker can read."""
    try:
        with open(path, "rb") as report:
            raw = report.read(runner.OUTPUT_LIMIT + 1)
        report = json.loads(raw)
    except (OSError, ValueError, RecursionError):
        return None
    if isinstance(report, dict) and len(report) == 1 and "result" in report:
        return report
    raised = report.get("raised") if isinstance(report, dict) else None
    if isinstance(raised, dict) and all(isinstance(raised.get(key), str) for key in
                                        ("kind", "type", "message", "where")):
        return report
    return None


def raised_line(name, raised):
    kind, where = raised["kind"], one_line(raised["where"], 200)
    message = one_line(raised["message"], 300)
    if kind == "unfinished":
        return f"unfinished {name}: {message} ({where})"
    if kind == "syntax":
        return f"wrong {name}: syntax error ({message}) at {where}; fix it"
    if kind == "called":
        return f"wrong {name}: calls {message}; write the answer in the scaffold instead"
    if kind == "memory":
        return f"wrong {name}: over the memory limit ({runner.MEMORY_LIMIT / 2**30:g} GiB " \
            f"beyond what JAX holds) at {where}; an exercise needs far less"
    if kind == "too_large":
        return f"wrong {name}: its result is over {runner.OUTPUT_LIMIT / 2**20:g} MiB; " \
            "return less"
    if kind == "assertion":
        return f"wrong {name}: {message} ({where})"
    return f"wrong {name}: {one_line(raised['type'], 80)}: {message} ({where})"


def ended_early(name, returncode, stderr):
    """The line for a child that ended without a report."""
    last = next((line for line in reversed(stderr.splitlines()) if line.strip()), "")
    if returncode < 0:
        how = f"was killed by {signal.Signals(-returncode).name}"
    else:
        how = f"ended with exit status {returncode}"
    hint = "; remove the sys.exit / os._exit call" if returncode >= 0 and not last \
        else (f": {one_line(last, 200)}" if last else "")
    return f"wrong {name}: the exercise's process {how} before its check finished{hint}"


def judge(exercise, answer, report):
    try:
        exercise.compare(report["result"], answer)
    except AssertionError as error:
        return False, f"wrong {exercise.name}: {one_line(error)}"
    except Exception as error:  # the learner's function returned something else entirely
        return False, f"wrong {exercise.name}: its result is not what the check reads " \
            f"({type(error).__name__}: {one_line(error, 200)})"
    return True, f"ok {exercise.name}"


def judge_exercise(exercise, root, scratch, replaced, use_reference, devices, time_limit):
    """(ok, line) for one exercise, whatever its code does to its own process."""
    name = exercise.name
    answer = exercise.answer(devices)
    folder = scratch / name
    copy, report, stderr = folder / "copy", folder / "report.json", folder / "stderr"
    copy.mkdir(parents=True)
    learner_copy(copy, root, {} if use_reference else replaced)
    implementation = spec(exercise.reference) if use_reference else exercise.scaffold
    command = [sys.executable, "-I", "-B", runner.__file__, str(copy), implementation,
               spec(exercise.attempt), str(report)]
    try:
        with open(stderr, "wb") as errors:
            # A file, not a pipe: a process it leaves behind holding stderr cannot keep
            # this one waiting, and the output limit applies to it (RLIMIT_FSIZE).
            child = subprocess.Popen(command, cwd=copy, env=child_environment(devices),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=errors, start_new_session=True,
                                     preexec_fn=dies_with(os.getpid()))
        try:
            stopped = watch(child, time_limit)
        finally:
            stop(child)
        if stopped == "time":
            return False, f"wrong {name}: still running after {time_limit:g} s, stopped " \
                "(an endless loop? a blocking call?)"
        if stopped == "processes":
            return False, f"wrong {name}: ran more than {MAX_PROCESSES} processes at once, " \
                "all stopped; an exercise needs one"
        if stderr.stat().st_size >= runner.OUTPUT_LIMIT:
            return False, f"wrong {name}: its stderr reached the " \
                f"{runner.OUTPUT_LIMIT / 2**20:g} MiB output limit and was cut there; print less"
        result = read_report(report)
        if result is None:
            with open(stderr, "rb") as errors:  # its last lines: the likeliest cause
                errors.seek(max(0, stderr.stat().st_size - 4096))
                tail = errors.read().decode(errors="replace")
            return False, ended_early(name, child.returncode, tail)
        if "raised" in result:
            return False, raised_line(name, result["raised"])
        return judge(exercise, answer, result)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

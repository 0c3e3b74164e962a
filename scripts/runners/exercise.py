"""One attempt at an exercise, in the learner's process:
`python -I -B scripts/runners/exercise.py COPY IMPLEMENTATION ATTEMPT REPORT`, started by
scripts/exercises.py, never by hand.

This process runs the learner's code, so it decides nothing. It imports ATTEMPT (the
checks' way of running an implementation on the lesson's devices), then IMPLEMENTATION
("module:function", the learner's scaffold or the lesson's solution), runs the one on the
other and writes to REPORT, as JSON, what came out: `{"result": ...}`, plain data (the
values, the lowered program's text), or `{"raised": ...}`, the exception that stopped it
and where. The checker compares that result with an answer worked out in its own
process, which this one never sees. COPY is a copy of lesson_code/ in which the lesson's
solutions and the checks' answers and comparisons raise CalledTheSolution; `-I` keeps
the repository itself off sys.path, so neither an import nor importlib.reload reaches
the originals. (Learner code can still make up the data it hands back; what it cannot
do is see the answer, or write the verdict.)

The limits are set here, before any learner code runs, and whatever that code starts
inherits them: MEMORY_LIMIT bytes of data beyond what JAX holds once its devices are up,
and OUTPUT_LIMIT bytes per file written (its stderr is a file). The checker adds a time
limit and a process count, and kills every process this one leaves behind.
Only the standard library at the top: the checker imports the limits from here.
"""
import importlib
import json
import os
import resource
import sys
import traceback

MEMORY_LIMIT = 2 * 2**30
OUTPUT_LIMIT = 2**20


def where_raised(error):
    """file:line of the innermost frame in the copy (this process's working folder),
    outside todo(): the learner's line, not one inside NumPy or JAX, and not the hole's
    own raise."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return "?"
    ours = [f for f in frames if not os.path.relpath(f.filename).startswith("..")]
    frame = next((f for f in reversed(ours) if f.name != "todo"), frames[-1])
    return f"{os.path.relpath(frame.filename)}:{frame.lineno}"


def one_line(error):
    return " ".join(str(error).split()) or type(error).__name__


def load(spec):
    module_name, function_name = spec.split(":")
    return getattr(importlib.import_module(module_name), function_name)


def as_data(value):
    """`value` as JSON can hold it: arrays (NumPy, JAX) become nested lists."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(key): as_data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_data(item) for item in value]
    if hasattr(value, "__array__"):
        import numpy as np
        return np.asarray(value).tolist()
    raise TypeError(f"the result holds a {type(value).__name__}, which the checker cannot "
                    f"read; return numbers, arrays, lists or dicts")


def data_in_use():
    """This process's data segment (VmData, bytes): what RLIMIT_DATA counts."""
    with open("/proc/self/status") as status:
        kib = next(line.split()[1] for line in status if line.startswith("VmData:"))
    return int(kib) * 1024


def cap(kind, limit):
    """Soft and hard limit both, so the learner's code cannot raise it again (unless it
    runs as root); never above a hard limit someone set lower."""
    _, hard = resource.getrlimit(kind)
    limit = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
    resource.setrlimit(kind, (limit, limit))


def limit_memory():
    """RLIMIT_DATA, not RLIMIT_AS: JAX reserves address space it never uses (1.6 GB of
    it on 4 CPU devices), but its data (thread stacks and heaps) is what it holds."""
    try:
        cap(resource.RLIMIT_DATA, data_in_use() + MEMORY_LIMIT)
    except (OSError, StopIteration):  # no /proc: no limit we could size
        pass


def raised(error):
    """What stopped the learner's code, as the checker's line needs it."""
    # CalledTheSolution is the copy's own (lesson_code.exercise in COPY), matched by name
    # so that this module needs nothing from lesson_code before the attempt is imported.
    kinds = [("CalledTheSolution", "called"), ("NotImplementedError", "unfinished"),
             ("MemoryError", "memory"), ("SyntaxError", "syntax"),
             ("AssertionError", "assertion")]
    names = {cls.__name__ for cls in type(error).__mro__}
    kind = next((kind for name, kind in kinds if name in names), "error")
    where = where_raised(error)
    if kind == "syntax":
        where = f"{os.path.relpath(error.filename or '?')}:{error.lineno}"
    message = error.msg if kind == "syntax" else one_line(error)
    return {"kind": kind, "type": type(error).__name__, "message": message, "where": where}


def attempt_once(implementation_spec, attempt_spec):
    attempt = load(attempt_spec)  # the checks' own code, bound before any learner code
    if "jax" in sys.modules:
        sys.modules["jax"].devices()  # JAX's threads and buffers count before the limit
    limit_memory()
    try:
        implementation = load(implementation_spec)  # the learner's file runs here...
        return {"result": as_data(attempt(implementation))}  # ...and here
    except Exception as error:  # a learner's bug is a result to report, not a crash
        return {"raised": raised(error)}


def main(argv):
    copy, implementation, attempt, report_path = argv
    cap(resource.RLIMIT_FSIZE, OUTPUT_LIMIT)
    sys.path.insert(0, copy)
    text = json.dumps(attempt_once(implementation, attempt))
    if len(text.encode()) > OUTPUT_LIMIT:  # the file could not hold it: say so instead
        text = json.dumps({"raised": {"kind": "too_large", "type": "", "message": "",
                                      "where": ""}})
    with open(report_path, "w") as report:
        report.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

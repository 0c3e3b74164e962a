"""One exercise, in a process of its own: `python -m scripts.runners.exercise CHECKS NAME
RESULT_FD [--reference]`, started by scripts/exercises.py, never by hand.

The order is what makes the verdict trustworthy. The checker's token is read from stdin
and the right answer is computed (from the lesson's checks module) before the learner's
file is imported, so nothing that file does on import can change either; the lesson's own
solutions are then replaced by tripwires, so a scaffold that calls one is caught. The
verdict goes to RESULT_FD with the token: a process that ends before writing it (a
sys.exit or os._exit in the learner's code, a crash) has no verdict, and the parent says
so. Imports no JAX itself: the checks module does, on the devices the parent set up.
"""
import importlib
import json
import os
import sys
import traceback


def where_raised(error):
    """file:line of the innermost frame outside todo(), so the learner sees which hole."""
    frames = traceback.extract_tb(error.__traceback__)
    frame = next((f for f in reversed(frames) if f.name != "todo"), frames[-1])
    return f"{os.path.relpath(frame.filename)}:{frame.lineno}"


def one_line(error):
    return " ".join(str(error).split()) or type(error).__name__


class CalledTheSolution(Exception):
    """A scaffold called the lesson's own solution instead of computing its answer."""


def tripwire(function):
    where = f"{function.__module__}.{function.__name__}"

    def caught(*args, **kwargs):
        raise CalledTheSolution(f"calls the lesson's own solution {where}; write the "
                                f"answer in the scaffold instead")
    return caught


def load_scaffold(spec):
    module_name, function_name = spec.split(":")
    return getattr(importlib.import_module(module_name), function_name)


def verdict(exercise, use_reference):
    """(state, line): state is ok, unfinished or wrong."""
    name = exercise.name
    answer, compare = exercise.answer(), exercise.compare  # before any learner code
    if use_reference:
        implementation = exercise.reference
    else:
        for other in (exercise.reference,):
            setattr(sys.modules[other.__module__], other.__name__, tripwire(other))
        try:
            implementation = load_scaffold(exercise.scaffold)
        except SyntaxError as error:
            where = f"{os.path.relpath(error.filename or '?')}:{error.lineno}"
            return "wrong", f"wrong {name}: syntax error ({error.msg}) at {where}; fix it"
    try:
        compare(exercise.attempt(implementation), answer)
    except NotImplementedError as error:
        return "unfinished", f"unfinished {name}: {one_line(error)} ({where_raised(error)})"
    except CalledTheSolution as error:
        return "wrong", f"wrong {name}: {one_line(error)}"
    except AssertionError as error:
        # An assert in the learner's own code: say where; the checks' own say enough.
        where = where_raised(error)
        mine = not where.startswith(exercise.compare.__module__.replace(".", "/"))
        return "wrong", f"wrong {name}: {one_line(error)}" + (f" ({where})" if mine else "")
    except Exception as error:  # a learner's bug is a result to report, not a crash
        return "wrong", f"wrong {name}: {type(error).__name__}: {one_line(error)} " \
            f"({where_raised(error)})"
    return "ok", f"ok {name}"


def main(argv):
    checks_module, name, result_fd = argv[:3]
    use_reference = "--reference" in argv[3:]
    token = sys.stdin.readline().strip()
    result = os.fdopen(int(result_fd), "w")
    checks = importlib.import_module(checks_module)
    [exercise] = [e for e in checks.EXERCISES if e.name == name]
    state, line = verdict(exercise, use_reference)
    result.write(json.dumps({"token": token, "state": state, "line": line}))
    result.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

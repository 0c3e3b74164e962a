"""What an exercise is, for every lesson's checks module, and the way into the checker.

A lesson's checks module (the registry's `exercises`) lists its exercises in `EXERCISES`;
`python scripts/exercises.py` imports that module and takes the list from there. Each
exercise is judged in two processes (lesson_code/CONTRACT.md, "Exercises"): `attempt`
runs in a child with the learner's function, `answer` and `compare` in the checker's. No
JAX here: the checker imports this before it knows a lesson's device count.
"""
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


def top_level_function(value):
    """True for a `def` at the top of its module: the child process finds `reference` and
    `attempt` by "module:function" (scripts/exercises.py)."""
    return callable(value) and getattr(value, "__qualname__", None) == \
        getattr(value, "__name__", "") != "<lambda>" and hasattr(value, "__code__")


@dataclass(frozen=True)
class Exercise:
    name: str  # an identifier: the checker's lines and `--exercise NAME` use it
    scaffold: str  # "module:function" under lesson_code/, the function the learner fills in
    reference: Callable  # the lesson's solution: `--reference` runs it
    answer: Callable[[int], object]  # answer(devices): the right result, in the checker
    attempt: Callable[[Callable], object]  # runs an implementation, in the learner's process
    compare: Callable[[object, object], None]  # compare(got, answer): AssertionError if wrong

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise TypeError(f"an exercise's name is an identifier in quotes, such as "
                            f"Exercise(\"clip_by_global_norm\", ...), not {self.name!r}")
        module, _, function = (self.scaffold if isinstance(self.scaffold, str) else "") \
            .partition(":")
        if not (module.startswith("lesson_code.") and function.isidentifier()):
            raise TypeError(f"exercise {self.name}: scaffold is \"module:function\" under "
                            f"lesson_code/, such as \"lesson_code.my_exercises:{self.name}\"; "
                            f"not {self.scaffold!r}")
        for role in ("reference", "attempt"):
            if not top_level_function(getattr(self, role)):
                raise TypeError(f"exercise {self.name}: {role} must be a function defined "
                                f"with `def` at the top of its module, not "
                                f"{getattr(self, role)!r}")


SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run_checker(*args):
    """Replace this process with `python scripts/exercises.py ARGS ...` (the command
    line's own arguments follow): a scaffold module's `python -m` entry.

    Call it before the scaffold imports JAX, which takes a second: a Ctrl-C that arrives
    meanwhile would otherwise be a KeyboardInterrupt traceback, or be swallowed by a JAX
    callback and the run go on. The signals are held, not lost, across the exec; the
    checker takes them once its own handlers are in place.
    """
    checker = Path(__file__).resolve().parents[1] / "scripts" / "exercises.py"
    signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    os.execv(sys.executable, [sys.executable, str(checker), *args, *sys.argv[1:]])

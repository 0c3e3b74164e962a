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

from lesson_code.program import STOPPING


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
        # The child process finds each by "module:function" (scripts/exercises.py).
        for role in ("reference", "attempt"):
            if not (callable(given := getattr(self, role)) and hasattr(given, "__code__")
                    and given.__qualname__ == given.__name__ != "<lambda>"):
                raise TypeError(f"exercise {self.name}: {role} must be a function defined "
                                f"with `def` at the top of its module, not {given!r}")


def run_checker(*args):
    """Replace this process with `python scripts/exercises.py ARGS ...` (the command
    line's own arguments follow): a scaffold module's `python -m` entry, called before it
    imports JAX, which takes a second: a Ctrl-C meanwhile would be a traceback, or be
    swallowed by a JAX callback. The stopping signals are held, not lost, across the exec;
    the checker takes them once its own handlers are in place."""
    checker = Path(__file__).resolve().parents[1] / "scripts" / "exercises.py"
    signal.pthread_sigmask(signal.SIG_BLOCK, STOPPING)
    os.execv(sys.executable, [sys.executable, str(checker), *args, *sys.argv[1:]])

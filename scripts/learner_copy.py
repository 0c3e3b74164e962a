"""The copy of lesson_code/ that a learner's exercise runs in.

The learner's process (scripts/runners/exercise.py) imports lesson_code from this copy
alone. In it, each function an exercise names as the lesson's solution, the checks'
answer or their comparison is a stand-in that raises CalledTheSolution: the learner's
code can import, reload or be handed any of them (`EXERCISES[...].reference`), and
what it gets says "calls the lesson's own solution" instead of an answer. The rest of
each file is as it is, line for line.
"""
import ast
import inspect
import shutil
from pathlib import Path

from scripts import display


class ChecksError(Exception):
    """A lesson's checks module cannot be used as it is: one line naming the fix."""


STANDS_IN_FOR = {"reference": "the lesson's own solution", "answer": "the check's own answer",
                 "compare": "the check's own comparison"}


def stand_ins(exercises, root):
    """{file: {function: what it is}}: the functions the learner's copy replaces, so its
    code can neither import, reload nor be handed one of them."""
    lesson_code = (root / "lesson_code").resolve()
    files = {}
    for exercise in exercises:
        for role, what in STANDS_IN_FOR.items():
            function = getattr(exercise, role)
            path = Path(inspect.getsourcefile(function)).resolve()
            if lesson_code not in path.parents:
                raise ChecksError(f"exercise {exercise.name}: its {role} is defined in "
                                  f"{display(path, root)}, outside lesson_code/ (the only "
                                  f"folder the learner's process has); move it there")
            files.setdefault(path, {})[function.__name__] = \
                f"{what} {function.__module__}.{function.__name__}"
    return files


def without(source, functions):
    """`source` with each top-level `def` in `functions` raising CalledTheSolution
    instead of running its body. Every other line keeps its number, so a traceback
    through the copy points at the lines the learner sees."""
    lines = source.splitlines(keepends=True)
    replaced = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in functions:
            first = node.body[0]
            start = first.lineno - 1
            lines[start] = (lines[start][:first.col_offset] + "from lesson_code.exercise "
                            f"import CalledTheSolution; raise CalledTheSolution("
                            f"{functions[node.name]!r})\n")
            lines[start + 1:node.end_lineno] = ["\n"] * (node.end_lineno - start - 1)
            replaced.add(node.name)
    if missing := sorted(set(functions) - replaced):
        raise ChecksError(f"{missing[0]} is not a `def` at the top of its module, so the "
                          f"learner's copy cannot stand in for it; define it there")
    return "".join(lines)


def learner_copy(folder, root, replaced):
    """lesson_code/ as the learner's process sees it: `replaced` stands in for its
    solutions and answers. The recordings (recordings/*.json, not their analyses) are
    copied beside it, for the checks that read one (the traffic a run measured): copied,
    not linked, so what the learner's code writes where it runs is lost with the copy,
    never written into the checkout."""
    shutil.copytree(root / "lesson_code", folder / "lesson_code", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "recordings").mkdir()
    for recording in sorted((root / "recordings").glob("*.json")):
        shutil.copyfile(recording, folder / "recordings" / recording.name)
    for path, functions in replaced.items():
        copy = folder / path.relative_to((root / "lesson_code").resolve().parent)
        copy.write_text(without(path.read_text(encoding="utf-8"), functions),
                        encoding="utf-8")

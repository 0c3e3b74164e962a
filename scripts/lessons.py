"""The lesson registry, read from lesson_code/lessons.toml. Imports no JAX.

The registry is data, so adding a lesson changes nothing under scripts/. Every other
module asks here which lessons exist, which module runs each, and what it produces.
"""
import tomllib
from dataclasses import dataclass, field

from scripts import REGISTRY, ROOT, display


class RegistryError(Exception):
    """lessons.toml cannot be used; str() is one line naming the entry."""


@dataclass(frozen=True)
class Lesson:
    id: str
    module: str  # dotted: lesson_code.distributed_03
    figures: tuple = ()
    devices: int = 4  # logical CPU devices of the recorded run and the notebook
    rank_module: str | None = None
    simulation: str | None = None
    sweep: str | None = None
    exercises: str | None = None  # the checks module scripts/exercises.py runs
    analysis: str | None = None  # NumPy module: analyse(variant, recording) -> dict
    analyses: tuple = ()  # recording variants ("cpu", "sweep", ...) it turns into analyses
    root: object = field(default=ROOT, compare=False, repr=False)

    def path(self, module=None):
        """The file of `module` (default: the lesson module), under this checkout."""
        return self.root / ((module or self.module).replace(".", "/") + ".py")


FIELDS = {"id", "module", "figures", "devices", "rank_module", "simulation", "sweep",
          "exercises", "analysis", "analyses"}


def load_lessons(root=ROOT):
    """{id: Lesson} in registry order; a malformed entry raises RegistryError."""
    path = root / REGISTRY.relative_to(ROOT)
    where = display(path, root)
    try:
        entries = tomllib.loads(path.read_text()).get("lesson", [])
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise RegistryError(f"{where}: cannot be read ({error}); fix the file") from None
    lessons = {}
    for number, entry in enumerate(entries, 1):
        unknown = set(entry) - FIELDS
        if unknown or not {"id", "module"} <= set(entry):
            raise RegistryError(f"{where}: lesson entry {number} needs id and module and "
                                f"takes only {', '.join(sorted(FIELDS))}")
        lesson = Lesson(**{**entry, "figures": tuple(entry.get("figures", ())),
                           "analyses": tuple(entry.get("analyses", ())), "root": root})
        if lesson.analyses and not lesson.analysis:
            raise RegistryError(f"{where}: lesson {lesson.id} lists analyses but names no "
                                f"`analysis` module; add one or drop `analyses`")
        for module in (lesson.module, lesson.rank_module, lesson.simulation, lesson.sweep,
                       lesson.exercises, lesson.analysis):
            if module and not lesson.path(module).exists():
                raise RegistryError(f"{where}: lesson {lesson.id} names {module}, but "
                                    f"{display(lesson.path(module), root)} does not exist")
        lessons[lesson.id] = lesson
    return lessons


def load_course(root=ROOT):
    """The registry's `[course]` table: {"title", "description"}, what the site is named
    after (the lessons are its pages); RegistryError when it is missing or incomplete."""
    path = root / REGISTRY.relative_to(ROOT)
    where = display(path, root)
    try:
        course = tomllib.loads(path.read_text()).get("course")
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise RegistryError(f"{where}: cannot be read ({error}); fix the file") from None
    if not isinstance(course, dict) or not all(
            isinstance(course.get(key), str) and course[key] for key in ("title", "description")):
        raise RegistryError(f"{where}: needs a [course] table with a title and a description "
                            f"(the site's name and summary)")
    return course

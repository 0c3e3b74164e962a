"""The lesson registry, read from lesson_code/lessons.toml. Imports no JAX.

The registry is data, so adding a lesson changes nothing under scripts/. Every other
module asks here which lessons exist, which module runs each, and what it produces.

It is also untrusted input (a pull request can change it): an id becomes file names and a
module becomes code that record.py executes. So every field is checked here, before
anything runs, against the one table FIELDS: an id matches the recordings' schema, a
module is a file inside lesson_code/, `devices` is a whole number a CPU can simulate.
A field that fails is refused in one line naming the file, the entry, the field and the fix.
"""
import json
import re
import tomllib
from dataclasses import dataclass, field

from scripts import REGISTRY, ROOT, display
from scripts.figures import KINDS

# The cap on logical CPU devices a lesson may ask for (1-256).
MAX_DEVICES = 256
MODULE = re.compile(r"lesson_code(\.[A-Za-z_][A-Za-z0-9_]*)+")


class RegistryError(Exception):
    """lessons.toml cannot be used; str() is one line naming the entry. Exit status 2:
    nothing can run until the registry is fixed."""

    exit_status = 2


@dataclass(frozen=True)
class Lesson:
    id: str
    module: str  # dotted: lesson_code.<module>
    figures: tuple = ()
    devices: int = 4  # logical CPU devices of the recorded run and the notebook
    rank_module: str | None = None
    going_further: str | None = None  # more steps, run after the lesson's in its notebook
    simulation: str | None = None
    sweep: str | None = None
    exercises: str | None = None  # the checks module scripts/exercises.py runs
    analysis: str | None = None  # NumPy module: analyse(variant, recording) -> dict
    analyses: tuple = ()  # recording variants ("cpu", "sweep", ...) it turns into analyses
    data_schema: str | None = None  # JSON Schema of its recordings' `data`, from the root
    root: object = field(default=ROOT, compare=False, repr=False)

    def path(self, module=None):
        """The file of `module` (default: the lesson module), under this checkout."""
        return self.root / ((module or self.module).replace(".", "/") + ".py")

    def also_run_with(self, module=None):
        """The files whose results a recording of `module` (default: the lesson module)
        stores besides its own: the lesson's one execution runs its going-further module
        too (its cells follow the lesson's), so that module is an input of the recording."""
        if (module or self.module) == self.module and self.going_further:
            return (self.path(self.going_further),)
        return ()


def lesson_id_rule(root):
    """The recordings' lessonId pattern and length, from recordings/schema.json, so an id
    the registry accepts is one every recording of it will carry."""
    try:
        schema = json.loads((root / "recordings" / "schema.json").read_text(encoding="utf-8"))
        rule = schema["$defs"]["header"]["properties"]["lessonId"]
        return re.compile(rule["pattern"]), rule["maxLength"]
    except (OSError, ValueError, RecursionError, KeyError, TypeError, re.error):
        raise RegistryError("recordings/schema.json: its header has no readable lessonId "
                            "pattern; run `git checkout -- recordings/schema.json`") from None


def check_id(value, root):
    pattern, longest = lesson_id_rule(root)
    if not isinstance(value, str) or len(value) > longest or not pattern.match(value):
        return (f"lowercase letters and digits in dash-separated words, at most {longest} "
                f"characters, such as \"collectives-01\"")
    return None


def check_module(value, root):
    if not isinstance(value, str) or not MODULE.fullmatch(value):
        return "a dotted module name inside lesson_code/, such as \"lesson_code.my_lesson\""
    path = (root / (value.replace(".", "/") + ".py")).resolve()
    inside = (root / "lesson_code").resolve()
    if inside not in path.parents or not path.is_file():
        return f"an existing module file; {display(path, root)} is not one inside lesson_code/"
    return None


def check_devices(value, root):
    # bool is an int in Python: `devices = true` must not pass as 1.
    if type(value) is not int or not 1 <= value <= MAX_DEVICES:
        return f"a whole number from 1 to {MAX_DEVICES}, such as 4"
    return None


def check_figures(value, root):
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value) \
            or len(set(value)) != len(value) or not all(kind in KINDS for kind in value):
        return (f"a list of distinct figure kinds from {', '.join(KINDS)}, or a lesson's "
                f"own renderer module (\"lesson_code.<module>\")")
    return None


# The recordings a lesson's analysis may read, by variant (lessons.toml `analyses`).
ANALYSED = re.compile(r"[a-z][a-z0-9-]{0,31}")


def check_analyses(value, root):
    if not isinstance(value, list) or not all(isinstance(v, str) and ANALYSED.fullmatch(v)
                                              for v in value) or len(set(value)) != len(value):
        return "a list of distinct recording variants, such as [\"cpu\", \"sweep\"]"
    return None


# A data schema is a JSON file beside the lesson (lessons.toml `data_schema`).
DATA_SCHEMA = re.compile(r"lesson_code/([A-Za-z0-9_][A-Za-z0-9_.-]*/)*[A-Za-z0-9_][A-Za-z0-9_.-]*"
                         r"\.schema\.json")


def check_data_schema(value, root):
    if not isinstance(value, str) or not DATA_SCHEMA.fullmatch(value):
        return ("a path inside lesson_code/ ending in .schema.json, such as "
                "\"lesson_code/my_lesson.schema.json\"")
    path = (root / value).resolve()
    if (root / "lesson_code").resolve() not in path.parents or not path.is_file():
        return f"an existing file; {display(path, root)} is not one inside lesson_code/"
    return None


# Each field: (required, its check). A new field is one line here and one in Lesson.
FIELDS = {
    "id": (True, check_id),
    "module": (True, check_module),
    "figures": (False, check_figures),
    "devices": (False, check_devices),
    "rank_module": (False, check_module),
    "going_further": (False, check_module),
    "simulation": (False, check_module),
    "sweep": (False, check_module),
    "exercises": (False, check_module),
    "analysis": (False, check_module),
    "analyses": (False, check_analyses),
    "data_schema": (False, check_data_schema),
}


def read_entries(path, where):
    try:
        text = path.read_bytes().decode("utf-8")
        registry = tomllib.loads(text)
    except OSError as error:
        raise RegistryError(f"{where}: cannot be read ({error.strerror}); run "
                            f"`git checkout -- {where}`") from None
    except UnicodeDecodeError as error:
        raise RegistryError(f"{where}: not UTF-8 (byte {error.start}); save it as UTF-8") \
            from None
    except tomllib.TOMLDecodeError as error:
        raise RegistryError(f"{where}: not valid TOML ({error}); fix the file") from None
    entries = registry.get("lesson", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise RegistryError(f"{where}: `lesson` must be [[lesson]] tables; see the comment "
                            f"at the top of the file")
    if not entries:
        raise RegistryError(f"{where}: no [[lesson]] entry; add one (lesson_code/CONTRACT.md "
                            f"says what a lesson provides)")
    return entries


def load_lessons(root=ROOT):
    """{id: Lesson} in registry order; a malformed entry raises RegistryError."""
    path = root / REGISTRY.relative_to(ROOT)
    where = display(path, root)
    lessons = {}
    for number, entry in enumerate(read_entries(path, where), 1):
        name = entry.get("id") if isinstance(entry.get("id"), str) else f"entry {number}"
        unknown = sorted(entry.keys() - FIELDS.keys())
        if unknown:
            raise RegistryError(f"{where}: lesson {name!r} has an unknown field "
                                f"{unknown[0]!r}; the fields are {', '.join(FIELDS)}")
        for key, (required, check) in FIELDS.items():
            if key not in entry:
                if required:
                    raise RegistryError(f"{where}: lesson {name!r} has no {key!r}; add it")
                continue
            fix = check(entry[key], root)
            if fix:
                raise RegistryError(f"{where}: lesson {name!r}, field {key!r} = "
                                    f"{entry[key]!r:.80}: must be {fix}")
        if entry["id"] in lessons:
            raise RegistryError(f"{where}: lesson id {entry['id']!r} is registered twice; "
                                f"give each [[lesson]] its own id")
        if entry.get("analyses") and not entry.get("analysis"):
            raise RegistryError(f"{where}: lesson {name!r} lists analyses but names no "
                                f"`analysis` module; add one or drop `analyses`")
        lessons[entry["id"]] = Lesson(**{**entry, "figures": tuple(entry.get("figures", ())),
                                         "analyses": tuple(entry.get("analyses", ())),
                                         "root": root})
    return lessons


def first_of(items, limit=5, separator=", "):
    """`items` joined for one error line: the first `limit`, then how many more. An error
    line quotes what it names; with 10,000 lessons, all of them made a line of 950 kB."""
    items = list(items)
    shown = separator.join(items[:limit])
    return shown if len(items) <= limit else f"{shown}{separator}and {len(items) - limit:,} more"


def load_course(root=ROOT):
    """The registry's `[course]` table: {"title", "description"}, what the site is named
    after (the lessons are its pages); RegistryError when it is missing or incomplete."""
    path = root / REGISTRY.relative_to(ROOT)
    where = display(path, root)
    try:
        course = tomllib.loads(path.read_text(encoding="utf-8")).get("course")
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise RegistryError(f"{where}: cannot be read ({error}); fix the file") from None
    if not isinstance(course, dict) or not all(
            isinstance(course.get(key), str) and course[key] for key in ("title", "description")):
        raise RegistryError(f"{where}: needs a [course] table with a title and a description "
                            f"(the site's name and summary)")
    return course

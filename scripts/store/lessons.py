"""The lesson registry, lesson_code/lessons.toml, held to lesson_code/lessons.schema.json.

Untrusted input (an id becomes file names, a module code record.py runs), so it is checked
before anything runs, in one line naming the entry, the field and what it must be. Checked
here, beyond the schema: modules inside lesson_code/, ids unique, figure kinds known.
"""
import tomllib
from dataclasses import dataclass, field

from scripts import REGISTRY, ROOT, display
from scripts.figures import KINDS
from scripts.store.schemas import SchemaError, compiled, schema_file

SCHEMA = "lesson_code/lessons.schema.json"
# An id follows the recordings' lessonId rule, so every recording of it can carry it.
SHARED = "recordings/schema.json"
NO_LESSON = "no [[lesson]] entry; add one (lesson_code/CONTRACT.md says what a lesson provides)"
NOT_TABLES = "`lesson` must be [[lesson]] tables; see the comment at the top of the file"


class RegistryError(Exception):
    """lessons.toml cannot be used; str() is one line naming the entry."""

    exit_status = 2


@dataclass(frozen=True)
class Lesson:
    id: str
    module: str  # dotted: lesson_code.<module>
    figures: tuple = ()
    devices: int = 4  # logical CPU devices of the recorded run and the notebook
    device_counts: tuple = ()  # the only counts its program runs on; () for any
    rank_module: str | None = None
    going_further: str | None = None  # more steps, run after the lesson's in its notebook
    simulation: str | None = None
    sweep: str | None = None
    tpu_sweep: str | None = None  # measured on TPU chips instead of `sweep`
    exercises: str | None = None  # the checks module scripts/exercises.py runs
    analysis: str | None = None  # NumPy module: analyse(variant, recording) -> dict
    analyses: tuple = ()  # recording variants ("cpu", "sweep", ...) it turns into analyses
    data_schema: str | None = None  # JSON Schema of its recordings' `data`, from the root
    root: object = field(default=ROOT, compare=False, repr=False)
    # How many lessons its registry lists: a fix names this one (--lesson) when more do.
    registered: int = field(default=1, compare=False, repr=False)

    def path(self, module=None):
        return self.root / ((module or self.module).replace(".", "/") + ".py")

    def sweep_on(self, platform):
        return self.tpu_sweep if platform == "tpu" and self.tpu_sweep else self.sweep

    def also_run_with(self, module=None):
        """More code a recording of `module` stores results of: the going-further module."""
        if (module or self.module) == self.module and self.going_further:
            return (self.path(self.going_further),)
        return ()


def load_lessons(root=ROOT):
    """{id: Lesson} in registry order; a malformed entry raises RegistryError."""
    registry, schema, where = read_registry(root)
    inside = (root / "lesson_code").resolve()
    lessons = {}
    files = [key for key, value in schema.schema["$defs"]["lesson"]["properties"].items()
             if value.get("$ref") == "#/$defs/module"] + ["data_schema"]  # files record.py reads
    for entry in registry["lesson"]:
        for key in [key for key in files if key in entry]:
            name = entry[key] if key == "data_schema" else entry[key].replace(".", "/") + ".py"
            path = (root / name).resolve()  # a link may lead out
            if not (path.is_file() and inside in path.parents):
                raise field_refusal(where, entry, key, f"an existing "
                                    f"{'module ' * (key != 'data_schema')}file; "
                                    f"{display(path, root)} is not one inside lesson_code/")
        if unknown := [kind for kind in entry.get("figures", ()) if kind not in KINDS]:
            raise field_refusal(where, entry, "figures", f"{rule(schema, 'figures')}; "
                                f"{unknown[0]!r} is none of {', '.join(KINDS)}")
        if entry.get("device_counts") and entry.get("devices", 4) not in entry["device_counts"]:
            raise field_refusal(where, entry, "device_counts", rule(schema, "device_counts"))
        if entry["id"] in lessons:
            raise RegistryError(f"{where}: lesson id {entry['id']!r} is registered twice; "
                                f"give each [[lesson]] its own id")
        lessons[entry["id"]] = Lesson(**{**entry, **{key: tuple(entry.get(key, ())) for key in
                                                     ("figures", "analyses", "device_counts")},
                                         "devices": int(entry.get("devices", 4)),  # 4.0 is 4
                                         "root": root, "registered": len(registry["lesson"])})
    return lessons


def chosen_lessons(lessons, lesson_id=None, having="module"):
    """[the lesson `--lesson` names], else every lesson, of those with a `having` module;
    one line listing the lessons there are for an unknown id, or saying none has one."""
    if lesson_id is not None and lesson_id not in lessons:
        raise RegistryError(f"--lesson {lesson_id}: no such lesson in lesson_code/lessons.toml; "
                            f"known: {first_of(lessons)}")
    chosen = [lesson for lesson in lessons.values()
              if lesson_id in (None, lesson.id) and getattr(lesson, having)]
    if not chosen:
        raise RegistryError(f"{lesson_id or 'no lesson'} has no `{having}` module in "
                            f"lesson_code/lessons.toml; add one (lesson_code/CONTRACT.md)")
    return chosen


def field_refusal(where, entry, key, fix):  # of an entry that fits the schema: it has an id
    return RegistryError(f"{where}: lesson {entry['id']!r}, field {key!r} = "
                         f"{entry[key]!r:.80}: must be {fix}")


def load_course(root=ROOT):
    """The registry's `[course]` table: {"title", "description"}."""
    registry, schema, where = read_registry(root)
    if "course" not in registry:
        raise RegistryError(f"{where}: needs "
                            f"{schema.schema['properties']['course']['description']}")
    return registry["course"]


def read_registry(root):
    """(lessons.toml, its Schema, its name as shown) once the file fits the schema."""
    path = root / REGISTRY.relative_to(ROOT)
    where = display(path, root)
    try:
        registry = tomllib.loads(path.read_bytes().decode("utf-8"))
    except OSError as error:
        raise RegistryError(f"{where}: cannot be read ({error.strerror}); run "
                            f"`git checkout -- {where}`") from None
    except UnicodeDecodeError as error:
        raise RegistryError(f"{where}: not UTF-8 (byte {error.start}); save it as UTF-8") from None
    except tomllib.TOMLDecodeError as error:
        raise RegistryError(f"{where}: not valid TOML ({error}); fix the file") from None
    except RecursionError:  # tomllib reads nested arrays and tables by recursing
        raise RegistryError(f"{where}: nested too deeply to read; fix the file") from None
    try:
        schema = compiled(root / SCHEMA, schema_file(root / SCHEMA),
                          (root / SHARED, schema_file(root / SHARED)))
    except SchemaError as error:
        raise RegistryError(str(error)) from None
    if (error := schema.error(registry)) is not None:
        raise RegistryError(f"{where}: {refusal(error, registry, schema)}")
    return registry, schema, where


def refusal(error, registry, schema):
    """The one line for the schema's most telling error: where it is and what it needs."""
    path = list(error.absolute_path)
    if path[:1] == ["course"]:
        return f"needs {schema.schema['properties']['course']['description']}"
    entry = registry["lesson"][path[1]] if len(path) > 1 else None
    if not isinstance(entry, dict):
        return NO_LESSON if registry.get("lesson") in (None, []) else NOT_TABLES
    name = entry.get("id") if isinstance(entry.get("id"), str) else f"entry {path[1] + 1}"
    if len(path) > 2:
        return (f"lesson {name!r}, field {path[2]!r} = {entry[path[2]]!r:.80}: must be "
                f"{rule(schema, path[2])}")
    lesson = schema.schema["$defs"]["lesson"]
    fields = lesson["properties"]
    if error.validator == "required":
        missing = next(key for key in lesson["required"] if key not in entry)
        return f"lesson {name!r} has no {missing!r}; add it"
    if error.validator == "dependentRequired":
        return (f"lesson {name!r} lists analyses but names no `analysis` module; add one or "
                f"drop `analyses`")
    return (f"lesson {name!r} has an unknown field {sorted(entry.keys() - fields.keys())[0]!r}; "
            f"the fields are {', '.join(fields)}")


def rule(schema, key):
    """What a lesson's field must be: its description in the schema (or its $ref's)."""
    defs = schema.schema["$defs"]
    found = defs["lesson"]["properties"][key]
    return found.get("description") or defs[found["$ref"].rsplit("/", 1)[1]]["description"]


def first_of(items, limit=5, separator=", "):
    """`items` joined for one error line: the first `limit`, then how many more."""
    items = list(items)
    shown = separator.join(items[:limit])
    return shown if len(items) <= limit else f"{shown}{separator}and {len(items) - limit:,} more"

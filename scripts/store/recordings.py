"""Every kind of recording: its header, its validation, and the one reader of committed
JSON (a pull request or a fetched file can hold anything).

A recording fits recordings/schema.json, then its lesson's `data_schema`; a file that does
not stops record.py, bench.py, --check and the build alike with one line naming it.
"""
import errno
import functools
import json
import math
import operator
import os
import platform
import stat
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from scripts import RECORDINGS, ROOT, display
from scripts.plumbing.checkout import no_link
from scripts.store.hashes import combined_hash, content_files, digest_bytes
from scripts.store.schemas import SchemaError, compiled, schema_file

SCHEMA_PATH = RECORDINGS / "schema.json"
RECORD = "python scripts/record.py"


class RecordingError(Exception):
    """A recording that cannot be used; str() is one line: `what`, then the `fix` if any."""

    def __init__(self, what, fix=None):
        super().__init__(f"{what}; run `{fix}`" if fix else what)
        self.what, self.fix = what, fix


# The largest recording, a sweep, is under 1 MB; a link to /dev/zero took all of memory.
MAX_JSON_BYTES = 32 * 2**20
# What a page can show of a lesson's output: the schema's stdout maxLength, and lines.
MAX_STDOUT_CHARACTERS = 1_000_000
MAX_STDOUT_LINES = 2_000


def read_bytes(path, fix=None, limit=MAX_JSON_BYTES):
    """The bytes of the regular file at `path`, at most `limit`; RecordingError for a link,
    a folder, a device or pipe (opened without waiting), or a larger file."""
    where = display(path)
    try:
        with open(path, "rb", opener=no_link) as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise RecordingError(f"{where}: not a regular file (a device, pipe or socket); "
                                     f"remove it", fix)
            data = file.read(limit + 1)
    except FileNotFoundError:
        raise RecordingError(f"{where}: missing", fix) from None
    except IsADirectoryError:
        raise RecordingError(f"{where}: is a directory, not a recording (remove it)", fix) from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise RecordingError(f"{where}: is a symbolic link; a recording is a file of "
                                 f"its own: `git rm {where}`", fix) from None
        raise RecordingError(f"{where}: cannot be read ({error.strerror})") from None
    if len(data) > limit:
        raise RecordingError(f"{where}: larger than {limit // 2**20} MiB, more than "
                             f"record.py writes", fix)
    return data


def parse_json(data, where, fix=None):
    """JSON text as Python values; RecordingError naming `where` for text that is not UTF-8
    JSON or that Python cannot hold (a 5,000-digit integer, arrays nested too deep)."""
    try:
        return json.loads(data.decode("utf-8") if isinstance(data, bytes) else data)
    except RecursionError:
        raise RecordingError(f"{where}: not valid JSON (nested deeper than a JSON reader "
                             f"goes)", fix) from None
    except ValueError as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise RecordingError(f"{where}: not valid JSON ({str(error)[:160]})", fix) from None


def read_json(path, fix=None):
    return parse_json(read_bytes(path, fix), display(path), fix)


# The `$defs` entry of a lesson's data schema that its sweep recording must also fit.
SWEEP_PART = "sweep"


def schemas_for(lesson):
    """(the shared schema, the lesson's data schema, its sweep part); None where none."""
    try:
        shared = SCHEMA_PATH, schema_file(SCHEMA_PATH)
        if not getattr(lesson, "data_schema", None):
            return compiled(*shared), None, None
        path = lesson.root / lesson.data_schema
        data = schema_file(path)
        return (compiled(*shared), compiled(path, data, shared),
                compiled(path, data, shared, SWEEP_PART))
    except SchemaError as error:
        raise RecordingError(error.what, error.fix) from None


def registered_lesson(lesson_id, root=ROOT):
    from scripts.store.lessons import RegistryError, load_lessons

    try:
        return load_lessons(root).get(lesson_id) if isinstance(lesson_id, str) else None
    except RegistryError as error:
        raise RecordingError(str(error)) from None


def non_finite(value, path=()):
    """The path of the first NaN or infinity in `value` (JSON Schema allows them), or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return path
    children = value.items() if isinstance(value, dict) else \
        enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        if (found := non_finite(child, (*path, key))) is not None:
            return found
    return None


def validate(recording, where="recording", fix=RECORD, lesson=None):
    """Raise RecordingError with the first violation, phrased for a person."""
    try:
        shared = schemas_for(None)[0]  # first: an unreadable schema is named before the file
        if (bad_number := non_finite(recording)) is not None:
            field = "/".join(map(str, bad_number)) or "(top level)"
            value = functools.reduce(operator.getitem, bad_number, recording)
            raise RecordingError(f"{where}: invalid at {field}: {value} is not a finite number, "
                                 f"and a recording holds only those", fix)
        refuse(shared, recording, (), where, fix)
        stdout = recording.get("stdout")
        if isinstance(stdout, str) and len(stdout.splitlines()) > MAX_STDOUT_LINES:
            raise RecordingError(f"{where}: invalid at stdout: {len(stdout.splitlines())} lines, "
                                 f"and a recording holds at most {MAX_STDOUT_LINES}", fix)
        if lesson is None:
            lesson = registered_lesson(recording["lessonId"])
        elif recording["lessonId"] != lesson.id:
            raise RecordingError(f"{where}: invalid at lessonId: it records "
                                 f"{recording['lessonId']!r}, and this file is {lesson.id}'s", fix)
        _, data, sweep = schemas_for(lesson)
        if data is not None and recording["kind"] == "executed":
            refuse(data, recording["data"], ("data",), where, fix)
        if sweep is not None and recording["kind"] == "sweep":
            refuse(sweep, recording, (), where, fix)
        return recording
    except RecursionError:  # values nested deeper than the checks can walk
        raise RecordingError(f"{where}: nested too deeply to be a recording", fix) from None


def refuse(schema, value, prefix, where, fix):
    """RecordingError for `schema`'s most telling error on `value` (at `prefix`), if any."""
    if (error := schema.error(value)) is not None:
        field = "/".join(str(part) for part in (*prefix, *error.absolute_path)) or "(top level)"
        message = error.message if len(error.message) < 160 else error.message[:157] + "..."
        raise RecordingError(f"{where}: invalid at {field}: {message}", fix)


# (bytes' digest, lesson, Schemas) found valid: a run reads a recording for each figure.
_VALID = set()


def load_recording(path, fix=RECORD, lesson=None):
    """The validated recording at `path`; `fix`: the command that remakes it."""
    where = display(path)
    data = read_bytes(path, fix)
    recording = parse_json(data, where, fix)
    if not isinstance(recording, dict):
        raise RecordingError(f"{where}: expected a JSON object", fix)
    lesson = lesson or registered_lesson(recording.get("lessonId"))  # None: not a str
    key = (digest_bytes(data), getattr(lesson, "id", None), *schemas_for(lesson))
    if key not in _VALID:
        validate(recording, where, fix, lesson)
        _VALID.add(key)
    return recording


def source_commit(root, files):
    """{HEAD's sha, whether `files` are as HEAD holds them}; None outside a git checkout."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30)

    try:
        top, head = git("rev-parse", "--show-toplevel"), git("rev-parse", "HEAD")
        if top.returncode or head.returncode or Path(top.stdout.strip()) != Path(root):
            return None
        changed = git("status", "--porcelain", "--", *files)
    except (OSError, subprocess.SubprocessError):
        return None
    return None if changed.returncode else {"sha": head.stdout.strip(),
                                            "clean": changed.stdout.strip() == ""}


def header(lesson_id, kind, module_path, environment, root=ROOT, extra=(), files=None):
    """The fields every kind shares; `files`: the contentFiles as the run's plan read them."""
    files = files or content_files(module_path, root, extra)
    multiprocess = "_multiprocess" if environment.get("processCount", 1) > 1 else ""
    commit = source_commit(Path(root).resolve(), files)
    return {
        "schemaVersion": 1, "lessonId": lesson_id, "kind": kind,
        "contentHash": combined_hash(files),
        "generatedAt": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "provenance": f"recorded_{environment['backend']}{multiprocess}_computation",
        "environment": {"python": platform.python_version(), "platform": platform.platform(),
                        "cpuCount": os.cpu_count(), **environment},
        "contentFiles": files,
        **({"commit": commit} if commit else {}),
    }


def dumps(recording):
    return json.dumps(recording, indent=2, ensure_ascii=False, allow_nan=False) + "\n"

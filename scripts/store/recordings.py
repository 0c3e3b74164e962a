"""Every kind of recording: its header, validation, reading, and the one atomic writer
every output of the chain goes through. Imports no JAX.

Validation is two schemas: recordings/schema.json, the header every recording shares and
each kind's envelope, then the lesson's own data schema (lesson_code/lessons.toml
`data_schema`, a file beside the lesson) for the `data` of its executed recordings. A
lesson without one still gets the header checked. Every executed value the site shows
comes from one of these files, so a file that does not validate stops record.py,
bench.py, --check and the build alike with one line naming it, never a traceback.

Every committed JSON file is read here (read_json): a pull request or a fetched file can
hold anything, so it is read only if it is a regular file, not a link, of a bounded size,
and JSON that Python cannot hold (an integer of 5,000 digits, arrays nested 100,000
deep) is refused in one line like any other malformed file.
"""
import errno
import json
import math
import os
import platform
import re
import shutil
import stat
import subprocess
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from scripts import RECORDINGS, ROOT, display
from scripts.proc import interrupts
from scripts.store.hashes import combined_hash, content_files
from scripts.proc.interrupts import signals_deferred
from scripts.proc.scratch import running

SCHEMA_PATH = RECORDINGS / "schema.json"
RECORD = "python scripts/record.py"


class RecordingError(Exception):
    """A recording that cannot be used or written; str() is one line naming the file.

    `what` says what is wrong and where; `fix` is the command that remakes the file (None
    where no command can), so a caller with a better fix can drop it.
    """

    def __init__(self, what, fix=None):
        super().__init__(f"{what}; run `{fix}`" if fix else what)
        self.what, self.fix = what, fix


# The most a JSON file read here may hold. The largest recording, a sweep, is under
# 1 MB; a file far past that is no recording, and reading it whole could take all of
# memory (a link to /dev/zero did).
MAX_JSON_BYTES = 32 * 2**20
# What a page can show of a lesson's output: the schema's stdout maxLength, and lines.
MAX_STDOUT_CHARACTERS = 1_000_000
MAX_STDOUT_LINES = 2_000


def read_bytes(path, fix=None, limit=MAX_JSON_BYTES):
    """The bytes of the regular file at `path`, at most `limit` of them; RecordingError
    (one line naming it) for a link, a folder, a device or pipe, or a larger file. Opened
    without following a link and without waiting (a pipe would block), then checked."""
    where = display(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise RecordingError(f"{where}: missing", fix) from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise RecordingError(f"{where}: is a symbolic link; a recording is a file of "
                                 f"its own: `git rm {where}`", fix) from None
        raise RecordingError(f"{where}: cannot be read ({error.strerror})") from None
    try:
        kind = os.fstat(fd).st_mode
        if stat.S_ISDIR(kind):
            raise RecordingError(f"{where}: is a directory, not a recording (remove it)",
                                 fix)
        if not stat.S_ISREG(kind):
            raise RecordingError(f"{where}: not a regular file (a device, pipe or socket); "
                                 f"remove it", fix)
        chunks, size = [], 0
        while size <= limit and (chunk := os.read(fd, min(1 << 20, limit + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as error:
        raise RecordingError(f"{where}: cannot be read ({error.strerror})") from None
    finally:
        os.close(fd)
    if size > limit:
        raise RecordingError(f"{where}: larger than {limit // 2**20} MiB, which no recording "
                             f"is", fix)
    return b"".join(chunks)


def parse_json(data, where, fix=None):
    """JSON text (bytes or str) as Python values; RecordingError naming `where` for text
    that is not UTF-8 JSON, or that Python cannot hold: ValueError for an integer past its
    4,300 digits, RecursionError for arrays nested past its parser's depth."""
    try:
        return json.loads(data.decode("utf-8") if isinstance(data, bytes) else data)
    except RecursionError:
        raise RecordingError(f"{where}: not valid JSON (nested deeper than a JSON reader "
                             f"goes)", fix) from None
    except ValueError as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise RecordingError(f"{where}: not valid JSON ({str(error)[:160]})", fix) from None


def read_json(path, fix=None, limit=MAX_JSON_BYTES):
    """The JSON in the file at `path` (read_bytes, then parse_json)."""
    return parse_json(read_bytes(path, fix, limit), display(path), fix)


def read_schema(path):
    """The JSON of a schema file; RecordingError naming it when it cannot be read."""
    try:
        return read_json(path)
    except RecordingError as error:
        raise RecordingError(f"{display(path)}: the schema cannot be read "
                             f"({error.what.removeprefix(display(path) + ': ')})",
                             f"git checkout -- {display(path)}") from None


def jsonschema_module():
    try:
        import jsonschema
    except ImportError:
        raise RecordingError("the jsonschema package is missing from this Python; run "
                             "`make install` and use .venv/bin/python") from None
    return jsonschema


def validator():
    """The shared schema's validator: the header and each kind's envelope."""
    return jsonschema_module().Draft202012Validator(read_schema(SCHEMA_PATH))


# What of a lesson's sweep recording is the lesson's own (the names of its programs): the
# `$defs/sweep` of its data schema, which a sweep recording must also fit.
SWEEP_PART = "sweep"


def data_validator(lesson, part=None):
    """The validator of the lesson's own data schema (None when it names none), or, with
    `part`, of that `$defs` entry of it (None when it has none). The shared schema is
    there under its $id, so the lesson's may reuse its $defs
    (`recordings/schema.json#/$defs/host`) rather than copy them."""
    path = data_schema_path(lesson)
    if path is None:
        return None
    schema, shared = read_schema(path), read_schema(SCHEMA_PATH)
    if part is not None:
        if part not in schema.get("$defs", {}):
            return None
        schema = {"$schema": schema.get("$schema"), "$defs": schema["$defs"],
                  "$ref": f"#/$defs/{part}"}
    key = (str(path), json.dumps(schema, sort_keys=True), json.dumps(shared, sort_keys=True))
    if key not in _DATA_VALIDATORS:  # checked and built once per schema text and process
        _DATA_VALIDATORS[key] = built_data_validator(path, schema, shared)
    return _DATA_VALIDATORS[key]


_DATA_VALIDATORS = {}


def built_data_validator(path, schema, shared):
    jsonschema = jsonschema_module()
    from referencing import Registry, Resource

    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as error:
        raise RecordingError(f"{display(path)}: not a JSON Schema (at "
                             f"{'/'.join(map(str, error.absolute_path)) or '(top level)'}: "
                             f"{error.message[:120]}); fix it, or `git checkout -- "
                             f"{display(path)}`") from None
    registry = Registry().with_resource(shared.get("$id", "recordings/schema.json"),
                                        Resource.from_contents(shared))
    return jsonschema.Draft202012Validator(schema, registry=registry)


def data_schema_path(lesson):
    """The file of the lesson's data schema (lessons.toml `data_schema`), or None."""
    schema = getattr(lesson, "data_schema", None)
    return lesson.root / schema if schema else None


def registered_lesson(lesson_id, root=ROOT):
    """The registry's lesson of that id, or None: whose data schema a recording that
    names no lesson of its own (a file checked on its own) is held to."""
    from scripts.store.lessons import RegistryError, load_lessons

    try:
        return load_lessons(root).get(lesson_id) if isinstance(lesson_id, str) else None
    except RegistryError as error:
        raise RecordingError(str(error)) from None


def non_finite(value, path=()):
    """The path of the first NaN or infinity in `value`, or None. JSON has no such
    numbers: Python writes them as bare NaN/Infinity tokens other readers refuse, and the
    schema's "number" lets them through."""
    if isinstance(value, float) and not math.isfinite(value):
        return path
    children = value.items() if isinstance(value, dict) else \
        enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        found = non_finite(child, (*path, key))
        if found is not None:
            return found
    return None


def validate(recording, where="recording", fix=RECORD, lesson=None):
    """Raise RecordingError with the first schema violation, phrased for a person.

    `lesson`: the registered lesson the file belongs to (its name says so); the recording
    must name that lesson, and its `data` must fit the lesson's data schema. Left out, it
    is the registered lesson the recording names (none: the header alone is checked).
    Every limit a recording is held to is here, so every reader applies it: the schema,
    finite numbers, and the stdout a page can show.
    """
    try:
        return validated(recording, where, fix, lesson)
    except RecursionError:  # values nested deeper than the checks below can walk
        raise RecordingError(f"{where}: nested too deeply to be a recording", fix) from None


def validated(recording, where, fix, lesson):
    checker = validator()  # first: a missing jsonschema is one line naming `make install`
    bad_number = non_finite(recording)
    if bad_number is not None:
        field = "/".join(map(str, bad_number)) or "(top level)"
        raise RecordingError(f"{where}: invalid at {field}: {lookup_path(recording, bad_number)}"
                             f" is not a finite number, and a recording holds only those", fix)
    first_violation(checker, recording, (), where, fix)
    stdout = recording.get("stdout")
    if isinstance(stdout, str) and len(stdout.splitlines()) > MAX_STDOUT_LINES:
        raise RecordingError(f"{where}: invalid at stdout: {len(stdout.splitlines())} lines, "
                             f"and a recording holds at most {MAX_STDOUT_LINES}", fix)
    if lesson is None:
        lesson = registered_lesson(recording["lessonId"])
    elif recording["lessonId"] != lesson.id:
        raise RecordingError(f"{where}: invalid at lessonId: it records "
                             f"{recording['lessonId']!r}, and this file is {lesson.id}'s", fix)
    data_checker = data_validator(lesson) if lesson is not None else None
    if data_checker is not None and recording["kind"] == "executed":
        first_violation(data_checker, recording["data"], ("data",), where, fix)
    sweep_checker = data_validator(lesson, SWEEP_PART) if lesson is not None else None
    if sweep_checker is not None and recording["kind"] == "sweep":
        first_violation(sweep_checker, recording, (), where, fix)
    return recording


def first_violation(checker, value, prefix, where, fix):
    """Raise RecordingError for the most telling error of `checker` on `value`, whose
    place in the recording is `prefix`."""
    from jsonschema.exceptions import best_match

    error = best_match(checker.iter_errors(value))
    if error is not None:
        field = "/".join(str(part) for part in (*prefix, *error.absolute_path)) or \
            "(top level)"
        message = error.message if len(error.message) < 160 else error.message[:157] + "..."
        raise RecordingError(f"{where}: invalid at {field}: {message}", fix)


def load_recording(path, fix=RECORD, lesson=None):
    """The validated recording at `path`; `fix` is the command that remakes it (the
    registry's, scripts/store/outputs.py); `lesson`, the lesson it belongs to (validate())."""
    path = Path(path)
    where = display(path)
    recording = read_json(path, fix)
    if not isinstance(recording, dict):
        raise RecordingError(f"{where}: expected a JSON object", fix)
    if lesson is None and isinstance(recording.get("lessonId"), str):
        lesson = registered_lesson(recording["lessonId"])
    validate(recording, where, fix, lesson)
    return recording


def host_environment():
    """What every recording says about the host, whatever its kind."""
    return {"python": platform.python_version(), "platform": platform.platform(),
            "cpuCount": os.cpu_count()}


def source_commit(root, files):
    """The commit a recording's inputs come from: HEAD's sha, and whether each of `files`
    (its contentFiles) is as HEAD holds it; None outside a git checkout of its own (a
    copied tree, an archive), where there is no commit to name."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                              timeout=30)

    try:
        top, head = git("rev-parse", "--show-toplevel"), git("rev-parse", "HEAD")
        if top.returncode or head.returncode or Path(top.stdout.strip()) != Path(root):
            return None
        changed = git("status", "--porcelain", "--", *files)
    except (OSError, subprocess.SubprocessError):
        return None
    if changed.returncode:
        return None
    return {"sha": head.stdout.strip(), "clean": changed.stdout.strip() == ""}


def header(lesson_id, kind, module_path, environment, root=ROOT, extra=()):
    """The fields every kind shares; `contentFiles` names what the recording is made of:
    the module's closure, the `extra` code whose results it stores, and the pins."""
    files = content_files(module_path, root, extra)
    backend = environment["backend"]
    multiprocess = "_multiprocess" if environment.get("processCount", 1) > 1 else ""
    commit = source_commit(Path(root).resolve(), files)
    return {
        "schemaVersion": 1,
        "lessonId": lesson_id,
        "kind": kind,
        "contentHash": combined_hash(files),
        "generatedAt": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "provenance": f"recorded_{backend}{multiprocess}_computation",
        "environment": {**host_environment(), **environment},
        "contentFiles": files,
        **({"commit": commit} if commit else {}),
    }


def dumps(recording):
    return json.dumps(recording, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def lookup_path(value, path):
    for key in path:
        value = value[key]
    return value


def staged_write(path, data, staged=None):
    """Write `data` to a temporary file beside `path`; return it, to os.replace later.

    Same directory, so the final os.replace is an atomic rename on one file system. A
    write that fails (disk full, no permission), or Ctrl-C or SIGTERM on the way, removes
    its temporary file, so no empty or truncated .tmp is left behind; a failure raises
    RecordingError naming `path`. `staged`: a list (a Staging's) the file joins, with
    `path`, in the same step that makes it, so no signal finds it made and not listed.
    """
    path = Path(path)
    made = []
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with signals_deferred():  # a signal waits until the file is made and listed
            # The pid in the name says whose file it is (remove_stray_temps).
            fd, temp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.",
                                        suffix=".tmp", dir=path.parent)
            made.append((Path(temp), path))
            if staged is not None:
                staged.append(made[0])
        os.fchmod(fd, 0o644)  # mkstemp's private 0600 would follow the file into git
        with os.fdopen(fd, "wb") as out:
            out.write(data.encode() if isinstance(data, str) else data)
    except BaseException as error:
        for entry in made:
            entry[0].unlink(missing_ok=True)
            if staged is not None and entry in staged:
                staged.remove(entry)
        if isinstance(error, OSError):
            raise RecordingError(f"{display(path)}: cannot be written ({error.strerror}); "
                                 f"nothing was changed") from None
        raise
    return made[0][0]


def remove_stray_temps(directories):
    """Delete staged files a killed run left behind (`.<name>.<pid>.<random>.tmp` and
    `.<name>.<pid>.old.tmp`, gitignored), and only those whose run is gone.

    Staging deletes its own on any exception; only SIGKILL or a power cut leaves one. A
    file of a run still going (a second run of this checkout, refused by the run lock,
    or anything else still staging) is left alone, as is a name with no pid in it.
    """
    for directory in directories:
        for temp in Path(directory).rglob(".*.tmp"):  # recordings/analysis/ is in there
            owner = STAGED_NAME.fullmatch(temp.name)
            if owner and not running(int(owner[1])) and not temp.is_dir():
                temp.unlink(missing_ok=True)


STAGED_NAME = re.compile(r"\..+\.(\d+)\.[^.]+\.tmp")


class Staging:
    """Files written beside their targets, moved into place together by commit().

    Used as a context manager: leaving it by an exception (or Ctrl-C) deletes every
    staged file, so the earlier files stay as they were.
    """

    def __init__(self):
        self.staged = []

    def add(self, path, data):
        staged_write(path, data, self.staged)

    def commit(self, report=lambda path: None):
        """Move every staged file into place: all of them, or (on an error) none.

        Ctrl-C and SIGTERM wait until the moves are done (a mix of new and old files
        would be worse than either). A move that fails puts back the files already moved,
        from hard links of the old ones, and raises RecordingError naming the file.
        """
        with signals_deferred():  # raises at once for a signal swallowed before now
            moved = self._move_every_file()
            interrupts.files_in_place = True  # a signal held until now says so
            for final in moved:
                report(final)

    def _move_every_file(self):
        """Each staged file into place, or (on an error) none; returns their targets."""
        moved = []  # (target, a link to its old file) for each file already moved
        try:
            for temp, final in self.staged:
                old = keep_old(final)
                try:
                    os.replace(temp, final)
                except OSError:
                    if old is not None:
                        old.unlink(missing_ok=True)
                    raise
                moved.append((final, old))
        except OSError as error:
            put_back(moved)
            raise RecordingError(f"{display(final)}: cannot be moved into place "
                                 f"({error.strerror}); every file is as it was") from None
        finally:
            for _, old in moved:
                if old is not None:
                    old.unlink(missing_ok=True)
        self.staged = []
        return [final for final, _ in moved]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for temp, _ in self.staged:
            temp.unlink(missing_ok=True)
        self.staged = []


def keep_old(path):
    """A hard link to the file about to be replaced (None if there is none), so a failed
    commit can put it back; named like a staged file, so a killed run's is removed."""
    if not path.exists():
        return None
    old = path.with_name(f".{path.name}.{os.getpid()}.old.tmp")
    old.unlink(missing_ok=True)
    try:
        os.link(path, old)
    except OSError:
        shutil.copy2(path, old)  # a file system without hard links
    return old


def put_back(moved):
    for final, old in reversed(moved):
        try:
            if old is None:
                final.unlink(missing_ok=True)
            else:
                os.replace(old, final)
        except OSError:
            pass  # the error already raised names the file; nothing more can be done


def write_atomically(path, data):
    """Replace `path` with `data`: a reader sees the old file or the new one, never half."""
    with Staging() as staging:
        staging.add(path, data)
        staging.commit()

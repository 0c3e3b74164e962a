"""Reading, validating and atomically writing recordings. Imports no JAX or matplotlib.

Every executed value the site shows comes from one of these files, so a file that does
not validate must stop the build with one line naming it, never a traceback.
"""
import json
import os
import tempfile
from pathlib import Path

import jsonschema

ROOT = Path(__file__).resolve().parents[1]
RECORDINGS = ROOT / "recordings"
SCHEMA_PATH = RECORDINGS / "schema.json"
FIX = "rerun `python scripts/record.py`"


class RecordingError(Exception):
    """A recording that cannot be used; str() is one line naming the file."""


def schema():
    return json.loads(SCHEMA_PATH.read_text())


def validate(recording, where="recording"):
    """Raise RecordingError with the first schema violation, phrased for a person."""
    validator = jsonschema.Draft202012Validator(schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(recording))
    if error is not None:
        field = "/".join(str(part) for part in error.absolute_path) or "(top level)"
        message = error.message if len(error.message) < 160 else error.message[:157] + "..."
        raise RecordingError(f"{where}: invalid at {field}: {message}; {FIX}")
    return recording


def load_recording(path):
    path = Path(path)
    where = display(path)
    try:
        recording = json.loads(path.read_text())
    except FileNotFoundError:
        raise RecordingError(f"{where}: missing; {FIX}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise RecordingError(f"{where}: not valid JSON ({error}); {FIX}") from None
    if not isinstance(recording, dict):
        raise RecordingError(f"{where}: expected a JSON object; {FIX}")
    if recording.get("schemaVersion") != 1:
        raise RecordingError(f"{where}: schemaVersion {recording.get('schemaVersion')!r} "
                             f"is not 1; {FIX}")
    return validate(recording, where)


def lesson_recordings(lesson_id, directory=RECORDINGS):
    """Executed recordings of one lesson: <lesson>.<variant>.json (schema.json excluded)."""
    paths = []
    for path in sorted(Path(directory).glob(f"{lesson_id}.*.json")):
        try:
            kind = json.loads(path.read_text()).get("kind")
        except (ValueError, AttributeError):
            kind = None  # kept, so that load_recording reports what is wrong with it
        if kind in (None, "executed"):
            paths.append(path)
    return paths


def display(path):
    path = Path(path).resolve()
    try:
        return path.relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def dumps(recording):
    return json.dumps(recording, indent=2, ensure_ascii=False) + "\n"


def write_atomically(path, data):
    """Replace `path` with `data` so a reader sees the old file or the new one, never half."""
    temp = staged_write(path, data)
    try:
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def staged_write(path, data):
    """Write `data` to a temporary file beside `path`; return it, to os.replace later.

    Same directory, so the final os.replace is an atomic rename on one file system.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o644)  # mkstemp's private 0600 would follow the file into git
    with os.fdopen(fd, "wb") as out:
        out.write(data.encode() if isinstance(data, str) else data)
    return Path(temp)

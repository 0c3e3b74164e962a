"""What this checkout has already worked out from exact bytes, kept between runs.

`record.py --check` should cost about a cache lookup, yet three of its steps cost far
more than reading the files they look at: keying a module on its code means parsing it
(scripts/hashes.py), validating a recording means importing jsonschema (about 90 ms
alone, scripts/recordings.py), and the whole check imports most of scripts/. Each is a
pure function of bytes, so its answer is kept here under the sha256 of those bytes, in
`.cache/memo/<table>.json` (gitignored). A changed byte anywhere is a different key, so
a kept answer can never describe other bytes; a missing, unreadable or foreign file is
simply worked out again. Nothing here decides freshness: it only spares repeating a
computation whose inputs are byte for byte the same.

Imports only the standard library's smallest modules: the check's shortcut runs before
anything else of scripts/ is imported.
"""
import atexit
import hashlib
import json
import os
import sys

from scripts import ROOT

MEMO_DIR = ROOT / ".cache" / "memo"
# Enough for every module, recording and check of a few lessons on a few branches; the
# oldest answers go first.
MAX_ENTRIES = 2000

_tables = {}  # table name -> {key: answer}, read on first use
_changed = set()


def _table(name):
    if name not in _tables:
        try:
            with open(MEMO_DIR / f"{name}.json", encoding="utf-8") as handle:
                table = json.load(handle)
        except (OSError, ValueError):
            table = {}
        _tables[name] = table if isinstance(table, dict) else {}
    return _tables[name]


def recall(table, key):
    """The answer kept for `key`, or None."""
    return _table(table).get(key)


def remember(table, key, answer):
    """Keep `answer` (JSON-serialisable) for `key`; written out when the process exits."""
    entries = _table(table)
    entries.pop(key, None)  # re-inserted last: the newest answer is the last to go
    entries[key] = answer
    while len(entries) > MAX_ENTRIES:
        del entries[next(iter(entries))]
    if not _changed:
        atexit.register(save)
    _changed.add(table)


def save():
    """Write every changed table atomically; a checkout that cannot be written is skipped
    (the memo only saves time, so a read-only tree just keeps recomputing)."""
    for name in sorted(_changed):
        path = MEMO_DIR / f"{name}.json"
        temp = MEMO_DIR / f".{name}.{os.getpid()}.tmp"
        try:
            MEMO_DIR.mkdir(parents=True, exist_ok=True)
            with open(temp, "w", encoding="utf-8") as handle:
                json.dump(_tables[name], handle, separators=(",", ":"))
            os.replace(temp, path)
        except OSError:
            try:
                os.unlink(temp)
            except OSError:
                pass
    _changed.clear()


# --- the whole check ----------------------------------------------------------------------

# Everything `record.py --check` reads lives under these: the registry, the lesson modules
# and their data (lesson_code/), the check's own code and every renderer (scripts/, .py
# files only: scripts/audit/ holds an npm install), and every file it judges.
CODE_FOLDERS = ("lesson_code", "scripts")
OUTPUT_FOLDERS = ("recordings", "figures", "docs/notebooks")
PIN_FILES = ("requirements.txt", "constraints.txt")


def _tree_files(root):
    for folder in CODE_FOLDERS + OUTPUT_FOLDERS:
        only_python = folder == "scripts"
        for directory, subfolders, names in os.walk(os.path.join(root, folder)):
            subfolders[:] = sorted(name for name in subfolders
                                   if name not in ("__pycache__", "node_modules", "audit")
                                   and not name.startswith("."))
            for name in sorted(names):
                if name.startswith(".") or (only_python and not name.endswith(".py")):
                    continue  # a staged .tmp is not an output yet
                yield os.path.join(directory, name)
    for name in PIN_FILES:
        yield os.path.join(root, name)


def tree_key(root, argv):
    """One digest of every file --check can read (path and bytes), of the arguments and of
    the Python it runs with (the interpreter's path, so its venv and the packages pinned
    there): equal keys mean the check would answer the same."""
    digest = hashlib.sha256(f"{sys.executable}\0{sys.version}\0{sorted(argv)}\0".encode())
    root = str(root)
    for path in _tree_files(root):
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            data = b"\0unreadable"
        digest.update(f"{os.path.relpath(path, root)}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def answer_check_from_memo(argv, root=ROOT):
    """`record.py --check ARGS` on a tree checked before, byte for byte: print the lines
    that check printed and exit with its status. Returns (runs nothing) otherwise."""
    if "--check" not in argv:
        return
    answer = recall("check", tree_key(root, argv))
    if answer is not None:
        sys.stdout.write("".join(f"{line}\n" for line in answer["lines"]))
        sys.exit(answer["status"])


def remember_check(root, argv, key_before, lines, status):
    """Keep a check's answer, unless a file changed while it ran (then its lines may
    describe either version, and the next check works them out again)."""
    if tree_key(root, argv) == key_before:
        remember("check", key_before, {"lines": lines, "status": status})

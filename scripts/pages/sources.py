"""What the pages are built from: the lesson registry, its recordings and the docs folder,
loaded once per build by whichever generator runs (MkDocs' hook, or the page language under
Zensical); and what code read (Reads), so that the sources, and each page `mkdocs serve`
wrote, are made again only once something they read has changed.
"""
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from scripts import ROOT
from scripts.store.freshness import load_all
from scripts.store.hashes import ClosureError
from scripts.store.lessons import RegistryError, first_of, load_lessons
from scripts.pages.recorded_text import READ, PageError, current
from scripts.store.recordings import RecordingError


@dataclass(frozen=True)
class Sources:
    lessons: dict  # lesson id -> Lesson, in the registry's order
    recordings: dict  # a directive's stem ("<lesson>.cpu") -> its freshness.Loaded
    docs: Path  # the pages' folder (docs/)


def refuse_another_checkout(root):
    """The checkout whose mkdocs.yml is being built, if it is the one this code is: another's
    recordings and rules would build its pages (a worktree built with another's .venv)."""
    if Path(root).resolve() != ROOT:
        raise PageError(f"{Path(root).resolve() / 'mkdocs.yml'} is being built with another "
                        f"checkout's code, {ROOT / 'scripts'} (where the activated .venv's "
                        f"install points): in {root}, run `make setup` and use its own .venv")
    return ROOT


def load_sources(root, docs):
    """Every lesson and its recordings and analyses, validated; else one PageError line."""
    try:
        lessons = load_lessons(Path(root))
        recordings, problems = load_all(lessons, Path(root))
    except (RegistryError, RecordingError, ClosureError) as error:
        raise PageError(str(error)) from None
    if problems:
        raise PageError(first_of(problems, 3, "; ") + (
            "; `python scripts/record.py --check` lists them all" if len(problems) > 3 else ""))
    return Sources(lessons, recordings, Path(docs))


def stat(path):
    try:
        found = os.stat(path)
        return found.st_mtime_ns, found.st_size
    except OSError:
        return None  # a file that appears later is a change too


@dataclass
class Reads:
    """What code read while it was noted (Sphinx's note_dependency, heard as audit events):
    each file opened and folder listed, with its stat before the read, and each recording
    recorded_text.read gave, by its key."""
    files: dict = field(default_factory=dict)
    recorded: dict = field(default_factory=dict)

    def changed(self, sources=None):
        """Whether any of it reads differently now, the recordings as `sources` holds them."""
        return any(stat(path) != seen for path, seen in self.files.items()) or \
            any(current(sources, key) != seen for key, seen in self.recorded.items())


READING = threading.local()  # .reads: the Reads this thread's reads go in, if any


def note_read(event, args):  # the audit hook
    if (reads := getattr(READING, "reads", None)) is None:
        return
    if event == READ:
        reads.recorded[args[0]] = args[1]
    elif event in ("open", "os.scandir", "os.listdir") and \
            isinstance(args[0], (str, os.PathLike)):  # not a descriptor
        reads.files.setdefault(os.path.abspath(args[0]), stat(args[0]))


def note_reads(reads):
    """This thread's reads go in `reads` (None: nowhere) from now on; returns the one before."""
    if not getattr(note_reads, "hooked", False):
        sys.addaudithook(note_read)  # for the process: an audit hook cannot be removed
        note_reads.hooked = True
    outer, READING.reads = getattr(READING, "reads", None), reads
    return outer


LOADED = {}  # (root, docs) -> (Sources, what loading them read)


def loaded_once(root, docs):
    """load_sources, again only once a file it read (or a folder it listed) has changed:
    MkDocs' every rebuild under `mkdocs serve`, and Zensical's Markdown instance per page."""
    key = str(root), str(docs)
    if key in LOADED and not LOADED[key][1].changed():
        return LOADED[key][0]
    outer = note_reads(reads := Reads())
    try:
        LOADED[key] = load_sources(root, docs), reads
    finally:
        note_reads(outer)
    return LOADED[key][0]

"""What the pages are built from: the lesson registry, its recordings and the docs folder,
loaded once per build by whichever generator runs (MkDocs' hook, or the page language under
Zensical), and again only when a file it read has changed.
"""
import os
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from scripts import ROOT
from scripts.store.freshness import load_all
from scripts.store.hashes import ClosureError
from scripts.store.lessons import RegistryError, first_of, load_lessons
from scripts.pages.recorded_text import PageError
from scripts.store.recordings import RecordingError


@dataclass(frozen=True)
class Sources:
    lessons: dict  # lesson id -> Lesson, in the registry's order
    recordings: dict  # a directive's stem ("<lesson>.cpu") -> its freshness.Loaded
    docs: Path  # the pages' folder (docs/)

    @cached_property
    def by_path(self):
        """The recordings by file: what a figure's data line names."""
        return {loaded.path: loaded for loaded in self.recordings.values()}


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


READING = threading.local()


def note_read(event, args):
    """An audit hook: each file opened and folder listed on a thread noting its reads,
    with its stat before the read."""
    reads = getattr(READING, "reads", None)
    if reads is not None and event in ("open", "os.scandir", "os.listdir") and \
            isinstance(args[0], (str, os.PathLike)):  # not a descriptor
        reads.setdefault(os.path.abspath(args[0]), stat(args[0]))


@contextmanager
def noting_reads():
    """{path: its stat} of what this thread reads inside the block."""
    if not getattr(noting_reads, "hooked", False):
        sys.addaudithook(note_read)  # for the process: an audit hook cannot be removed
        noting_reads.hooked = True
    READING.reads = reads = {}
    try:
        yield reads
    finally:
        READING.reads = None


LOADED = {}  # (root, docs) -> (Sources, what loading them read)


def loaded_once(root, docs):
    """load_sources, again only once a file it read (or a folder it listed) has changed:
    MkDocs' every rebuild under `mkdocs serve`, and Zensical's Markdown instance per page."""
    key = str(root), str(docs)
    if key in LOADED and all(stat(path) == seen for path, seen in LOADED[key][1].items()):
        return LOADED[key][0]
    with noting_reads() as reads:
        sources = load_sources(root, docs)
    LOADED[key] = sources, reads
    return sources

"""What the pages are built from: the lesson registry, its recordings and the docs folder,
loaded once by the build (or by the page language run on its own).
"""
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

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


LOADED = {}


def loaded_once(root, docs):
    """load_sources, again only once a file it reads has changed (the registry, lesson code,
    recordings, notebooks, pins): Zensical makes a Markdown instance per page."""
    root = Path(root)
    files = [*(root / "recordings").rglob("*"), *(root / "lesson_code").rglob("*"),
             *(root / "docs" / "notebooks").glob("*.ipynb"), *root.glob("*.txt")]
    key = str(docs), tuple((str(p), p.stat().st_mtime_ns) for p in files if p.is_file())
    if key not in LOADED:
        LOADED.clear()
        LOADED[key] = load_sources(root, docs)
    return LOADED[key]

"""What the pages are built from: the lesson registry, its recordings and the docs folder.

The docs build loads them once (pages/hooks.py, on_config) and hands them to the page
language (pages/page_language.py); Python-Markdown run on its own loads them from the
repository the same way. Either way a broken recording, or a stale one this machine can
remake, stops the build with one line each.
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
    # A directive's stem ("<lesson>.cpu", "<lesson>.cpu.analysis") -> its freshness.Loaded
    recordings: dict
    docs: Path  # the pages' folder (docs/)

    @cached_property
    def by_path(self):
        """The same, by file: what a figure's data line names."""
        return {loaded.path: loaded for loaded in self.recordings.values()}


def load_sources(root, docs):
    """Every registered lesson and every recording and analysis of it, validated."""
    try:
        lessons = load_lessons(Path(root))
        recordings, problems = load_all(lessons, Path(root))
    except (RegistryError, RecordingError, ClosureError) as error:
        raise PageError(str(error)) from None
    if problems:
        # One line, of a bounded length: `record.py --check` lists every problem.
        raise PageError(first_of(problems, 3, "; ") + (
            "; `python scripts/record.py --check` lists them all" if len(problems) > 3 else ""))
    return Sources(lessons, recordings, Path(docs))

"""The one step that puts in docs/ what the pages serve from elsewhere, so that MkDocs and
Zensical build the same tree: the figures, each lesson's downloads, what the figures' data
lines link to, each notebook's page and its .ipynb. Run by the MkDocs hooks and by `make
build-zensical` (`python -m scripts.pages.site_files`). Copies, never links, at the paths
the pages link them by, ignored by git, written only when they differ (`mkdocs serve`
settles after one more rebuild).
"""
import sys

from scripts import ROOT
from scripts.pages.course import downloadable_files
from scripts.pages.figure_data import served_files
from scripts.plumbing.checkout import LinkInCheckout, refuse_links
from scripts.store.lessons import RegistryError, load_lessons
from scripts.store.outputs import for_lesson
from scripts.store.staging import write_atomically


def wanted(root, lessons):
    """{path below docs/: the bytes it must hold}."""
    files = {path: (root / path).read_bytes() for path in sorted(
        {f"figures/{svg.name}" for svg in (root / "figures").glob("*.svg")}
        | {path for lesson in lessons.values() for path in downloadable_files(lesson)}
        | set(served_files(lessons, root)))}
    for lesson in lessons.values():
        notebook = root / for_lesson(lesson).notebook
        if notebook.is_file():  # its `notebook`: the theme's download icon (overrides/main.html)
            files[for_lesson(lesson).notebook_page] = (
                f"---\nnotebook: {notebook.name}\n---\n\n{{{{ notebook:{lesson.id} }}}}\n").encode()
            files[f"notebooks/{lesson.id}/{notebook.name}"] = notebook.read_bytes()
    return files


def stage(root=ROOT, docs=None):
    """Bring docs/ up to date, first refusing any link in the checkout; LinkInCheckout or
    RegistryError is the one line that says what stops it."""
    docs = docs or root / "docs"
    refuse_links(root)
    files = wanted(root, load_lessons(root))
    for path in [*(docs / "notebooks").glob("*.md"), *(docs / "notebooks").glob("*/*"),
                 *(path for part in ("figures", "lesson_code", "recordings")
                   for path in (docs / part).rglob("*") if path.is_file())]:
        if path.relative_to(docs).as_posix() not in files:  # what an earlier run left
            path.unlink()
    for path, content in files.items():
        if not (docs / path).is_file() or (docs / path).read_bytes() != content:
            write_atomically(docs / path, content)


if __name__ == "__main__":
    try:
        stage()
    except (LinkInCheckout, RegistryError) as error:
        sys.exit(f"error: {error}")

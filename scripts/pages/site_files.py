"""The one step that puts in docs/ what the pages serve from elsewhere, so that MkDocs and
Zensical build the same tree: the figures, each lesson's downloads, what the figures' data
lines link to, each notebook's page and its .ipynb. Run by the MkDocs hooks and by `make
build-zensical` (`python -m scripts.pages.site_files`). Copies, never links, at the paths
the pages link them by, ignored by git, written only when they differ (`mkdocs serve`
settles after one more rebuild).
"""
import sys

from scripts import ROOT
from scripts.cli import command, run
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


# What the last run wrote, one path a line: only those are ever removed, so a file someone
# put in docs/ by hand stays.
WRITTEN = ".site-files"


def stage(root=ROOT, docs=None):
    """Bring docs/ up to date, first refusing any link in the checkout; LinkInCheckout or
    RegistryError is the one line that says what stops it."""
    docs = docs or root / "docs"
    refuse_links(root)
    files = wanted(root, load_lessons(root))
    written = docs / WRITTEN
    earlier = written.read_text(encoding="utf-8").splitlines() if written.is_file() else []
    for path in set(earlier) - set(files):  # a figure or a lesson that is gone
        (docs / path).unlink(missing_ok=True)
    for path, content in files.items():
        if not (docs / path).is_file() or (docs / path).read_bytes() != content:
            write_atomically(docs / path, content)
    if earlier != list(files):
        write_atomically(written, "".join(f"{path}\n" for path in files).encode())


if __name__ == "__main__":
    sys.exit(run(command(lambda argv: stage(), (LinkInCheckout, RegistryError))))

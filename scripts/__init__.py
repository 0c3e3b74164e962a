"""The machinery that turns lesson_code/ into recordings, figures, a notebook and pages.

Imported as a package (`from scripts import recordings`). The command-line entry points
that import it (record.py, bench.py, tpu_job.py) put the repository root on sys.path in
their first lines, so `python scripts/record.py` works as the README says; pages/check_links.py
imports nothing from here and needs no such line.
"""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDINGS = ROOT / "recordings"
# Every derived file's inputs, as digests: see scripts/store/freshness.py.
LOCK = RECORDINGS / "outputs.lock.json"
REGISTRY = ROOT / "lesson_code" / "lessons.toml"


def display(path, root=ROOT):
    """A path as a reader at the repository root would type it: a link by its own name,
    not where it leads, and a name that is not UTF-8 with its odd bytes as \\xNN."""
    path = Path(path)
    path = path.resolve() if path.name in ("", "..") else path.parent.resolve() / path.name
    try:
        shown = path.relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        shown = str(path)
    return shown.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")

"""The machinery that turns lesson_code/ into recordings, figures, a notebook and pages.

Imported as a package (`from scripts import recordings`). The command-line entry points
that import it (record.py, bench.py, tpu_job.py) put the repository root on sys.path in
their first lines, so `python scripts/record.py` works as the README says; pages/check_links.py
imports nothing from here and needs no such line.
"""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDINGS = ROOT / "recordings"
FIGURES = ROOT / "figures"
# Every derived file's inputs, as digests: see scripts/freshness.py.
LOCK = RECORDINGS / "outputs.lock.json"
REGISTRY = ROOT / "lesson_code" / "lessons.toml"


def display(path, root=ROOT):
    """A path as a reader at the repository root would type it."""
    path = Path(path).resolve()
    try:
        return path.relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return str(path)

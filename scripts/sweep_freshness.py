"""Is the committed sweep current? Standard library only, so `bench.py --check` is instant
and never starts JAX or matplotlib."""
import json
from pathlib import Path

from lesson_hashes import PINS, ROOT, combined_hash, file_digests, pinned_versions

RECORDING = ROOT / "recordings" / "distributed-03.sweep.json"
FIGURE = ROOT / "figures" / "distributed-03-sweep.svg"
FIX = "python scripts/bench.py"


def hashed_sources(root=ROOT):
    """The files whose change can change a sweep: its code and the pinned versions."""
    scripts = root / "scripts"
    return [scripts / "bench.py", *sorted(scripts.glob("sweep_*.py")),
            *(root / name for name in PINS)]


def content_hash(root=ROOT):
    # The lessons' scheme: each file's digest under its name, plus the pinned versions.
    code = [path for path in hashed_sources(root) if path.suffix == ".py"]
    return combined_hash(file_digests(code, root), pinned_versions(root))


def figure_stamp(recording):
    """The line a figure carries to name the recording it was drawn from."""
    return f"<!-- drawn from the sweep recorded at {recording['generatedAt']} -->"


def shown(path, root=ROOT):
    """A path as a reader at the repository root would type it."""
    path = Path(path).resolve()
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def stale_reasons(recording_path=RECORDING, figure_path=FIGURE, root=ROOT):
    """Why the recording or the figure needs `python scripts/bench.py`; empty when current."""
    if not recording_path.exists():
        return [f"{shown(recording_path, root)} is missing"]
    recording = json.loads(recording_path.read_text())
    reasons = []
    if recording.get("contentHash") != content_hash(root):
        changed = " or ".join(p.relative_to(root).as_posix() for p in hashed_sources(root))
        reasons.append(f"{shown(recording_path, root)} is stale ({changed} changed since it was "
                       "recorded)")
    if not figure_path.exists():
        reasons.append(f"{shown(figure_path, root)} is missing")
    elif figure_stamp(recording) not in figure_path.read_text():
        reasons.append(f"{shown(figure_path, root)} was not drawn from {recording_path.name}")
    return reasons

"""Which figure is drawn by which renderer from which input. Imports no matplotlib.

A figure is current when its bytes are the ones record.py wrote (figures.lock.json keeps
their sha256, so a hand edit shows) and neither its renderer's code nor its input changed
since. `{lesson}` is filled in per lesson, so a new lesson needs no new entry here.
"""
import hashlib
import json
from dataclasses import dataclass

from lesson_hashes import ROOT, renderer_hash

LOCK = ROOT / "figures" / "figures.lock.json"
SHARED_RENDERING = ("scripts/svg_output.py",)


@dataclass(frozen=True)
class FigureSpec:
    path: str  # where the SVG lives, relative to the repository root
    renderer: str  # "module:function" in scripts/; called with the loaded recording
    recording: str | None  # recordings/<name>.json it is drawn from, if any
    sources: tuple = ()  # other files the drawing depends on (a simulator, say)

    def renderer_files(self):
        module = self.renderer.split(":")[0]
        return (f"scripts/{module}.py", *SHARED_RENDERING, *self.sources)

    def renderer_hash(self, root=ROOT):
        return renderer_hash([root / name for name in self.renderer_files()], root)

    def input_hash(self, root=ROOT):
        if self.recording is None:
            return None
        return hashlib.sha256((root / self.recording).read_bytes()).hexdigest()


def figure_specs(lesson_id):
    recording = f"recordings/{lesson_id}.{{}}.json"
    return [
        FigureSpec(f"figures/{lesson_id}.svg", "render_figures:render_panels_svg",
                   recording.format("cpu")),
        FigureSpec(f"figures/{lesson_id}-mechanism.svg",
                   "render_figures:render_mechanism_svg", recording.format("cpu")),
        FigureSpec(f"figures/{lesson_id}-traffic.svg", "render_traffic:render_traffic_svg",
                   recording.format("cpu-processes")),
        FigureSpec(f"figures/{lesson_id}-ring.svg", "render_ring:render_ring_svg", None,
                   ("lesson_code/ring.py",)),
    ]


def available_specs(lesson_id, root=ROOT, arriving=()):
    """The specs whose renderer exists and whose input recording exists or is `arriving`."""
    return [spec for spec in figure_specs(lesson_id)
            if (root / spec.renderer_files()[0]).exists()
            and (spec.recording is None or spec.recording in arriving
                 or (root / spec.recording).exists())]


def read_lock(root=ROOT):
    path = root / LOCK.relative_to(ROOT)
    return json.loads(path.read_text()) if path.exists() else {}


def lock_entry(spec, svg, input_hash, root=ROOT):
    return {"sha256": hashlib.sha256(svg.encode()).hexdigest(),
            "rendererHash": spec.renderer_hash(root), "inputHash": input_hash}


def figure_problems(spec, lock, root=ROOT):
    """Why a committed figure is not what record.py would draw now (empty: current)."""
    path = root / spec.path
    if not path.exists():
        return ["missing"]
    entry = lock.get(spec.path)
    if entry is None:
        return ["not in figures/figures.lock.json"]
    problems = []
    if hashlib.sha256(path.read_bytes()).hexdigest() != entry["sha256"]:
        problems.append("edited by hand since record.py drew it")
    if entry["rendererHash"] != spec.renderer_hash(root):
        problems.append("its renderer changed")
    if entry["inputHash"] != spec.input_hash(root):
        problems.append("its recording changed")
    return problems

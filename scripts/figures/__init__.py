"""Recording -> SVG: the registry of figure kinds. Only the renderers import matplotlib.

A renderer has `render(data, variant) -> SVG text` (variants.py) and `rows(data)`, the
numbers it draws (data.py). A lesson may name a renderer of its own under lesson_code/
(CONTRACT.md), drawn in all four variants only if its `render` takes the variant.
"""
import ast
import functools
import importlib
import re
from collections import namedtuple
from dataclasses import dataclass
from pathlib import Path

from scripts.figures.variants import STATIC, VARIANTS


@dataclass(frozen=True)
class FigureKind:
    renderer: str  # module under scripts/figures/ (or a lesson's, dotted) with render(data)
    input: str  # the JSON it is drawn from, relative to the repository root
    path: str  # the SVG, relative to the repository root
    # A recording drawn over the input when it exists (a hardware run over a prediction);
    # an input too, so its arrival makes the figure stale.
    overlay: str | None = None
    part: str | None = None  # which drawing of a module that makes several (ring.py)

    @property
    def options(self):
        return {} if self.part is None else {"part": self.part}

    @property
    def module(self):
        return self.renderer if "." in self.renderer else f"scripts.figures.{self.renderer}"

    def module_path(self):
        return self.module.replace(".", "/") + ".py"

    def source(self, root):
        """The JSON it is drawn from: a lesson renderer's module may name its lesson's
        analysis, or another recording, as `DRAWN_FROM = "<variant>[.analysis]"`."""
        if "." not in self.renderer or self.overlay is not None:
            return self.input
        variant, _, analysis = renderer_facts(root / self.module_path()).drawn_from.partition(".")
        return f"recordings/{'analysis/' * bool(analysis)}{{id}}.{variant}.json"

    def variants(self, root):
        """All four drawings, or the light wide one for a lesson's `render(data)`."""
        if "." not in self.renderer or renderer_facts(root / self.module_path()).takes_variant:
            return VARIANTS
        return (STATIC,)

    def render(self, data, overlay=None, variant=STATIC):
        module = importlib.import_module(self.module)
        if self.overlay is not None:
            return module.render(data, overlay, variant)
        if "." in self.renderer and not renderer_facts(Path(module.__file__)).takes_variant:
            return module.render(data)  # a lesson renderer of the data alone: light, wide
        return module.render(data, variant, **self.options)


def renderer_facts(path):
    """What the lesson renderer at `path` binds, read without importing it (it imports
    matplotlib): whether its `render` takes a second parameter, and its `DRAWN_FROM`."""
    try:
        return parsed_facts(path, path.stat().st_mtime_ns)
    except (OSError, ValueError, SyntaxError):
        return RendererFacts(False, "cpu")  # the figure's own check names the broken code


RendererFacts = namedtuple("RendererFacts", "takes_variant drawn_from")


@functools.cache  # once per version of the file: each rebuild of a course asks for every one
def parsed_facts(path, modified):
    takes_variant, drawn_from = False, "cpu"
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef) and node.name == "render":
            args = node.args
            takes_variant = bool(args.vararg) or len(args.posonlyargs + args.args) >= 2
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                and [getattr(target, "id", None) for target in node.targets] == ["DRAWN_FROM"]:
            drawn_from = str(node.value.value)
    return RendererFacts(takes_variant, drawn_from)


# A lesson's own renderer, named by its dotted module under lesson_code/.
LESSON_RENDERER = re.compile(r"lesson_code(\.[A-Za-z_]\w*)+")


class FigureKinds(dict):
    """The kinds above by name, and any lesson renderer by its module name."""

    def __contains__(self, kind):
        return super().__contains__(kind) or bool(LESSON_RENDERER.fullmatch(str(kind)))

    def __missing__(self, kind):
        if not LESSON_RENDERER.fullmatch(str(kind)):
            raise KeyError(kind)
        name = kind.rsplit(".", 1)[1].replace("_", "-")
        return FigureKind(kind, "recordings/{id}.cpu.json", f"figures/{{id}}-{name}.svg")


KINDS = FigureKinds({
    "panels": FigureKind("panels", "recordings/{id}.cpu.json", "figures/{id}.svg"),
    "mechanism": FigureKind("mechanism", "lesson_code/figures/{id}-mechanism.json",
                            "figures/{id}-mechanism.svg"),
    "ring-reduce-scatter": FigureKind("ring", "recordings/{id}.simulation.json",
                                      "figures/{id}-ring-reduce-scatter.svg",
                                      part="reduce_scatter"),
    "ring-all-gather": FigureKind("ring", "recordings/{id}.simulation.json",
                                  "figures/{id}-ring-all-gather.svg", part="all_gather"),
    "traffic": FigureKind("traffic", "recordings/{id}.cpu-processes.json",
                          "figures/{id}-traffic.svg"),
    # Drawn from the sweep's analysis (its medians, intervals and fits), not the raw rows.
    "sweep": FigureKind("sweep_times", "recordings/analysis/{id}.sweep.json",
                        "figures/{id}-sweep.svg"),
    "sweep-ratios": FigureKind("sweep_ratios", "recordings/analysis/{id}.sweep.json",
                               "figures/{id}-sweep-ratios.svg"),
    "tpu-predictions": FigureKind("tpu_predictions",
                                  "lesson_code/figures/{id}-tpu-predictions.json",
                                  "figures/{id}-tpu-predictions.svg",
                                  overlay="recordings/{id}.tpu-sweep.json"),
})

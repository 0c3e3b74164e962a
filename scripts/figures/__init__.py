"""Recording -> SVG. The only importers of matplotlib, and they never import lesson_code/.

Every renderer is a module here with one function, `render(data) -> str`: `data` is the
parsed JSON of its input (a recording, or a figure's own data file the lesson keeps in
lesson_code/figures/), and the
SVG text comes back; writing it is record.py's job. A lesson lists the kinds it wants in
lesson_code/lessons.toml; `{id}` is filled in with the lesson id.
"""
import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class FigureKind:
    renderer: str  # module under scripts/figures/ with render(data) -> str
    input: str  # the JSON it is drawn from, relative to the repository root
    path: str  # the SVG, relative to the repository root
    # Optional: a recording drawn over the input when it exists (render(data, overlay)),
    # such as a hardware run to set against a prediction. Its digest joins the figure's
    # inputs, so its arrival makes the figure stale: `--render-only` redraws it.
    overlay: str | None = None

    def module_path(self):
        return f"scripts/figures/{self.renderer}.py"

    def render(self, data, overlay=None):
        module = importlib.import_module(f"scripts.figures.{self.renderer}")
        return module.render(data) if self.overlay is None else module.render(data, overlay)


KINDS = {
    "panels": FigureKind("panels", "recordings/{id}.cpu.json", "figures/{id}.svg"),
    "mechanism": FigureKind("mechanism", "lesson_code/figures/{id}-mechanism.json",
                            "figures/{id}-mechanism.svg"),
    "ring-reduce-scatter": FigureKind("ring_reduce_scatter", "recordings/{id}.simulation.json",
                                      "figures/{id}-ring-reduce-scatter.svg"),
    "ring-all-gather": FigureKind("ring_all_gather", "recordings/{id}.simulation.json",
                                  "figures/{id}-ring-all-gather.svg"),
    "traffic": FigureKind("traffic", "recordings/{id}.cpu-processes.json",
                          "figures/{id}-traffic.svg"),
    # Drawn from the sweep's analysis (its medians, intervals and fits), not the raw rows.
    "sweep": FigureKind("sweep", "recordings/analysis/{id}.sweep.json",
                        "figures/{id}-sweep.svg"),
    "tpu-predictions": FigureKind("tpu_predictions",
                                  "lesson_code/figures/{id}-tpu-predictions.json",
                                  "figures/{id}-tpu-predictions.svg",
                                  overlay="recordings/{id}.tpu-sweep.json"),
}

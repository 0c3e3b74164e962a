"""Predicted collective times on a 4-chip TPU VM, from the lesson's predictions file alone.

Drawn from lesson_code/figures/<lesson>-tpu-predictions.json (written by the lesson's
lesson_code/tpu_predictions.py, with a source for every input); nothing is measured or
run. Left: a table of the predicted microseconds at the three sizes the page names.
Right: the model's time against size for both VMs, the latency floor and the size where
bandwidth takes over. The page says what a TPU recording would be checked against.
"""
import numpy as np
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from scripts.figures.svg import figure_style, new_figure, svg_text
from scripts.units import format_bytes

INK = "#1f2328"
MUTED = "#57606a"
# Okabe-Ito blue and vermillion for the two VMs; all-reduce dashed, one phase solid.
COLOURS = ("#0072B2", "#D55E00")
LABELS = {"reduce_scatter": "reduce-scatter", "all_gather": "all-gather",
          "all_reduce": "all-reduce"}
WIDTH_IN, HEIGHT_IN = 7.2, 3.6
SMALL = 7.5


def model_us(size, machine, chips, hop_s, phases):
    return phases * max(hop_s * chips / 2, size / (2 * machine["linkOneWayBytesPerS"])) * 1e6


def table_text(data):
    """Rows of the table, one per VM and collective: microseconds at each size."""
    sizes = data["sizes"]
    header = ["", *(format_bytes(size) for size in sizes)]
    rows = [header]
    for name in data["machines"]:
        for collective in ("reduce_scatter", "all_reduce"):
            cells = {row["bytes"]: row for row in data["rows"]
                     if row["machine"] == name and row["collective"] == collective}
            label = f"{name} {LABELS[collective]}" + (" / all-gather"
                                                      if collective == "reduce_scatter" else "")
            rows.append([label, *(f"{cells[size]['predictedUs']:,.1f} µs" for size in sizes)])
    return rows


def render(data):
    chips, hop = data["chips"], data["hopLatencyS"]
    with figure_style():
        fig, ax = new_figure(figsize=(WIDTH_IN, HEIGHT_IN))
        fig.subplots_adjust(left=0.1, right=0.98, top=0.62, bottom=0.14)
        sizes = np.geomspace(16, 64 * 2**20, 200)
        for index, ((name, machine), colour) in enumerate(zip(data["machines"].items(),
                                                              COLOURS)):
            for collective, style in (("reduce_scatter", "-"), ("all_reduce", "--")):
                phases = 2 if collective == "all_reduce" else 1
                ax.plot(sizes, [model_us(s, machine, chips, hop, phases) for s in sizes],
                        style, color=colour, linewidth=1.6,
                        label=f"{name}: {LABELS[collective]}"
                              + (" (= all-gather)" if phases == 1 else ""))
            crossover = machine["crossoverBytes"]
            ax.axvline(crossover, color=colour, linewidth=0.8, linestyle=":")
            # The first VM's label left of its line, the second's right: they never meet.
            left = index == 0
            ax.text(crossover / 1.15 if left else crossover * 1.15, 30 if left else 400,
                    f"{name}: bandwidth-\nbound from {format_bytes(crossover)}", color=colour,
                    fontsize=SMALL, ha="right" if left else "left", va="center")
        for size in data["sizes"]:
            ax.axvline(size, color="#d0d7de", linewidth=0.8, zorder=0)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=32))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: format_bytes(value)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g} µs"))
        ax.tick_params(labelsize=SMALL)
        ax.set_xlabel("bytes of the whole vector (V)", fontsize=9)
        ax.set_ylabel("predicted time on the links", fontsize=9)
        ax.spines[["top", "right"]].set_visible(False)
        ax.legend(fontsize=SMALL, frameon=False, loc="upper left",
                  title="below the crossover both VMs pay the same hops", title_fontsize=SMALL)
        table = ax.table(cellText=table_text(data), loc="top", cellLoc="right",
                         bbox=(0.0, 1.08, 1.0, 0.55), edges="horizontal")
        table.auto_set_font_size(False)
        table.set_fontsize(SMALL)
        for (row, column), cell in table.get_celld().items():
            cell.set_edgecolor("#d0d7de")
            if column == 0:
                cell.set_text_props(ha="left")
            if row == 0:
                cell.set_text_props(fontweight="bold")
        fig.suptitle(data["title"], x=0.02, ha="left", fontsize=9.5, fontweight="bold",
                     color=INK)
        fig.text(0.02, 0.015, f"Model, not measurement: {data['model']}, T_hop = "
                 f"{hop * 1e6:g} µs, p = {chips}; sources in the data file.",
                 fontsize=SMALL, color=MUTED)
        return svg_text(fig, data["title"], describe(data))


def describe(data):
    parts = []
    for name, machine in data["machines"].items():
        rows = {(row["collective"], row["bytes"]): row["predictedUs"] for row in data["rows"]
                if row["machine"] == name}
        sizes = data["sizes"]
        parts.append(f"{name}: a reduce-scatter or all-gather "
                     + ", ".join(f"{rows[('reduce_scatter', s)]:,.1f} µs at {format_bytes(s)}"
                                 for s in sizes)
                     + f"; an all-reduce twice that; bandwidth-bound from "
                       f"{format_bytes(machine['crossoverBytes'])}")
    return ("Predicted times on 4 TPU chips, from the scaling book's ring model, before any "
            "TPU run. " + ". ".join(parts) + ".")

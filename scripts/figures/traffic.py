"""Bytes each process sent, beside the ring model, from the multi-process recording alone.

Drawn from `data.traffic` of <lesson>.cpu-processes.json; nothing is run.
"""
import numpy as np
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MultipleLocator

from scripts.figures.svg import figure_style, new_figure, svg_text

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather")
LABELS = {"all_reduce": "all-reduce", "reduce_scatter": "reduce-scatter",
          "all_gather": "all-gather"}
# Okabe-Ito blue for what was measured; the model is outlined and hatched, so the two
# stay apart in greyscale too. The white card keeps the ink legible on dark pages.
OBSERVED, MODEL, INK = "#0072B2", "#ffffff", "#1f2328"
BAR = 0.15  # bar width: the model, then one bar per rank, fill 0.15 * (p + 1) per group


def format_bytes(n):
    for unit, size in (("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n:g} B"


def ratio_label(ratios):
    """`×1.001`, or `×9.4–14` when the ranks sent different amounts."""
    low, high = min(ratios), max(ratios)
    spec = ".3f" if high < 2 else ".2g"  # near 1 the third decimal is the overhead
    low, high = format(low, spec), format(high, spec)
    return f"×{high}" if low == high else f"×{low}–{high}"


def draw_panel(ax, rows, log_scale):
    ranks = len(rows[0]["observedBytesPerRank"])
    for group, row in enumerate(rows):
        model = row["modelBytesPerRank"]
        observed = np.asarray(row["observedBytesPerRank"])
        left = group - BAR * ranks / 2  # the model bar's centre; ranks follow
        ax.bar(left, model, BAR, color=MODEL, edgecolor=INK, hatch="///", linewidth=0.8)
        ax.bar(left + BAR * np.arange(1, ranks + 1), observed, BAR, color=OBSERVED,
               edgecolor=INK, linewidth=0.4)
        for r in range(ranks):
            # x in data units, y in axes units: just under the axis, whatever the scale.
            ax.text(left + BAR * (r + 1), -0.015, f"{r}", transform=ax.get_xaxis_transform(),
                    ha="center", va="top", fontsize=7.5, color=INK)
        top = max(observed.max(), model)
        ax.annotate(ratio_label(observed / model), (group, top), xytext=(0, 4),
                    textcoords="offset points", ha="center", fontsize=9, color=INK)
    ax.set_xticks(range(len(rows)), [LABELS[row["collective"]] for row in rows])
    ax.tick_params(axis="x", length=0, pad=14)  # room for the rank numbers above
    if log_scale:
        ax.set_yscale("log")
        ax.set_ylim(top=ax.get_ylim()[1] * 3)  # headroom for the ratio labels
    else:
        ax.set_ylim(0, max(max(r["observedBytesPerRank"]) for r in rows) * 1.15)
        ax.yaxis.set_major_locator(MultipleLocator(rows[0]["gradientBytes"] / 4))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: format_bytes(value)))
    ax.set_ylabel("bytes sent per rank per call")
    ax.spines[["top", "right"]].set_visible(False)
    gradient = rows[0]["gradientBytes"]
    ax.set_title(f"gradient G = {format_bytes(gradient)} ({gradient // 4:,} float32)",
                 fontsize=10, color=INK)


def describe(rows, ranks, calls):
    parts = []
    for row in rows:
        observed = ", ".join(f"{b:,.0f}" for b in row["observedBytesPerRank"])
        parts.append(f"{LABELS[row['collective']]} of {format_bytes(row['gradientBytes'])}: "
                     f"model {row['modelBytesPerRank']:,.0f} B, observed by rank {observed} B")
    return (f"Grouped bars, two panels, one per gradient size. For each collective, a "
            f"hatched bar for the idealized ring model and {ranks} blue bars for the bytes "
            f"ranks 0 to {ranks - 1} actually sent per call over loopback TCP, averaged "
            f"over {calls} calls. " + "; ".join(parts) + ".")


def render(recording):
    """The figure as SVG text, from the multi-process recording alone."""
    with figure_style():
        return draw(recording["data"])


def draw(data):
    rows = [row for row in data["traffic"] if row["collective"] in COLLECTIVES]
    sizes = sorted({row["gradientBytes"] for row in rows})
    ranks, calls = len(rows[0]["observedBytesPerRank"]), rows[0].get("calls", "repeated")
    fig, axes = new_figure(ncols=len(sizes), figsize=(10, 4.8))
    for ax, size in zip(np.atleast_1d(axes), sizes):
        panel = sorted((r for r in rows if r["gradientBytes"] == size),
                       key=lambda r: COLLECTIVES.index(r["collective"]))
        # Small gradients: overhead is many times the payload, so only a log axis shows both.
        draw_panel(ax, panel, log_scale=size < 2**16)
    fig.suptitle(f"Bytes each of {ranks} processes sent per call: observed vs idealized "
                 f"ring model", fontsize=11.5, color=INK)
    fig.legend(handles=[Patch(fc=MODEL, ec=INK, hatch="///",
                              label=f"model, p = {ranks}: 2(p−1)/p·G all-reduce, "
                                    f"(p−1)/p·G the others"),
                        Patch(fc=OBSERVED, ec=INK,
                              label=f"observed: ranks 0–{ranks - 1}, left to right")],
               loc="upper center", bbox_to_anchor=(0.5, 0.94), ncols=2, frameon=False,
               fontsize=9)
    fig.text(0.5, 0.015, f"Above each group: observed ÷ model. Observed: TCP payload bytes "
             f"sent, mean of {calls} calls per rank.\nIt includes protocol overhead, and "
             "the transport's algorithm may differ from the idealized ring.",
             ha="center", fontsize=8.5, color=INK, linespacing=1.4)
    fig.tight_layout(rect=(0, 0.07, 1, 0.91))
    title = f"Observed vs modelled bytes per rank for {ranks} JAX processes over loopback"
    return svg_text(fig, title, describe(rows, ranks, calls))

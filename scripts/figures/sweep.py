"""Draw the sweep figure from the sweep's analysis alone: one row per device count p, with
the time per call of every program (median of the block medians, with its interval as a
band) on the left and the time ratios the ring model predicts (2 and 1) on the right.

The programs, their labels and which are the ring come from the analysis, so the figure
knows no lesson's collectives by name. The narrow drawing stacks the same panels in one
column, each p's time panel above its ratio panel, under a one-column legend.

Data rows (rows(), the figure's CSV and JSON), per p (`ranks`): a `time` row per program
and size S (`bytes`) with its `medianUs` and interval `lowUs`-`highUs` (the line and its
band), and a `ratio` row per ratio and size with its `ratio` and the ring `model`'s value
(the dotted line); `series` is the program's or the ratio's name, `label` its legend."""
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from scripts.figures.palette import LIGHT
from scripts.figures.svg import DETERMINISTIC, figure_style, svg_text
from scripts.figures.variants import NARROW_IN, STATIC
from scripts.units import format_bytes

# Okabe-Ito colours (the palette's series) stay distinct for colour-blind readers, given to
# the programs in the order the analysis lists them; each ring series is dashed.
MARKER_CYCLE = "osD^vP*"
RATIO_SERIES = (0, 2, 4)  # blue, green, vermillion
# The SVG is 7.2 in (518 pt) wide and shown about 700 px wide, so 1 pt draws as ~1.35 px:
# 7.5 pt, the smallest text here, is ~10 px on the page. The narrow one is shown at its
# own 326 px: 7 points is 9.3 px there.
SMALL, TEXT = 7.5, 8.5
NARROW_SMALL, NARROW_TEXT = 7, 8


def styles(analysis, palette=LIGHT):
    """collective -> (colour, marker, dashed) in the analysis's order."""
    ring = set(analysis["ringCollectives"])
    colours = palette.series
    return {c: (colours[i % len(colours)], MARKER_CYCLE[i % len(MARKER_CYCLE)], c in ring)
            for i, c in enumerate(analysis["collectives"])}


def ratio_styles(analysis, palette=LIGHT):
    """ratio name -> (label, colour, line style), from the analysis's own ratio names."""
    found = {}
    for i, name in enumerate(analysis["ratios"]["model"]):
        entry = next(iter(analysis["ratios"]["belowOnset"].values())).get(name)
        label = name if entry is None else entry.get("label", name)
        colour = palette.series[RATIO_SERIES[i % len(RATIO_SERIES)]]
        found[name] = (label, colour, "--" if i >= 2 else "-")
    return found


def series(analysis, ranks):
    """collective -> (bytes, interval low, median, interval high) arrays, for one p."""
    grouped = {}
    for row in sorted(analysis["rows"], key=lambda r: r["bytes"]):
        if row["ranks"] == ranks:
            grouped.setdefault(row["collective"], []).append(
                (row["bytes"], row["lowUs"], row["medianUs"], row["highUs"]))
    return {c: [np.array(col) for col in zip(*grouped[c])] for c in analysis["collectives"]
            if c in grouped}


def rows(analysis):
    found = []
    for ranks in sorted({row["ranks"] for row in analysis["rows"]}):
        for collective, columns in series(analysis, ranks).items():
            found += [{"ranks": ranks, "panel": "time", "series": collective,
                       "label": analysis["labels"][collective], "bytes": nbytes, "lowUs": low,
                       "medianUs": median, "highUs": high}
                      for nbytes, low, median, high in zip(*columns)]
        ratios = analysis["ratios"]["byRanks"][str(ranks)]
        for name, (label, _, _) in ratio_styles(analysis).items():
            found += [{"ranks": ranks, "panel": "ratio", "series": name, "label": label,
                       "bytes": nbytes, "ratio": ratio,
                       "model": analysis["ratios"]["model"][name]}
                      for nbytes, ratio in zip(ratios["bytes"], ratios.get(name, []))]
    return found


def log2_size_axis(ax, sizes, label_every, look):
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator([8 * label_every**k for k in range(8)]))
    ax.xaxis.set_major_formatter(FuncFormatter(format_bytes))
    ax.xaxis.set_minor_locator(FixedLocator(sizes))  # a tick at every measured size
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(min(sizes) / 1.5, max(sizes) * 1.5)
    ax.tick_params(labelsize=look.small)
    ax.grid(True, which="major", color=look.palette.grid, lw=0.6)
    ax.spines[["top", "right"]].set_visible(False)


def shade_past_cache(analysis, ax, sizes, ranks, look):
    """Grey from the smallest size whose working set fills the cache for some program at
    this p (each program's own boundary is in its fit)."""
    boundaries = [fit[str(ranks)]["cacheBoundaryBytes"] for fit in analysis["fits"].values()
                  if str(ranks) in fit and fit[str(ranks)]["cacheBoundaryBytes"]]
    if boundaries and max(sizes) >= min(boundaries):
        ax.axvspan(min(boundaries) / 1.2, max(sizes) * 1.5, color=look.palette.shade, lw=0,
                   zorder=0)


def mark_fault_onset(analysis, ax, look):
    """A line at the size from which calls fault in fresh pages for their outputs."""
    onset = analysis["faults"]["onsetBytes"]
    if onset:
        ax.axvline(onset / 1.4, color=look.palette.ink, lw=0.9, ls=(0, (4, 2)))


def plot_times(analysis, ax, ranks, look):
    measured = series(analysis, ranks)
    drawn = styles(analysis, look.palette)
    sizes = sorted({b for nbytes, *_ in measured.values() for b in nbytes})
    shade_past_cache(analysis, ax, sizes, ranks, look)
    mark_fault_onset(analysis, ax, look)
    for collective, (nbytes, low, median, high) in measured.items():
        colour, marker, dashed = drawn[collective]
        ax.fill_between(nbytes, low, high, color=colour, alpha=0.18, lw=0)
        ax.plot(nbytes, median, color=colour, marker=marker, ms=3.2,
                lw=1.2, ls="--" if dashed else "-")
    grid = np.geomspace(min(sizes), max(sizes), 32)
    ax.plot(grid, grid / (analysis["memcpyGBps"] * 1e3), color=look.palette.muted, lw=1,
            ls=":")
    log2_size_axis(ax, sizes, 16, look)
    ax.set_yscale("log")
    # The measured range decides the axis; the memcpy line leaves it where it is faster.
    low = min(band.min() for _, band, _, _ in measured.values())
    high = max(band.max() for _, _, _, band in measured.values())
    ax.set_ylim(low / 2, high * 1.5)
    ax.yaxis.set_major_formatter(FuncFormatter(format_microseconds))
    ax.set_title(f"p = {ranks}: time per call (median, interval band)", fontsize=look.text,
                 loc="left")


def format_microseconds(value, _tick_position=None):
    """100 µs, 1 ms, 10 s: unit labels keep the log axis short enough to need no ylabel."""
    for unit, scale in (("s", 1e6), ("ms", 1e3)):
        if value >= scale:
            return f"{value / scale:g} {unit}"
    return f"{value:g} µs"


def ratio_limits(analysis):
    """One y range for every p, so the rows compare at a glance."""
    values = [v for entry in analysis["ratios"]["byRanks"].values()
              for name in analysis["ratios"]["model"] for v in entry.get(name, [])]
    values += list(analysis["ratios"]["model"].values())
    return min(values) / 1.3, max(values) * 1.3


def plot_ratios(analysis, ax, ranks, look):
    ratios = analysis["ratios"]["byRanks"][str(ranks)]
    sizes = ratios["bytes"]
    shade_past_cache(analysis, ax, sizes, ranks, look)
    mark_fault_onset(analysis, ax, look)
    for value in sorted(set(analysis["ratios"]["model"].values())):
        ax.axhline(value, color=look.palette.ink, lw=0.9, ls=(0, (1, 2)))
    for name, (_, colour, style) in ratio_styles(analysis, look.palette).items():
        if name in ratios:
            ax.plot(sizes, ratios[name], color=colour, lw=1.2, ls=style, marker=".", ms=4)
    log2_size_axis(ax, sizes, 64, look)
    ax.set_yscale("log", base=2)
    ax.set_ylim(*ratio_limits(analysis))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_title(f"p = {ranks}: time ratios", fontsize=look.text, loc="left")


def add_legend(fig, analysis, look):
    """Three columns: one-step programs, the ring and the scale marks, the ratios (one
    column, in that order, in the narrow drawing)."""
    def line(colour, label, style="-", marker=None):
        return Line2D([], [], color=colour, lw=1.4, ls=style, marker=marker, ms=3.5, label=label)

    palette, labels = look.palette, analysis["labels"]
    drawn = styles(analysis, palette)
    xla = [line(colour, labels[c], marker=marker) for c, (colour, marker, dashed)
           in drawn.items() if not dashed]
    ring = [line(colour, labels[c], "--", marker) for c, (colour, marker, dashed)
            in drawn.items() if dashed]
    ring += [line(palette.muted, "S / single-thread memcpy, for scale", ":"),
             Patch(color=palette.shade, label="working set past the cache: not fitted")]
    if analysis["faults"]["onsetBytes"]:
        ring.append(line(palette.ink, "from here calls fault in fresh output pages: not "
                         "fitted", (0, (4, 2))))
    ratios = [line(colour, label, style)
              for label, colour, style in ratio_styles(analysis, palette).values()]
    ratios.append(line(palette.ink, "ring model (2 and 1)", (0, (1, 2))))
    handles = [h for column in (xla, ring, ratios) for h in column]
    fig.legend(handles=handles, loc="upper center", ncol=1 if look.narrow else 3,
               frameon=False, fontsize=look.small, columnspacing=1.2, handlelength=2.2)
    return len(handles)


@dataclass(frozen=True)
class Look:
    """What the variant changes: colours, and in the narrow drawing the layout and sizes."""
    palette: object
    narrow: bool
    small: float
    text: float


def look_of(variant):
    if variant.narrow:
        return Look(variant.palette, True, NARROW_SMALL, NARROW_TEXT)
    return Look(variant.palette, False, SMALL, TEXT)


def draw_panels(analysis, look):
    ranks = sorted({row["ranks"] for row in analysis["rows"]})
    # The legend's scale marks: memcpy, the cache shade, and the fault onset when there is one.
    marks = 3 + bool(analysis["faults"]["onsetBytes"])
    if look.narrow:  # one column: p's time per call, then its ratios, for each p
        legend_in = 0.16 * (len(analysis["collectives"]) + len(analysis["ratios"]["model"])
                            + marks) + 0.2
        height = legend_in + 0.5 + len(ranks) * (2.1 + 1.6)
        fig = Figure(figsize=(NARROW_IN, height), facecolor=look.palette.paper)
        axes = fig.subplots(2 * len(ranks), 1, squeeze=False,
                            gridspec_kw={"height_ratios": [1.35, 1] * len(ranks)})
        pairs = [(axes[2 * i][0], axes[2 * i + 1][0]) for i in range(len(ranks))]
    else:
        fig = Figure(figsize=(7.2, 1.0 + 2.15 * len(ranks)), facecolor=look.palette.paper)
        axes = fig.subplots(len(ranks), 2, squeeze=False,
                            gridspec_kw={"width_ratios": [1.7, 1]})
        pairs = [tuple(row) for row in axes]
    for (time_ax, ratio_ax), p in zip(pairs, ranks):
        plot_times(analysis, time_ax, p, look)
        plot_ratios(analysis, ratio_ax, p, look)
    pairs[-1][0].set_xlabel("gradient size S (float32 bytes, full array)", fontsize=look.small)
    pairs[-1][1].set_xlabel("S", fontsize=look.small)
    entries = add_legend(fig, analysis, look)
    if look.narrow:
        fig.subplots_adjust(left=0.19, right=0.96, top=1 - legend_in / height,
                            bottom=0.45 / height, hspace=0.55)
    else:
        # Three legend columns of 0.17 in a row, under 0.27 in of margin; past four rows the
        # figure grows by the rows it adds.
        rows = -(-entries // 3)
        fig.set_figheight(fig.get_figheight() + 0.17 * max(0, rows - 4))
        top = 1 - (0.27 + 0.17 * rows) / fig.get_figheight()
        fig.subplots_adjust(left=0.1, right=0.985, top=top, bottom=0.06, wspace=0.22,
                            hspace=0.42)
    return fig


def alt_text(analysis):
    """Title and description for screen readers, with the numbers the figure shows."""
    ranks = sorted({row["ranks"] for row in analysis["rows"]})
    below_onset = analysis["ratios"]["belowOnset"]
    smallest = {p: min(r["bytes"] for r in analysis["rows"] if r["ranks"] == p) for p in ranks}
    labels = {name: label for name, (label, _, _) in ratio_styles(analysis).items()}
    ratio_words = "; ".join(
        f"at p = {p}, {labels[name]} {entry['median']:.1f} "
        f"(ring model {analysis['ratios']['model'][name]:g})"
        for p, by_name in below_onset.items() for name, entry in by_name.items())
    title = ("Time per call and time ratios of XLA's collectives and a ppermute ring against "
             "message size on logical CPU devices")
    desc = (f"One row per device count p = {', '.join(map(str, ranks))}. Left: median time per "
            f"call with its interval as a band, log-log, for sizes from "
            f"{', '.join(f'{format_bytes(b)} (p = {p})' for p, b in smallest.items())} to "
            f"{analysis['sizeLabels']['largest']}, with S divided by a single-thread memcpy "
            f"of {analysis['memcpyGBps']:.1f} GB/s for scale; calls fault in fresh pages for "
            f"their outputs from {analysis['faults']['labels']['onset']}. Right: time "
            f"ratios against the ring model's 2 and 1. At "
            f"{analysis['sizeLabels']['ratios']}, the largest size below that: {ratio_words}.")
    return title, desc


def render(analysis, variant=STATIC):
    title, desc = alt_text(analysis)
    # matplotlib's defaults, not the lesson figures' style: this figure sets its own look.
    with figure_style(DETERMINISTIC, variant.palette):
        return svg_text(draw_panels(analysis, look_of(variant)), title, desc)

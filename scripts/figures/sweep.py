"""What the two sweep figures (sweep_times.py, sweep_ratios.py) share: one panel per device
count p, side by side in the wide drawing and stacked in the narrow one, every panel on the
same axes, under a legend of the figure's own series.

Both read the sweep's analysis alone (recordings/analysis/<id>.sweep.json), so neither
knows a lesson's collectives by name: `collectives`, `ringCollectives`, `labels`, `rows`
(`medianUs`, `lowUs`, `highUs` per program, p and S), `faults` (`onsetBytes`,
`belowOnsetBytes`, `labels.onset`), `ratios` (`model`, `byRanks[p]`, `warm[p]`),
`memcpyGBps` and `sizeLabels`.
"""
from collections import namedtuple

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from scripts.figures.svg import DETERMINISTIC, figure_style, svg_text
from scripts.figures.variants import NARROW_IN, NARROW_SMALL, WIDE_IN, WIDE_SMALL
from scripts.units import format_bytes

TEXT, NARROW_TEXT = 8.5, 8  # above the smallest (variants.py): titles
# The wide legend: rows of 0.17 in, under 0.27 in of margin.
LEGEND_ROW_IN, LEGEND_MARGIN_IN = 0.17, 0.27
NARROW_ENTRY_IN = 0.16  # the narrow legend is one column, one entry a row


# What the variant changes: colours, and in the narrow drawing the layout and sizes.
Look = namedtuple("Look", "palette narrow small text")


def ranks_of(analysis):
    return sorted({row["ranks"] for row in analysis["rows"]})


def log2_size_axis(ax, sizes, limits, look):
    """Sizes on a log-2 axis, labelled every 64x, a minor tick at each size measured."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator([8 * 64**k for k in range(6)]))
    ax.xaxis.set_major_formatter(FuncFormatter(format_bytes))
    ax.xaxis.set_minor_locator(FixedLocator(sizes))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(*limits)
    ax.tick_params(labelsize=look.small)
    ax.grid(True, which="major", color=look.palette.grid, lw=0.6)
    ax.spines[["top", "right"]].set_visible(False)


ONSET_STYLE = (0, (4, 2))


def legend_line(colour, label, style="-", marker=None):
    return Line2D([], [], color=colour, lw=1.4, ls=style, marker=marker, ms=3.5, label=label)


def onset_entries(analysis, look, words):
    onset = analysis["faults"]["onsetBytes"]
    return [legend_line(look.palette.ink, words, ONSET_STYLE)] if onset else []


def panel_grid(analysis, look, legend, columns, wide_panel_in, narrow_panel_in):
    """(figure, one axes per p) under `legend` (its handles): side by side under `columns`
    legend columns (wide), or stacked under one (narrow)."""
    count = len(ranks_of(analysis))
    if look.narrow:
        legend_in = NARROW_ENTRY_IN * len(legend) + 0.2
        height = legend_in + 0.45 + count * narrow_panel_in
        fig = Figure(figsize=(NARROW_IN, height), facecolor=look.palette.paper)
        axes = list(fig.subplots(count, 1, squeeze=False)[:, 0])
        fig.subplots_adjust(left=0.235, right=0.96, top=1 - legend_in / height,
                            bottom=0.45 / height, hspace=0.5)
    else:
        legend_in = LEGEND_MARGIN_IN + LEGEND_ROW_IN * -(-len(legend) // columns)
        height = legend_in + wide_panel_in + 0.5
        fig = Figure(figsize=(WIDE_IN, height), facecolor=look.palette.paper)
        axes = list(fig.subplots(1, count, squeeze=False)[0])
        fig.subplots_adjust(left=0.12, right=0.985, top=1 - legend_in / height,
                            bottom=0.5 / height, wspace=0.12)
    fig.legend(handles=legend, loc="upper center", frameon=False, fontsize=look.small,
               ncol=1 if look.narrow else columns, columnspacing=1.2, handlelength=2.2)
    return fig, axes


def render_panels(analysis, variant, legend, grid, sizes, plot, ylabel, alt):
    """The figure as SVG text with its `alt` (title, description): in each p's panel the
    fault onset's line, then `plot(analysis, ax, p, look, x limits)`, one x range (of
    `sizes`) for all; side by side, they share the left panel's y axis."""
    look = Look(variant.palette, variant.narrow,
                *((NARROW_SMALL, NARROW_TEXT) if variant.narrow else (WIDE_SMALL, TEXT)))
    # matplotlib's defaults, not the lesson figures' style: these figures set their own look.
    with figure_style(DETERMINISTIC, variant.palette):
        fig, axes = panel_grid(analysis, look, legend(analysis, look), *grid)
        x_limits = min(sizes) / 1.5, max(sizes) * 1.5  # of every p: one x range for all
        onset = analysis["faults"]["onsetBytes"]
        for ax, p in zip(axes, ranks_of(analysis)):
            if onset:
                ax.axvline(onset / 1.4, color=look.palette.ink, lw=0.9, ls=ONSET_STYLE)
            plot(analysis, ax, p, look, x_limits)
            ax.set_title(f"p = {p}", fontsize=look.text, loc="left")
        (axes[-1] if look.narrow else axes[len(axes) // 2]).set_xlabel(
            "gradient size S (float32 bytes, full array)", fontsize=look.small)
        for ax in axes if look.narrow else axes[:1]:
            ax.set_ylabel(ylabel, fontsize=look.small)
        if not look.narrow:
            for ax in axes[1:]:
                ax.tick_params(labelleft=False)
        return svg_text(fig, *alt)

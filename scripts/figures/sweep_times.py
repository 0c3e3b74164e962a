"""The sweep's time per call in sweep.py's panels: every program's median against the size
S, its interval as a band, log-log, a single-thread memcpy of S for scale, the onset marked.
Data rows: one per p, program and size, the line and its band.
"""
import numpy as np
from matplotlib.ticker import FuncFormatter

from scripts.figures.palette import LIGHT
from scripts.figures.sweep import (legend_line, log2_size_axis, onset_entries, ranks_of,
                                   render_panels)
from scripts.figures.variants import STATIC
from scripts.units import format_bytes, format_microseconds

# Okabe-Ito colours (the palette's series) stay distinct for colour-blind readers, given to
# the programs in the order the analysis lists them; each ring series is dashed.
MARKER_CYCLE = "osD^vP*"


def styles(analysis, palette=LIGHT):
    """program -> (colour, marker, dashed) in the analysis's order."""
    return {c: (palette.series[i % len(palette.series)], MARKER_CYCLE[i % len(MARKER_CYCLE)],
                c in analysis["ringCollectives"]) for i, c in enumerate(analysis["collectives"])}


def series(analysis, ranks):
    """program -> (bytes, interval low, median, interval high) arrays, for one p."""
    grouped = {}
    for row in sorted(analysis["rows"], key=lambda r: r["bytes"]):
        if row["ranks"] == ranks:
            grouped.setdefault(row["collective"], []).append(
                (row["bytes"], row["lowUs"], row["medianUs"], row["highUs"]))
    return {c: [np.array(col) for col in zip(*grouped[c])] for c in analysis["collectives"]
            if c in grouped}


def rows(analysis):
    return [{"ranks": ranks, "series": program, "label": analysis["labels"][program],
             "bytes": nbytes, "lowUs": low, "medianUs": median, "highUs": high}
            for ranks in ranks_of(analysis) for program, columns in series(analysis, ranks).items()
            for nbytes, low, median, high in zip(*columns)]


def plot_times(analysis, ax, ranks, look, x_limits):
    measured = series(analysis, ranks)
    drawn = styles(analysis, look.palette)
    sizes = sorted({b for nbytes, *_ in measured.values() for b in nbytes})
    for program, (nbytes, low, median, high) in measured.items():
        colour, marker, dashed = drawn[program]
        ax.fill_between(nbytes, low, high, color=colour, alpha=0.18, lw=0)
        ax.plot(nbytes, median, color=colour, marker=marker, ms=3.2,
                lw=1.2, ls="--" if dashed else "-")
    grid = np.geomspace(min(sizes), max(sizes), 32)
    ax.plot(grid, grid / (analysis["memcpyGBps"] * 1e3), color=look.palette.muted, lw=1, ls=":")
    log2_size_axis(ax, sizes, x_limits, look)
    ax.set_yscale("log")
    # One y range for every p: the measured bands set it; the memcpy line leaves it where
    # it is faster.
    ax.set_ylim(min(row["lowUs"] for row in analysis["rows"]) / 2,
                max(row["highUs"] for row in analysis["rows"]) * 1.5)
    ax.yaxis.set_major_formatter(FuncFormatter(format_microseconds))


def legend(analysis, look):
    """The one-step programs, the ring's, then the scale marks: a column each, wide."""
    palette, labels = look.palette, analysis["labels"]
    drawn = styles(analysis, palette)
    programs = [legend_line(colour, labels[c], "--" if dashed else "-", marker)
                for c, (colour, marker, dashed) in drawn.items()]
    marks = [legend_line(palette.muted, "S / single-thread memcpy, for scale", ":"),
             *onset_entries(analysis, look, "from here calls fault in fresh output pages: "
                                            "not fitted")]
    return programs + marks


def alt_text(analysis):
    ranks = ranks_of(analysis)
    smallest = {p: min(r["bytes"] for r in analysis["rows"] if r["ranks"] == p) for p in ranks}
    title = ("Time per call of XLA's collectives and a ppermute ring against message size "
             "on logical CPU devices")
    desc = (f"One panel per device count p = {', '.join(map(str, ranks))}: median time per "
            f"call with its interval as a band, log-log, for sizes from "
            f"{', '.join(f'{format_bytes(b)} (p = {p})' for p, b in smallest.items())} to "
            f"{analysis['sizeLabels']['largest']}, with S divided by a single-thread memcpy "
            f"of {analysis['memcpyGBps']:.1f} GB/s for scale; calls fault in fresh pages for "
            f"their outputs from {analysis['faults']['labels']['onset']}.")
    return title, desc


def render(analysis, variant=STATIC):
    return render_panels(analysis, variant, legend, grid=(3, 2.3, 2.1),
                         sizes=[row["bytes"] for row in analysis["rows"]], plot=plot_times,
                         ylabel="median time per call\n(band: its interval)",
                         alt=alt_text(analysis))

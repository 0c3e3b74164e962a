"""Predicted collective times on a 4-chip TPU VM, and a TPU size sweep against them.

Drawn from lesson_code/figures/<lesson>-tpu-predictions.json (written by the lesson's
lesson_code/tpu_predictions.py, with a source for every input) and, once one exists, the
TPU size sweep recordings/<lesson>.tpu-sweep.json drawn over it; nothing is run here.
Top: the predicted microseconds at the three sizes the page names. Below: the model's
time against size for both VMs, the latency floor and the size where bandwidth takes
over; with a TPU sweep, its p = 4 medians as markers and, under them, measured over
predicted for the VM the recording ran on. The narrow drawing stacks the same parts for a
phone: the table across the whole width, the chart, then its legend below it.
"""
import textwrap

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from scripts.figures.palette import LIGHT
from scripts.figures.svg import figure_style, new_figure, svg_text
from scripts.figures.variants import NARROW_IN, STATIC
from scripts.units import format_bytes

# Okabe-Ito blue and vermillion (the palette's series 0 and 4) for the two VMs; all-reduce
# dashed, one phase solid.
VM_SERIES = (0, 4)
LABELS = {"reduce_scatter": "reduce-scatter", "all_gather": "all-gather",
          "all_reduce": "all-reduce"}
MARKERS = {"reduce_scatter": "o", "all_gather": "^", "all_reduce": "s"}
WIDTH_IN = 7.2
SMALL = 7.5


def table_text(data, narrow=False):
    """Rows of the table, one per VM and collective: microseconds at each size (the row's
    name on two lines in the narrow drawing)."""
    sizes = data["sizes"]
    rows = [["", *(format_bytes(size) for size in sizes)]]
    for name in data["machines"]:
        for collective in ("reduce_scatter", "all_reduce"):
            cells = {row["bytes"]: row for row in data["rows"]
                     if row["machine"] == name and row["collective"] == collective}
            label = f"{name}{chr(10) if narrow else ' '}{LABELS[collective]}" + (
                " / all-gather" if collective == "reduce_scatter" else "")
            rows.append([label, *(f"{cells[size]['predictedUs']:,.1f} µs" for size in sizes)])
    return rows


def machine_of(data, recording):
    """The VM whose prediction a TPU recording is checked against, from its device kind."""
    kind = recording["environment"]["deviceKind"]
    for name, machine in data["machines"].items():
        if kind in machine["deviceKinds"]:
            return name
    known = [k for machine in data["machines"].values() for k in machine["deviceKinds"]]
    raise ValueError(f"device kind {kind!r} is none of the predicted VMs' ({', '.join(known)})")


def row_medians(recording, collective, ranks, sizes):
    """{bytes: the median of the block medians} of a sweep recording (which keeps every
    sample of every block, one row per block), for one collective at `ranks`."""
    blocks = {}
    for row in recording["rows"]:
        if row["collective"] == collective and row["ranks"] == ranks and row["bytes"] in sizes:
            blocks.setdefault(row["bytes"], []).append(float(np.median(row["samplesUs"])))
    return {nbytes: float(np.median(found)) for nbytes, found in sorted(blocks.items())}


def measured(data, recording):
    """{collective: [(bytes, median us, median / predicted)]} at the predicted p."""
    name = machine_of(data, recording)
    points = {}
    for collective, curve in data["curve"][name].items():
        predicted = dict((size, us) for size, us in curve)
        medians = row_medians(recording, collective, data["chips"], predicted)
        points[collective] = [(nbytes, median, median / predicted[nbytes])
                              for nbytes, median in medians.items()]
    return name, points


def draw_prediction(ax, data, palette=LIGHT, small=SMALL, narrow=False):
    colours = [palette.series[i] for i in VM_SERIES]
    for index, ((name, machine), colour) in enumerate(zip(data["machines"].items(), colours)):
        for collective, style in (("reduce_scatter", "-"), ("all_reduce", "--")):
            sizes, times = zip(*data["curve"][name][collective])
            ax.plot(sizes, times, style, color=colour, linewidth=1.6,
                    label=f"{name}: {LABELS[collective]}"
                          + (" (= all-gather)" if collective == "reduce_scatter" else ""))
        crossover = machine["crossoverBytes"]
        ax.axvline(crossover, color=colour, linewidth=0.8, linestyle=":")
        # The first VM's label left of its line, the second's right: they never meet. On a
        # phone's width there is no room right of the second: both go left, one higher.
        left = index == 0 or narrow
        ax.text(crossover / 1.15 if left else crossover * 1.15, 30 if index == 0 else 400,
                f"{name}: bandwidth-\nbound from {format_bytes(crossover)}", color=colour,
                fontsize=small, ha="right" if left else "left", va="center")
    for size in data["sizes"]:
        ax.axvline(size, color=palette.grid, linewidth=0.8, zorder=0)


def size_axis(ax, label=True, small=SMALL):
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=32))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: format_bytes(value)))
    ax.tick_params(labelsize=small)
    ax.spines[["top", "right"]].set_visible(False)
    if label:
        ax.set_xlabel("bytes of the whole vector (V)", fontsize=small + 1.5)


def draw_table(ax, data, palette=LIGHT, bbox=(0.0, 1.08, 1.0, 0.55), narrow=False):
    # Narrow: the row names take half the width, on two lines each.
    widths = [0.5, 0.16, 0.16, 0.18] if narrow else None
    table = ax.table(cellText=table_text(data, narrow), loc="top", cellLoc="right",
                     bbox=bbox, edges="horizontal", colWidths=widths)
    table.auto_set_font_size(False)
    table.set_fontsize(7 if narrow else SMALL)
    for (row, column), cell in table.get_celld().items():
        cell.set_edgecolor(palette.grid)
        cell.set_facecolor(palette.paper)
        cell.get_text().set_color(palette.ink)
        if column == 0:
            cell.set_text_props(ha="left")
        if row == 0:
            cell.set_text_props(fontweight="bold")


def wide_canvas(overlay):
    """(figure, chart axes, ratio axes or None, where the table goes in chart axes units)."""
    if overlay is None:
        fig, ax = new_figure(figsize=(WIDTH_IN, 4.4))
        fig.subplots_adjust(left=0.12, right=0.98, top=0.64, bottom=0.17)
        return fig, ax, None, (0.0, 1.08, 1.0, 0.55)
    fig = Figure(figsize=(WIDTH_IN, 5.8))  # outside pyplot, as new_figure does
    ax, ratio_ax = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1.3]})
    fig.subplots_adjust(left=0.12, right=0.98, top=0.68, bottom=0.15, hspace=0.12)
    return fig, ax, ratio_ax, (0.0, 1.08, 1.0, 0.55)


# The narrow drawing's parts, top to bottom, in inches: title, table, chart (and the
# measured over predicted), axis label and legend, note.
NARROW_TOP_IN, NARROW_TABLE_IN, NARROW_CHART_IN, NARROW_RATIO_IN = 0.5, 1.55, 2.3, 1.0
NARROW_LEGEND_IN, NARROW_NOTE_IN = 1.5, 0.55  # the legend: 0.45 in more with the markers


def narrow_legend_in(overlay):
    return NARROW_LEGEND_IN + (0 if overlay is None else 0.45)
NARROW_LEFT, NARROW_RIGHT = 0.2, 0.96  # figure fractions: room for the µs tick labels


def narrow_canvas(overlay):
    ratio_in = 0 if overlay is None else NARROW_RATIO_IN + 0.1
    height = (NARROW_TOP_IN + NARROW_TABLE_IN + 0.25 + NARROW_CHART_IN + ratio_in
              + narrow_legend_in(overlay) + NARROW_NOTE_IN)
    fig = Figure(figsize=(NARROW_IN, height))
    top = 1 - (NARROW_TOP_IN + NARROW_TABLE_IN + 0.25) / height
    bottom = (narrow_legend_in(overlay) + NARROW_NOTE_IN) / height
    if overlay is None:
        ax, ratio_ax = fig.subplots(), None
    else:
        ax, ratio_ax = fig.subplots(2, 1, sharex=True, gridspec_kw={
            "height_ratios": [NARROW_CHART_IN, NARROW_RATIO_IN]})
    fig.subplots_adjust(left=NARROW_LEFT, right=NARROW_RIGHT, top=top, bottom=bottom,
                        hspace=0.1)
    # The table spans the whole width: from 0.03 to 0.97 of the figure, in axes units.
    chart_in = NARROW_CHART_IN if overlay is None else \
        (NARROW_CHART_IN + ratio_in) * NARROW_CHART_IN / (NARROW_CHART_IN + NARROW_RATIO_IN)
    span = NARROW_RIGHT - NARROW_LEFT
    table = ((0.03 - NARROW_LEFT) / span, 1 + 0.25 / chart_in, 0.94 / span,
             NARROW_TABLE_IN / chart_in)
    return fig, ax, ratio_ax, table


def render(data, overlay=None, variant=STATIC):
    if not isinstance(data, dict) or not isinstance(data.get("machines"), dict) or not all(
            isinstance(machine, dict) for machine in data["machines"].values()):
        # A list would fail as an AttributeError deep in the drawing, not in one line.
        raise ValueError("`machines` must map each VM's name to its object "
                         "(lesson_code/tpu_predictions.py writes it)")
    chips, hop = data["chips"], data["hopLatencyS"]
    palette, narrow = variant.palette, variant.narrow
    small, label = (7, 8) if narrow else (SMALL, 9)
    with figure_style(palette=palette):
        fig, ax, ratio_ax, table_box = (narrow_canvas if narrow else wide_canvas)(overlay)
        if overlay is None:
            title = data["title"]
        else:
            name, points = measured(data, overlay)
            kind = overlay["environment"]["deviceKind"]
            title = f"Measured on {chips} × {kind} ({name}) against the prediction"
        draw_prediction(ax, data, palette, small, narrow)
        size_axis(ax, label=overlay is None, small=small)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g} µs"))
        ax.set_ylabel("time of one call", fontsize=label)
        if overlay is not None:
            colour = palette.series[VM_SERIES[list(data["machines"]).index(name)]]
            for collective, rows in points.items():
                if rows:
                    sizes, medians, ratios = zip(*rows)
                    ax.plot(sizes, medians, MARKERS[collective], color=colour,
                            markerfacecolor=palette.paper, markersize=4.5,
                            label=f"measured median: {LABELS[collective]}")
                    ratio_ax.plot(sizes, ratios, MARKERS[collective] + "-", color=colour,
                                  markerfacecolor=palette.paper, markersize=4, linewidth=0.8)
            ratio_ax.axhline(1, color=palette.muted, linewidth=0.8)
            ratio_ax.set_yscale("log")
            ratio_ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"×{value:g}"))
            ratio_ax.set_ylabel("measured /\npredicted", fontsize=label)
            size_axis(ratio_ax, small=small)
        legend_title = "below the crossover both VMs pay the same hops"
        if narrow:  # below the chart, from the figure's left edge
            legend_top = (narrow_legend_in(overlay) + NARROW_NOTE_IN - 0.45) \
                / fig.get_figheight()
            ax.legend(fontsize=small, frameon=False, loc="upper left",
                      bbox_to_anchor=(0.01, legend_top), bbox_transform=fig.transFigure,
                      title=textwrap.fill(legend_title, 44), title_fontsize=small,
                      alignment="left")
        else:
            ax.legend(fontsize=small, frameon=False, loc="upper left", title=legend_title,
                      title_fontsize=small)
        draw_table(ax, data, palette, table_box, narrow)
        fig.suptitle(textwrap.fill(title, 40) if narrow else title, x=0.02, ha="left",
                     fontsize=9.5, fontweight="bold", color=palette.ink,
                     **({"y": 1 - 0.06 / fig.get_figheight(), "va": "top"} if narrow else {}))
        note = (f"Lines: a model, not a measurement: {data['model']}, T_hop = {hop * 1e6:g} "
                f"µs, p = {chips}; sources in the data file."
                + ("" if overlay is None else " Markers: the TPU sweep's medians."))
        note = textwrap.fill(note, 52) if narrow else note.replace(
            f"{data['model']}, T_hop", f"{data['model']},\nT_hop")
        fig.text(0.02, 0.01, note, fontsize=small, color=palette.muted, va="bottom")
        return svg_text(fig, title, describe(data, overlay))


def describe(data, overlay=None):
    parts = []
    for name, machine in data["machines"].items():
        rows = {(row["collective"], row["bytes"]): row["predictedUs"] for row in data["rows"]
                if row["machine"] == name}
        parts.append(f"{name}: a reduce-scatter or all-gather "
                     + ", ".join(f"{rows[('reduce_scatter', s)]:,.1f} µs at {format_bytes(s)}"
                                 for s in data["sizes"])
                     + f"; an all-reduce twice that; bandwidth-bound from "
                       f"{format_bytes(machine['crossoverBytes'])}")
    text = ("Predicted times on 4 TPU chips, from the scaling book's ring model, before any "
            "TPU run. " + ". ".join(parts) + ".")
    if overlay is not None:
        name, points = measured(data, overlay)
        ratios = [ratio for rows in points.values() for _, _, ratio in rows]
        text += (f" Measured on {overlay['environment']['deviceKind']}: the medians of the "
                 f"size sweep at p = {data['chips']} are {min(ratios):.2g} to "
                 f"{max(ratios):.2g} times the {name} prediction.")
    return text

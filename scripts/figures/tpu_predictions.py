"""Predicted collective times on a 4-chip TPU VM at p = 2 and 4 (the lesson's predictions
file), and a TPU size sweep's own costs drawn over them once one exists. Data rows, by
`part`: the `table`'s cells, the `curve`'s points, each `crossover` and, over a sweep, each
`measured` own cost.
"""
import textwrap

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

from scripts.figures.svg import figure_style, svg_text
from scripts.figures.variants import NARROW_IN, NARROW_SMALL, STATIC, WIDE_IN, WIDE_SMALL
from scripts.sweep.analysis import own_costs, predicted_machine
from scripts.units import format_bytes, format_microseconds

# Okabe-Ito blue and vermillion for the two VMs; p = 4 solid, p = 2 dotted.
VM_SERIES = (0, 4)
MARKERS = {"reduce_scatter": "o", "all_gather": "^", "all_reduce": "s"}
RANK_STYLES = {4: "-", 2: ":"}


def table_text(data, narrow=False):
    """Rows of the table, one per VM and p: one phase's microseconds at each size."""
    sizes = data["sizes"]
    bands = {row["bytes"]: row["band"] for row in data["rows"]}
    band = "" if narrow else "band "
    rows = [["one phase", *(f"{format_bytes(size)} ({band}{bands[size]['low']:g}–"
                            f"{bands[size]['high']:g}×)" for size in sizes)]]
    for name in data["machines"]:
        for ranks in data["ranks"]:
            cells = {row["bytes"]: row for row in data["rows"] if row["machine"] == name
                     and row["ranks"] == ranks and row["collective"] == "reduce_scatter"}
            label = f"{name}{chr(10) if narrow else ' '}p = {ranks}"
            rows.append([label, *(f"{cells[size]['predictedUs']:,.1f} µs" for size in sizes)])
    return rows


def rows(data, overlay=None):
    found = [{"part": "table", "machine": row["machine"], "ranks": row["ranks"],
              "bytes": row["bytes"], "predictedUs": row["predictedUs"]}
             for row in data["rows"] if row["collective"] == "reduce_scatter"]
    found += [{"part": "curve", "machine": name, "ranks": int(ranks), "bytes": size,
               "predictedUs": us}
              for name in data["machines"] for ranks in map(str, data["ranks"])
              for size, us in data["curve"][name][ranks]["reduce_scatter"]]
    found += [{"part": "crossover", "machine": name, "ranks": int(ranks), "bytes": nbytes}
              for name, machine in data["machines"].items()
              for ranks, nbytes in machine["crossoverBytes"].items()]
    if overlay is not None:
        name, points = measured(data, overlay)
        found += [{"part": "measured", "machine": name, "ranks": ranks,
                   "collective": collective, "bytes": nbytes, "ownCostUs": cost,
                   "measuredOverPredicted": ratio}
                  for (collective, ranks), drawn in points.items() for nbytes, cost, ratio in drawn]
    return found


def measured(data, recording):
    """(VM, {(collective, p): [(bytes, own cost us, over predicted)]}) at the predicted p."""
    name = predicted_machine(data, recording["environment"]["deviceKind"])
    costs, _ = own_costs(recording)
    points = {}
    for ranks in data["ranks"]:
        for collective, curve in data["curve"][name][str(ranks)].items():
            predicted = dict(curve)
            points[collective, ranks] = [
                (nbytes, float(np.median(found)), float(np.median(found)) / predicted[nbytes])
                for (c, p, nbytes), found in sorted(costs.items())
                if c == collective and p == ranks and nbytes in predicted]
    return name, points


def draw_prediction(ax, data, palette, small, narrow):
    colours = [palette.series[i] for i in VM_SERIES]
    for index, ((name, machine), colour) in enumerate(zip(data["machines"].items(), colours)):
        for ranks in sorted(data["ranks"], reverse=True):
            sizes, times = zip(*data["curve"][name][str(ranks)]["reduce_scatter"])
            ax.plot(sizes, times, RANK_STYLES.get(ranks, "--"), color=colour, linewidth=1.6,
                    label=f"{name}, p = {ranks}: one phase")
        crossover = machine["crossoverBytes"][str(max(data["ranks"]))]
        ax.axvline(crossover, color=colour, linewidth=0.8, linestyle=":")
        # The labels sit on either side of their lines; on a phone, both left, one higher.
        left = index == 0 or narrow
        ax.text(crossover / 1.15 if left else crossover * 1.15, 30 if index == 0 else 400,
                f"{name}, p = {max(data['ranks'])}: bandwidth-\nbound from "
                f"{format_bytes(crossover)}", color=colour,
                fontsize=small, ha="right" if left else "left", va="center")
    for size in data["sizes"]:
        ax.axvline(size, color=palette.grid, linewidth=0.8, zorder=0)


def size_axis(ax, small, label=True):
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=32))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(format_bytes))
    ax.tick_params(labelsize=small)
    ax.spines[["top", "right"]].set_visible(False)
    if label:
        ax.set_xlabel("bytes of the whole vector (V)", fontsize=small + 1.5)


def draw_table(ax, data, palette, bbox, narrow):
    widths = [0.4, 0.3, 0.3] if narrow else None
    table = ax.table(cellText=table_text(data, narrow), loc="top", cellLoc="right",
                     bbox=bbox, edges="horizontal", colWidths=widths)
    table.auto_set_font_size(False)
    table.set_fontsize(NARROW_SMALL if narrow else WIDE_SMALL)
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
    fig = Figure(figsize=(WIDE_IN, 4.4 if overlay is None else 5.8))  # outside pyplot
    if overlay is None:
        ax, ratio_ax = fig.subplots(), None
        fig.subplots_adjust(left=0.12, right=0.98, top=0.64, bottom=0.17)
    else:
        ax, ratio_ax = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1.3]})
        fig.subplots_adjust(left=0.12, right=0.98, top=0.68, bottom=0.15, hspace=0.12)
    return fig, ax, ratio_ax, (0.0, 1.08, 1.0, 0.55)


# The narrow drawing's parts, top to bottom, in inches.
NARROW_TOP_IN, NARROW_TABLE_IN, NARROW_CHART_IN, NARROW_RATIO_IN = 0.5, 1.55, 2.3, 1.0
NARROW_LEGEND_IN, NARROW_NOTE_IN = 1.5, 0.85  # the legend: 0.45 in more with the markers
NARROW_LEFT, NARROW_RIGHT = 0.2, 0.96  # figure fractions: room for the µs tick labels


def narrow_legend_in(overlay):
    return NARROW_LEGEND_IN + (0 if overlay is None else 0.45)


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
    fig.subplots_adjust(left=NARROW_LEFT, right=NARROW_RIGHT, top=top, bottom=bottom, hspace=0.1)
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
        raise ValueError("`machines` must map each VM's name to its object "
                         "(lesson_code/tpu_predictions.py writes it)")
    chips, hop = data["chips"], data["hopLatencyS"]
    palette, narrow = variant.palette, variant.narrow
    small, label = (NARROW_SMALL, 8) if narrow else (WIDE_SMALL, 9)
    with figure_style(palette=palette):
        fig, ax, ratio_ax, table_box = (narrow_canvas if narrow else wide_canvas)(overlay)
        title = data["title"]
        draw_prediction(ax, data, palette, small, narrow)
        size_axis(ax, label=overlay is None, small=small)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(format_microseconds))
        ax.set_ylabel("time of one call", fontsize=label)
        if overlay is not None:
            name, points = measured(data, overlay)
            kind = overlay["environment"]["deviceKind"]
            title = f"Measured on {chips} × {kind} ({name}) against the prediction"
            ax.set_ylim(0.5, 1e5)  # room above the markers for the legend's seven entries
            colour = palette.series[VM_SERIES[list(data["machines"]).index(name)]]
            every_ratio = [1.0]
            for (collective, ranks), rows in points.items():
                if rows:
                    sizes, medians, ratios = zip(*rows)
                    every_ratio += ratios
                    filled = ranks == max(data["ranks"])  # hollow: p = 2, unlabelled
                    face = colour if filled else palette.paper
                    ax.plot(sizes, medians, MARKERS[collective], color=colour, markersize=4.5,
                            markerfacecolor=face,
                            label=f"own cost: {collective.replace('_', '-')}" if filled else None)
                    ratio_ax.plot(sizes, ratios, MARKERS[collective] + RANK_STYLES.get(ranks, "--"),
                                  color=colour, markerfacecolor=face, markersize=4, linewidth=0.8)
            ratio_ax.axhline(1, color=palette.muted, linewidth=0.8)
            band = data["bands"]["bandwidth"]
            ratio_ax.axhspan(band["low"], band["high"], color=palette.shade, linewidth=0, zorder=0)
            ratio_ax.set_yscale("log")
            low = min(min(every_ratio), band["low"]) / 1.3
            high = max(max(every_ratio), band["high"]) * 1.3
            ratio_ax.set_ylim(low, high)
            ticks = [2.0**k for k in range(-8, 9) if low <= 2.0**k <= high]
            ratio_ax.yaxis.set_major_locator(FixedLocator(ticks))
            ratio_ax.yaxis.set_minor_locator(NullLocator())
            ratio_ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"×{value:g}"))
            ratio_ax.set_ylabel("measured /\npredicted", fontsize=label)
            size_axis(ratio_ax, small=small)
        legend_title = "below the crossover both VMs pay the same hops"
        below_the_chart = {"alignment": "left", "bbox_transform": fig.transFigure,  # narrow
                           "bbox_to_anchor": (0.01, (narrow_legend_in(overlay) + NARROW_NOTE_IN
                                                     - 0.45) / fig.get_figheight())}
        ax.legend(fontsize=small, frameon=False, loc="upper left", title_fontsize=small,
                  title=textwrap.fill(legend_title, 44) if narrow else legend_title,
                  **(below_the_chart if narrow else {}))
        draw_table(ax, data, palette, table_box, narrow)
        fig.suptitle(textwrap.fill(title, 40) if narrow else title, x=0.02, ha="left",
                     fontsize=9.5, fontweight="bold", color=palette.ink,
                     **({"y": 1 - 0.06 / fig.get_figheight(), "va": "top"} if narrow else {}))
        note = (f"Lines: a model, not a measurement: {data['model']}, T_hop = {hop * 1e6:g} "
                f"µs; the model's all-reduce is two phases; sources in the data file."
                + ("" if overlay is None else " Markers: the TPU sweep's own cost per "
                   "collective (filled: p = 4, hollow: p = 2); shaded: the bandwidth band."))
        note = textwrap.fill(note, 52) if narrow else "\n".join(
            textwrap.fill(line, 118) for line in note.replace(
                f"{data['model']}, T_hop", f"{data['model']},\nT_hop").split("\n"))
        fig.text(0.02, 0.01, note, fontsize=small, color=palette.muted, va="bottom")
        return svg_text(fig, title, describe(data, overlay))


def describe(data, overlay=None):
    parts = []
    for name, machine in data["machines"].items():
        for ranks in data["ranks"]:
            rows = {(row["collective"], row["bytes"]): row["predictedUs"] for row in data["rows"]
                    if row["machine"] == name and row["ranks"] == ranks}
            parts.append(f"{name} at p = {ranks}: a reduce-scatter or all-gather "
                         + ", ".join(f"{rows[('reduce_scatter', s)]:,.1f} µs at {format_bytes(s)}"
                                     for s in data["sizes"])
                         + f"; bandwidth-bound from "
                           f"{format_bytes(machine['crossoverBytes'][str(ranks)])}")
    text = (f"Predicted times on {data['chips']} TPU chips, from the scaling book's ring model "
            "with (p - 1)/p kept, before any TPU run; the model's all-reduce is two phases. "
            + ". ".join(parts) + ".")
    if overlay is not None:
        name, points = measured(data, overlay)
        ratios = [ratio for rows in points.values() for _, _, ratio in rows]
        text += (f" Measured on {overlay['environment']['deviceKind']}: each collective's own "
                 f"cost in the size sweep at p = {' and '.join(map(str, data['ranks']))} is "
                 f"{min(ratios):.2g} to {max(ratios):.2g} times the {name} prediction.")
    return text

"""Bytes each process sent, beside the ring model, from the multi-process recording's
`data.traffic` and `data.ringTraffic`: a panel per gradient size, in each a pair of groups
per collective (gloo's, then the ring from ppermute). Data rows: one per dot.
"""
import textwrap

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, MultipleLocator, NullLocator

from scripts.figures.svg import figure_style, new_figure, svg_text
from scripts.figures.variants import NARROW_IN, NARROW_SMALL, STATIC, WIDE_IN, WIDE_SMALL
from scripts.units import format_bytes

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather")
# Okabe-Ito blue and vermillion (the palette's first and fifth colours) tell the two
# algorithms apart; they differ in marker shape too, so the figure reads in greyscale.
ALGORITHMS = (("gloo", "XLA's collective (gloo)", 0, "o"),
              ("ring", "ring from ppermute", 4, "s"))
RANK_SPREAD = 0.5  # the ranks' dots fill this much of a group's width, 0 on the left


def ratio_label(ratios, narrow=False):
    """`×1.001`, or `×1.000–1.334` when the ranks sent different amounts."""
    low, high = min(ratios), max(ratios)
    spec = ".4f" if high < 1.01 and not narrow else ".3f" if high < 2 else ".0f"
    low, high = format(low, spec), format(high, spec)
    return f"×{high}" if low == high else f"×{low}{chr(10) if narrow else ''}–{high}"


def groups_of(data, size):
    """(collective, algorithm key, row) in drawing order for one gradient size."""
    by_algorithm = {"gloo": data["traffic"], "ring": data["ringTraffic"]}
    found = []
    for collective in COLLECTIVES:
        for key, *_ in ALGORITHMS:
            row = next(r for r in by_algorithm[key]
                       if r["collective"] == collective and r["gradientBytes"] == size)
            found.append((collective, key, row))
    return found


def sizes_of(data):
    return sorted({row["gradientBytes"] for row in data["traffic"]})


def rows(recording):
    data = recording["data"]
    return [{"gradientBytes": size, "collective": collective, "algorithm": key, "rank": rank,
             "observedBytes": observed, "modelBytes": row["modelBytesPerRank"],
             "calls": row["calls"]}
            for size in sizes_of(data) for collective, key, row in groups_of(data, size)
            for rank, observed in enumerate(row["observedBytesPerRank"])]


def draw_panel(ax, groups, log_scale, palette, narrow):
    small, label = (NARROW_SMALL, 8) if narrow else (WIDE_SMALL, 9)
    ink = palette.ink
    style = {key: (palette.series[colour], marker) for key, _, colour, marker in ALGORITHMS}
    ranks = len(groups[0][2]["observedBytesPerRank"])
    offsets = RANK_SPREAD * (np.arange(ranks) / (ranks - 1) - 0.5)  # rank 0 on the left
    for x, (_, key, row) in enumerate(groups):
        color, marker = style[key]
        model = row["modelBytesPerRank"]
        observed = np.asarray(row["observedBytesPerRank"])
        # The model is a level, not a quantity stacked from zero: a line across the group.
        ax.hlines(model, x - 0.4, x + 0.4, colors=ink, linestyles="--", linewidth=1.2)
        ax.plot(x + offsets, observed, marker, color=color, markersize=5.5,
                markeredgecolor=ink, markeredgewidth=0.5, linestyle="none")
        ax.annotate(ratio_label(observed / model, narrow), (x, max(observed.max(), model)),
                    xytext=(0, 6), textcoords="offset points", ha="center",
                    fontsize=small, color=ink, linespacing=1.1)
    ax.set_xticks(range(len(groups)), [key for _, key, _ in groups], fontsize=small)
    for pair, collective in enumerate(COLLECTIVES):
        # Under each pair of groups, the collective they both perform.
        ax.text(2 * pair + 0.5, -0.16, collective.replace("_", "-"), ha="center", va="top",
                transform=ax.get_xaxis_transform(), fontsize=label, color=ink)
        if pair:
            ax.axvline(2 * pair - 0.5, color=palette.grid, linewidth=0.8)
    ax.set_xlim(-0.6, len(groups) - 0.4)
    if log_scale:
        ax.set_yscale("log")
        low, high = ax.get_ylim()
        ax.set_ylim(low / 1.5, high * (4 if narrow else 2.5))  # headroom for the ratios
        # Powers of 4 read as sizes people write (64 B, 1 KiB), not "1e+03 B".
        ax.yaxis.set_major_locator(LogLocator(base=4))
        ax.yaxis.set_minor_locator(NullLocator())
    else:
        highest = max(max(row["observedBytesPerRank"]) for _, _, row in groups)
        ax.set_ylim(0, highest * (1.3 if narrow else 1.2))
        ax.yaxis.set_major_locator(MultipleLocator(groups[0][2]["gradientBytes"] / 4))
    ax.yaxis.set_major_formatter(FuncFormatter(format_bytes))
    ax.tick_params(axis="y", labelsize=small)
    ax.set_ylabel("bytes per rank per call", fontsize=label)
    ax.spines[["top", "right"]].set_visible(False)
    gradient = groups[0][2]["gradientBytes"]
    scale = "log scale" if log_scale else "linear scale"
    title = f"gradient G = {format_bytes(gradient)} ({gradient // 4:,} float32), {scale}"
    ax.set_title(textwrap.fill(title, 38) if narrow else title, fontsize=label + 0.5,
                 color=ink, loc="left")


def describe(data, sizes, ranks, calls):
    parts = []
    for size in sizes:
        for collective, key, row in groups_of(data, size):
            observed = ", ".join(f"{b:,.0f}" for b in row["observedBytesPerRank"])
            parts.append(f"{collective.replace('_', '-')} of {format_bytes(size)} by "
                         f"{dict((k, name) for k, name, *_ in ALGORITHMS)[key]}: model "
                         f"{row['modelBytesPerRank']:,.0f} B, observed by rank {observed} B")
    return (f"Two panels, one per gradient size. For each collective, two groups: XLA's "
            f"collective as gloo runs it, and the ring built from ppermute. A dashed line "
            f"marks the idealized ring model; {ranks} dots, ranks 0 to {ranks - 1} from "
            f"left to right, the bytes each rank actually sent per call over loopback TCP, "
            f"averaged over {calls} calls. " + "; ".join(parts) + ".")


def render(recording, variant=STATIC):
    data, palette, narrow = recording["data"], variant.palette, variant.narrow
    sizes = sizes_of(data)
    first = data["traffic"][0]
    ranks, calls = len(first["observedBytesPerRank"]), first["calls"]
    ink, small = palette.ink, NARROW_SMALL if narrow else WIDE_SMALL
    width, panel_in, extra_in = (NARROW_IN, 3.2, 2.1) if narrow else (WIDE_IN, 3.0, 1.1)
    height = panel_in * len(sizes) + extra_in
    with figure_style(palette=palette):
        fig, axes = new_figure(nrows=len(sizes), figsize=(width, height))
        for ax, size in zip(np.atleast_1d(axes), sizes):
            # Small gradients: overhead is many times the payload, so only a log axis shows both.
            draw_panel(ax, groups_of(data, size), size < 2**16, palette, narrow)

        def fill(text, chars):
            return textwrap.fill(text, chars) if narrow else text

        heading = fill(f"Bytes each of {ranks} processes sent per call, against the ring model", 42)
        handles = [Line2D([], [], color=ink, linestyle="--", label=fill(
            "ring model: 2(p−1)/p·G all-reduce, (p−1)/p·G the others", 40))]
        handles += [Line2D([], [], color=palette.series[colour], marker=marker, linestyle="none",
                           markeredgecolor=ink, markeredgewidth=0.5,
                           label=f"{name}: ranks 0–{ranks - 1}, left to right")
                    for _, name, colour, marker in ALGORITHMS]
        note = (f"Above each group: observed ÷ model. Observed: TCP payload bytes sent, mean of "
                f"{calls} calls per rank, protocol overhead included.")
        if narrow:  # in inches from the edges, since the narrow canvas is taller than wide
            fig.suptitle(heading, y=1 - 0.08 / height, va="top", fontsize=9.5, color=ink)
            fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 1 - 0.5 / height),
                       ncols=1, frameon=False, fontsize=small)
            fig.text(0.5, 0.08 / height, textwrap.fill(note, 52), ha="center", va="bottom",
                     fontsize=small, color=ink, linespacing=1.4)
            fig.tight_layout(rect=(0, 0.7 / height, 1, 1 - 1.3 / height), h_pad=2.5)
        else:
            fig.suptitle(heading, fontsize=10.5, color=ink)
            fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.965), ncols=1,
                       frameon=False, fontsize=small)
            fig.text(0.5, 0.012, note.replace(" calls per rank, ", " calls per rank,\n"),
                     ha="center", fontsize=small, color=ink, linespacing=1.4)
            fig.tight_layout(rect=(0, 0.045, 1, 0.89), h_pad=2.5)
        title = (f"Observed vs modelled bytes per rank for {ranks} JAX processes over loopback: "
                 f"gloo's collectives and the ppermute ring")
        return svg_text(fig, title, describe(data, sizes, ranks, calls))

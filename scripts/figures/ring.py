"""Every chunk of a p-rank ring, step by step, one figure per phase (`part`), from the
simulation recording's trace (who sent which chunk, whose contributions each copy sums).
Data rows: one per step, rank and chunk.
"""
import textwrap
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from scripts.figures.svg import DETERMINISTIC, figure_style, svg_text
from scripts.figures.variants import NARROW_IN, STATIC, WIDE_IN

# Inches. Inside a collapsed hint the 7.2 in figure is 660 px wide: 7.3 points is 9.3 px.
MARGIN, RANK_GAP, CELL_H = 0.08, 0.14, 0.4
SMALL, TEXT = 7.3, 7.5  # point sizes: values in a cell; everything else at least TEXT
LINE = 0.15  # inches per line of TEXT


@dataclass(frozen=True)
class Layout:
    """How the grid sits on the canvas, and how many characters a line of text may hold."""
    width: float  # inches
    ranks_per_line: int  # 0: every rank on one line
    title_chars: int
    rule_chars: int
    note_chars: int  # room for a fallback font with wider letters (Verdana)
    legend_columns: int  # 0: the whole legend on one line


WIDE = Layout(WIDE_IN, 0, 200, 200, 100, 0)
# Two ranks a line: cells as wide as the wide drawing's, each step on two lines.
NARROW = Layout(NARROW_IN, 2, 40, 56, 46, 2)


@dataclass(frozen=True)
class Phase:
    title: str
    rule: str  # what the receiver does, in one line
    rows: list  # (label, state after the step, sends in the step)
    legend: tuple  # which cell looks occur
    bytes_note: str


def per_line(p, layout):
    return min(p, layout.ranks_per_line or p)


def cell_width(p, layout):
    k = per_line(p, layout)
    return (layout.width - 2 * MARGIN - (k - 1) * RANK_GAP) / (k * p)


def cell_x(rank, chunk, p, layout):
    slot = rank % per_line(p, layout)
    return MARGIN + slot * (p * cell_width(p, layout) + RANK_GAP) + chunk * cell_width(p, layout)


def cell_look(summed, p, palette):
    """Fill, text colour and top-line label of a copy that sums the ranks in `summed`."""
    if not summed:
        return (*palette.missing, "—")
    if len(summed) == p:
        return (*palette.full, "all")  # "0+1+2+3" would overflow the cell
    return (*(palette.own if len(summed) == 1 else palette.partial), "+".join(map(str, summed)))


def draw_row(ax, y, label, state, values, sends, p, layout, palette):
    """One step: its label, p rank blocks of p chunk cells, each rank's send and receive."""
    ax.text(MARGIN, y, label, va="bottom", fontsize=TEXT, fontweight="bold", color=palette.ink)
    y += 0.04
    got = {dst: (chunk, src) for src, dst, chunk in sends}
    width, k = cell_width(p, layout), per_line(p, layout)
    for first in range(0, p, k):
        if k < p:  # several lines: each block says whose it is
            for r in range(first, first + k):
                ax.text(cell_x(r, 0, p, layout) + p * width / 2, y + 0.02, f"rank {r}",
                        ha="center", va="top", fontsize=TEXT, fontweight="bold", color=palette.ink)
            y += LINE + 0.04
        for r in range(first, first + k):
            for c in range(p):
                fill, ink, top_line = cell_look(state[r][c], p, palette)
                arrived = got.get(r, (None,))[0] == c
                ax.add_patch(Rectangle(
                    (cell_x(r, c, p, layout), y), width, CELL_H, facecolor=fill,
                    edgecolor=palette.ink if arrived else palette.faint,
                    linewidth=2.2 if arrived else 0.8, linestyle="-" if state[r][c] else "--"))
                centre = cell_x(r, c, p, layout) + width / 2
                ax.text(centre, y + 0.3 * CELL_H, top_line, ha="center", va="center",
                        fontsize=TEXT if len(top_line) < 5 else SMALL, color=ink)
                if state[r][c]:
                    ax.text(centre, y + 0.73 * CELL_H,
                            ", ".join(f"{v:g}" for v in values[r][c]), ha="center",
                            va="center", fontsize=SMALL, color=ink)
        line_sends = [send for send in sends if first <= send[0] < first + k]
        for src, dst, chunk in line_sends:
            middle = cell_x(src, 0, p, layout) + p * width / 2
            received, sender = got[src]
            ax.text(middle, y + CELL_H + 0.05, f"sent c{chunk} → r{dst}\ngot c{received} "
                    f"← r{sender}", ha="center", va="top", fontsize=TEXT, color=palette.ink,
                    linespacing=1.25)
        y += CELL_H + (0.05 + 2 * LINE if line_sends else 0) + 0.14
    return y


def wrapped(text, chars):
    return textwrap.wrap(text, chars) or [""]


def draw_header(ax, phase, p, layout, palette):
    title = wrapped(phase.title, layout.title_chars)
    ax.text(MARGIN, 0.1, "\n".join(title), va="top", fontsize=9.5, fontweight="bold",
            color=palette.ink, linespacing=1.2)
    y = 0.1 + len(title) * 0.17 + 0.06
    rule = wrapped(phase.rule, layout.rule_chars)
    ax.text(MARGIN, y, "\n".join(rule), va="top", fontsize=TEXT, fontstyle="italic",
            color=palette.ink, linespacing=1.3)
    y += len(rule) * LINE * 1.3 + 0.07
    looks = {name: Patch(facecolor=fill, label=label, **{"edgecolor": palette.faint, **more})
             for name, fill, label, more in (
                 ("original", palette.own[0], "own contribution", {}),
                 ("partial", palette.partial[0], "partly reduced", {}),
                 ("full", palette.full[0], f"fully reduced (all {p})", {}),
                 ("missing", palette.missing[0], "not received yet", {"linestyle": "--"}),
                 ("arrived", palette.paper, "arrived this step",
                  {"edgecolor": palette.ink, "linewidth": 2.2}))}
    columns = layout.legend_columns or len(phase.legend)
    ax.legend(handles=[looks[name] for name in phase.legend], loc="upper left",
              bbox_to_anchor=(MARGIN - 0.08, y), bbox_transform=ax.transData,
              ncol=columns, frameon=False, fontsize=TEXT, labelcolor=palette.ink,
              handlelength=1.4, columnspacing=1.0, handletextpad=0.4)
    y += 0.22 * -(-len(phase.legend) // columns) + 0.21
    k = per_line(p, layout)
    for r in range(k):
        if k == p:  # one line of ranks: named once, here; otherwise in every line
            ax.text(cell_x(r, 0, p, layout) + p * cell_width(p, layout) / 2, y, f"rank {r}",
                    ha="center", va="center", fontsize=8.5, fontweight="bold", color=palette.ink)
        for c in range(p):
            ax.text(cell_x(r, c, p, layout) + cell_width(p, layout) / 2, y + 0.18, f"c{c}",
                    ha="center", va="center", fontsize=TEXT, color=palette.muted)
    return y + 0.32


def phases(trace):
    p, n = trace["ranks"], len(trace["contributions"][0])
    scatter, gather = trace["reduceScatter"], trace["allGather"]
    b_rs, b_ag, whole = scatter["bytesSent"][0], gather["bytesSent"][0], trace["vectorBytes"]

    # The all-gather moves finished sums: a copy it holds carries every contribution.
    def as_sums(state):
        return tuple(tuple(tuple(range(p)) if held else () for held in row) for row in state)

    setup = f"p = {p} ranks, {n} float32 values (G = {whole} B), simulated"
    return {
        "reduce_scatter": Phase(
            f"Ring reduce-scatter: {setup}",
            "Each step, every rank sends one chunk to rank r+1, which adds it to its own copy.",
            [("start", scatter["initial"], ())]
            # Counted from 1, as the step-through (docs/assets/ring-stepper.js) counts them.
            + [(f"step {k}", step["state"], step["sends"])
               for k, step in enumerate(scatter["steps"], start=1)],
            ("original", "partial", "full", "arrived"),
            f"Each rank sends {b_rs} bytes: {p - 1} chunks of G/p."),
        "all_gather": Phase(
            f"Ring all-gather: {setup}",
            "Each step, every rank forwards one finished chunk to rank r+1, which stores a "
            "copy.",
            [("start: after the reduce-scatter, rank r's finished chunk r",
              as_sums(gather["initial"]), ())]
            + [(f"step {k}", as_sums(step["state"]), step["sends"])
               for k, step in enumerate(gather["steps"], start=1)],
            ("full", "missing", "arrived"),
            f"Each rank sends {b_ag} bytes here; with the reduce-scatter's {b_rs}, "
            f"{b_rs + b_ag} bytes for a G = {whole}-byte all-reduce."),
    }


def copy_values(trace, state):
    """Each copy's example numbers, [rank][chunk] -> f32[n/p]."""
    p = trace["ranks"]
    contributions = np.asarray(trace["contributions"], dtype=np.float32)  # (p, n), n = 2p
    # A copy's numbers: the sum of its contributors' pieces of that chunk.
    chunks = contributions.reshape(p, p, -1)  # (p, n) -> (rank, chunk, n/p)
    return [[chunks[list(state[r][c]), c].sum(axis=0) for c in range(p)] for r in range(p)]


def rows(recording, *, part):
    trace = recording["data"]
    p, found = trace["ranks"], []
    for step, (_, state, sends) in enumerate(phases(trace)[part].rows):
        values = copy_values(trace, state)
        sent = {(src, chunk): dst for src, dst, chunk in sends}
        got = {(dst, chunk): src for src, dst, chunk in sends}
        for rank in range(p):
            for chunk in range(p):
                held = state[rank][chunk]
                found.append({
                    "step": step, "rank": rank, "chunk": chunk,
                    "sums": "+".join(map(str, held)) if held else None,
                    **{f"value{i}": float(v) if held else None
                       for i, v in enumerate(values[rank][chunk], start=1)},
                    "sentTo": sent.get((rank, chunk)), "arrivedFrom": got.get((rank, chunk))})
    return found


def ring_figure(trace, phase, layout, palette):
    p, n = trace["ranks"], len(trace["contributions"][0])
    fig = Figure(figsize=(layout.width, 1), facecolor=palette.paper)  # its height once drawn
    ax = fig.add_axes((0, 0, 1, 1))
    ax.axis("off")
    y = draw_header(ax, phase, p, layout, palette)
    for label, state, sends in phase.rows:
        y = draw_row(ax, y + LINE, label, state, copy_values(trace, state), sends, p, layout,
                     palette)
    # No-break spaces keep "[1, …, n]" on one line.
    note = (wrapped(f"In a cell: which ranks' contributions the copy sums, then its values; "
                    f"rank r contributes (r+1)·[1,\u00a0…,\u00a0{n}].", layout.note_chars)
            + wrapped(f"{phase.bytes_note} A simulation of the idealized ring schedule "
                      f"(lesson_code/ring.py), not a trace of what any runtime does.",
                      layout.note_chars))
    ax.text(MARGIN, y, "\n".join(note), va="top", fontsize=TEXT, color=palette.ink, linespacing=1.4)
    height = y + len(note) * LINE * 1.4 + 0.1
    fig.set_size_inches(layout.width, height)
    ax.set_xlim(0, layout.width)
    ax.set_ylim(height, 0)  # y grows downwards, in inches
    return fig


def describe(trace, name):
    p, b_rs = trace["ranks"], trace["reduceScatter"]["bytesSent"][0]
    b_ag, whole = trace["allGather"]["bytesSent"][0], trace["vectorBytes"]
    steps = (f"every rank holds only its own contribution. In each of the {p - 1} steps "
             f"every rank sends one chunk to the next rank, which adds it to its own copy; "
             f"under each rank, the chunk it sent and the chunk it got. After the last step "
             f"rank r holds chunk r fully reduced and its other chunks only as partial sums. "
             f"Each rank sends {b_rs} bytes" if name == "reduce_scatter" else
             f"rank r holds only chunk r, fully reduced. In each of the {p - 1} steps every "
             f"rank forwards a finished chunk to the next rank, which stores a copy, until "
             f"every rank holds all {p} fully reduced chunks. Each rank sends {b_ag} bytes, "
             f"{b_rs + b_ag} with the reduce-scatter,")
    return (f"A grid with one row per step and, for each of {p} ranks, one cell per chunk. "
            f"At the start {steps} for a {whole}-byte vector. A simulation of the idealized "
            f"ring schedule, not a measurement.")


def render(recording, variant=STATIC, *, part):
    trace = recording["data"]
    phase = phases(trace)[part]
    with figure_style(DETERMINISTIC, variant.palette):
        fig = ring_figure(trace, phase, NARROW if variant.narrow else WIDE, variant.palette)
        return svg_text(fig, phase.title, describe(trace, part))

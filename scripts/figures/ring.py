"""Every chunk of a p-rank ring, step by step, drawn from the simulation's recording.

The recording (<lesson>.simulation.json) holds lesson_code/ring.py's trace: who sent which
chunk at each step, and which ranks' contributions each copy sums. Nothing is simulated
here, and nothing in it is measured. One figure per phase (ring_reduce_scatter.py and
ring_all_gather.py are the renderers): each fits the page's content width at its own size.
"""
import textwrap
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from scripts.figures.svg import DETERMINISTIC, figure_style, svg_text

# Pale -> mid -> dark, so the three states stay apart in greyscale and for colour-blind
# readers; the figure background is opaque white, so they read the same on dark pages.
ORIGINAL, PARTIAL, FULL, MISSING = "#e3eef9", "#f6c667", "#2f6f4f", "#ffffff"
INK, FAINT = "#1f2328", "#8c959f"
# Data units are inches. 7.2 in is about the page's content width (690 px), so the figure
# is shown at its own size; inside a collapsed hint (build-the-ring) it is drawn 660 px
# wide, where 7.3-point text still lands at 9.3 px. On a phone the page links the figure
# full size.
WIDTH, MARGIN, RANK_GAP, CELL_H = 7.2, 0.08, 0.14, 0.4
SMALL, TEXT = 7.3, 7.5  # point sizes: values in a cell; everything else at least TEXT
LINE = 0.15  # inches per line of TEXT
# Characters of TEXT per line of the note: 7.04 in of 7.5-point DejaVu Sans holds about
# 120 average characters, and a fallback font with wider letters (Verdana) about 100.
NOTE_CHARS = 100


@dataclass(frozen=True)
class Phase:
    title: str
    rule: str  # what the receiver does, in one line
    rows: list  # (label, state after the step, sends in the step)
    legend: tuple  # which cell looks occur
    bytes_note: str


def cell_width(p):
    return (WIDTH - 2 * MARGIN - (p - 1) * RANK_GAP) / (p * p)


def cell_x(rank, chunk, p):
    return MARGIN + rank * (p * cell_width(p) + RANK_GAP) + chunk * cell_width(p)


def cell_look(summed, p):
    """Fill, text colour and top-line label of a copy that sums the ranks in `summed`."""
    if not summed:
        return MISSING, FAINT, "—"
    if len(summed) == p:
        return FULL, "white", "all"  # "0+1+2+3" would overflow the cell
    return (ORIGINAL if len(summed) == 1 else PARTIAL), INK, "+".join(map(str, summed))


def draw_row(ax, y, label, state, values, sends, p):
    """One step: its label, p rank blocks of p chunk cells, then each rank's send and
    receive, named from that rank's side."""
    ax.text(MARGIN, y, label, va="bottom", fontsize=TEXT, fontweight="bold", color=INK)
    y += 0.04
    got = {dst: (chunk, src) for src, dst, chunk in sends}
    width = cell_width(p)
    for r in range(p):
        for c in range(p):
            fill, ink, top_line = cell_look(state[r][c], p)
            arrived = got.get(r, (None,))[0] == c
            ax.add_patch(Rectangle(
                (cell_x(r, c, p), y), width, CELL_H, facecolor=fill,
                edgecolor=INK if arrived else FAINT, linewidth=2.2 if arrived else 0.8,
                linestyle="-" if state[r][c] else "--"))
            centre = cell_x(r, c, p) + width / 2
            ax.text(centre, y + 0.3 * CELL_H, top_line, ha="center", va="center",
                    fontsize=TEXT if len(top_line) < 5 else SMALL, color=ink)
            if state[r][c]:
                ax.text(centre, y + 0.73 * CELL_H, ", ".join(f"{v:g}" for v in values[r][c]),
                        ha="center", va="center", fontsize=SMALL, color=ink)
    for src, dst, chunk in sends:
        middle = cell_x(src, 0, p) + p * width / 2
        received, sender = got[src]
        ax.text(middle, y + CELL_H + 0.05, f"sent c{chunk} → r{dst}\ngot c{received} ← "
                f"r{sender}", ha="center", va="top", fontsize=TEXT, color=INK,
                linespacing=1.25)
    return y + CELL_H + (0.05 + 2 * LINE if sends else 0) + 0.14


def draw_header(ax, phase, p):
    ax.text(MARGIN, 0.1, phase.title, va="top", fontsize=9.5, fontweight="bold", color=INK)
    ax.text(MARGIN, 0.33, phase.rule, va="top", fontsize=TEXT, fontstyle="italic", color=INK)
    looks = {"original": Patch(facecolor=ORIGINAL, edgecolor=FAINT,
                               label="own contribution"),
             "partial": Patch(facecolor=PARTIAL, edgecolor=FAINT, label="partly reduced"),
             "full": Patch(facecolor=FULL, edgecolor=FAINT, label=f"fully reduced (all {p})"),
             "missing": Patch(facecolor=MISSING, edgecolor=FAINT, linestyle="--",
                              label="not received yet"),
             "arrived": Patch(facecolor="white", edgecolor=INK, linewidth=2.2,
                              label="arrived this step")}
    ax.legend(handles=[looks[name] for name in phase.legend], loc="upper left",
              bbox_to_anchor=(MARGIN - 0.08, 0.55), bbox_transform=ax.transData,
              ncol=len(phase.legend), frameon=False, fontsize=TEXT, labelcolor=INK,
              handlelength=1.4, columnspacing=1.0, handletextpad=0.4)
    for r in range(p):
        ax.text(cell_x(r, 0, p) + p * cell_width(p) / 2, 0.98, f"rank {r}", ha="center",
                va="center", fontsize=8.5, fontweight="bold", color=INK)
        for c in range(p):
            ax.text(cell_x(r, c, p) + cell_width(p) / 2, 1.16, f"c{c}", ha="center",
                    va="center", fontsize=TEXT, color=FAINT)
    return 1.3


def phases(trace):
    """The two phases of the trace, keyed by the figure that draws each."""
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
            # Steps counted from 0, as in lesson_code/ring.py and the pages (review L2).
            + [(f"step {s}", step["state"], step["sends"])
               for s, step in enumerate(scatter["steps"])],
            ("original", "partial", "full", "arrived"),
            f"Each rank sends {b_rs} bytes: {p - 1} chunks of G/p."),
        "all_gather": Phase(
            f"Ring all-gather: {setup}",
            "Each step, every rank forwards one finished chunk to rank r+1, which stores a "
            "copy.",
            [("start: after the reduce-scatter, rank r's finished chunk r",
              as_sums(gather["initial"]), ())]
            + [(f"step {s}", as_sums(step["state"]), step["sends"])
               for s, step in enumerate(gather["steps"])],
            ("full", "missing", "arrived"),
            f"Each rank sends {b_ag} bytes here; with the reduce-scatter's {b_rs}, "
            f"{b_rs + b_ag} bytes for a G = {whole}-byte all-reduce."),
    }


def note_lines(*sentences):
    """The note under a figure, wrapped to the canvas: a phase's byte count makes its
    sentence longer or shorter, and an unwrapped line runs off the right edge."""
    return [line for sentence in sentences for line in textwrap.wrap(sentence, NOTE_CHARS)]


def ring_figure(trace, phase):
    p = trace["ranks"]
    contributions = np.asarray(trace["contributions"], dtype=np.float32)  # (p, n), n = 2p
    n = contributions.shape[1]
    # The simulator records which contributions each copy sums; the example numbers of a
    # copy follow from that: the sum of those ranks' pieces of that chunk.
    chunks = contributions.reshape(p, p, n // p)  # (p, n) -> (rank, chunk, n/p)

    def values_of(state):
        return [[chunks[list(state[r][c]), c].sum(axis=0) for c in range(p)] for r in range(p)]

    fig = Figure(figsize=(WIDTH, 1), facecolor="white")  # its height once drawn
    ax = fig.add_axes((0, 0, 1, 1))
    ax.axis("off")
    y = draw_header(ax, phase, p)
    for label, state, sends in phase.rows:
        y = draw_row(ax, y + LINE, label, state, values_of(state), sends, p)
    note = note_lines(f"In a cell: which ranks' contributions the copy sums, then its "
                      f"values; rank r contributes (r+1)·[1, …, {n}].",
                      f"{phase.bytes_note} A simulation of the idealized ring schedule "
                      f"(lesson_code/ring.py), not a trace of what any runtime does.")
    ax.text(MARGIN, y, "\n".join(note), va="top", fontsize=TEXT, color=INK, linespacing=1.4)
    height = y + len(note) * LINE * 1.4 + 0.1
    fig.set_size_inches(WIDTH, height)
    ax.set_xlim(0, WIDTH)
    ax.set_ylim(height, 0)  # y grows downwards, in inches
    return fig


def describe(trace, name):
    p, b_rs = trace["ranks"], trace["reduceScatter"]["bytesSent"][0]
    b_ag, whole = trace["allGather"]["bytesSent"][0], trace["vectorBytes"]
    if name == "reduce_scatter":
        return (f"A grid with one row per step and, for each of {p} ranks, one cell per "
                f"chunk. At the start every rank holds only its own contribution. In each "
                f"of the {p - 1} steps every rank sends one chunk to the next rank, which "
                f"adds it to its own copy; under each rank, the chunk it sent and the chunk "
                f"it got. After the last step rank r holds chunk r fully reduced and its "
                f"other chunks only as partial sums. Each rank sends {b_rs} bytes for a "
                f"{whole}-byte vector. A simulation of the idealized ring schedule, not a "
                f"measurement.")
    return (f"A grid with one row per step and, for each of {p} ranks, one cell per chunk. "
            f"At the start rank r holds only chunk r, fully reduced. In each of the {p - 1} "
            f"steps every rank forwards a finished chunk to the next rank, which stores a "
            f"copy, until every rank holds all {p} fully reduced chunks. Each rank sends "
            f"{b_ag} bytes, {b_rs + b_ag} with the reduce-scatter, for a {whole}-byte "
            f"vector. A simulation of the idealized ring schedule, not a measurement.")


def render_phase(recording, name):
    """One phase's figure as SVG text; the same trace always gives the same bytes."""
    trace = recording["data"]
    phase = phases(trace)[name]
    # matplotlib's defaults: their sans-serif fallback list travels into the SVG.
    with figure_style(DETERMINISTIC):
        fig = ring_figure(trace, phase)
        return svg_text(fig, phase.title, describe(trace, name))

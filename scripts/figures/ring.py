"""Every chunk of a p-rank ring, step by step, drawn from the simulation's recording.

The recording (<lesson>.simulation.json) holds lesson_code/ring.py's trace: who sent which
chunk at each step, and which ranks' contributions each copy sums. Nothing is simulated
here, and nothing in it is measured.
"""
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from scripts.figures.svg import DETERMINISTIC, figure_style, svg_text

# Pale -> mid -> dark, so the three states stay apart in greyscale and for colour-blind
# readers; the figure background is opaque white, so they read the same on dark pages.
ORIGINAL, PARTIAL, FULL, MISSING = "#e3eef9", "#f6c667", "#2f6f4f", "#ffffff"
INK, FAINT = "#1f2328", "#8c959f"
# Layout in data units, y growing downwards. A page shows the figure about 800 px wide,
# so 0.5 in per unit keeps the 8.5-9.5 pt cell text near 9-10 px there.
CELL_W, CELL_H, RANK_GAP, LABEL_W, UNIT_IN = 1.1, 0.9, 0.6, 1.4, 0.5


def _cell_x(rank: int, chunk: int, p: int) -> float:
    return rank * (p * CELL_W + RANK_GAP) + chunk * CELL_W


def _cell_look(summed: tuple[int, ...], p: int) -> tuple[str, str, str]:
    """Fill, text colour and top-line label of a copy that sums the ranks in `summed`."""
    if not summed:
        return MISSING, FAINT, "—"
    if len(summed) == p:
        return FULL, "white", "all"  # "0+1+2+3" would overflow the cell
    return (ORIGINAL if len(summed) == 1 else PARTIAL), INK, "+".join(map(str, summed))


def _draw_row(ax, y, label, state, values, sends, p):
    """One step: p rank blocks of p chunk cells, then what each rank sent in this step."""
    arrived = {dst: chunk for _, dst, chunk in sends}
    ax.text(-0.3, y + CELL_H / 2, label, ha="right", va="center", fontsize=9, color=INK)
    for r in range(p):
        for c in range(p):
            fill, ink, top_line = _cell_look(state[r][c], p)
            just_arrived = arrived.get(r) == c
            ax.add_patch(Rectangle(
                (_cell_x(r, c, p), y), CELL_W, CELL_H, facecolor=fill,
                edgecolor=INK if just_arrived else FAINT, linewidth=2.4 if just_arrived else 0.8,
                linestyle="-" if state[r][c] else "--"))
            centre = _cell_x(r, c, p) + CELL_W / 2
            ax.text(centre, y + 0.3 * CELL_H, top_line, ha="center", va="center", fontsize=9.5,
                    color=ink, fontweight="bold")
            if state[r][c]:
                ax.text(centre, y + 0.72 * CELL_H, ", ".join(f"{v:g}" for v in values[r][c]),
                        ha="center", va="center", fontsize=8.5, color=ink)
    for src, dst, chunk in sends:
        ax.text(_cell_x(src, 0, p) + p * CELL_W / 2, y + CELL_H + 0.32,
                f"sends c{chunk} → rank {dst}", ha="center", va="center", fontsize=9,
                color=INK)


def _phases(scatter, gather, p):
    """(heading, rows) per phase; a row is (label, state after the step, sends in the step)."""
    # The all-gather moves finished sums: a copy it holds carries every contribution.
    def as_sums(state):
        return tuple(tuple(tuple(range(p)) if held else () for held in row) for row in state)

    return [
        ("Reduce-scatter: the receiver adds the incoming chunk to its own copy",
         [("start", scatter["initial"], ())]
         + [(f"step {s + 1}", step["state"], step["sends"])
            for s, step in enumerate(scatter["steps"])]),
        ("All-gather: only finished chunks travel; the receiver stores a copy "
         "(its partial sums are no longer needed)",
         [(f"step {s + 1}", as_sums(step["state"]), step["sends"])
          for s, step in enumerate(gather["steps"])]),
    ]


def _draw_header(ax, left, p, n):
    ax.text(left, 0.55, f"Ring reduce-scatter, then ring all-gather: p = {p} ranks, "
            f"{n} float32 values, simulated", va="center", fontsize=12, fontweight="bold",
            color=INK)
    handles = [
        Patch(facecolor=ORIGINAL, edgecolor=FAINT, label="original contribution"),
        Patch(facecolor=PARTIAL, edgecolor=FAINT, label="partly reduced"),
        Patch(facecolor=FULL, edgecolor=FAINT, label=f"fully reduced (all {p})"),
        Patch(facecolor=MISSING, edgecolor=FAINT, linestyle="--", label="not received yet"),
        Patch(facecolor="white", edgecolor=INK, linewidth=2.4, label="arrived this step"),
    ]
    ax.legend(handles=handles, loc="center left", bbox_to_anchor=(left - 0.1, 1.3),
              bbox_transform=ax.transData, ncol=len(handles), frameon=False, fontsize=9.5,
              labelcolor=INK, handlelength=1.6, columnspacing=1.4)
    for r in range(p):
        ax.text(_cell_x(r, 0, p) + p * CELL_W / 2, 2.1, f"rank {r}", ha="center",
                va="center", fontsize=10, fontweight="bold", color=INK)
        for c in range(p):
            ax.text(_cell_x(r, c, p) + CELL_W / 2, 2.65, f"c{c}", ha="center", va="center",
                    fontsize=8.5, color=FAINT)


def _ring_figure(trace):
    p = trace["ranks"]
    contributions = np.asarray(trace["contributions"], dtype=np.float32)  # (p, n), n = 2p
    scatter, gather = trace["reduceScatter"], trace["allGather"]
    n = contributions.shape[1]
    b_rs, b_ag, whole = scatter["bytesSent"][0], gather["bytesSent"][0], trace["vectorBytes"]

    # The simulator records which contributions each copy sums; the example numbers of a
    # copy follow from that: the sum of those ranks' pieces of that chunk.
    chunks = contributions.reshape(p, p, n // p)  # (p, n) -> (rank, chunk, n/p)

    def values_of(state):
        return [[chunks[list(state[r][c]), c].sum(axis=0) for c in range(p)] for r in range(p)]

    phases = _phases(scatter, gather, p)
    right = _cell_x(p - 1, p, p) + 0.2
    height = 3.0 + len(phases) * 0.8 + sum(len(rows) for _, rows in phases) * 1.75 + 1.7
    fig = Figure(figsize=((LABEL_W + right) * UNIT_IN, height * UNIT_IN), facecolor="white")
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(-LABEL_W, right)
    ax.set_ylim(height, 0)
    ax.axis("off")

    left = -LABEL_W + 0.15
    _draw_header(ax, left, p, n)
    y = 3.0
    for heading, rows in phases:
        ax.text(left, y + 0.35, heading, va="center", fontsize=10, fontstyle="italic",
                color=INK)
        y += 0.8
        for label, state, sends in rows:
            _draw_row(ax, y, label, state, values_of(state), sends, p)
            y += 1.75
    ax.text(left, y + 0.1,
            f"In a cell: which ranks' contributions the copy sums, then its values. Rank r "
            f"contributes (r+1)·[1, …, {n}].\nEach rank sends {b_rs} bytes in the "
            f"reduce-scatter and {b_ag} in the all-gather: {b_rs + b_ag} bytes for a "
            f"G = {whole}-byte vector.\nA simulation of the idealized ring schedule, "
            f"not a trace of what any runtime does.",
            va="top", fontsize=9, color=INK, linespacing=1.5)

    desc = (
        f"A grid with one row per step and, for each of {p} ranks, one cell per chunk. At "
        f"the start every rank holds only its own contribution. In each of the {p - 1} "
        f"reduce-scatter steps every rank sends one chunk to the next rank, which adds it to "
        f"its own copy; after the last step rank r holds chunk r fully reduced and its other "
        f"chunks only as partial sums. In each of the {p - 1} all-gather steps every rank "
        f"forwards a finished chunk, which the next rank copies, until every rank holds all "
        f"{p} fully reduced chunks. Each rank sends {b_rs} bytes per phase, {b_rs + b_ag} in "
        f"all, for a {whole}-byte vector. A simulation of the idealized ring schedule, not a "
        f"measurement."
    )
    return fig, desc


def render(recording):
    """The ring figure as SVG text; the same trace always gives the same bytes."""
    trace = recording["data"]
    title = (f"Ring reduce-scatter and all-gather, chunk by chunk "
             f"(p = {trace['ranks']}, simulated)")
    # matplotlib's defaults: their sans-serif fallback list travels into the SVG.
    with figure_style(DETERMINISTIC):
        fig, desc = _ring_figure(trace)
        return svg_text(fig, title, desc)

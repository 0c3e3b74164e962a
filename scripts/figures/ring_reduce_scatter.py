"""The ring's reduce-scatter phase, chunk by chunk, from the simulation recording (ring.py).

Data rows: one per step, rank and chunk (ring.py's docstring names the columns).
"""
from scripts.figures.ring import phase_rows, render_phase
from scripts.figures.variants import STATIC


def render(recording, variant=STATIC):
    return render_phase(recording, "reduce_scatter", variant)


def rows(recording):
    return phase_rows(recording, "reduce_scatter")

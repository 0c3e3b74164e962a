"""The ring's all-gather phase, chunk by chunk, from the simulation's recording (see ring.py).

Data rows: one per step, rank and chunk (ring.py's docstring names the columns).
"""
from scripts.figures.ring import phase_rows, render_phase
from scripts.figures.variants import STATIC


def render(recording, variant=STATIC):
    return render_phase(recording, "all_gather", variant)


def rows(recording):
    return phase_rows(recording, "all_gather")

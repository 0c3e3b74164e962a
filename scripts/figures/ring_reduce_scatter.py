"""The ring's reduce-scatter phase, chunk by chunk, from the simulation recording (ring.py)."""
from scripts.figures.ring import render_phase


def render(recording):
    return render_phase(recording, "reduce_scatter")

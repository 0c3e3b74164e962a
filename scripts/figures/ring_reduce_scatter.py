"""The ring's reduce-scatter phase, chunk by chunk, from the simulation recording (ring.py)."""
from scripts.figures.ring import render_phase
from scripts.figures.variants import STATIC


def render(recording, variant=STATIC):
    return render_phase(recording, "reduce_scatter", variant)

"""The ring's all-gather phase, chunk by chunk, from the simulation's recording (see ring.py)."""
from scripts.figures.ring import render_phase
from scripts.figures.variants import STATIC


def render(recording, variant=STATIC):
    return render_phase(recording, "all_gather", variant)

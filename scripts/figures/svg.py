"""Deterministic, accessible SVG out of a matplotlib figure, with matplotlib state confined.

Determinism is what lets a test compare a committed figure with a fresh rendering byte for
byte: no date, a fixed hash salt for element ids, and text kept as <text> (selectable,
searchable, no per-run glyph ids). Every renderer draws inside figure_style(), which starts
from matplotlib's defaults and restores the caller's settings on the way out, so no
renderer can change another's bytes; it takes the drawing's palette (palette.py), whose
paper and ink become matplotlib's defaults for that drawing.
"""
import io
import re
from contextlib import contextmanager
from xml.sax.saxutils import escape

import matplotlib
from matplotlib.figure import Figure

from scripts.figures.palette import LIGHT

# What every renderer needs, whatever its look: repeatable element ids, text as <text>.
# The salt only has to be fixed, not meaningful; changing it changes every figure's bytes.
DETERMINISTIC = {"svg.hashsalt": "lesson-figure", "svg.fonttype": "none"}

STYLE = {
    **DETERMINISTIC,
    # The default sans-serif list travels into the SVG, so browsers without DejaVu
    # fall back to their own sans-serif instead of a serif font.
    "font.size": 10,
}


def palette_style(palette):
    """The rcParams that give paper and ink their palette's colours (palette.py): what a
    renderer does not colour itself (tick labels, axes, legend text) follows the palette."""
    return {"figure.facecolor": palette.paper, "axes.facecolor": palette.paper,
            "savefig.facecolor": palette.paper, "text.color": palette.ink,
            "axes.labelcolor": palette.ink, "axes.edgecolor": palette.ink,
            "xtick.color": palette.ink, "ytick.color": palette.ink,
            "grid.color": palette.grid, "legend.labelcolor": palette.ink,
            "patch.edgecolor": palette.ink}


@contextmanager
def figure_style(style=STYLE, palette=LIGHT):
    """matplotlib's defaults plus `style` in `palette`'s colours, for one drawing only."""
    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        matplotlib.rcParams.update({**style, **palette_style(palette)})
        yield


def new_figure(**kwargs):
    """A Figure and its axes, outside pyplot: nothing global keeps a reference to it."""
    subplot_args = {k: kwargs.pop(k) for k in ("nrows", "ncols", "squeeze") if k in kwargs}
    fig = Figure(**kwargs)
    return fig, fig.subplots(**subplot_args)


FONT_FAMILY = re.compile(r"font-family: ([^;\"]+);? ?")
NO_ROTATION = re.compile(r' transform="rotate\(-0 [-0-9. ]+\)"')
STYLE_ELEMENT = '<style type="text/css">'


def compact(svg):
    """The same drawing in fewer bytes: matplotlib writes the whole font-family list into
    every <text> (about 200 bytes each, 37 KB of a ring figure's 82) and a rotation by
    -0 degrees beside it. One family for every text becomes one rule in the SVG's own
    stylesheet, which the browser applies to each <text> that no longer names one."""
    families = set(FONT_FAMILY.findall(svg))
    svg = NO_ROTATION.sub("", svg)
    if len(families) != 1 or STYLE_ELEMENT not in svg:
        return svg  # several families: each text keeps its own
    family = families.pop()
    svg = FONT_FAMILY.sub("", svg).replace(' style=""', "")
    return svg.replace(STYLE_ELEMENT, f"{STYLE_ELEMENT}text{{font-family: {family}}}", 1)


def svg_text(fig, title, desc):
    """The figure as SVG text, with <title> and <desc> for screen readers."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    svg = compact(buffer.getvalue())
    start = svg.index("<svg")
    end = svg.index(">", start) + 1
    accessible = f"\n <title>{escape(title)}</title>\n <desc>{escape(desc)}</desc>"
    opening = svg[start:end].replace("<svg ", '<svg role="img" ', 1)
    return svg[:start] + opening + accessible + svg[end:]

"""Deterministic, accessible SVG out of a matplotlib figure, with matplotlib state confined:
no date, a fixed hash salt, text as <text>, so a fresh rendering equals the committed one
byte for byte; figure_style() restores the caller's settings, so no renderer changes
another's bytes.
"""
import io
import re
from contextlib import contextmanager
from xml.sax.saxutils import escape

import matplotlib
from matplotlib.figure import Figure

from scripts.figures.palette import LIGHT

# The salt only has to be fixed; changing it changes every figure's bytes.
DETERMINISTIC = {"svg.hashsalt": "lesson-figure", "svg.fonttype": "none"}

# The default sans-serif list travels into the SVG, so browsers without DejaVu fall back to
# their own sans-serif instead of a serif font.
STYLE = {**DETERMINISTIC, "font.size": 10}


@contextmanager
def figure_style(style=STYLE, palette=LIGHT):
    """matplotlib's defaults plus `style` in `palette`'s colours, for one drawing only: the
    colours of what a renderer does not colour itself."""
    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        matplotlib.rcParams.update({
            **style, "figure.facecolor": palette.paper, "axes.facecolor": palette.paper,
            "savefig.facecolor": palette.paper, "text.color": palette.ink,
            "axes.labelcolor": palette.ink, "axes.edgecolor": palette.ink,
            "xtick.color": palette.ink, "ytick.color": palette.ink,
            "grid.color": palette.grid, "legend.labelcolor": palette.ink,
            "patch.edgecolor": palette.ink})
        yield


def new_figure(**kwargs):
    """A Figure and its axes, outside pyplot: nothing global keeps a reference to it."""
    subplot_args = {k: kwargs.pop(k) for k in ("nrows", "ncols", "squeeze") if k in kwargs}
    fig = Figure(**kwargs)
    return fig, fig.subplots(**subplot_args)


# What no XML document can hold, escaped or not (matplotlib writes text as it is given).
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def not_xml(text):
    """'U+0000' for the first character of `text` XML cannot hold, or None."""
    found = NOT_XML.search(text)
    return f"U+{ord(found.group()):04X}" if found else None


def svg_text(fig, title, desc):
    """The figure as SVG text, with <title> and <desc> for screen readers."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    svg = buffer.getvalue()
    for what, text in (("title", title), ("description", desc), ("text", svg)):
        if character := not_xml(text):
            raise ValueError(f"the figure's {what} holds {character}, a character no SVG "
                             f"can hold; remove it from the figure's data")
    start = svg.index("<svg")
    end = svg.index(">", start) + 1
    accessible = f"\n <title>{escape(title)}</title>\n <desc>{escape(desc)}</desc>"
    opening = svg[start:end].replace("<svg ", '<svg role="img" ', 1)
    return svg[:start] + opening + accessible + svg[end:]

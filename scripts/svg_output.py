"""Deterministic, accessible SVG out of a matplotlib figure.

Determinism is what lets a test compare a committed figure with a fresh rendering byte for
byte: no date, a fixed hash salt for element ids, and text kept as <text> (selectable,
searchable, no per-run glyph ids).
"""
import io
from xml.sax.saxutils import escape

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the headless backend)

# What every renderer needs, whatever its look: repeatable element ids, text as <text>.
DETERMINISTIC = {"svg.hashsalt": "distributed-03", "svg.fonttype": "none"}

STYLE = {
    **DETERMINISTIC,
    # The default sans-serif list travels into the SVG, so browsers without DejaVu
    # fall back to their own sans-serif instead of a serif font.
    "font.size": 10,
    # An opaque light card with dark ink reads the same on light and dark page palettes.
    "figure.facecolor": "#ffffff",
    "axes.facecolor": "#ffffff",
    "text.color": "#1f2328",
    "axes.labelcolor": "#1f2328",
    "xtick.color": "#1f2328",
    "ytick.color": "#1f2328",
}


def new_figure(**kwargs):
    # From the defaults every time: what another figure set must not change these bytes.
    plt.rcdefaults()
    plt.rcParams.update(STYLE)
    return plt.subplots(**kwargs)


def svg_text(fig, title, desc, note=""):
    """The figure as SVG text, with <title> and <desc> for screen readers.

    `note` (an XML comment, say) goes right after them, for tools that read the file.
    """
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    svg = buffer.getvalue()
    start = svg.index("<svg")
    end = svg.index(">", start) + 1
    accessible = f"\n <title>{escape(title)}</title>\n <desc>{escape(desc)}</desc>"
    accessible += f"\n {note}" if note else ""
    opening = svg[start:end].replace("<svg ", '<svg role="img" ', 1)
    return svg[:start] + opening + accessible + svg[end:]

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


# Geometry attributes, whose numbers matplotlib writes to six decimals of a point.
GEOMETRY = re.compile(r'\b(d|x|y|x1|x2|y1|y2|width|height|transform|points)="([^"]*)"')
LONG_DECIMAL = re.compile(r"-?\d+\.\d{3,}")


def short_number(match):
    """A coordinate to 0.01 pt: a hundredth of a point is 0.014 CSS px at the largest a
    figure is drawn, far under what a screen shows; six decimals were a third of the
    sweep figure's bytes."""
    text = f"{float(match.group(0)):.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def with_short_coordinates(svg):
    return GEOMETRY.sub(lambda m: f'{m.group(1)}="{LONG_DECIMAL.sub(short_number, m.group(2))}"',
                        svg)


# matplotlib writes a path one vertex a line, "M 58.41 -371.58 \nL 58.41 -368.31 \n";
# the path grammar needs no space around a command letter and one between two numbers.
PATH_DATA = re.compile(r'\bd="([^"]*)"')
AROUND_COMMAND = re.compile(r"\s*([MLHVCSQTAZmlhvcsqtaz])\s*")


def with_tight_path_data(svg):
    def tighten(match):
        data = AROUND_COMMAND.sub(r"\1", match.group(1))
        return f'd="{" ".join(data.split())}"'
    return PATH_DATA.sub(tighten, svg)


# A group of markers: matplotlib writes one <use> per data point, each with the line's
# whole style, inside a group of its own.
MARKER_GROUP = re.compile(r'<g( clip-path="[^"]*")?>((?:\s*<use [^>]*/>)+)(\s*)</g>')
USE_STYLE = re.compile(r' style="([^"]*)"(?=/>)')


def with_shared_marker_styles(svg):
    """Each group's markers share one style: it moves onto the group, which they inherit
    it from (fill, stroke and their widths are inherited properties, and a <use> passes
    them on to the marker it draws)."""
    def hoist(match):
        styles = USE_STYLE.findall(match.group(2))
        if len(set(styles)) != 1 or styles[0].count('"'):
            return match.group(0)
        uses = USE_STYLE.sub("", match.group(2))
        return f'<g{match.group(1) or ""} style="{styles[0]}">{uses}{match.group(3)}</g>'

    return MARKER_GROUP.sub(hoist, svg)


# matplotlib names every group after its artist (`id="line2d_6"`); nothing refers to
# those names (references go to hashed ids such as `#m453f931cba`), and a bare <g> around
# a single element groups nothing.
ARTIST_ID = re.compile(r' id="[A-Za-z]+(?:_\d+)+"')
BARE_GROUP = re.compile(r"<g>\s*(<(?:use|path|text)\b[^<>]*(?:/>|>[^<]*</text>))\s*</g>")
INDENTATION = re.compile(r"\n[ \t]+")


def without_structure_nobody_reads(svg):
    """No indentation (whitespace between elements draws nothing, and no text of these
    figures spans lines), no artist names, no group of one."""
    svg = ARTIST_ID.sub("", INDENTATION.sub("\n", svg))
    while True:
        shorter = BARE_GROUP.sub(r"\1", svg)
        if shorter == svg:
            return svg
        svg = shorter


def compact(svg):
    """The same drawing in fewer bytes: matplotlib writes the whole font-family list into
    every <text> (about 200 bytes each, 37 KB of a ring figure's 82) and a rotation by
    -0 degrees beside it. One family for every text becomes one rule in the SVG's own
    stylesheet, which the browser applies to each <text> that no longer names one; every
    coordinate is written to a hundredth of a point, path data loses the spaces its grammar
    does not need, markers share their style, and the indentation and names nothing reads
    are gone."""
    families = set(FONT_FAMILY.findall(svg))
    svg = with_tight_path_data(with_short_coordinates(NO_ROTATION.sub("", svg)))
    # SVG 2's plain href, which every browser that draws these figures reads; xlink:href
    # was SVG 1.1's, and matplotlib writes it onto each of a figure's hundreds of <use>.
    svg = with_shared_marker_styles(svg.replace("<use xlink:href=", "<use href="))
    svg = without_structure_nobody_reads(svg)
    if len(families) != 1 or STYLE_ELEMENT not in svg:
        return svg  # several families: each text keeps its own
    family = families.pop()
    svg = FONT_FAMILY.sub("", svg).replace(' style=""', "")
    return svg.replace(STYLE_ELEMENT, f"{STYLE_ELEMENT}text{{font-family: {family}}}", 1)


# What no XML document can hold, escaped or not: the C0 controls but tab, newline and
# carriage return, lone surrogates, U+FFFE and U+FFFF. matplotlib writes text as it is
# given, so a NUL in a title made an SVG no browser would draw.
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def not_xml(text):
    """'U+0000' for the first character of `text` XML cannot hold, or None."""
    found = NOT_XML.search(text)
    return f"U+{ord(found.group()):04X}" if found else None


def svg_text(fig, title, desc):
    """The figure as SVG text, with <title> and <desc> for screen readers; ValueError
    when the text it draws holds a character XML cannot hold."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    svg = compact(buffer.getvalue())
    for what, text in (("title", title), ("description", desc), ("text", svg)):
        if character := not_xml(text):
            raise ValueError(f"the figure's {what} holds {character}, a character no SVG "
                             f"can hold; remove it from the figure's data")
    start = svg.index("<svg")
    end = svg.index(">", start) + 1
    accessible = f"\n <title>{escape(title)}</title>\n <desc>{escape(desc)}</desc>"
    opening = svg[start:end].replace("<svg ", '<svg role="img" ', 1)
    return svg[:start] + opening + accessible + svg[end:]

"""The two colour sets a figure is drawn in, for the site's light and dark palettes
(mkdocs-material's `default` and `slate`), written into the SVG itself. Data colours are
the Okabe-Ito set; on dark paper its darkest are swapped for lighter ones of the family.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Palette:
    name: str  # "light" or "dark"
    paper: str  # the figure's background, the page's own where possible
    ink: str  # text, axes, model lines
    muted: str  # secondary text: notes, column letters
    faint: str  # outlines of empty things, dotted scale marks
    grid: str  # grid lines and separators between groups
    header: str  # the fill of a table's header cells
    shade: str  # a region set apart (a band of predictions)
    series: tuple  # categorical colours, Okabe-Ito order
    bars: tuple  # bar fills (each with the ink's bar labels beside it)
    # The ring figures' cells, (fill, ink): own contribution, some ranks', all, none yet;
    # ordered in lightness, so they stay apart in greyscale.
    own: tuple
    partial: tuple
    full: tuple
    missing: tuple


LIGHT = Palette(
    name="light", paper="#ffffff", ink="#1f2328", muted="#57606a", faint="#8c959f",
    grid="#d0d7de", header="#eaeef2", shade="#ededed",
    series=("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#000000"),
    bars=("#4C78A8", "#F58518", "#54A24B", "#B279A2", "#9D755D", "#72B7B2"),
    own=("#e3eef9", "#1f2328"), partial=("#f6c667", "#1f2328"), full=("#2f6f4f", "#ffffff"),
    missing=("#ffffff", "#57606a"))

# The slate page's own colour, hsl(225, 15%, 14%) (mkdocs-material's palette stylesheet).
DARK = Palette(
    name="dark", paper="#1e2129", ink="#e6e8ee", muted="#b1b7c3", faint="#8d95a5",
    grid="#3d4350", header="#2c313c", shade="#2a2e38",
    series=("#56B4E9", "#E69F00", "#2BBF8F", "#DA8FB8", "#F0804A", "#A8D8F5", "#F2F2F2"),
    bars=("#6E9BD1", "#F5A04E", "#6FBF68", "#C79BBE", "#C19A80", "#8CCFC9"),
    own=("#26405c", "#e6e8ee"), partial=("#c99a3a", "#1e2129"), full=("#6fcf9b", "#1e2129"),
    missing=("#1e2129", "#8d95a5"))

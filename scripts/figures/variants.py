"""The four drawings of one figure: light or dark, wide or narrow.

Every renderer under scripts/figures/ draws each of them from the same data, as
`render(data, variant)`: the palette picks the colours (palette.py) and `narrow` re-lays
the same panels for a phone, stacked in fewer columns, so that its text is at least 9 CSS
px where a phone shows it. The light wide drawing is the figure itself, `<name>.svg`, the
one print, a reader without scripts and a page that names the figure get; the others sit
beside it as `<name>-dark.svg`, `<name>-narrow.svg` and `<name>-narrow-dark.svg`, and the
page markup (scripts/pages/markup.py) offers each where it fits. Each is a derived file
like any figure: declared in scripts/store/outputs.py, locked, checked by `record.py --check`.
"""
from dataclasses import dataclass

from scripts.figures.palette import DARK, LIGHT

# The narrow drawings are this wide: a 360 px phone's content column (mkdocs-material pads
# the page 16 px a side), so they are shown at their own size from there up, never scaled
# down on a common phone. 3.4 in = 245 pt = 326 CSS px; 7-point text is then 9.3 px.
NARROW_IN = 3.4
# The page shows the narrow drawing up to this viewport width: below it the content column
# is narrower than about 620 px, where the wide drawings' 7.5-point text would fall under
# 9 px (they are 7.2 in, 691 px, wide).
NARROW_MEDIA = "(max-width: 45em)"


@dataclass(frozen=True)
class Variant:
    suffix: str  # added to the figure's file name, before .svg
    palette: object  # a palette.Palette
    narrow: bool

    def path(self, figure_path):
        """figures/x.svg -> figures/x<suffix>.svg."""
        return figure_path.removesuffix(".svg") + self.suffix + ".svg"


STATIC = Variant("", LIGHT, False)
VARIANTS = (STATIC, Variant("-dark", DARK, False), Variant("-narrow", LIGHT, True),
            Variant("-narrow-dark", DARK, True))
BY_SUFFIX = {variant.suffix: variant for variant in VARIANTS}

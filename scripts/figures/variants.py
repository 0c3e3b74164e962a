"""The four drawings of one figure: light or dark, wide or narrow (re-laid for a phone, so
its text is at least 9 CSS px). The light wide one is the figure itself, `<name>.svg`;
the others sit beside it with a suffix, and the page markup offers each where it fits.
"""
from dataclasses import dataclass

from scripts.figures.palette import DARK, LIGHT

# The wide drawing is 7.2 in (518 pt), shown about 660-700 px wide: 1 pt draws as ~1.3 px,
# so its smallest text, 7.5 pt, is ~10 px. Below about 620 px of column it would fall under
# 9 px: there the narrow one is shown, 3.4 in = 326 CSS px (a 360 px phone's content
# column), where 7-point text is 9.3 px.
WIDE_IN, WIDE_SMALL = 7.2, 7.5
NARROW_IN, NARROW_SMALL = 3.4, 7
NARROW_MEDIA = "(max-width: 45em)"


@dataclass(frozen=True)
class Variant:
    suffix: str  # added to the figure's file name, before .svg
    palette: object  # a palette.Palette
    narrow: bool

    def path(self, figure_path):
        return figure_path.removesuffix(".svg") + self.suffix + ".svg"


STATIC = Variant("", LIGHT, False)
VARIANTS = (STATIC, Variant("-dark", DARK, False), Variant("-narrow", LIGHT, True),
            Variant("-narrow-dark", DARK, True))
BY_SUFFIX = {variant.suffix: variant for variant in VARIANTS}

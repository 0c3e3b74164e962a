"""The four drawings of one figure: light or dark, wide or narrow (re-laid for a phone, so
its text is at least 9 CSS px). The light wide one is the figure itself, `<name>.svg`;
the others sit beside it with a suffix, and the page markup offers each where it fits.
"""
from dataclasses import dataclass

from scripts.figures.palette import DARK, LIGHT

# A 360 px phone's content column: 3.4 in = 326 CSS px, where 7-point text is 9.3 px.
NARROW_IN = 3.4
# Below about 620 px of column the wide drawings' 7.5-point text would fall under 9 px.
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

"""Make the site's math font: DejaVu Math TeX Gyre, cut down to the characters formulas use.

Chromium (and other browsers) lay MathML out with the `math` font family, which on most
systems resolves glyph by glyph to text fonts without a MATH table: a display Σ is then
drawn at text size (15 px at 16 px text), operators are spaced by guesswork and every
reader sees other glyphs. Naming a real math font fixes all three (the Σ becomes 25 px,
with its limits above and below), so the site ships one, as small as it can be:

- the characters the built site's formulas draw, and the ten digits, with (through
  `--layout-features '*'`) the MATH table's size variants and assembly parts for them: a
  character costs its glyph and its variants (Σ brings seven more), so a generous set
  (Latin, Greek, common operators) would be 24 KB where this is 12 KB, and the lesson
  page's first load must stay under 500 KB;
- WOFF (zlib): no brotli module is pinned here for WOFF2.

The subset is committed (docs/assets/fonts/lesson-math.woff). The site test fails, naming
this command, when a formula draws a character the font lacks: build the site, then run
this on it. The source font is Debian's fonts-dejavu-extra (`apt-get install
fonts-dejavu-extra`), under the GUST Font License, which allows modified copies
(docs/assets/fonts/README.txt).

    mkdocs build --strict && python scripts/pages/math_font.py site
"""
import html
import re
import sys
from pathlib import Path

SOURCE = Path("/usr/share/fonts/truetype/dejavu/DejaVuMathTeXGyre.ttf")
ROOT = Path(__file__).resolve().parents[2]
FONT = ROOT / "docs" / "assets" / "fonts" / "lesson-math.woff"
FORMULA = re.compile(r"<math\b.*?</math>", re.S)
ANNOTATION = re.compile(r"<annotation\b.*?</annotation>", re.S)


def drawn_characters(html_text):
    """The characters the formulas of a page draw (their TeX annotations are not drawn)."""
    used = set()
    for formula in FORMULA.findall(html_text):
        used |= set(html.unescape(re.sub(r"<[^>]+>", "", ANNOTATION.sub("", formula))))
    return used


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    site = Path(argv[0] if argv else "site")
    if not SOURCE.exists():
        sys.exit(f"error: {SOURCE} is missing: apt-get install fonts-dejavu-extra")
    pages = sorted(site.rglob("*.html"))
    if not pages:
        sys.exit(f"error: no built pages in {site}/; run `mkdocs build --strict` first")
    characters = set("0123456789")
    for page in pages:
        characters |= drawn_characters(page.read_text())
    from fontTools import subset

    FONT.parent.mkdir(parents=True, exist_ok=True)
    temp = FONT.with_suffix(".woff.tmp")  # renamed onto the font: never a half file
    subset.main([str(SOURCE), f"--text={''.join(sorted(characters))}",
                 "--layout-features=*", "--flavor=woff", "--no-hinting", "--desubroutinize",
                 f"--output-file={temp}"])
    temp.replace(FONT)
    print(f"wrote {FONT.relative_to(ROOT)}: {len(characters)} characters, "
          f"{FONT.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()

"""After every build, the site's math font, cut from Debian's Latin Modern Math down to the
characters the built formulas draw (MAINTAINING.md, "The site"). Its GUST Font License
allows such a subset (docs/assets/fonts/README.txt). It can only follow a build: an MkDocs
hook, and after Zensical (no such event) `python -m scripts.pages.math_font <site>`.
"""
import hashlib
import html
import re
import sys
import unicodedata
from pathlib import Path

from mkdocs.exceptions import PluginError

from scripts.pages.layout import text_of

SOURCE = Path("/usr/share/texmf/fonts/opentype/public/lm-math/latinmodern-math.otf")
# Pinned by content: another version would change every formula's drawing unseen.
SOURCE_SHA256 = "6075562b771f8b82f0c179e363389684f2dd09de30038269e2628e504bd7be0f"
FONT = Path("assets") / "fonts" / "lesson-math.woff"
# Family, unique id, full name, PostScript name, typographic family.
NAMES = {1: "Lesson Math", 3: "LessonMath-Regular", 4: "Lesson Math",
         6: "LessonMath-Regular", 16: "Lesson Math"}
FORMULA = re.compile(r"<math\b.*?</math>", re.S)
# A one-character <mi> without a mathvariant is drawn as MathML Core's `math-auto` says.
SINGLE_LETTER = re.compile(r"<mi\b(?![^>]*\bmathvariant=)[^>]*>([^<])</mi>")
LETTER = re.compile(r"(?:LATIN|GREEK) (SMALL|CAPITAL) LETTER ([A-Z ]+)")


def math_auto(character):
    """The mathematical italic a one-letter <mi> is drawn as: p is U+1D45D, h is ℎ."""
    if character == "h":
        return "\u210e"  # Unicode's italic h was there before its alphabet
    name = LETTER.fullmatch(unicodedata.name(character, ""))
    try:
        return unicodedata.lookup(f"MATHEMATICAL ITALIC {name[1]} {name[2]}") if name else character
    except KeyError:  # a letter with no italic of its own (ß, ÿ...) is drawn as it is
        return character


def drawn_characters(html_text):
    """The characters the formulas of a page draw (no annotation, space or invisible one)."""
    drawn = "".join(text_of(SINGLE_LETTER.sub(lambda m: math_auto(html.unescape(m[1])), formula))
                    for formula in FORMULA.findall(html_text))
    return {char for char in drawn if not char.isspace()
            and unicodedata.category(char) != "Cf" and not "\ufe00" <= char <= "\ufe0f"}


def make_font(site):
    """Write the site's math font; return (its path, how many characters it holds)."""
    if not SOURCE.exists():
        raise PluginError(f"{SOURCE} is missing: run `make install` (it installs Debian's "
                          f"fonts-lmodern)")
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()
    if digest != SOURCE_SHA256:
        raise PluginError(f"{SOURCE} is not Latin Modern Math 1.959 of Debian's "
                          f"fonts-lmodern 2.005-1 (sha256 {digest[:12]}...); install that "
                          f"version, or pin the new one in scripts/pages/math_font.py")
    characters = set("0123456789")  # a recorded value a page shows may hold any digit
    for page in sorted(site.rglob("*.html")):
        characters |= drawn_characters(page.read_text(encoding="utf-8"))
    from fontTools import subset
    from fontTools.ttLib import TTFont

    font = TTFont(SOURCE, recalcTimestamp=False)  # the same formulas, the same bytes
    del font["FFTM"]  # FontForge's timestamps, which fontTools cannot subset
    subsetter = subset.Subsetter(subset.Options(layout_features=["dtls"], hinting=False,
                                                desubroutinize=True))
    subsetter.populate(text="".join(sorted(characters)))
    subsetter.subset(font)
    # The GUST Font License asks a modified copy to change the font's name.
    for record in font["name"].names:
        if record.nameID in NAMES:
            record.string = NAMES[record.nameID]
    font.flavor = "woff"
    path = site / FONT
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_suffix(".woff.tmp")
    font.save(temp)
    temp.replace(path)
    return path, len(characters)


def on_post_build(config):
    """MkDocs-only: its post-build event."""
    make_font(Path(config["site_dir"]))


if __name__ == "__main__":
    try:
        make_font(Path(sys.argv[1]))
    except PluginError as error:
        sys.exit(f"error: {error}")

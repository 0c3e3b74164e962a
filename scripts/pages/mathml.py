"""mkdocs hook: typeset every formula at build time, as MathML, so readers load no math script.

pymdownx.arithmatex (generic mode) leaves `\\(...\\)` in `<span class="arithmatex">` and
`\\[...\\]` / `$$...$$` in `<div class="arithmatex">`. This hook swaps each for MathML Core
from latex2mathml: browsers lay MathML out themselves, with no script and no web font, it
follows the page's text colour in light and dark mode, and screen readers read it once.

Where MathML's defaults differ from TeX, the markup says what TeX does:

- `/` is an ordinary symbol in TeX ("G/p"), but MathML's operator dictionary spaces it
  as an infix operator ("G / p"): it gets `lspace="0" rspace="0"`.
- A display formula's large operators (Σ) are drawn at display size with their limits
  above and below (`largeop`, `movablelimits="false"`), whatever the reader's defaults.
- In a subscript, a superscript or a limit, TeX puts no space around a relation or a
  binary operator ("r=0" under a Σ, "p-1" over it); MathML's dictionary spaces them as
  in the line ("r = 0"). Every such operator there gets `lspace="0" rspace="0"`; a large
  operator (Σ, ∫) or a named one (lim, max) keeps its space, as in TeX. An inline
  fraction's numerator and denominator, which TeX also sets in script style, are left
  as the dictionary spaces them.
- An inline formula and the punctuation right after it do not wrap apart.
- The TeX stays in the page as the formula's annotation (`<semantics>`), which browsers
  do not draw and screen readers do not read; the search index holds that TeX ("G/p")
  instead of the drawn formula flattened ("p−1pG" for \\frac{p-1}{p}G).

A display formula becomes one `<math>` per `\\qquad`-separated part, side by side in a
wrapping row: on a phone the parts stack instead of being cut off. If one part is still too
wide, its row scrolls and can be reached by keyboard. The few lines of CSS this needs are
put into the `<head>` of pages that have a formula, and only those.

latex2mathml copies `\\text{...}` into the page as it is (`\\text{<script>}` is a live
script inside `<mtext>`) and turns `\\href` and `\\style` into attributes. A formula can
come from a notebook cell, so its MathML is rebuilt here from MathML elements and
presentation attributes only, every piece of text escaped.
"""
import html
import re
from html.parser import HTMLParser

from latex2mathml.converter import convert
from mkdocs.exceptions import PluginError

INLINE = re.compile(r'<span class="arithmatex">\\\((.*?)\\\)</span>([.,;:!?)]*)', re.S)
DISPLAY = re.compile(r'<div class="arithmatex">\\\[(.*?)\\\]</div>', re.S)
LEFTOVER = 'class="arithmatex"'
# A part of a display formula ends at a \qquad outside any braces.
QQUAD = re.compile(r"\\qquad(?![A-Za-z])")

STYLE = """<style>
.md-typeset .math-display{display:flex;flex-wrap:wrap;justify-content:center;
align-items:baseline;gap:.6em 2em;margin:1em 0;padding:.2em 0;overflow-x:auto}
.md-typeset .math-display:focus-visible{outline:.1rem solid var(--md-accent-fg-color)}
.md-typeset .math-display>math{margin:0}
.md-typeset .math-nowrap{white-space:nowrap}
</style>
"""

MATHML_ELEMENTS = frozenset("""
    math semantics annotation mrow mi mn mo ms mtext mspace msub msup msubsup mfrac msqrt
    mroot mstyle mtable mtr mtd mlabeledtr munder mover munderover mpadded mphantom
    menclose merror mmultiscripts mprescripts none mfenced maligngroup malignmark
""".split())
# Presentation only: no href, no style (CSS can load a URL), no event handler, no id.
MATHML_ATTRIBUTES = frozenset("""
    xmlns display mathvariant stretchy fence separator lspace rspace accent accentunder
    movablelimits largeop symmetric minsize maxsize linethickness columnalign rowalign
    columnspacing rowspacing columnlines rowlines frame framespacing equalrows equalcolumns
    displaystyle scriptlevel width height depth voffset notation open close separators
    mathcolor mathbackground mathsize form columnspan rowspan align encoding
""".split())


class InertMathML(HTMLParser):
    """latex2mathml's output with only MathML elements and attributes; all text escaped."""

    CDATA_CONTENT_ELEMENTS = ()  # a `<script>` here is text to escape, not script content

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts = []

    def handle_starttag(self, tag, attrs, close=""):
        if tag not in MATHML_ELEMENTS:
            self.parts.append(html.escape(self.get_starttag_text()))
            return
        kept = "".join(f' {name}="{html.escape(value or "")}"' for name, value in attrs
                       if name in MATHML_ATTRIBUTES)
        self.parts.append(f"<{tag}{kept}{close}>")

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs, close=" /")

    def handle_endtag(self, tag):
        self.parts.append(f"</{tag}>" if tag in MATHML_ELEMENTS else html.escape(f"</{tag}>"))

    def handle_data(self, data):
        self.parts.append(html.escape(data, quote=False))

    def handle_comment(self, data):
        pass

    def unknown_decl(self, data):
        pass


def inert(markup):
    parser = InertMathML()
    parser.feed(markup)
    parser.close()
    return "".join(parser.parts)


def top_level_parts(tex):
    """Split at each \\qquad that is not inside braces; each part is a whole formula."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(tex):
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth == 0 and QQUAD.match(tex, index):
            parts.append(tex[start:index])
            start = index + len("\\qquad")
    parts.append(tex[start:])
    return [part.strip() for part in parts if part.strip()]


SLASH = "<mo>/</mo>"  # as inert() writes latex2mathml's <mo>&#x0002F;</mo>
TIGHT_SLASH = '<mo lspace="0" rspace="0">&#x0002F;</mo>'
# ∏ ∐ ∑, ∫ ∬ ∭ ∮ ∯, ⋀ ⋁ ⋂ ⋃, as inert() writes them (characters, not references).
LARGE_OPERATOR = re.compile("<mo>([\u220F\u2210\u2211\u222B-\u222F\u22C0-\u22C3])</mo>")
BODY = re.compile(r"^(<math\b[^>]*>)(.*)(</math>)$", re.S)


# Elements whose children after the first are scripts: sub- and superscripts, limits,
# accents, a root's index.
SCRIPTED = frozenset({"msub", "msup", "msubsup", "munder", "mover", "munderover", "mroot"})
# An operator TeX spaces in scripts too: a large one, or a named one (lim, max, sin).
SPACED_IN_SCRIPTS = re.compile("([\u220F\u2210\u2211\u222B-\u222F\u22C0-\u22C3]|[A-Za-z]+)</mo>")
# A tag as inert() writes it (attribute values are escaped, so none holds a ">").
TAG = re.compile(r"<(/?)([a-z]+)([^>]*?)(\s*/)?>")


def tight_in_scripts(markup):
    """`markup` with each operator inside a script spaced as TeX's script style spaces
    it: not at all."""
    pieces, end = [], 0
    open_elements = []  # [name, children seen so far, inside a script] for each open tag
    for tag in TAG.finditer(markup):
        closing, name, attributes, self_closing = tag.groups()
        if closing:
            open_elements.pop()
            continue
        in_script = False
        if open_elements:
            parent = open_elements[-1]
            in_script = parent[2] or (parent[0] in SCRIPTED and parent[1] >= 1)
            parent[1] += 1
        if name == "mo" and in_script and "lspace" not in attributes \
                and not SPACED_IN_SCRIPTS.match(markup, tag.end()):
            pieces += [markup[end:tag.start()], f'<mo{attributes} lspace="0" rspace="0">']
            end = tag.end()
        if not self_closing:
            open_elements.append([name, 0, in_script])
    return "".join(pieces + [markup[end:]])


def mathml(tex, display, page):
    try:
        # Rebuilt from MathML elements and attributes only, before anything of ours is added.
        markup = inert(convert(tex, display="block" if display else "inline"))
    except Exception as error:  # latex2mathml raises many kinds; all mean "cannot read this"
        raise PluginError(f"{page.file.src_uri}: cannot convert the formula {tex!r} to "
                          f"MathML ({type(error).__name__}: {error}); rewrite it in the "
                          f"LaTeX subset latex2mathml reads") from None
    markup = tight_in_scripts(markup.replace(SLASH, TIGHT_SLASH))
    if display:  # ∏ ∐ ∑ ⋀ ⋁ ⋂ ⋃ ∫ ...: display size, limits above and below
        markup = LARGE_OPERATOR.sub(r'<mo largeop="true" movablelimits="false">\1</mo>', markup)
    return with_annotation(markup, tex)


def with_annotation(markup, tex):
    """The formula inside <semantics>, its TeX beside it as an annotation."""
    opened, body, closed = BODY.match(markup).groups()
    # The search index keeps the TeX once, not the drawn formula flattened beside it. The
    # wrapper is an <mstyle>, not an <mrow>: the search plugin ends an exclusion at the
    # first closing tag of the same name, and formulas are full of </mrow>.
    return (f"{opened}<semantics><mstyle data-search-exclude>{body}</mstyle>"
            f"<annotation encoding=\"application/x-tex\">{html.escape(tex)}</annotation>"
            f"</semantics>{closed}")


def inline_formula(match, page):
    formula = mathml(html.unescape(match.group(1)).strip(), False, page)
    punctuation = match.group(2)
    # The punctuation stays on the formula's line, as TeX keeps it.
    return f'<span class="math-nowrap">{formula}{punctuation}</span>' if punctuation \
        else formula


def display_formula(match, page):
    tex = html.unescape(match.group(1))
    parts = "".join(mathml(part, True, page) for part in top_level_parts(tex))
    # Focusable so a reader without a mouse can scroll a row that is still too wide.
    return ('<div class="math-display" tabindex="0" role="group" aria-label="equation">'
            f"{parts}</div>")


def on_page_content(html_text, page, config, files):
    converted = INLINE.sub(lambda m: inline_formula(m, page), html_text)
    converted = DISPLAY.sub(lambda m: display_formula(m, page), converted)
    if LEFTOVER in converted:
        where = converted.index(LEFTOVER)
        raise PluginError(f"{page.file.src_uri}: a formula in an unexpected form was left "
                          f"as TeX near {converted[where:where + 80]!r}; write it as "
                          f"$...$ or $$...$$")
    return converted


def on_post_page(output, page, config):
    """The formulas' CSS, on the pages that have formulas (text that reads `<math` in a
    page is escaped, so an element is the only way to match)."""
    if "<math" in output:
        output = output.replace("</head>", STYLE + "</head>", 1)
    return output

"""Recorded text reaches a page only after Markdown and every extension have run.

A recording is untrusted input: it can come from a VM, a pull request or a hand edit.
Escaping it for HTML is not enough while Markdown still reads it: `[x](javascript:...)`
would become a live link, a `]` would end an image's alt text and a `--8<-- "file"` line
would make pymdownx.snippets publish that file. So a page directive leaves only a marker
in the Markdown, letters and digits that no extension rewrites, and `fill` swaps each
marker for the HTML-escaped value once the page's HTML exists.
"""
import html
import json
import re
import secrets

from markdown.extensions.toc import slugify
from mkdocs.exceptions import PluginError

# Where escaped text is still only text. Anything else (href, src, on*, style, id...)
# would let a recorded value choose a link target or run script, escaped or not.
TEXT_ATTRIBUTES = {"alt", "title", "aria-label"}
ATTRIBUTE_NAME = re.compile(r"""([\w:.-]+)\s*=\s*(?:"[^"]*|'[^']*|[^\s"'>]*)$""")
# Recorded prose may hold inline math such as \([4, 6]\). Only the spans arithmatex makes
# become MathML (scripts/pages/mathml.py, latex2mathml, at build time), and TeX has commands
# that link (\href) or style (\style, \class), so only plain formulas get a span;
# anything else stays visible as text.
INLINE_MATH = re.compile(r"\\\((.+?)\\\)")
PLAIN_FORMULA = re.compile(r"(?:[\w\s.,;:+\-*/=<>()\[\]{}^|!']|\\(?:times|cdot|ldots|"
                           r"dots|frac|sqrt|sum|le|ge|approx|alpha|beta|gamma|mathrm|text)"
                           r"(?![A-Za-z]))*")


# Python's format-spec grammar, [[fill]align][sign][z][#][0][width][grouping][.precision][type],
# with the width and precision a page can use: `|>1000000000` or `|.100000000f` would
# otherwise build a gigabyte string (MemoryError) or a 195 MB page with exit 0.
FORMAT_SPEC = re.compile(r"(?:.?[<>=^])?[+\- ]?z?#?0?(?P<width>\d+)?[,_]?"
                         r"(?:\.(?P<precision>\d+))?[bcdeEfFgGnosxX%]?", re.S)
MAX_WIDTH = 40
MAX_PRECISION = 20


def formatted(value, spec):
    """`value` formatted with a page's `|spec`; ValueError (one line) for a spec outside
    the grammar or the bounds, or one the value's type does not take."""
    if not spec:
        return str(value)
    shape = FORMAT_SPEC.fullmatch(spec)
    if shape is None:
        raise ValueError("not a format code")
    width, precision = int(shape["width"] or 0), int(shape["precision"] or 0)
    if width > MAX_WIDTH or precision > MAX_PRECISION:
        raise ValueError(f"a page takes widths up to {MAX_WIDTH} and precisions up to "
                         f"{MAX_PRECISION}")
    try:
        return format(value, spec)
    except TypeError as error:
        raise ValueError(str(error)) from None


class PageValues:
    """The recorded strings of one page, held back until its HTML exists."""

    def __init__(self, page_name):
        self.page_name = page_name
        self.values = []
        self.json_values = set()  # indices of values that are script JSON, not text
        # Unguessable per page, so neither an author nor a recording can forge a marker.
        nonce = secrets.token_hex(6).upper()
        self.prefix = f"RECVAL{nonce}N"
        self.marker = re.compile(rf"RECVAL{nonce}N(\d+)END")
        # The toc extension lowercases heading text into anchor ids: that copy becomes a
        # slug of the value, which only has [a-z0-9_-] in it.
        self.slug_marker = re.compile(rf"recval{nonce.lower()}n(\d+)end")

    def hold(self, value):
        """Keep `value` (any type, shown with str) and return the marker standing for it."""
        self.values.append(str(value))
        return f"{self.prefix}{len(self.values) - 1}END"

    def hold_json(self, value):
        """Keep `value` as JSON for a <script type="application/json"> element and return
        its marker; raises ValueError for what JSON cannot hold (NaN, say)."""
        marker = self.hold(script_json(value))
        self.json_values.add(len(self.values) - 1)
        return marker

    def text(self, source):
        """`source` with every marker replaced by its value, escaped for HTML."""
        source = self.marker.sub(lambda m: html.escape(self.values[int(m[1])]), source)
        return self.slug_marker.sub(lambda m: slugify(self.values[int(m[1])], "-"), source)

    def fill(self, content):
        """The page's finished HTML with the values in, each escaped for where it landed."""
        pieces, end, shown = [], 0, set()
        for match in self.marker.finditer(content):
            shown.add(int(match[1]))
            pieces += [content[end:match.start()],
                       self.render(int(match[1]), content, match.start())]
            end = match.end()
        if len(shown) != len(self.values):
            raise PluginError(f"{self.page_name}: {len(self.values) - len(shown)} recorded "
                              f"value(s) vanished while the page was converted; move the "
                              f"{{{{ rec:... }}}} directive out of raw HTML or a comment")
        return self.text("".join(pieces + [content[end:]]))

    def render(self, index, content, at):
        value = self.values[index]
        if index in self.json_values:
            opened = content.rfind("<script", 0, at)
            if opened < content.rfind("</script", 0, at) or not content.startswith(
                    '<script type="application/json"', opened):
                raise PluginError(f"{self.page_name}: recorded JSON ended up outside its "
                                  f"<script type=\"application/json\"> element; put the "
                                  f"{{{{ json:... }}}} directive on a line of its own")
            return value  # script_json made it safe for exactly this place
        tag_start = content.rfind("<", 0, at)
        if tag_start > content.rfind(">", 0, at):  # inside a tag: an attribute's value
            attribute = ATTRIBUTE_NAME.search(content, tag_start, at)
            name = attribute[1].lower() if attribute else "tag"
            if name not in TEXT_ATTRIBUTES:
                raise PluginError(f"{self.page_name}: a recorded value ended up in a "
                                  f"{name}= attribute; put {{{{ rec:... }}}} in text, never "
                                  f"in a link target or an attribute")
            return html.escape(value)
        if content.rfind("<code", 0, at) > content.rfind("</code>", 0, at):
            return html.escape(value)
        return with_plain_math(value)

    def fill_toc(self, items):
        """The table of contents carries its own copies of heading text and anchor ids."""
        for item in items:
            item.title = self.text(item.title)
            item.id = self.text(item.id)
            self.fill_toc(item.children)


def with_plain_math(value):
    """`value` escaped as text, its plain inline formulas in arithmatex's math spans."""
    pieces, end = [], 0
    for match in INLINE_MATH.finditer(value):
        if PLAIN_FORMULA.fullmatch(match[1]):
            pieces += [html.escape(value[end:match.start()]),
                       f'<span class="arithmatex">\\({html.escape(match[1])}\\)</span>']
            end = match.end()
    return "".join(pieces) + html.escape(value[end:])


def script_json(value):
    """`value` as JSON that can sit inside <script type="application/json">...</script>.

    The HTML parser ends a script element at the first `</script` whatever the JSON says,
    and `<!--` would start an escape state, so no `<`, `>` or `&` may appear literally:
    each is written as a JSON escape (`\\u003c`...), which JSON.parse reads back as the
    same character. ensure_ascii writes U+2028/U+2029 (and everything non-ASCII) escaped.
    """
    text = json.dumps(value, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")

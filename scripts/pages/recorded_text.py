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
import sys
from datetime import datetime


try:  # under mkdocs a BuildError is reported in one line, without a traceback
    from mkdocs.exceptions import PluginError as Reported
except ImportError:  # Python-Markdown on its own
    Reported = Exception


class PageError(Reported):
    """A page the page language cannot build; str() is the one line that says why."""


# What a page read, said as it reads: an audit event, as open() raises one for a file, which
# pages/sources.Reads notes, so `mkdocs serve` re-renders the page when what it read changes.
READ = "scripts.pages.read"


def read(sources, key):
    """What a page reads from `sources` (pages/sources.Sources), noted as read: by its stem
    a recording or analysis ("<id>.cpu"; None until it is made), or by `<id>.*` each of a
    lesson's ({stem: freshness.Loaded}), so a page that lists them changes as they come."""
    found = current(sources, key)
    sys.audit(READ, key, found)
    return found


def current(sources, key):
    """What `read` gives for `key` now, noting nothing."""
    if key.endswith(".*"):
        return {stem: loaded for stem, loaded in sources.recordings.items()
                if stem.startswith(key[:-1])}
    return sources.recordings.get(key)


# Where escaped text is still only text. Anything else (href, src, on*, style, id...)
# would let a recorded value choose a link target or run script, escaped or not.
TEXT_ATTRIBUTES = {"alt", "title", "aria-label"}
ATTRIBUTE_NAME = re.compile(r"""([\w:.-]+)\s*=\s*(?:"[^"]*|'[^']*|[^\s"'>]*)$""")
# Recorded prose may hold inline math such as \([4, 6]\). Only the spans arithmatex makes
# become MathML (scripts/pages/mathml.py, Temml, at build time), and TeX has commands
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
    the grammar or the bounds, or one the value's type does not take. With no spec an ISO
    8601 timestamp is written for people (`|s` shows it as stored)."""
    if not spec:
        return human_date(value) if TIMESTAMP.match(str(value)) else str(value)
    if (shape := FORMAT_SPEC.fullmatch(spec)) is None:
        raise ValueError("not a format code")
    width, precision = int(shape["width"] or 0), int(shape["precision"] or 0)
    if width > MAX_WIDTH or precision > MAX_PRECISION:
        raise ValueError(f"a page takes widths up to {MAX_WIDTH} and precisions up to "
                         f"{MAX_PRECISION}")
    try:
        return format(value, spec)
    except (TypeError, OverflowError) as error:  # OverflowError: `c` of a negative number
        raise ValueError(str(error)) from None


TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)?$")


def human_date(timestamp):
    """An ISO 8601 timestamp as a reader writes the day: "30 November 2026" (UTC as
    recorded; a reader does not need the second a recording was made)."""
    when = datetime.fromisoformat(str(timestamp))
    return f"{when.day} {when:%B %Y}"


class PageValues:
    """The recorded strings of one page, held back until its HTML exists."""

    def __init__(self):
        self.values = []
        self.json_values = set()  # indices of values that are script JSON, not text
        # Unguessable per page, so neither an author nor a recording can forge a marker.
        nonce = secrets.token_hex(6).upper()
        self.prefix = f"RECVAL{nonce}N"
        self.marker = re.compile(rf"RECVAL{nonce}N(\d+)END")

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

    def fill(self, content, whole=True):
        """`content` with the values in, each escaped for where it landed: the page's
        finished HTML (`whole`), or a piece of it, such as the heading text the toc
        extension makes its entries and anchor ids from."""
        shown = set()

        def value(match):
            shown.add(int(match[1]))
            return self.render(int(match[1]), content, match.start())

        filled = self.marker.sub(value, content)
        if whole and len(shown) != len(self.values):
            raise PageError(f"{len(self.values) - len(shown)} recorded value(s) vanished "
                            f"while the page was converted; move the {{{{ rec:... }}}} "
                            f"directive out of raw HTML or a comment")
        return filled

    def render(self, index, content, at):
        value = self.values[index]
        if index in self.json_values:
            opened = content.rfind("<script", 0, at)
            if opened < content.rfind("</script", 0, at) or not content.startswith(
                    '<script type="application/json"', opened):
                raise PageError("recorded JSON ended up outside its <script "
                                "type=\"application/json\"> element; put the "
                                "{{ json:... }} directive on a line of its own")
            return value  # script_json made it safe for exactly this place
        tag_start = content.rfind("<", 0, at)
        if tag_start > content.rfind(">", 0, at):  # inside a tag: an attribute's value
            attribute = ATTRIBUTE_NAME.search(content, tag_start, at)
            name = attribute[1].lower() if attribute else "tag"
            if name not in TEXT_ATTRIBUTES:
                raise PageError(f"a recorded value ended up in a {name}= attribute; put "
                                f"{{{{ rec:... }}}} in text, never in a link target or an "
                                f"attribute")
            return html.escape(value)
        if content.rfind("<code", 0, at) > content.rfind("</code>", 0, at):
            return html.escape(value)
        return with_plain_math(value)


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
    """`value` as JSON that can sit inside <script type="application/json">...</script>:
    the HTML parser ends the element at the first `</script`, and `<!--` starts an escape
    state, so `<`, `>` and `&` are JSON escapes (`\\u003c`...), which JSON.parse reads back
    as the same characters; ensure_ascii escapes U+2028/U+2029 and all non-ASCII."""
    text = json.dumps(value, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")

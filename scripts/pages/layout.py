"""Layout decided when the site is built, so no script measures the page in a browser (a
code block's scrollWidth, read while the theme starts, lays out the whole page: a 139-287
ms long task on a phone). From the text and the theme's widths: a code block that may not
fit a 390 px phone is marked `data-wide` (only it scrolls, so only it takes focus); each
table's box is named after the heading above it; a header cell holding only a formula
gets the formula's symbols as hidden text (axe reads MathML as no text).
"""
import html
import re

TAGS = re.compile(r"<[^>]+>")
# Characters of code that fit a phone: 390 px less the page's margins is 358 px, less the
# block's padding and the room kept for the copy button (lesson.css) about 296 px, at
# 0.85 em monospace (8.2 px a character) 36 characters; inside an admonition or a
# collapsed answer a few less. A block may scroll when its longest line is longer.
PHONE_CODE_CHARS = 30
HEADING = re.compile(r'<h([1-6]) id="([^"]+)"[^>]*>(.*?)</h\1>', re.S)
PERMALINK = re.compile(r'<a class="headerlink".*?</a>', re.S)
# MathML's TeX annotation is for search and copying, not for the visible width.
ANNOTATION = re.compile(r"<annotation\b.*?</annotation>", re.S)


def text_of(markup):
    return html.unescape(TAGS.sub("", ANNOTATION.sub("", markup)))


def may_overflow_a_phone(code_html):
    return max((len(line) for line in text_of(code_html).split("\n")), default=0) > PHONE_CODE_CHARS


def table_names(page_html, tables):
    """A name for each table (match objects, in page order): the heading above it, with
    its number under that heading when there are more."""
    headings = [(m.start(), text_of(PERMALINK.sub("", m.group(3))).strip())
                for m in HEADING.finditer(page_html)]
    titles = [next((title for start, title in reversed(headings) if start < table.start()),
                   "table") for table in tables]
    return [f"{title}, table {titles[:index + 1].count(title)} of {titles.count(title)}"
            if titles.count(title) > 1 else title for index, title in enumerate(titles)]


# One formula and nothing else: the formula may not run past its own </math>, or a header
# that starts with one ("α (µs)") would take the next cell's formula with it.
MATH_ONLY_HEADER = re.compile(r"(<th\b[^>]*>)\s*(<math\b(?:(?!</math>).)*</math>)\s*(</th>)", re.S)
TOKEN = re.compile(r"<m[ion]\b[^>]*>([^<]*)</m[ion]>")


def spoken_header(match):
    opened, formula, closed = match.groups()
    words = " ".join(TOKEN.findall(ANNOTATION.sub("", formula)))
    hidden = formula.replace("<math ", '<math aria-hidden="true" ', 1)
    return f'{opened}{hidden}<span class="sr-only">{words}</span>{closed}'


def with_named_math_headers(table_html):
    return MATH_ONLY_HEADER.sub(spoken_header, table_html)

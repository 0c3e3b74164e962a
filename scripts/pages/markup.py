"""The page markup a keyboard reader, a phone and the search box need: a Markdown extension
whose postprocessor finishes each page's HTML, after its formulas (pages/mathml.py).

Built here, once, so that no script measures the page (MAINTAINING.md, "The site"): code
blocks that may scroll on a phone and every table take keyboard focus (pages/layout.py);
code stays out of the search index, with a "Defines:" line naming what a block defines;
API names link to the JAX reference; figures are sized, lazy, offered in the reader's
palette and width, linked full size, with their data line under each (figure_data.py).
"""
import html
import posixpath
import re
from collections import namedtuple
from pathlib import Path

from markdown.extensions import Extension
from markdown.postprocessors import Postprocessor

from scripts.figures.variants import BY_SUFFIX, NARROW_MEDIA
from scripts.pages.api_links import with_api_links
from scripts.pages.figure_data import data_line
from scripts.pages.layout import (TAGS, may_overflow_a_phone, table_names, text_of,
                                  with_named_math_headers)
from scripts.pages.page_language import page_finished
from scripts.pages.page_location import page_location
from scripts.pages.recorded_text import PageError

HIGHLIGHT = re.compile(r'<div class="highlight"')
HIGHLIGHT_BLOCK = re.compile(r'<div class="highlight">(<pre\b.*?</pre>)</div>', re.S)
CODE = re.compile(r"(<pre[^>]*>(?:<span></span>)?<code)(?![^>]*\btabindex=)([^>]*>)(.*?</code>)",
                  re.S)
DEFINITION = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_]\w*)", re.MULTILINE)
TABLE = re.compile(r"<table\b.*?</table>", re.S)
LINK_AND_IMAGE = re.compile(r"(<a\b[^>]*>\s*)?(<img\b[^>]*>)(\s*</a>)?")
HREF = re.compile(r'\bhref="([^"]*)"')
SOURCE = re.compile(r'\bsrc="(?![^"]*://)([^"]+\.svg)"')  # a figure of the site's own
SVG_ROOT = re.compile(r"<svg\b[^>]*>", re.S)
LENGTH = re.compile(r"^\s*([0-9]{1,6}(?:\.[0-9]+)?|\.[0-9]+)\s*(pt|px)?\s*$")
VIEW_BOX_NUMBER = re.compile(r"-?[0-9]{1,6}(?:\.[0-9]+)?")
PX_PER_UNIT = {"px": 1, None: 1, "pt": 4 / 3}  # CSS: 1pt = 4/3 px

# The page being finished: its pages/page_location.PageLocation, its pages/sources.Sources.
Page = namedtuple("Page", "location sources")


def svg_size(path):
    """The CSS pixel size an SVG file declares on its root element."""
    root = SVG_ROOT.search(Path(path).read_text(encoding="utf-8", errors="replace"))
    if not root:
        return None
    attrs = dict(re.findall(r'\b(width|height|viewBox)="([^"]*)"', root.group(0)))
    box = attrs.get("viewBox", "").replace(",", " ").split()
    size = []
    for name, index in (("width", 2), ("height", 3)):
        if length := LENGTH.match(attrs.get(name, "")):
            size.append(round(float(length.group(1)) * PX_PER_UNIT[length.group(2)]))
        elif name not in attrs and len(box) == 4 and all(map(VIEW_BOX_NUMBER.fullmatch, box)):
            size.append(round(float(box[index])))  # no width: the browser draws the box
        else:
            # A width that is not a length (`abc`, `.`, `10%`, a hand edit): a browser
            # ignores it, so the viewBox's size would not be the size it draws either.
            return None
    return tuple(size) if all(size) and min(size) > 0 else None


def figure_file(source, page):
    """The file below docs/ that an image's `src` names, or None."""
    path = posixpath.normpath(posixpath.join(page.location.base, source))
    file = page.sources.docs / path
    return file if not path.startswith("../") and file.is_file() else None


def sized_image(tag, page):
    source = SOURCE.search(tag)
    if not source or "width=" in tag:
        return tag
    figure = figure_file(source.group(1), page)
    size = svg_size(figure) if figure else None
    if size is None:
        raise PageError(f"{page.location.source}: cannot read the size of {source.group(1)} "
                        f"(no such figure, or no width/height/viewBox); rerun "
                        f"`python scripts/record.py --render-only`")
    extra = f' width="{size[0]}" height="{size[1]}"'
    if "loading=" not in tag:
        extra += ' loading="lazy"'
    return re.sub(r"\s*/?>$", extra + " />", tag)


def variant_source(source, suffix):
    """../figures/x.svg -> ../figures/x<suffix>.svg"""
    return source.removesuffix(".svg") + suffix + ".svg"


def drawn_variants(source, page):
    """Whether the figure at `source` comes in all its variants; a figure with some of
    them only was drawn by an older renderer, which the build refuses in one line."""
    found = [suffix for suffix in BY_SUFFIX if suffix
             and figure_file(variant_source(source, suffix), page)]
    if found and len(found) < len(BY_SUFFIX) - 1:
        missing = [variant_source(source, suffix) for suffix in BY_SUFFIX
                   if suffix and suffix not in found]
        raise PageError(f"{page.location.source}: {source} has no {', '.join(missing)}; "
                        f"rerun `python scripts/record.py --render-only`")
    return bool(found)


def figure_in_both_palettes(image, source, page):
    """Two links, light then dark, each a <picture> with the narrow drawing for a phone."""
    links = []
    for palette, wide, narrow in (("light", "", "-narrow"), ("dark", "-dark", "-narrow-dark")):
        wide_source, narrow_source = variant_source(source, wide), variant_source(source, narrow)
        tag = sized_image(image.replace(f'src="{source}"', f'src="{wide_source}"', 1), page)
        size = svg_size(figure_file(narrow_source, page))
        links.append(f'<a class="figure-link figure-link--{palette}" href="{wide_source}">'
                     f'<picture><source media="{NARROW_MEDIA}" srcset="{narrow_source}" '
                     f'width="{size[0]}" height="{size[1]}" />{tag}</picture></a>')
    return "".join(links)


def sized_linked_image(match, page):
    """An `<img>` sized, and a link to its SVG unless the page already made it one; a
    figure with variants, in both palettes and both widths."""
    link, image, closing = match.groups()
    source = SOURCE.search(image)
    to_itself = link is not None and closing is not None and source is not None \
        and (HREF.search(link) or [None, None])[1] == source.group(1)
    if source and (link is None or to_itself) and "width=" not in image \
            and drawn_variants(source.group(1), page):
        return figure_in_both_palettes(image, source.group(1), page)
    image = sized_image(image, page)  # sizing only adds attributes: `source` holds
    if link or not source:
        return (link or "") + image + (closing or "")
    return f'<a href="{source.group(1)}">{image}</a>' + (closing or "")


def figure_data_line(image, page):
    """The data line under a figure (pages/figure_data.py); "" for any other image."""
    figure = figure_file(source[1], page) if (source := SOURCE.search(image)) else None
    if figure is None:
        return ""
    return data_line(figure.relative_to(page.sources.docs).as_posix(), page.location.base,
                     page.sources)


def finished(html, page):
    html = LINK_AND_IMAGE.sub(lambda m: sized_linked_image(m, page)
                              + figure_data_line(m.group(2), page), html)
    html = with_named_tables(html)
    html = with_api_links(html)
    html = HIGHLIGHT_BLOCK.sub(with_defines_line, html)
    html = HIGHLIGHT.sub('<div class="highlight" data-search-exclude="code"', html)
    return with_focusable_code(html)


class Markup(Postprocessor):
    def run(self, text):
        if not page_finished(self.md):  # a heading's text, for the toc
            return text
        return finished(text, Page(page_location(self.md), self.md.page_language.loaded_sources()))


class PageMarkup(Extension):
    def extendMarkdown(self, md):
        md.postprocessors.register(Markup(md), "markup", -20)  # after the MathML (-10)


makeExtension = PageMarkup  # the name Python-Markdown calls


def with_named_tables(text):
    names = iter(table_names(text, list(TABLE.finditer(text))))
    return TABLE.sub(lambda m: '<div class="table-scroll" tabindex="0" role="group" '
                     f'aria-label="{html.escape(next(names))}"'
                     f'{SEARCH_EXCLUDED if mostly_numbers(m.group(0)) else ""}>'
                     f'{with_named_math_headers(m.group(0))}</div>', text)


# A table of recorded numbers is something to read, not to search for: its digits would
# fill the search index every page loads (the processes and sweep pages' tables are most
# of it) and match nothing a reader types. A table mostly of words stays searchable.
SEARCH_EXCLUDED = ' data-search-exclude="numbers"'


def mostly_numbers(table, share=0.25):
    """Whether digits are at least `share` of a table's letters and digits."""
    text = TAGS.sub(" ", table)
    digits = sum(char.isdigit() for char in text)
    letters = sum(char.isalpha() for char in text)
    return digits >= share * (digits + letters) if digits + letters else False


def with_defines_line(match):
    """A highlighted block, then the names it defines as searchable text (if any)."""
    names = list(dict.fromkeys(name for name in DEFINITION.findall(text_of(match.group(1)))
                               if not name.startswith("__")))
    block = f'<div class="highlight">{match.group(1)}</div>'
    if not names:
        return block
    listed = ", ".join(f"<code>{name}</code>" for name in names)
    return f'{block}\n<p class="defines">Defines: {listed}</p>'


def with_focusable_code(html):
    """Each `<pre><code>` that may scroll sideways on a phone takes keyboard focus: only
    what takes focus can be scrolled without a mouse."""
    def code_block(match):
        focus = ' tabindex="0" data-wide' if may_overflow_a_phone(match.group(3)) else ""
        return match.group(1) + focus + match.group(2) + match.group(3)

    return CODE.sub(code_block, html)

"""mkdocs hook: the page markup a keyboard, a phone and a slow connection need.

- Every `<pre><code>` gets `tabindex="0"`: a code block wider than a phone scrolls
  sideways, and a reader without a mouse can only scroll what can take focus.
- Every `<table>` sits in a focusable wrapper that scrolls it, for the same reason (the
  theme wraps tables in a scroller of its own at run time, which no key can reach).
- Code blocks stay out of the search index (`data-search-exclude`, which the search
  plugin reads and then strips): every reader downloads the index on every page, and the
  code would be two thirds of it; the prose around each block names what it defines.
- The theme's search dialog gets the name a dialog needs (axe: aria-dialog-name).
- The theme's label of a nav section ("Going further", with `navigation.sections`) loses
  its `tabindex=""`: mkdocs-material 9.8 writes the attribute empty for a section, which
  is invalid HTML and which browsers ignore anyway, so dropping it changes nothing a
  reader can do.
- Bytes a reader downloads and never sees are left out, because the lesson page's first
  load must stay under 500 KB (the theme's CSS, JavaScript and search index are over
  300 KB of it): the indentation of the theme's templates outside `<pre>`, `<code>`,
  `<textarea>`, `<script>` and `<style>` (elsewhere whitespace that holds a line break
  shows as one space either way), and Pygments' span around each plain name in code,
  which the theme draws in the code's own colour (`.highlight .n` takes
  `--md-code-hl-name-color`, which is `--md-code-fg-color`).
- Every `<img>` of an SVG figure gets the figure's own `width`/`height` (so the page does
  not jump while it loads) and `loading="lazy"` (figures below the fold wait until needed).
- Every such figure is a link to its SVG, unless the page already made it one: a phone
  shrinks a figure's text below legibility, and a tap then opens it full size.
"""
import posixpath
import re
from pathlib import Path

from mkdocs.exceptions import PluginError

HIGHLIGHT = re.compile(r'<div class="highlight"')
CODE = re.compile(r"(<pre[^>]*>(?:<span></span>)?)<code(?![^>]*\btabindex=)")
SEARCH_DIALOG = '<div class="md-search" data-md-component="search" role="dialog">'
TABLE = re.compile(r"<table\b.*?</table>", re.S)
IMAGE = re.compile(r"<img\b[^>]*>")
LINK_AND_IMAGE = re.compile(r"(<a\b[^>]*>\s*)?(<img\b[^>]*>)")
SOURCE = re.compile(r'\bsrc="([^"]+\.svg)"')
SVG_ROOT = re.compile(r"<svg\b[^>]*>", re.S)
LENGTH = re.compile(r"^\s*([0-9.]+)\s*(pt|px)?\s*$")
PX_PER_UNIT = {"px": 1, None: 1, "pt": 4 / 3}  # CSS: 1pt = 4/3 px
VERBATIM = re.compile(r"<(pre|code|textarea|script|style)\b.*?</\1>", re.S)
INDENTATION = re.compile(r"\n\s+")
NAME_TOKEN = re.compile(r'<span class="n">([^<]*)</span>')
EMPTY_TABINDEX = re.compile(r'(<label class="md-nav__link[^"]*"[^>]*?) tabindex=""')


def svg_size(path):
    """The CSS pixel size an SVG file declares on its root element."""
    root = SVG_ROOT.search(Path(path).read_text(errors="replace"))
    if not root:
        return None
    attrs = dict(re.findall(r'\b(width|height|viewBox)="([^"]*)"', root.group(0)))
    size = []
    for name, index in (("width", 2), ("height", 3)):
        length = LENGTH.match(attrs.get(name, ""))
        if length:
            size.append(round(float(length.group(1)) * PX_PER_UNIT[length.group(2)]))
        elif len(attrs.get("viewBox", "").split()) == 4:
            size.append(round(float(attrs["viewBox"].split()[index])))
        else:
            return None
    return tuple(size)


def sized_image(tag, page, files):
    source = SOURCE.search(tag)
    if not source or "width=" in tag or "://" in source.group(1):
        return tag
    # By now mkdocs has made the src relative to the page's URL, not to its Markdown file.
    base = page.url if page.url.endswith("/") else posixpath.dirname(page.url)
    path = posixpath.normpath(posixpath.join(base, source.group(1)))
    figure = files.get_file_from_path(path) if files else None
    size = svg_size(figure.abs_src_path) if figure else None
    if size is None:
        raise PluginError(f"{page.file.src_uri}: cannot read the size of {source.group(1)} "
                          f"(no such figure, or no width/height/viewBox); rerun "
                          f"`python scripts/record.py --render-only`")
    extra = f' width="{size[0]}" height="{size[1]}"'
    if "loading=" not in tag:
        extra += ' loading="lazy"'
    return re.sub(r"\s*/?>$", extra + " />", tag)


def linked_figure(match):
    link, image = match.groups()
    source = SOURCE.search(image)
    if link or not source or "://" in source.group(1):
        return match.group(0)
    return f'<a href="{source.group(1)}">{image}</a>'


def on_page_content(html, page, config, files):
    html = IMAGE.sub(lambda m: sized_image(m.group(0), page, files), html)
    html = LINK_AND_IMAGE.sub(linked_figure, html)
    html = TABLE.sub(lambda m: '<div class="table-scroll" tabindex="0" role="group" '
                     f'aria-label="table">{m.group(0)}</div>', html)
    html = HIGHLIGHT.sub('<div class="highlight" data-search-exclude="code"', html)
    return CODE.sub(r'\1<code tabindex="0"', html)


def without_unseen_bytes(output):
    pieces, end = [], 0
    for verbatim in VERBATIM.finditer(output):
        pieces += [INDENTATION.sub("\n", output[end:verbatim.start()]),
                   NAME_TOKEN.sub(r"\1", verbatim.group(0))]
        end = verbatim.end()
    return "".join(pieces + [INDENTATION.sub("\n", output[end:])])


def on_post_page(output, page, config):
    output = without_unseen_bytes(EMPTY_TABINDEX.sub(r"\1", output))
    return output.replace(SEARCH_DIALOG, SEARCH_DIALOG[:-1] + ' aria-label="Search">', 1)


def on_post_template(output, template_name, config):
    """The 404 page is a theme template, not a page: it needs the same dialog name."""
    return on_post_page(output, None, config)

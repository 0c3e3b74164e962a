"""mkdocs hook: show the executed notebook as a page of the site, in the site's own markup.

mkdocs-jupyter (0.26.3) is configured through its options only (mkdocs.yml): it puts the
notebook in the navigation, never executes it (`execute: false`), sets `page.nb_url` and
ships the `.ipynb` beside the page for download (`include_source: true`). Its page body
is nbconvert's JupyterLab template, and no option of the plugin changes that: it inlines
about 600 KB of CSS in `<body>` (five <style> elements, which are invalid there, holding
CSS the Nu checker rejects), writes the MathJax loader (`custom_mathjax_url` only changes
its address; the default empty one is `<script src="">`, invalid HTML), a clipboard script
and `<clipboard-copy aria-label>` elements (an ARIA attribute that element may not have),
and passes a Markdown cell's raw HTML through (the plugin turns nbconvert's clean_html
filter off), so a notebook's `<script>` would run on the page.

So this hook's on_page_content replaces that body, mkdocs' documented place to alter a
page's HTML, with the cells as the Markdown the lesson page is written in (a Python fence
per code cell, a text fence per output), converted with the site's own Markdown
extensions: the notebook then looks, reads and validates like every other page, and its
formulas go through the same build-time MathML as the lesson (pages/mathml.py runs after
this hook).

A notebook is untrusted input: a pull request can change its cells and the lock's digest in
the same commit. So it is converted by a Markdown instance of its own that can only write
text: no raw HTML (a `<script>` or `onerror=` is shown as the characters it is), no
extension that reads files or sets attributes (`--8<-- ".git/config"` stays a line of
text), and no link or image whose address has a scheme other than http(s) or mailto.
"""
import html
import json
import posixpath
import re
from pathlib import Path
from urllib.parse import urlsplit

import markdown
from markdown.extensions import Extension
from markdown.treeprocessors import Treeprocessor
from mkdocs.exceptions import PluginError
from mkdocs.structure.toc import get_toc

from scripts import ROOT
from scripts.store.lessons import RegistryError, load_lessons

TEXT_OUTPUTS = ("text/plain",)
# The site's extensions a notebook may use: each only shapes the text it is given. Left out
# on purpose: pymdownx.snippets (it reads any file in the checkout), attr_list and
# md_in_html (they let a cell write attributes and raw HTML), and anything not listed.
INERT_EXTENSIONS = ("admonition", "tables", "toc", "pymdownx.details", "pymdownx.superfences",
                    "pymdownx.highlight", "pymdownx.inlinehilite", "pymdownx.tabbed",
                    "pymdownx.arithmatex")
SAFE_SCHEMES = {"", "http", "https", "mailto"}
# Python-Markdown's placeholders for stashed HTML: a cell holding them could pull in HTML
# an extension stashed, so they never reach the converter.
STASH_CHARACTERS = re.compile("[\x02\x03]")


def fence(text, language):
    """A fence longer than any backtick run inside, so the cell's text stays text."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{language}\n{text.rstrip()}\n{ticks}"


def source(cell):
    text = cell.get("source", "")
    if isinstance(text, list) and all(isinstance(part, str) for part in text):
        return "".join(text)
    if isinstance(text, str):
        return text
    raise PluginError(f"a notebook cell or output holds {type(text).__name__} where text "
                      f"belongs; rerun `python scripts/record.py`")


def output_text(output, where):
    kind = output.get("output_type")
    if kind == "stream":
        return source({"source": output.get("text", "")})
    if kind == "error":
        lines = output.get("traceback", [])
        if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
            raise PluginError(f"{where}: an error output's traceback is not a list of lines; "
                              f"rerun `python scripts/record.py`")
        return "\n".join(re.sub(r"\x1b\[[0-9;]*m", "", line) for line in lines)
    data = output.get("data", {})
    if not isinstance(data, dict):
        raise PluginError(f"{where}: an output's `data` is not a mapping; rerun "
                          f"`python scripts/record.py`")
    for mime in TEXT_OUTPUTS:
        if mime in data:
            return source({"source": data[mime]})
    raise PluginError(f"{where}: an output of kind {kind!r} with {sorted(data)} cannot be "
                      f"shown as text; pages/notebook_page.py shows text outputs only, so print "
                      f"the result instead and rerun `python scripts/record.py`")


def cells_of(notebook, where):
    """The notebook's cells, each a dict whose outputs are dicts; anything else is refused
    in one line (a hand-edited or forged notebook is not a traceback)."""
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list) or not all(isinstance(cell, dict) for cell in cells):
        raise PluginError(f"{where}: `cells` is not a list of cells; rerun "
                          f"`python scripts/record.py`")
    for number, cell in enumerate(cells, start=1):
        outputs = cell.get("outputs", [])
        if not isinstance(outputs, list) or not all(isinstance(o, dict) for o in outputs) \
                or not all(isinstance(part, str) for part in text_parts(cell.get("source"))):
            raise PluginError(f"{where}, cell {number}: its source or outputs are not what "
                              f"a notebook holds; rerun `python scripts/record.py`")
    return cells


def text_parts(text):
    return text if isinstance(text, list) else [text or ""]


def notebook_markdown(notebook, where):
    blocks = []
    for number, cell in enumerate(cells_of(notebook, where), start=1):
        if cell.get("cell_type") == "markdown":
            blocks.append(source(cell))
        elif cell.get("cell_type") == "code":
            blocks.append(fence(source(cell), "python"))
            for output in cell.get("outputs", []):
                text = output_text(output, f"{where}, cell {number}")
                if text.strip():
                    blocks.append(fence(text, "text"))
    return "\n\n".join(blocks) + "\n"


class TextOnly(Extension):
    """Raw HTML in a cell is text, and addresses with a script scheme are dropped."""

    def extendMarkdown(self, md):
        md.preprocessors.deregister("html_block")
        md.inlinePatterns.deregister("html")
        md.treeprocessors.register(SafeAddresses(md), "safe_addresses", 0)


class SafeAddresses(Treeprocessor):
    def run(self, root):
        for element in root.iter():
            for attribute in ("href", "src"):
                address = element.get(attribute)
                if address is not None and not safe_address(address):
                    element.set(attribute, "#unsafe-address-removed")


def safe_address(address):
    """A relative address or one of SAFE_SCHEMES, after the spaces and control characters
    a browser ignores (`java\tscript:` is `javascript:` to a browser)."""
    cleaned = re.sub(r"[\x00-\x20\x7f]", "", address)
    try:
        return urlsplit(cleaned).scheme.lower() in SAFE_SCHEMES
    except ValueError:
        return False


def inert_markdown(config):
    """A Markdown instance for a notebook: the site's inert extensions, nothing else."""
    names = [name for name in config["markdown_extensions"] if name in INERT_EXTENSIONS]
    configs = {name: options for name, options in config["mdx_configs"].items()
               if name in names}
    return markdown.Markdown(extensions=[*names, TextOnly()], extension_configs=configs)


def on_page_content(html_text, page, config, files):
    """The notebook page's body in the site's markup instead of nbconvert's."""
    if not page.file.src_uri.endswith(".ipynb"):
        return html_text
    render_notebook(page, config)
    return page.content


def render_notebook(page, config):
    """What Page.render does for Markdown: page.content and page.toc, from the cells."""
    path = Path(page.file.abs_src_path)
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise PluginError(f"{page.file.src_uri}: not a valid notebook ({error}); rerun "
                          f"`python scripts/record.py`") from None
    converter = inert_markdown(config)
    text = STASH_CHARACTERS.sub("", notebook_markdown(notebook, page.file.src_uri))
    page.content = download_buttons(page) + converter.convert(text)
    # The side bar's table of contents must name the ids this HTML has.
    page.toc = get_toc(getattr(converter, "toc_tokens", []))


def download_buttons(page):
    """Visible buttons for the two downloads, under the title: the theme's own download
    link is a 20 px icon with a tooltip. The program is the notebook's lesson module
    (lesson_code/lessons.toml), which the site serves beside it (pages/hooks.py)."""
    notebook = posixpath.basename(page.file.src_uri)
    base = page.url if page.url.endswith("/") else posixpath.dirname(page.url)
    try:
        lesson = load_lessons().get(Path(notebook).stem)
    except RegistryError as error:
        raise PluginError(str(error)) from None
    buttons = [f'<a class="md-button md-button--primary" href="{html.escape(notebook)}" '
               f'download>Download the notebook (.ipynb)</a>']
    if lesson is not None:
        program = lesson.path().relative_to(ROOT).as_posix()
        href = posixpath.relpath(program, base or ".")
        buttons.append(f'<a class="md-button" href="{html.escape(href)}" '
                       f'download="{html.escape(posixpath.basename(program))}">'
                       f'Download the program (.py)</a>')
    return f'<p class="downloads">{" ".join(buttons)}</p>\n'

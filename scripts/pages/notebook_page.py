"""Each committed notebook as a page of the site, in the site's own markup (nbconvert's
body is invalid HTML with 600 KB of inline CSS; MAINTAINING.md, "The site"): the page
language's {{ notebook:<lesson> }}, on the page pages/site_files.py writes with the .ipynb
beside it. The cells become Markdown, made by an instance that writes text only: a notebook
is untrusted input, and one that is not a notebook stops the build in one line.
"""
import html
import posixpath
import re
from urllib.parse import urlsplit

import markdown
from markdown.extensions import Extension
from markdown.preprocessors import Preprocessor
from markdown.treeprocessors import Treeprocessor

from scripts import display
from scripts.pages.directives import NOTEBOOK
from scripts.pages.page_location import page_location
from scripts.pages.recorded_text import PageError
from scripts.store.freshness import notebook_problems
from scripts.store.recordings import RECORD, RecordingError, parse_json, read_bytes

# The site's extensions that only shape the text they are given, by module: no snippets
# (they read files), no attr_list or md_in_html (attributes and raw HTML).
INERT_EXTENSIONS = ("markdown.extensions.admonition", "markdown.extensions.tables",
                    "markdown.extensions.toc", "pymdownx.details", "pymdownx.superfences",
                    "pymdownx.highlight", "pymdownx.inlinehilite", "pymdownx.tabbed",
                    "pymdownx.arithmatex")
SAFE_SCHEMES = {"", "http", "https", "mailto"}
# Python-Markdown's placeholders for stashed HTML, which a cell could use to pull some in.
STASH_CHARACTERS = re.compile("[\x02\x03]")


def fence(text, language):
    """A fence longer than any backtick run inside, so the cell's text stays text."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{language}\n{text.rstrip()}\n{ticks}"


def joined(text, where):
    if isinstance(text, str):
        return text
    if isinstance(text, list) and all(isinstance(part, str) for part in text):
        return "".join(text)
    raise PageError(f"{where}: holds {type(text).__name__} where text belongs; rerun `{RECORD}`")


def output_text(output, where):
    kind = output.get("output_type")
    if kind == "stream":
        return joined(output.get("text", ""), where)
    if kind == "error":
        lines = output.get("traceback", [])
        if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
            raise PageError(f"{where}: an error output's traceback is not a list of lines; "
                            f"rerun `{RECORD}`")
        return "\n".join(re.sub(r"\x1b\[[0-9;]*m", "", line) for line in lines)
    data = output.get("data", {})
    if not isinstance(data, dict):
        raise PageError(f"{where}: an output's `data` is not a mapping; rerun `{RECORD}`")
    if "text/plain" in data:
        return joined(data["text/plain"], where)
    raise PageError(f"{where}: an output of kind {kind!r} with {sorted(data)} cannot be "
                    f"shown as text; pages/notebook_page.py shows text outputs only, so print "
                    f"the result instead and rerun `{RECORD}`")


# record.py's notebooks are tens of KB: their output is a recording's, 2,000 lines at most.
MAX_NOTEBOOK_BYTES = 4 * 2**20


def notebook_markdown(path):
    """The cells of the notebook at `path` as Markdown; one that is not one (truncated, not
    UTF-8, an older format, too large), in one line naming it."""
    where = display(path)
    try:
        notebook = parse_json(read_bytes(path, RECORD, MAX_NOTEBOOK_BYTES), where, RECORD)
    except RecordingError as error:
        raise PageError(str(error)) from None
    if isinstance(notebook, dict) and notebook.get("nbformat") != 4:
        raise PageError(f"{where}: nbformat {notebook.get('nbformat')!r}, where record.py "
                        f"writes nbformat 4; rerun `{RECORD}`")
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list) or not all(isinstance(cell, dict) for cell in cells):
        raise PageError(f"{where}: `cells` is not a list of cells; rerun `{RECORD}`")
    blocks = []
    for number, cell in enumerate(cells, start=1):
        at, outputs = f"{where}, cell {number}", cell.get("outputs", [])
        if not isinstance(outputs, list) or not all(isinstance(o, dict) for o in outputs):
            raise PageError(f"{at}: its outputs are not a list of outputs; rerun `{RECORD}`")
        text = joined(cell.get("source", ""), at)
        if cell.get("cell_type") == "markdown":
            blocks.append(text)
        elif cell.get("cell_type") == "code":
            blocks.append(fence(text, "python"))
            shown = [output_text(output, at) for output in outputs]
            blocks += [fence(output, "text") for output in shown if output.strip()]
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
    """A relative address or one of SAFE_SCHEMES, read as a browser reads `java\tscript:`."""
    cleaned = re.sub(r"[\x00-\x20\x7f]", "", address)
    try:
        return urlsplit(cleaned).scheme.lower() in SAFE_SCHEMES
    except ValueError:
        return False


class NotebookCells(Preprocessor):
    """{{ notebook:<lesson> }} as HTML the page's own Markdown never reads; registered by
    the page language after normalize_whitespace, which strips a stash placeholder's marks."""

    def run(self, lines):
        text = "\n".join(lines)
        return NOTEBOOK.sub(self.notebook, text).split("\n") if "{{" in text else lines

    def notebook(self, match):
        """The download buttons, then the cells, converted with the page's own inert
        extensions and settings; their headings go to the page's toc."""
        sources = self.md.page_language.loaded_sources()
        if (lesson := sources.lessons.get(match[1])) is None:
            raise PageError(f"{match[0]} names no lesson of lesson_code/lessons.toml")
        if stale := notebook_problems(lesson, lesson.root):  # here: the other pages still build
            raise PageError(stale[0])
        converter = markdown.Markdown(extensions=[
            *[type(ext)(**ext.getConfigs()) for ext in self.md.registeredExtensions
              if type(ext).__module__ in INERT_EXTENSIONS], TextOnly()])
        path = sources.docs / "notebooks" / f"{lesson.id}.ipynb"
        body = download_buttons(lesson, path.name, page_location(self.md).base) + \
            converter.convert(STASH_CHARACTERS.sub("", notebook_markdown(path)))
        self.md.page_language.notebook_toc = getattr(converter, "toc_tokens", [])
        return f"\n\n{self.md.htmlStash.store(body)}\n\n"


class NotebookHeadings(Treeprocessor):
    """After the toc: the notebook's headings join the page's table of contents."""

    def run(self, root):
        self.md.toc_tokens = [*getattr(self.md, "toc_tokens", []),
                              *self.md.page_language.notebook_toc]


def download_buttons(lesson, notebook, base):
    """Visible download buttons (the theme's own link is a 20 px icon), their links from
    `base`, where the finished HTML's start: no generator rewrites a stashed block's."""
    program = lesson.path().relative_to(lesson.root).as_posix()
    notebook, code = (html.escape(posixpath.relpath(path, base or ".")) for path in
                      (f"notebooks/{lesson.id}/{notebook}", program))
    return (f'<p class="downloads"><a class="md-button md-button--primary" href="{notebook}" '
            f'download>Download the notebook (.ipynb)</a> <a class="md-button" href="{code}" '
            f'download="{html.escape(posixpath.basename(program))}">'
            f'Download the program (.py)</a></p>\n')

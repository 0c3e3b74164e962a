"""mkdocs hook: each committed notebook as a page of the site, in the site's own markup
(nbconvert's body is invalid HTML with 600 KB of inline CSS; MAINTAINING.md, "The site"),
its .ipynb copied beside it for download. The cells become Markdown, made by an instance
that writes text only: a notebook is untrusted input, and one that is not a notebook
stops the build in one line.
"""
import html
import posixpath
import re
import shutil
from pathlib import Path
from urllib.parse import urlsplit

import markdown
from markdown.extensions import Extension
from markdown.treeprocessors import Treeprocessor
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File
from mkdocs.structure.toc import get_toc

from scripts import display
from scripts.pages.page_language import NAME as PAGE_LANGUAGE
from scripts.store.recordings import RecordingError, read_json

TEXT_OUTPUTS = ("text/plain",)
# The site's extensions that only shape the text they are given: no snippets (they read
# files), no attr_list or md_in_html (attributes and raw HTML).
INERT_EXTENSIONS = ("admonition", "tables", "toc", "pymdownx.details", "pymdownx.superfences",
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
    raise PluginError(f"{where}: holds {type(text).__name__} where text belongs; "
                      f"rerun `python scripts/record.py`")


def output_text(output, where):
    kind = output.get("output_type")
    if kind == "stream":
        return joined(output.get("text", ""), where)
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
            return joined(data[mime], where)
    raise PluginError(f"{where}: an output of kind {kind!r} with {sorted(data)} cannot be "
                      f"shown as text; pages/notebook_page.py shows text outputs only, so print "
                      f"the result instead and rerun `python scripts/record.py`")


def notebook_markdown(path):
    """The cells of the notebook at `path` as Markdown; one that is not one, in one line."""
    where = display(path)
    try:
        notebook = read_json(path, "python scripts/record.py")
    except RecordingError as error:
        raise PluginError(str(error)) from None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list) or not all(isinstance(cell, dict) for cell in cells):
        raise PluginError(f"{where}: `cells` is not a list of cells; rerun "
                          f"`python scripts/record.py`")
    blocks = []
    for number, cell in enumerate(cells, start=1):
        at, outputs = f"{where}, cell {number}", cell.get("outputs", [])
        if not isinstance(outputs, list) or not all(isinstance(o, dict) for o in outputs):
            raise PluginError(f"{at}: its outputs are not a list of outputs; rerun "
                              f"`python scripts/record.py`")
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


class NotebookPage(File):
    """A committed notebook as a page: mkdocs builds a page of each file that says so."""

    def is_documentation_page(self):
        return True


def on_files(files, config):
    """Each notebook becomes a page once it has been read: a broken one stops the build in
    one line before any page is built."""
    for file in [file for file in files if file.src_uri.endswith(".ipynb")]:
        notebook_markdown(Path(file.abs_src_path))
        files.remove(file)
        files.append(NotebookPage(file.src_path, file.src_dir, file.dest_dir,
                                  file.use_directory_urls))
    return files


def on_pre_page(page, config, files):
    if isinstance(page.file, NotebookPage):
        page.nb_url = posixpath.basename(page.file.src_uri)  # docs/overrides/main.html
        page.render = lambda config, files: render_notebook(page, config)
    return page


def on_post_page(output, page, config):
    """The .ipynb beside its page, for download (pages/course.py links it too)."""
    if isinstance(page.file, NotebookPage):
        copy = Path(page.file.abs_dest_path).with_name(page.nb_url)
        copy.parent.mkdir(parents=True, exist_ok=True)  # the page is written after this
        shutil.copyfile(page.file.abs_src_path, copy)
    return output


def render_notebook(page, config):
    """What Page.render does for Markdown, made from the cells."""
    names = [name for name in config["markdown_extensions"] if name in INERT_EXTENSIONS]
    converter = markdown.Markdown(extensions=[*names, TextOnly()], extension_configs={
        name: options for name, options in config["mdx_configs"].items() if name in names})
    text = STASH_CHARACTERS.sub("", notebook_markdown(Path(page.file.abs_src_path)))
    page.content = download_buttons(page, config) + converter.convert(text)
    page.toc = get_toc(getattr(converter, "toc_tokens", []))


def download_buttons(page, config):
    """Visible download buttons: the theme's own link is a 20 px icon."""
    notebook = posixpath.basename(page.file.src_uri)
    base = page.url if page.url.endswith("/") else posixpath.dirname(page.url)
    lesson = config["mdx_configs"][PAGE_LANGUAGE]["sources"].lessons.get(Path(notebook).stem)
    buttons = [f'<a class="md-button md-button--primary" href="{html.escape(notebook)}" '
               f'download>Download the notebook (.ipynb)</a>']
    if lesson is not None:
        program = lesson.path().relative_to(lesson.root).as_posix()
        href = posixpath.relpath(program, base or ".")
        buttons.append(f'<a class="md-button" href="{html.escape(href)}" '
                       f'download="{html.escape(posixpath.basename(program))}">'
                       f'Download the program (.py)</a>')
    return f'<p class="downloads">{" ".join(buttons)}</p>\n'

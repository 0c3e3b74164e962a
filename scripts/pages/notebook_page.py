"""mkdocs hook: show the executed notebook as a page of the site, in the site's own markup.

mkdocs-jupyter still puts the notebook in the navigation, sets `page.nb_url` and ships the
`.ipynb` for download; only its renderer is replaced (hooks run after plugins, so this
on_pre_page has the last word), before it runs nbconvert at all. Its HTML (nbconvert's
JupyterLab template) inlines about 600 KB of CSS in `<body>`, loads MathJax and a clipboard script,
keeps a light code palette in dark mode and is invalid HTML in 74 places. Here the cells
become the Markdown the lesson page is written in (a Python fence per code cell, a text
fence per output), converted with the site's own Markdown extensions: the notebook then
looks, reads and validates like every other page, and its formulas go through the same
build-time MathML as the lesson (pages/mathml.py runs after this hook).
"""
import html
import json
import posixpath
import re
import sys
from pathlib import Path

import markdown
from mkdocs.exceptions import PluginError
from mkdocs.structure.toc import get_toc

# mkdocs loads this file by path; the `scripts` package lives one level up.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts import ROOT  # noqa: E402
from scripts.lessons import RegistryError, load_lessons  # noqa: E402

TEXT_OUTPUTS = ("text/plain",)


def fence(text, language):
    """A fence longer than any backtick run inside, so the cell's text stays text."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{language}\n{text.rstrip()}\n{ticks}"


def source(cell):
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else text


def output_text(output, where):
    kind = output.get("output_type")
    if kind == "stream":
        return source({"source": output.get("text", "")})
    if kind == "error":
        return "\n".join(re.sub(r"\x1b\[[0-9;]*m", "", line)
                         for line in output.get("traceback", []))
    data = output.get("data", {})
    for mime in TEXT_OUTPUTS:
        if mime in data:
            return source({"source": data[mime]})
    raise PluginError(f"{where}: an output of kind {kind!r} with {sorted(data)} cannot be "
                      f"shown as text; pages/notebook_page.py shows text outputs only, so print "
                      f"the result instead and rerun `python scripts/record.py`")


def notebook_markdown(notebook, where):
    blocks = []
    for number, cell in enumerate(notebook.get("cells", []), start=1):
        if cell.get("cell_type") == "markdown":
            blocks.append(source(cell))
        elif cell.get("cell_type") == "code":
            blocks.append(fence(source(cell), "python"))
            for output in cell.get("outputs", []):
                text = output_text(output, f"{where}, cell {number}")
                if text.strip():
                    blocks.append(fence(text, "text"))
    return "\n\n".join(blocks) + "\n"


def on_pre_page(page, config, files):
    if page.file.src_uri.endswith(".ipynb"):
        page.render = lambda config, files: render_notebook(page, config)
    return page


def render_notebook(page, config):
    """What Page.render does for Markdown: page.content and page.toc, from the cells."""
    path = Path(page.file.abs_src_path)
    try:
        notebook = json.loads(path.read_text())
    except ValueError as error:
        raise PluginError(f"{page.file.src_uri}: not a valid notebook ({error}); rerun "
                          f"`python scripts/record.py`") from None
    converter = markdown.Markdown(extensions=config["markdown_extensions"],
                                  extension_configs=config["mdx_configs"])
    page.content = download_buttons(page) + converter.convert(
        notebook_markdown(notebook, page.file.src_uri))
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

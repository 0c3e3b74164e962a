"""The notebook companion of each lesson: cut from its module, runnable in a fresh kernel, and
its page, which shows whatever a notebook holds as text."""
import ast
import html
import json
import re
from html.parser import HTMLParser

import markdown
import nbformat
import pytest
from mkdocs.config import load_config
from mkdocs.exceptions import PluginError
from nbclient import NotebookClient

from conftest import LESSONS, ROOT, SEED, each_lesson, each_lesson_with, module_file
from harness import raised_in_one_line
from scripts.pages import notebook_page
from scripts.pages.page_language import NAME as PAGE_LANGUAGE
from scripts.pages.sources import Sources
from scripts.runners.notebook import (build_notebook, lay_out, setup_line, source_blocks,
                                     stdout_of, teaching_blocks)
from site_hostile import CANARY


def committed(lesson):
    return ROOT / "docs" / "notebooks" / f"{lesson.id}.ipynb"


def recorded_stdout(lesson):
    return json.loads((ROOT / "recordings" / f"{lesson.id}.cpu.json").read_text())["stdout"]


@each_lesson
def test_the_committed_notebook_is_its_sections_freshly_built_and_printed_the_recording(
        lesson, site_config):
    """A reader downloads it alone: it imports nothing of this repository (read from its cells:
    the editable install makes both importable in any kernel here). Its cells are the module's
    sections in order, the run spread over its steps; the site renders it as inert text."""
    notebook = nbformat.read(committed(lesson), as_version=4)
    fresh = build_notebook(lesson, devices=lesson.devices)
    assert [cell.source for cell in fresh.cells] == [cell.source for cell in notebook.cells]
    printed = stdout_of(notebook)
    assert printed == recorded_stdout(lesson) and printed.rstrip().endswith(f"PASS: {lesson.id}")
    assert not any("_json.dump" in cell.source for cell in notebook.cells)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    printing = [cell for cell in code if any(out.get("text") for out in cell.outputs)]
    silent = next((cell.source.splitlines()[0] for cell in code if cell not in printing), "")
    lines = lesson.path().read_text().splitlines()
    line = lines.index(silent) + 1 if silent in lines else 1
    assert 2 * len(printing) > len(code), (
        f"{module_file(lesson)}:{line}: {len(printing)} of the notebook's {len(code)} code cells "
        f"print, the first silent one opening here; the rule (lesson_code/CONTRACT.md): more "
        f"than half print, so follow each step in run_lesson with a print of what it shows")
    imported = {alias.name.split(".")[0] if isinstance(node, ast.Import)
                else (node.module or "").split(".")[0]
                for cell in code for node in ast.walk(ast.parse(cell.source))
                if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    assert imported.isdisjoint({"scripts", "lesson_code"}), imported
    source = lesson.path().read_text()
    _, blocks = source_blocks(source)
    names = [name for name, _ in blocks if name]
    assert names == sorted(names, key=lambda n: source.index(f"[start:{n}]"))
    assert not any('__name__ == "__main__"' in code for _, code in blocks)
    code = [cell.source for cell in code]
    assert not any("def run_lesson(" in cell for cell in code)  # it runs spread out
    # The set-up line ends its cell (a failure there is this machine's); the last cell
    # makes `results`, the recording's data.
    (step_1,) = [cell for cell in code if "def configure_devices(" in cell]
    assert setup_line("cpu", lesson.devices) in step_1.splitlines()
    assert any(line.startswith("results = ") for line in code[-1].splitlines())
    content, _ = rendered_page(ROOT / "docs", site_config, lesson)
    assert "<pre" in content and LiveMarkup(content).found == []


@pytest.mark.slow
@each_lesson
def test_downloaded_notebook_runs_top_to_bottom_in_a_fresh_kernel(lesson, tmp_path):
    notebook = nbformat.read(committed(lesson), as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    # A reader's fresh kernel: record.py's own must not be the only place the cells work.
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    lines = stdout_of(notebook).splitlines()
    assert lines[-1] == f"PASS: {lesson.id}" and len(lines) == len(set(lines))
    # What record.py's own kernel printed, line for line, but for the numbers (timings).
    number = re.compile(r"-?\d+(\.\d+)?(e-?\d+)?")
    assert [number.sub("#", line) for line in lines] == \
        [number.sub("#", line) for line in recorded_stdout(lesson).splitlines()]


def test_each_statement_of_the_run_ends_the_first_cell_it_can_run_in_and_helpers_are_read():
    """Only names a section reads keep a helper: a local `main` is not the module's `def main()`."""
    cells = [("a", "def a():\n    return 1"), ("b", "import json\n\n\ndef b(x):\n    pass")]
    run = ["x = a()", "print(x)", "y = b(x)", "print(a(), json)"]
    # The last reads only `a`, defined above, yet stays after `b(x)`: the run's order.
    assert lay_out(cells, run) == [["x = a()", "print(x)"], ["y = b(x)", "print(a(), json)"]]
    blocks = [("step", "def step(x):\n    main = helper(x)\n    return [main for _ in x]"),
              (None, "import argparse\n\n\ndef main():\n    argparse.ArgumentParser()\n"
                     "\n\ndef helper(x):\n    return x")]
    kept = "\n".join(code for _, code in teaching_blocks(blocks, "step([1])"))
    assert "def helper" in kept and "def main" not in kept and "argparse" not in kept


def test_the_notebook_teaches_and_holds_no_command_line_plumbing():
    notebook = build_notebook(SEED, devices=SEED.devices)
    code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    assert "__name__ ==" not in code and "SystemExit" not in code  # the program is the shell's
    headings = [line[3:] for cell in notebook.cells if cell.cell_type == "markdown"
                for line in cell.source.splitlines() if line.startswith("## ")]
    page_headings = {line.lstrip("#").strip() for page in (ROOT / "docs").rglob("*.md")
                     for line in page.read_text().splitlines() if line.startswith("##")}
    assert set(headings) <= page_headings and "Step 1 · Configure four logical devices" in headings
    assert "make_it_yours" in {name for name, _ in source_blocks(SEED.path().read_text())[1]}


@each_lesson_with("going_further")
def test_the_going_further_steps_follow_the_lesson_without_importing_it(lesson):
    notebook = build_notebook(lesson, devices=lesson.devices)
    code = [cell.source for cell in notebook.cells if cell.cell_type == "code"]
    sections = [text for name, text in
                source_blocks(lesson.path(lesson.going_further).read_text())[1] if name]
    lesson_run = next(i for i, cell in enumerate(code) if "def configure_devices(" in cell)
    places = [next(i for i, cell in enumerate(code) if section in cell)
              for section in sections]  # each a cell of its own, in order
    assert lesson_run < places[0] and places == sorted(set(places))
    assert "run_going_further" not in "".join(code)
    imports = [statement for cell in code for statement in ast.parse(cell).body
               if isinstance(statement, (ast.Import, ast.ImportFrom))]
    assert not any("lesson_code" in ast.unparse(statement) for statement in imports)
    # Its own `import jax` repeats the lesson's Step 1: left out.
    assert [ast.unparse(s) for s in imports].count("import jax") == 1


# the notebook's page: untrusted input, shown as text ----------------------------------------

class LiveMarkup(HTMLParser):
    def __init__(self, html_text):
        super().__init__()
        self.found = []
        self.feed(html_text)

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "iframe", "object", "embed", "style", "link", "base", "meta"):
            self.found.append(tag)
        for name, value in attrs:
            if name.startswith("on") or name in ("style", "srcdoc"):
                self.found.append(f"{tag} {name}")
            if name in ("href", "src", "xlink:href", "action", "formaction") and value \
                    and not notebook_page.safe_address(value):
                self.found.append(f"{tag} {name}={value}")


@pytest.fixture(scope="module")
def site_config():
    return load_config(str(ROOT / "mkdocs.yml"))


def rendered_page(docs, config, lesson=SEED):
    """The notebook page of `lesson`, from <docs>/notebooks/<id>.ipynb, as the site's
    Markdown extensions make it: (its HTML, its table of contents' titles)."""
    configs = {**config["mdx_configs"], PAGE_LANGUAGE: {"sources": Sources(LESSONS, {}, docs)}}
    md = markdown.Markdown(extensions=config["markdown_extensions"], extension_configs=configs)
    return md.convert(f"{{{{ notebook:{lesson.id} }}}}"), [t["name"] for t in md.toc_tokens]


def render(tmp_path, config, notebook):
    path = tmp_path / "notebooks" / f"{SEED.id}.ipynb"
    path.parent.mkdir()
    path.write_bytes(notebook if isinstance(notebook, bytes) else json.dumps(notebook).encode())
    return rendered_page(tmp_path, config)


HOSTILE_MARKDOWN = [
    '<script>alert("XSS script")</script>', '<img src=x onerror=alert("XSS img")>',
    '<svg onload=alert("XSS svg")></svg>', '[click](javascript:alert("XSS link"))',
    '[click](JaVa\tScRiPt:alert("XSS tab"))', '![x](data:text/html,<script>alert(1)</script>)',
    '<a href="javascript:alert(1)">anchor</a>', 'attr list {: onclick="alert(1)" }',
    '<div markdown="1" onclick="alert(1)">md_in_html</div>',
    '# heading <img src=x onerror=alert("XSS toc")>',
    '$\\text{<script>alert("XSS mtext")</script>}$',  # \href, \style: tests/test_math.py
    '<style>@import url(http://example.com/x.css)</style>', '\x02wzxhzdk:0\x03']


def test_a_hostile_notebook_reaches_the_page_as_text(tmp_path, site_config, monkeypatch):
    # The site's snippets read files under the working folder.
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text(f"[http]\n\textraheader = {CANARY}\n")
    include = '--8<-- ".git/config"'
    cells = [{"cell_type": "markdown", "source": "\n\n".join(HOSTILE_MARKDOWN + [include])},
             {"cell_type": "code", "source": [include, "\n", "print(1)"],
              "outputs": [{"output_type": "stream", "name": "stdout",
                           "text": [include + "\n", '<script>alert("out")</script>\n']},
                          {"output_type": "error", "traceback": [include, "<b>x</b>"]}]}]
    html_text, titles = render(tmp_path, site_config, {"cells": cells, "metadata": {},
                                                       "nbformat": 4, "nbformat_minor": 5})
    assert LiveMarkup(html_text).found == []
    assert CANARY not in html_text  # no snippet was expanded, from any cell or output
    text = html.unescape(re.sub(r"<[^>]+>", "", html_text))
    assert text.count('--8<-- ".git/config"') == 4  # ...each is shown as the text it is
    assert "<mtext>&lt;script&gt;" in html_text  # \\text{} content, escaped
    assert "<math" in html_text  # formulas still become MathML
    # The side bar's table of contents too.
    assert titles and not any("<img" in title for title in titles)


def cells(*given):
    return {"nbformat": 4, "cells": list(given)}


@pytest.mark.parametrize("notebook, words", [
    ({"nbformat": 4, "cells": {"a": 1}}, "`cells` is not a list"), (cells(1, 2), "not a list"),
    ([], "`cells` is not a list"), (cells({"cell_type": "code", "source": 3}), "cell 1: holds int"),
    (cells({"cell_type": "markdown", "source": ["a", None]}), "holds list where text"),
    (cells({"cell_type": "code", "source": "", "outputs": "x"}), "outputs are not a list"),
    (cells({"cell_type": "code", "source": "", "outputs": [3]}), "outputs are not a list"),
    *((cells({"cell_type": "code", "source": "", "outputs": [output]}), words)
      for output, words in [({"output_type": "error", "traceback": "x"}, "traceback"),
                            ({"output_type": "display_data", "data": ["text/plain"]}, "`data`"),
                            ({"output_type": "stream", "text": [1]}, "holds list")]),
    (json.dumps(cells())[:20].encode(), "not valid JSON"),
    (json.dumps(cells()).replace("cells", "c\u00e9lls").encode("latin-1"), "not valid JSON"),
    ({"nbformat": 3, "worksheets": [{"cells": []}]}, "nbformat 3, where record.py writes "
                                                     "nbformat 4"),
    (b" " * (4 * 2**20 + 1), "larger than 4 MiB, more than record.py writes")])
def test_a_broken_notebook_is_one_line_naming_it(tmp_path, site_config, notebook, words):
    """What a pull request may commit as a notebook: truncated, mistyped, not UTF-8, older, huge."""
    refusal = str(raised_in_one_line(PluginError, render, tmp_path, site_config, notebook))
    assert f"notebooks/{SEED.id}.ipynb" in refusal.split(": ")[0], refusal
    assert words in refusal and refusal.endswith("run `python scripts/record.py`"), refusal

"""Everything a maintainer or a pull request hands the build is untrusted input (issue 23).

Each test feeds one boundary a hostile or malformed input and asserts what the issue asks:
a refusal in one line naming the file, the field and the fix, or text that stays text.
No test runs JAX or asserts how fast anything is.
"""
import html
import json
import re
from html.parser import HTMLParser
from types import SimpleNamespace

import pytest
from mkdocs.config import load_config
from mkdocs.exceptions import PluginError

from conftest import ROOT
from scripts.pages import mathml, notebook_page

CANARY = "CANARY-TOKEN-5be1c0d3"


# ----------------------------------------------------------- 1: the notebook page --

class LiveMarkup(HTMLParser):
    """What a browser would run or load from a page: scripts, handlers, script URLs."""

    def __init__(self):
        super().__init__()
        self.found = []

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "iframe", "object", "embed", "style", "link", "base", "meta"):
            self.found.append(tag)
        for name, value in attrs:
            if name.startswith("on") or name in ("style", "srcdoc"):
                self.found.append(f"{tag} {name}")
            if name in ("href", "src", "xlink:href", "action", "formaction") and value \
                    and not notebook_page.safe_address(value):
                self.found.append(f"{tag} {name}={value}")


def live_markup(html_text):
    parser = LiveMarkup()
    parser.feed(html_text)
    return parser.found


@pytest.fixture(scope="module")
def site_config():
    return load_config(str(ROOT / "mkdocs.yml"))


def render(tmp_path, config, cells):
    path = tmp_path / "hostile.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                                "nbformat_minor": 5}))
    page = SimpleNamespace(file=SimpleNamespace(abs_src_path=str(path),
                                                src_uri="notebooks/hostile.ipynb"))
    notebook_page.render_notebook(page, config)
    return mathml.on_page_content(page.content, page, config, None), page


HOSTILE_MARKDOWN = [
    '<script>alert("XSS script")</script>',
    '<img src=x onerror=alert("XSS img")>',
    '<svg onload=alert("XSS svg")></svg>',
    '[click](javascript:alert("XSS link"))',
    '[click](JaVa\tScRiPt:alert("XSS tab"))',
    '![x](data:text/html,<script>alert(1)</script>)',
    '<a href="javascript:alert(1)">anchor</a>',
    '<div markdown="1" onclick="alert(1)">md_in_html</div>',
    'attr list {: onclick="alert(1)" }',
    '# heading <img src=x onerror=alert("XSS toc")>',
    '$\\text{<script>alert("XSS mtext")</script>}$',
    '$\\href{javascript:alert("XSS href")}{x}$',
    '$\\style{background:url(http://example.com/x)}{x}$',
    '<style>@import url(http://example.com/x.css)</style>',
    '\x02wzxhzdk:0\x03',
]


def test_a_hostile_notebook_reaches_the_page_as_text(tmp_path, site_config, monkeypatch):
    # The site's snippets read files under "." (the build's working folder): here, tmp_path.
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text(f"[http]\n\textraheader = {CANARY}\n")
    include = '--8<-- ".git/config"'
    cells = [{"cell_type": "markdown", "source": "\n\n".join(HOSTILE_MARKDOWN + [include])},
             {"cell_type": "code", "source": [include, "\n", "print(1)"],
              "outputs": [{"output_type": "stream", "name": "stdout",
                           "text": [include + "\n", '<script>alert("out")</script>\n']},
                          {"output_type": "error", "traceback": [include, "<b>x</b>"]}]}]
    html_text, page = render(tmp_path, site_config, cells)
    assert live_markup(html_text) == []
    assert CANARY not in html_text  # no snippet was expanded, from any cell or output
    text = html.unescape(re.sub(r"<[^>]+>", "", html_text))
    assert text.count('--8<-- ".git/config"') == 4  # ...each is shown as the text it is
    assert "<mtext>&lt;script&gt;" in html_text  # \\text{} content, escaped
    assert "<math" in html_text  # formulas still become MathML
    # The side bar's table of contents is built from the same headings: text there too.
    titles = [item.title for item in page.toc]
    assert titles and not any("<img" in title for title in titles)


def test_the_site_s_own_notebook_still_converts(site_config):
    page = SimpleNamespace(file=SimpleNamespace(
        abs_src_path=str(ROOT / "docs/notebooks/distributed-03.ipynb"),
        src_uri="notebooks/distributed-03.ipynb"))
    notebook_page.render_notebook(page, site_config)
    assert "<pre" in page.content and live_markup(page.content) == []


@pytest.mark.parametrize("notebook", [
    {"cells": "not a list"}, {"cells": {"a": 1}}, {"cells": [1, 2]}, [],
    {"cells": [{"cell_type": "code", "source": 3}]},
    {"cells": [{"cell_type": "markdown", "source": ["a", None]}]},
    {"cells": [{"cell_type": "code", "source": "", "outputs": "x"}]},
    {"cells": [{"cell_type": "code", "source": "", "outputs": [3]}]},
    {"cells": [{"cell_type": "code", "source": "",
                "outputs": [{"output_type": "error", "traceback": "x"}]}]},
    {"cells": [{"cell_type": "code", "source": "",
                "outputs": [{"output_type": "display_data", "data": ["text/plain"]}]}]},
    {"cells": [{"cell_type": "code", "source": "",
                "outputs": [{"output_type": "stream", "text": [1]}]}]},
])
def test_a_malformed_notebook_is_one_line(tmp_path, site_config, notebook):
    path = tmp_path / "bad.ipynb"
    path.write_text(json.dumps(notebook))
    page = SimpleNamespace(file=SimpleNamespace(abs_src_path=str(path),
                                                src_uri="notebooks/bad.ipynb"))
    with pytest.raises(PluginError) as refused:
        notebook_page.render_notebook(page, site_config)
    message = str(refused.value)
    assert "\n" not in message and "record.py" in message

"""A bare mkdocs-material page with the project's palette, what the theme alone makes of a
heading, a link, a table and a code block: the accessibility and HTML tests, and `make audit`
(a page as long as each lesson's, long/<page>), hold the project's pages to it."""
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml
from mkdocs.utils import yaml_load

ROOT = Path(__file__).resolve().parents[1]

PAGE = '''# Reference page

A paragraph with [a link to the second section](#second-section) and `inline code`.

| size | value |
|---|---|
| small | 1 |

```python
import numpy as np  # a comment


def gradient(x, y, w, n):
    """A docstring."""
    return 2 * x.T @ (x @ w - y) / n if n is not None else 0.5
```

## Second section

Some closing text.
'''


# PAGE's sections repeated to a lesson page's element count: a browser paints a long page
# before the theme's script runs, so only a page as long says what the theme alone blocks.
# The bare page's frame is about 200 elements, each repeated section about 77.
FRAME_ELEMENTS, SECTION_ELEMENTS = 200, 77
ELEMENT = re.compile(r"<[a-zA-Z]")


def elements(html):
    """How many elements a page's HTML opens."""
    return len(ELEMENT.findall(html))


def long_page_path(page):
    """Where the bare page as long as the lesson page `page` ("lessons/<id>/") is served."""
    return f"long/{page}"


def long_page(length):
    """PAGE's sections repeated to about `length` elements once built."""
    repeats = max(1, round((length - FRAME_ELEMENTS) / SECTION_ELEMENTS))
    heading, body = PAGE.split("\n", 1)
    sections = "".join(f"\n## Part {number}\n{body.replace('# ', '### ')}"
                       for number in range(1, repeats + 1))
    return f"{heading}\n{sections}"


def build_reference(directory, root=ROOT, lengths=None):
    """Build the reference site under `directory` with `root`'s theme settings and a page
    as long as each of `lengths` ({lesson page: its element count}); return the site."""
    project = yaml_load((Path(root) / "mkdocs.yml").read_text(encoding="utf-8"))
    theme = {key: project["theme"][key] for key in ("name", "font", "features", "palette")}
    config = {"site_name": "Reference", "theme": theme, "plugins": ["search"],
              "markdown_extensions": ["tables", "attr_list", "pymdownx.superfences",
                                      {"pymdownx.highlight": {"anchor_linenums": False}},
                                      "pymdownx.inlinehilite"]}
    directory = Path(directory)
    docs = directory / "docs"
    docs.mkdir(parents=True)
    (docs / "index.md").write_text(PAGE, encoding="utf-8")
    for page, length in (lengths or {}).items():
        source = docs / long_page_path(page) / "index.md"
        source.parent.mkdir(parents=True)
        source.write_text(long_page(length), encoding="utf-8")
    (directory / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    site = directory / "site"
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                          str(site)], cwd=directory, capture_output=True, text=True,
                         timeout=120, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert run.returncode == 0, run.stderr[-2000:]
    return site

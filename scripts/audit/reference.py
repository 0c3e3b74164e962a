"""A bare mkdocs-material page with the project's palette: what the theme alone produces.

Two readers hold the project's pages to it. The accessibility and HTML-validity tests
("nothing worse than the theme itself": a finding this page also shows comes from
mkdocs-material's own markup or colours) read the page itself: it holds what every lesson
page is made of (a heading, a paragraph with a link, a table and a highlighted Python
block) and nothing of the project's (no hooks, no CSS, no templates). `make audit` reads
a second page (long/) that holds the same again and again, as long as a lesson page, and
sets each lesson page's blocking time against it in the same run.
"""
import os
import subprocess
import sys
from pathlib import Path

import yaml
from mkdocs.utils import yaml_load

ROOT = Path(__file__).resolve().parents[2]

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


# The same theme on a page as long as a lesson page: PAGE's sections, again and again, to
# about the 1,700 elements of the seed lesson's page (the short page has 200). A browser
# paints a short page only once the theme's script, at the end of the body, has run; a
# long one it paints first, so the theme's own start-up lands after the first paint and
# counts as blocking time. Only a page as long says what the theme alone blocks on a
# lesson page.
LONG_PAGE_PATH = "long/"
LONG_PAGE_REPEATS = 20


def long_page():
    heading, body = PAGE.split("\n", 1)
    sections = "".join(f"\n## Part {number}\n{body.replace('# ', '### ')}"
                       for number in range(1, LONG_PAGE_REPEATS + 1))
    return f"{heading}\n{sections}"


class ReferenceBuildFailed(Exception):
    """mkdocs could not build the reference page; str() is its last lines of output."""


def build_reference(directory, root=ROOT):
    """Build the reference site under `directory` with `root`'s theme settings; return
    the site folder."""
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
    (docs / LONG_PAGE_PATH.rstrip("/")).mkdir()
    (docs / LONG_PAGE_PATH / "index.md").write_text(long_page(), encoding="utf-8")
    (directory / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    site = directory / "site"
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                          str(site)], cwd=directory, capture_output=True, text=True,
                         timeout=120, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    if run.returncode != 0:
        raise ReferenceBuildFailed(run.stderr[-2000:])
    return site

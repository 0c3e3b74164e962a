"""A bare mkdocs-material page with the project's palette: what the theme alone produces.

The accessibility and HTML-validity tests hold the project's pages to "nothing worse than
the theme itself": a finding that this reference page also shows comes from
mkdocs-material's own markup or colours, not from anything this project wrote. The page
holds what every lesson page is made of (a heading, a paragraph with a link, a table and a
highlighted Python block) and nothing of the project's (no hooks, no CSS, no templates).
"""
import os
import subprocess
import sys

import yaml
from mkdocs.utils import yaml_load

from conftest import ROOT

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


def build_reference(directory):
    """Build the reference site under `directory`; return the site folder."""
    project = yaml_load((ROOT / "mkdocs.yml").read_text())
    theme = {key: project["theme"][key] for key in ("name", "font", "features", "palette")}
    config = {"site_name": "Reference", "theme": theme, "plugins": ["search"],
              "markdown_extensions": ["tables", "attr_list", "pymdownx.superfences",
                                      {"pymdownx.highlight": {"anchor_linenums": False}},
                                      "pymdownx.inlinehilite"]}
    docs = directory / "docs"
    docs.mkdir(parents=True)
    (docs / "index.md").write_text(PAGE)
    (directory / "mkdocs.yml").write_text(yaml.safe_dump(config))
    site = directory / "site"
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                          str(site)], cwd=directory, capture_output=True, text=True,
                         timeout=120, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert run.returncode == 0, run.stderr[-2000:]
    return site

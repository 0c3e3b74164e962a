"""A bare mkdocs-material page with the project's palette, what the theme alone makes of a heading,
a link, a table and a code block (tests/fixtures/reference_page.md): the accessibility and HTML
tests, and `make audit` (benchmarks/long_pages.py), hold the project's pages to it."""
import os
import subprocess
import sys
from pathlib import Path

import yaml
from mkdocs.utils import yaml_load

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "tests" / "fixtures" / "reference_page.md").read_text(encoding="utf-8")


def build_reference(directory, pages=None):
    """Build the reference site under `directory` with the project's theme settings, PAGE as its
    home and `pages` ({path below docs/: Markdown}) beside it; return the site."""
    project = yaml_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    theme = {key: project["theme"][key] for key in ("name", "font", "features", "palette")}
    config = {"site_name": "Reference", "theme": theme, "plugins": ["search"],
              "markdown_extensions": ["tables", "attr_list", "pymdownx.superfences",
                                      {"pymdownx.highlight": {"anchor_linenums": False}},
                                      "pymdownx.inlinehilite"]}
    directory = Path(directory)
    for path, text in {"index.md": PAGE, **(pages or {})}.items():
        (directory / "docs" / path).parent.mkdir(parents=True, exist_ok=True)
        (directory / "docs" / path).write_text(text, encoding="utf-8")
    (directory / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    site = directory / "site"
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                          str(site)], cwd=directory, capture_output=True, text=True,
                         timeout=120, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert run.returncode == 0, run.stderr[-2000:]
    return site

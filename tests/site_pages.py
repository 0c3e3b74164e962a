"""The built site's pages (found in the site, so a page added later is checked unlisted),
and the formulas each page's Markdown source holds, counted without the MathML step."""
import html
from pathlib import Path

import markdown
from mkdocs.utils import yaml_load

from conftest import ROOT
from scripts.pages.directives import IF_RECORDED
from scripts.pages.mathml import DISPLAY, INLINE, top_level_parts


def site_pages(site):
    """Every page of a built site as its path below the root: "", "lessons/x/", "404.html"."""
    site = Path(site)
    pages = [path.parent.relative_to(site).as_posix() + "/" for path in site.rglob("index.html")]
    return sorted(page.removeprefix("./") for page in pages) + ["404.html"]


def markdown_source(page):
    """The docs/ Markdown file a directory-URL page was built from, or None (404)."""
    stem = page.rstrip("/") or "index"
    source = ROOT / "docs" / f"{stem}.md"
    return source if source.exists() else None


FINISHING = ("scripts.pages.mathml", "scripts.pages.markup")  # the formulas stay arithmatex's


def formulas_in(source):
    """How many <math> elements the page's formulas make: one per `$...$`, one per
    \\qquad-separated part of each `$$...$$` (as scripts/pages/mathml.py splits them)."""
    config = yaml_load((ROOT / "mkdocs.yml").read_text())
    names, settings = [], {}
    for extension in config["markdown_extensions"]:
        name, options = next(iter(extension.items())) if isinstance(extension, dict) \
            else (extension, {})
        if name not in FINISHING:
            names.append(name)
            settings[name] = dict(options or {})
    settings["pymdownx.snippets"]["base_path"] = [str(ROOT)]
    # The build keeps one branch of each {{ if-recorded:... }}: so does the count.
    text = IF_RECORDED.sub(lambda m: m.group(2) if (ROOT / "recordings" / f"{m.group(1)}.json")
                           .exists() else m.group(3), Path(source).read_text())
    page = markdown.Markdown(extensions=names, extension_configs=settings).convert(text)
    displays = [top_level_parts(html.unescape(tex)) for tex in DISPLAY.findall(page)]
    return len(INLINE.findall(page)) + sum(len(parts) for parts in displays)


def page_file(site, page):
    """The HTML file of a page listed by site_pages()."""
    return Path(site) / (page if page.endswith(".html") else page + "index.html")

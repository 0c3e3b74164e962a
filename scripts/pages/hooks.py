"""MkDocs hooks: what only MkDocs has. What a page shows is made by Markdown extensions
(the page language, pages/mathml.py, pages/markup.py), which Zensical runs too, and what
the pages serve from outside docs/ is copied in by pages/site_files.py. The build reads
recordings; it never imports JAX.
"""
import re
from pathlib import Path

from mkdocs.exceptions import PluginError

from scripts import ROOT
from scripts.plumbing.checkout import LinkInCheckout
from scripts.store.lessons import RegistryError, load_course
from scripts.pages.course import add_unlisted_lessons
from scripts.pages.page_language import NAME as PAGE_LANGUAGE
from scripts.pages.site_files import stage
from scripts.pages.sources import load_sources

# The theme writes SITE_URL unescaped: an address of these characters cannot end an attribute.
SITE_URL = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%/-]*)?")


def check_site_url(config):
    url = config.get("site_url")
    if url and not SITE_URL.fullmatch(url):  # no site_url: mkdocs writes no canonical link
        raise PluginError(f"site_url (the SITE_URL environment variable, read by mkdocs.yml) "
                          f"is {url[:80]!r}: it must be an http(s) address of letters, "
                          f"digits and . - _ ~ % / only; set SITE_URL to one, such as "
                          f"https://user.github.io/lesson/")


def on_config(config):
    """Its own code, no link in it, the files copied into docs/, the course from the
    registry, every recording loaded. MkDocs-only: its config, nav and published SITE_URL
    (Zensical loads through the extension, and `make build-zensical` copies)."""
    root = Path(config["config_file_path"]).resolve().parent  # wherever mkdocs runs from
    if ROOT != root:  # another checkout's, whose recordings and rules would build these pages
        raise PluginError(f"{root / 'mkdocs.yml'} is being built with another checkout's "
                          f"code, {ROOT / 'scripts'} (where the activated .venv's install "
                          f"points): in {root}, run `make setup` and use its own .venv")
    try:
        stage(ROOT, Path(config["docs_dir"]))  # it refuses links before it reads a file
        check_site_url(config)
        course = load_course(ROOT)
    except (LinkInCheckout, RegistryError) as error:
        raise PluginError(str(error)) from None
    sources = load_sources(ROOT, config["docs_dir"])
    if PAGE_LANGUAGE not in config["markdown_extensions"]:
        raise PluginError(f"mkdocs.yml: the pages' directives need `- {PAGE_LANGUAGE}` "
                          f"under markdown_extensions; add it")
    # What every page's Markdown instance is made with: it carries the sources to each.
    config["mdx_configs"].setdefault(PAGE_LANGUAGE, {})["sources"] = sources
    config["site_name"], config["site_description"] = course["title"], course["description"]
    add_unlisted_lessons(config["nav"], sources.lessons, sources.docs)
    return config


SEARCH_DIALOG = '<div class="md-search" data-md-component="search" role="dialog">'
# mkdocs-material 9.8 writes a nav section's label with an empty tabindex: invalid HTML,
# which browsers ignore, so dropping it changes nothing a reader can do.
EMPTY_TABINDEX = re.compile(r'(<label class="md-nav__link[^"]*"[^>]*?) tabindex=""')


def on_post_page(output, page, config):
    """The theme's search dialog gets the name a dialog needs (axe: aria-dialog-name).
    MkDocs-only: mkdocs-material's templates (Zensical's are its own)."""
    output = EMPTY_TABINDEX.sub(r"\1", output)
    return output.replace(SEARCH_DIALOG, SEARCH_DIALOG[:-1] + ' aria-label="Search">', 1)


def on_post_template(output, template_name, config):  # the 404 page, a template, not a page
    return on_post_page(output, None, config)

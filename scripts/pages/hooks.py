"""MkDocs hooks: what only MkDocs has. What a page shows is made by Markdown extensions
(the page language, pages/mathml.py, pages/markup.py), which Zensical runs too, and what
the pages serve from outside docs/ is copied in as either generator reads mkdocs.yml
(pages/site_files.py). The build reads recordings; it never imports JAX.
"""
import re
from pathlib import Path

from mkdocs.exceptions import PluginError

from scripts.store.lessons import RegistryError, load_course
from scripts.pages.course import add_unlisted_lessons
from scripts.pages.page_language import NAME as PAGE_LANGUAGE
from scripts.pages.sources import loaded_once, refuse_another_checkout


def on_config(config):
    """Its own code, the course from the registry, every recording loaded (the one path the
    page language takes under Zensical too). MkDocs-only: its config and nav."""
    root = refuse_another_checkout(Path(config["config_file_path"]).resolve().parent)
    try:
        course = load_course(root)
    except RegistryError as error:
        raise PluginError(str(error)) from None
    sources = loaded_once(root, Path(config["docs_dir"]))
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

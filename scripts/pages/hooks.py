"""mkdocs hooks: the site's own part of the build (the page language is a Markdown
extension). The build reads recordings; it never imports JAX.
"""
import re
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

from scripts import ROOT, display
from scripts.plumbing.checkout import LinkInCheckout, refuse_links
from scripts.store.lessons import RegistryError, load_course
from scripts.pages.course import add_unlisted_lessons, downloadable_files, downloads
from scripts.pages.figure_data import served_files
from scripts.pages.page_language import NAME as PAGE_LANGUAGE
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
    """Its own code, no link in it, the course from the registry, every recording loaded."""
    root = Path(config["config_file_path"]).resolve().parent  # wherever mkdocs runs from
    if ROOT != root:  # another checkout's, whose recordings and rules would build these pages
        raise PluginError(f"{root / 'mkdocs.yml'} is being built with another checkout's "
                          f"code, {ROOT / 'scripts'} (where the activated .venv's install "
                          f"points): in {root}, run `make setup` and use its own .venv")
    try:
        refuse_links(root)  # before anything reads the checkout
        check_site_url(config)
        course = load_course(root)
    except (LinkInCheckout, RegistryError) as error:
        raise PluginError(str(error)) from None
    sources = load_sources(root, config["docs_dir"])
    if PAGE_LANGUAGE not in config["markdown_extensions"]:
        raise PluginError(f"mkdocs.yml: the pages' directives need `- {PAGE_LANGUAGE}` "
                          f"under markdown_extensions; add it")
    # What every page's Markdown instance is made with: it carries the sources to each.
    config["mdx_configs"].setdefault(PAGE_LANGUAGE, {})["sources"] = sources
    config["site_name"], config["site_description"] = course["title"], course["description"]
    add_unlisted_lessons(config["nav"], sources.lessons, sources.docs)
    return config


def loaded(config):
    return config["mdx_configs"][PAGE_LANGUAGE]["sources"]


def on_files(files, config):
    """Serve figures/, downloads and what the figures' data lines link to; then refuse a
    page with a control character (on_config refused every link before any file is read)."""
    root = Path(config["config_file_path"]).resolve().parent
    paths = [f"figures/{svg.name}" for svg in sorted((root / "figures").glob("*.svg"))]
    paths += [path for lesson in loaded(config).lessons.values()
              for path in downloadable_files(lesson)]
    paths += served_files(loaded(config).lessons, root)
    for path in paths:
        files.append(File(path, str(root), config["site_dir"], config["use_directory_urls"]))
    for file in files:
        if file.abs_src_path is None:  # made by a plugin, from no file
            continue
        if file.src_uri.endswith(".md") and Path(file.abs_src_path).is_relative_to(root):
            refuse_control_characters(Path(file.abs_src_path))
    return files


# Markdown passes a NUL through to the HTML, where a browser cuts the text.
CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def refuse_control_characters(page):
    text = page.read_bytes().decode("utf-8", "replace")
    if found := CONTROL.search(text):
        line = text.count("\n", 0, found.start()) + 1
        raise PluginError(f"{display(page)}: line {line} holds U+{ord(found.group()):04X}, a "
                          f"control character no page can show; remove it")


def on_page_markdown(markdown, page, config, files):
    """Each lesson page ends with its downloads."""
    lessons = loaded(config).lessons
    lesson = lessons.get(page.file.src_uri.removeprefix("lessons/").removesuffix(".md"))
    if lesson is None or page.file.src_uri != f"lessons/{lesson.id}.md":
        return markdown
    return markdown + downloads(lesson, page.file.src_uri, page.url,
                                config["use_directory_urls"], Path(config["docs_dir"]))

"""mkdocs hook: under `mkdocs serve`, an edit re-renders the pages it touches and no other.

mkdocs' dirty build re-renders a page whose Markdown is newer than its HTML. A page here is
made from more: the recordings its directives read, the files it opens as it renders
(snippets of lesson code, figures, lesson pages' titles) and what every page shows
(mkdocs.yml, the nav, the registry, the theme). So each page built while serving keeps what
it was made from, and every rebuild is a dirty one that first marks modified each page whose
inputs changed. `mkdocs build` and `mkdocs serve --clean` build every page.
"""
import json
import logging
import os
import sys
import threading
from pathlib import Path

from jinja2 import FileSystemBytecodeCache
from mkdocs.commands.build import build
from mkdocs.config import load_config
from mkdocs.exceptions import Abort
from mkdocs.structure.files import InclusionLevel

from scripts.pages.directives import recordings_read
from scripts.pages.figure_data import figure_data
from scripts.pages.page_language import NAME as PAGE_LANGUAGE
from scripts.store.recordings import read_json
from scripts.store.staging import write_atomically


def stat(path):
    try:
        found = os.stat(path)
        return found.st_mtime_ns, found.st_size
    except OSError:
        return None  # a file that appears later is a change too


class Serving:
    """This `mkdocs serve` process's pages: what each was made from when it was written."""

    def __init__(self):
        self.built = {}  # src_uri -> (its declared inputs, {file it opened: stat})
        self.declared, self.urls, self.rebuilt, self.entries = {}, [], set(), {}
        self.opened = self.thread = None

    def note_opened(self, event, args):  # a sys.addaudithook hook: the stat before the read
        if event == "open" and self.opened is not None and threading.get_ident() == self.thread \
                and isinstance(args[0], (str, os.PathLike)):  # not a descriptor
            self.opened[os.path.abspath(args[0])] = stat(args[0])

    def changed(self, uri):
        declared, opened = self.built.get(uri, (None, {}))
        return declared != self.declared[uri] or any(stat(path) != seen
                                                     for path, seen in opened.items())


SERVING = None  # a Serving under `mkdocs serve`


def on_startup(command, dirty):
    """Serving: note what each page opens, and let strict mode pass the dirty build's
    warning that its pages may be stale (this module keeps them current)."""
    global SERVING
    if command == "serve" and SERVING is None:
        SERVING = Serving()
        sys.addaudithook(SERVING.note_opened)
        logging.getLogger("mkdocs.commands.build").addFilter(
            lambda record: not record.getMessage().startswith("A 'dirty' build"))


def on_serve(server, config, builder):
    """Each rebuild a dirty one, of mkdocs.yml read afresh as mkdocs' own rebuild does; a
    failed one leaves the pages last written answering (a dirty build empties nothing)."""
    if SERVING is None:  # --clean: mkdocs' own rebuild
        return server

    def rebuild():
        logging.getLogger("mkdocs").info("Building documentation...")  # as mkdocs' own does
        fresh = load_config(config.config_file_path, site_dir=config.site_dir,
                            strict=config.strict, use_directory_urls=config.use_directory_urls)
        fresh.site_url = config.site_url  # the served address, which mkdocs serve set
        try:
            build(fresh, serve_url=config.site_url, dirty=True)
        except Abort:  # raised after the build logged its error; a bug still tracebacks
            logging.getLogger("mkdocs").warning(
                "still serving the last pages built; fix the error above to rebuild")

    server.builder = rebuild
    return server


def on_nav(nav, config, files):
    """Mark modified each page whose inputs changed since it was written (mkdocs adds each
    page newer than its HTML). Every page in the nav is read: each page's nav shows its
    title, and mkdocs reads only the pages it renders."""
    if SERVING is None:
        return nav
    for page in nav.pages:
        page.read_source(config)
    sources, theme = config["mdx_configs"][PAGE_LANGUAGE]["sources"], config.theme.custom_dir
    # What every page shows: mkdocs.yml, the registry, the nav's titles, the files a link
    # may name, the theme's overrides.
    everywhere = (Path(config.config_file_path).read_bytes(), config["site_name"],
                  config["site_description"], tuple(sources.lessons.values()),
                  [(page.title, page.url) for page in nav.pages], [file.src_uri for file in files],
                  {path: stat(path) for path in (Path(theme).rglob("*") if theme else ())})
    pages = files.documentation_pages(inclusion=InclusionLevel.is_in_serve)
    SERVING.rebuilt.clear()
    SERVING.urls = ["" if file.url == "./" else file.url for file in pages]  # as Page.url
    figures = figure_data(sources.lessons)
    for file in pages:
        read = recordings_read(file.content_string, sources, figures)
        SERVING.declared[file.src_uri] = everywhere, {stem: sources.recordings.get(stem)
                                                      for stem in read}
        if SERVING.changed(file.src_uri):
            file.is_modified = lambda: True
    return nav


def on_env(env, config, files):
    """The theme compiled once, not at every rebuild: jinja2's cache, keyed on the source."""
    if SERVING is not None:
        env.bytecode_cache = FileSystemBytecodeCache()
    return env


def on_pre_page(page, config, files):
    if SERVING is not None:
        SERVING.opened, SERVING.thread = {}, threading.get_ident()
    return page


def on_page_content(html, page, config, files):  # the last hook that reads files for a page
    if SERVING is not None:
        page.opened, SERVING.opened = SERVING.opened, None
    return html


def on_post_page(output, page, config):
    if SERVING is not None:  # written next
        SERVING.built[page.file.src_uri] = SERVING.declared[page.file.src_uri], page.opened
        SERVING.rebuilt.add(page.url)
    return output


def on_post_build(config):
    """The search plugin indexed the pages this build rendered; the others keep their
    entries, and the index lists them in the pages' order, as a full build writes it."""
    index = Path(config.site_dir) / "search" / "search_index.json"
    if SERVING is None or not index.is_file():
        return
    fresh = read_json(index)
    SERVING.entries.update({url: [] for url in SERVING.rebuilt})
    for entry in fresh["docs"]:  # under --dirty the theme's own merge: the others' too
        if (url := entry["location"].partition("#")[0]) in SERVING.rebuilt:
            SERVING.entries[url].append(entry)
    fresh["docs"] = [entry for url in SERVING.urls for entry in SERVING.entries.get(url, [])]
    write_atomically(index, json.dumps(fresh, separators=(",", ":")).encode())  # read as served

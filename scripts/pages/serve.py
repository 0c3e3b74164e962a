"""mkdocs hook: under `mkdocs serve`, an edit re-renders the pages it touches and no other.

mkdocs' dirty build re-renders a page whose Markdown is newer than its HTML. A page here is
made from more: the recordings it reads, the files it opens as it renders (snippets of
lesson code, figures, lesson pages' titles) and what every page shows (mkdocs.yml, the nav,
the registry, the theme). The code that reads says so as it reads (audit events, noted by
pages/sources.py), so each page built while serving keeps what it was made from, and every
rebuild is a dirty one that first marks modified each page whose inputs changed, and last
removes the pages no longer in the site. `mkdocs build` and `mkdocs serve --clean` build
every page.
"""
import json
import logging
from functools import partial
from pathlib import Path

from jinja2 import FileSystemBytecodeCache
from mkdocs.commands.build import build
from mkdocs.config import load_config
from mkdocs.exceptions import Abort, BuildError
from mkdocs.structure.files import InclusionLevel
from mkdocs.utils import DuplicateFilter

from scripts.pages.page_language import NAME as PAGE_LANGUAGE
from scripts.pages.site_files import FOLDERS
from scripts.pages.sources import Reads, note_reads, stat
from scripts.store.recordings import read_json
from scripts.store.staging import write_atomically


class Serving:
    """This `mkdocs serve` process's pages: what each was made from when it was written."""

    def __init__(self):
        self.built = {}  # src_uri -> (what every page showed, its sources.Reads, its HTML file)
        self.everywhere = None  # this build's
        self.pages, self.rebuilt, self.entries = {}, set(), {}  # pages: src_uri -> url


SERVING = None  # a Serving under `mkdocs serve`


def on_startup(command, dirty):
    """Serving: let strict mode pass the dirty build's warning that its pages may be stale
    (this module keeps them current)."""
    global SERVING
    if command == "serve" and SERVING is None:
        SERVING = Serving()
        logging.getLogger("mkdocs.commands.build").addFilter(
            lambda record: not record.getMessage().startswith("A 'dirty' build"))


def on_serve(server, config, builder):
    """Each rebuild a dirty one, of mkdocs.yml read afresh as mkdocs' own rebuild does; a
    failed one leaves the pages last written answering (a dirty build empties nothing)."""
    if SERVING is None:  # --clean: mkdocs' own rebuild
        return server

    def rebuild():
        # mkdocs' command line drops a message its build logged once before (a
        # DuplicateFilter): a rebuild as quick as an earlier one would end without its
        # "Documentation built in 0.52 seconds", an error made again would go unsaid.
        logger = logging.getLogger("mkdocs.commands.build")
        for heard in [found for found in logger.filters if isinstance(found, DuplicateFilter)]:
            logger.removeFilter(heard)
            logger.addFilter(DuplicateFilter())  # so each rebuild logs as the first build did
        logging.getLogger("mkdocs").info("Building documentation...")  # as mkdocs' own does
        try:
            fresh = load_config(config.config_file_path, site_dir=config.site_dir,
                                strict=config.strict, use_directory_urls=config.use_directory_urls)
            fresh.site_url = config.site_url  # the served address, which mkdocs serve set
            build(fresh, serve_url=config.site_url, dirty=True)
        except SystemExit as stopped:  # a bug still tracebacks
            if not isinstance(stopped, Abort):  # mkdocs.yml's refusal (pages/site_files.py)
                logging.getLogger("mkdocs").error(str(stopped).removeprefix("error: "))
            logging.getLogger("mkdocs").warning(  # an Abort follows the build's logged error
                "still serving the last pages built; fix the error above to rebuild")

    server.builder = rebuild
    # mkdocs watches docs/; the copies that reading mkdocs.yml writes there
    # (pages/site_files.py) are no edit, and watched would start a second rebuild after each
    # figure or module edit. So docs/ itself, each folder but the copies' own, and the
    # notebooks' folder without the copies' subfolders.
    docs = Path(config.docs_dir)
    server.unwatch(str(docs))
    server.watch(str(docs), recursive=False)
    for folder in sorted(path for path in docs.iterdir() if path.is_dir()):
        if folder.name not in FOLDERS:
            server.watch(str(folder), recursive=folder.name != "notebooks")
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
    SERVING.everywhere = (Path(config.config_file_path).read_bytes(), config["site_name"],
                          config["site_description"], tuple(sources.lessons.values()),
                          [(page.title, page.url) for page in nav.pages],
                          [file.src_uri for file in files],
                          {path: stat(path) for path in (Path(theme).rglob("*") if theme else ())})
    pages = files.documentation_pages(inclusion=InclusionLevel.is_in_serve)
    SERVING.rebuilt.clear()
    SERVING.pages = {file.src_uri: "" if file.url == "./" else file.url for file in pages}
    for file in pages:
        shown, made_from, _ = SERVING.built.get(file.src_uri, (None, None, None))
        if made_from is None or shown != SERVING.everywhere or made_from.changed(sources):
            file.is_modified = lambda: True
    return nav


def on_env(env, config, files):
    """The theme compiled once, not at every rebuild: jinja2's cache, keyed on the source."""
    if SERVING is not None:
        env.bytecode_cache = FileSystemBytecodeCache()
    return env


def on_pre_page(page, config, files):
    if SERVING is not None:
        page.made_from = Reads()
        note_reads(page.made_from)
        page.render = partial(render_or_keep, page, page.render)
    return page


def render_or_keep(page, render, config, files):
    """A page that cannot be built says why in one line and keeps its last HTML (a notebook
    whose module changed, a broken directive): one page is no reason to stop the others.
    The build still ends in its error, after writing them."""
    try:
        render(config, files)
    except BuildError as error:
        logging.getLogger("mkdocs").error(f"{page.file.src_uri}: {error}")
        page.content, page.failed = "", True


def on_page_content(html, page, config, files):  # the last hook that reads files for a page
    if SERVING is not None:
        note_reads(None)
    return html


def on_post_page(output, page, config):
    if SERVING is None:
        return output
    if getattr(page, "failed", False):  # to be built again
        last = Path(page.file.abs_dest_path)
        return last.read_text(encoding="utf-8") if last.is_file() else output
    uri = page.file.src_uri  # written next
    SERVING.built[uri] = SERVING.everywhere, page.made_from, page.file.abs_dest_path
    SERVING.rebuilt.add(SERVING.pages[uri])
    return output


def on_post_build(config):
    """A page no longer in the site (deleted, renamed) stops answering, as after a full
    build. The search plugin indexed the pages this build rendered; the others keep their
    entries, and the index lists them in the pages' order, as a full build writes it."""
    if SERVING is None:
        return
    kept = {SERVING.built[uri][2] for uri in SERVING.pages if uri in SERVING.built}
    for uri in set(SERVING.built) - set(SERVING.pages):
        if (gone := SERVING.built.pop(uri)[2]) not in kept:  # foo.md renamed foo/index.md
            Path(gone).unlink(missing_ok=True)
    index = Path(config.site_dir) / "search" / "search_index.json"
    if not index.is_file():
        return
    fresh = read_json(index)
    SERVING.entries.update({url: [] for url in SERVING.rebuilt})
    for entry in fresh["docs"]:  # under --dirty the theme's own merge: the others' too
        if (url := entry["location"].partition("#")[0]) in SERVING.rebuilt:
            SERVING.entries[url].append(entry)
    fresh["docs"] = [entry for url in SERVING.pages.values()
                     for entry in SERVING.entries.get(url, [])]
    write_atomically(index, json.dumps(fresh, separators=(",", ":")).encode())  # read as served

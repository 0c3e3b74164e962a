"""Which page a Markdown conversion is of, as the generator running it says. MkDocs gives
its link rewriter (`relpath`) the page's file and makes links relative to the page's URL
before the postprocessors run; Zensical gives its rendering context the page and rewrites
links from the Markdown file's folder after the conversion. Python-Markdown alone: docs/.
"""
import posixpath
from typing import NamedTuple


class PageLocation(NamedTuple):
    source: str  # the Markdown file below docs/, "lessons/x.md", where its links start
    base: str  # the folder below the site's root where a link in the finished HTML starts


def page_location(md):
    if "relpath" in md.treeprocessors:
        file = md.treeprocessors["relpath"].file  # url "lessons/x/": base "lessons/x"
        return PageLocation(file.src_uri, posixpath.dirname(file.url))
    if "rendering_context" in md.preprocessors:
        source = md.preprocessors["rendering_context"].page.path
        return PageLocation(source, posixpath.dirname(source))
    return PageLocation("", "")

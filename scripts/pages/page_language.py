"""The page language (pages/directives.py) as a Python-Markdown extension, so a page builds
the same wherever Python-Markdown runs (MkDocs, Zensical).

A preprocessor, before the snippets, puts markers where recorded text goes, each notebook
page's cells in (pages/notebook_page.py) and each lesson page's downloads at its end; the
last postprocessor puts the text in, escaped for where it landed (the toc runs
postprocessors on headings first, so a heading keeps its markers until the tree is finished).
"""
import posixpath
import re
from pathlib import Path

from markdown.extensions import Extension
from markdown.postprocessors import Postprocessor
from markdown.preprocessors import Preprocessor
from markdown.treeprocessors import Treeprocessor

from scripts import ROOT
from scripts.pages.course import downloads
from scripts.pages.directives import expand_page
from scripts.pages.notebook_page import NotebookCells, NotebookHeadings
from scripts.pages.page_location import page_location
from scripts.pages.recorded_text import PageError, PageValues
from scripts.pages.sources import loaded_once, refuse_another_checkout

NAME = __name__  # what mkdocs.yml registers: scripts.pages.page_language
LEVEL_ONE = re.compile(r"<h1[\s>].*?</h1>", re.S)
# Markdown passes a NUL through to the HTML, where a browser cuts the text.
CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class PageLanguage(Extension):
    def __init__(self, **kwargs):
        self.config = {"sources": ["", "pages/sources.Sources the build already loaded (set by "
                                       "pages/hooks.py); empty: load them from this checkout"]}
        super().__init__(**kwargs)

    def extendMarkdown(self, md):
        md.page_language = Conversion(self.getConfig("sources") or None, md)
        md.preprocessors.register(Directives(md), "page_language", 35)
        md.preprocessors.register(NotebookCells(md), "page_language_notebook", 25)
        md.treeprocessors.register(NotebookHeadings(md), "page_language_toc", 4)
        if "snippet" in md.preprocessors:  # pymdownx.snippets, registered before this
            md.preprocessors.register(SnippetsInOneLine(md, md.preprocessors["snippet"]),
                                      "snippet", SNIPPETS_PRIORITY)
        md.treeprocessors.register(TreeFinished(md), "page_language_end", -100)
        md.postprocessors.register(RecordedText(md), "page_language_text", 0)


class Conversion:
    """One Markdown instance's share: the sources, loaded once, and the page's values."""

    def __init__(self, sources, md):
        self.sources, self.md = sources, md
        self.values = PageValues()
        self.tree_finished = False  # False while the toc runs postprocessors on headings
        self.notebook_toc = []

    def loaded_sources(self):
        """The sources MkDocs' hook handed over; under Zensical, those of the mkdocs.yml it
        builds, if that is this code's checkout; under Python-Markdown alone, this checkout's."""
        if self.sources is None and "rendering_context" in self.md.preprocessors:
            config = self.md.preprocessors["rendering_context"].config
            root = refuse_another_checkout(config["root_dir"])
            self.sources = loaded_once(root, Path(root, config["docs_dir"]))
        elif self.sources is None:
            self.sources = loaded_once(ROOT, ROOT / "docs")
        return self.sources


class Directives(Preprocessor):
    def run(self, lines):
        # A new page's values, the sources kept (Markdown.convert may run again on one md).
        conversion = self.md.page_language = Conversion(self.md.page_language.sources, self.md)
        text, location = "\n".join(lines), page_location(self.md)
        if found := CONTROL.search(text):
            line = text.count("\n", 0, found.start()) + 1
            raise PageError(f"docs/{location.source}: line {line} holds U+{ord(found[0]):04X}, "
                            f"a control character no page can show; remove it")
        # A lesson's page (`lessons/<id>.md`) ends with its downloads.
        lesson_id = location.source.removeprefix("lessons/").removesuffix(".md")
        lesson = conversion.loaded_sources().lessons.get(lesson_id) \
            if location.source == f"lessons/{lesson_id}.md" else None
        if "{{" not in text and lesson is None:
            return lines
        sources = conversion.loaded_sources()
        text = expand_page(text, sources, conversion.values, posixpath.dirname(location.source))
        if lesson is not None:
            text += downloads(lesson, location.source, sources.docs)
        return text.split("\n")


SNIPPETS_PRIORITY = 32  # where pymdownx.snippets registers itself; its stand-in too


class SnippetsInOneLine(Preprocessor):
    """pymdownx.snippets, its SnippetMissingError (a traceback in mkdocs) as one line."""

    def __init__(self, md, snippets):
        super().__init__(md)
        self.snippets = snippets

    def __getattr__(self, name):  # the extension's reset() reaches its own (`download`)
        return getattr(self.snippets, name)

    def run(self, lines):
        from pymdownx.snippets import SnippetMissingError

        try:
            return self.snippets.run(lines)
        except SnippetMissingError as error:
            raise PageError(f"{error}: a page includes only files inside the repository "
                            f"(`--8<-- \"lesson_code/<module>.py:<section>\"`), and each "
                            f"section it names must exist") from None


def page_finished(md):
    """Whether a postprocessor is given the page (True), not a heading's text for the toc;
    without the page language, always the page."""
    return getattr(md, "page_language", None) is None or md.page_language.tree_finished


class TreeFinished(Treeprocessor):
    def run(self, root):
        self.md.page_language.tree_finished = True


class RecordedText(Postprocessor):
    def run(self, text):
        values = self.md.page_language.values
        if not self.md.page_language.tree_finished:  # a heading's text, for the toc
            return values.fill(text, whole=False)
        # A level-1 heading is the page's title, which themes show unescaped.
        if any(values.marker.search(heading) for heading in LEVEL_ONE.findall(text)):
            raise PageError("a {{ rec:... }} value is in the page's first heading, its "
                            "title, which the theme shows unescaped; move the value below "
                            "the heading")
        return values.fill(text)


makeExtension = PageLanguage  # the name Python-Markdown calls

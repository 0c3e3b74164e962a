"""The page language (pages/directives.py) as a Python-Markdown extension, so a page builds
the same wherever Python-Markdown runs.

A preprocessor, before the snippets, puts markers where recorded text goes; the last
postprocessor puts the text in, escaped for where it landed (the toc runs postprocessors
on headings first, so a heading keeps its markers until the tree is finished).
"""
import re

from markdown.extensions import Extension
from markdown.postprocessors import Postprocessor
from markdown.preprocessors import Preprocessor
from markdown.treeprocessors import Treeprocessor

from scripts import ROOT
from scripts.pages.directives import expand_page
from scripts.pages.recorded_text import PageError, PageValues
from scripts.pages.sources import load_sources

NAME = __name__  # what mkdocs.yml registers: scripts.pages.page_language
LEVEL_ONE = re.compile(r"<h1[\s>].*?</h1>", re.S)


class PageLanguage(Extension):
    def __init__(self, **kwargs):
        self.config = {
            "sources": ["", "pages/sources.Sources the build already loaded (set by "
                            "pages/hooks.py); empty: load them from this checkout"],
        }
        super().__init__(**kwargs)

    def extendMarkdown(self, md):
        md.page_language = Conversion(self.getConfigs())
        md.preprocessors.register(Directives(md), "page_language", 35)
        if "snippet" in md.preprocessors:  # pymdownx.snippets, registered before this
            md.preprocessors.register(SnippetsInOneLine(md, md.preprocessors["snippet"]),
                                      "snippet", SNIPPETS_PRIORITY)
        md.treeprocessors.register(TreeFinished(md), "page_language_end", -100)
        md.postprocessors.register(RecordedText(md), "page_language_text", 0)


class Conversion:
    """One Markdown instance's share: the sources, loaded once, and the page's values."""

    def __init__(self, config):
        self.config = config
        self.sources = config["sources"] or None
        self.values = PageValues()
        self.tree_finished = False  # False while the toc runs postprocessors on headings

    def loaded_sources(self):
        if self.sources is None:
            self.sources = load_sources(ROOT, ROOT / "docs")
        return self.sources


class Directives(Preprocessor):
    def run(self, lines):
        conversion = self.md.page_language
        # A new page: Markdown.convert may be called again on the same instance.
        conversion.values, conversion.tree_finished = PageValues(), False
        text = "\n".join(lines)
        if "{{" not in text:
            return lines
        return expand_page(text, conversion.loaded_sources(), conversion.values).split("\n")


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


def makeExtension(**kwargs):  # the name Python-Markdown looks for
    return PageLanguage(**kwargs)

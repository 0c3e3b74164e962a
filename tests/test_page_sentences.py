"""Every page reads in sentences of about twenty words: the scaling book's sharding chapter
averages 21, and a page here may average no more than 20.

Measured on each page's Markdown source with its recorded values in, as the page language
puts them there (a value's words are the reader's words too), and read the way
test_lesson_page.prose_words reads a page: code, snippet includes, comments, headings,
tables and display math are not prose. Inline code or an inline formula reads as one
word; a paragraph or a list item ends a sentence wherever it ends.
"""
import re

import pytest

from conftest import FIRST_LESSON, ROOT
from scripts.pages.directives import expand_page
from scripts.pages.recorded_text import PageValues
from scripts.pages.sources import load_sources
from test_lesson_page import COMMENT, FENCE, FRONT_MATTER, SNIPPET

MAX_WORDS_PER_SENTENCE = 20
PAGES = sorted((ROOT / "docs").rglob("*.md"))

DISPLAY_MATH = re.compile(r"^[ \t]*(\$\$|\\\[).*?(\$\$|\\\])[ \t]*$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]+`")
INLINE_MATH = re.compile(r"\\\(.+?\\\)|\$[^$\n]+\$")
IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)(\{[^}]*\})?")
LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)(\{[^}]*\})?")
# Lines that are not prose: headings, table rows, admonition and tab titles, raw HTML.
NOT_PROSE = re.compile(r"^\s*(#|\||!!!|\?\?\?|===|<)")
ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+")
RUN_IN_HEADING = re.compile(r"^\*\*[^*]+\.\*\*\s*")  # "**Timing.** The calls...": a heading
# A sentence ends at . ! or ? (after any closing quote or bracket) and a space, unless
# the full stop ends an abbreviation: "e.g. the" goes on, "chain. gloo's" starts anew.
SENTENCE_END = re.compile(r"""(?<![ (]e\.g\.)(?<![ (]i\.e\.)(?<![ (]cf\.)(?<![ (]vs\.)"""
                          r"""(?<=[.!?])["'”’)\]*]*\s+(?=[\w"'“‘(\[*])""")


@pytest.fixture(scope="module")
def sources():
    return load_sources(ROOT, ROOT / "docs")


def as_built(markdown, sources):
    """`markdown` with its directives expanded and the recorded text in, unescaped."""
    values = PageValues()
    expanded = expand_page(markdown, sources, values)
    return values.marker.sub(lambda marker: values.values[int(marker[1])], expanded)


def paragraphs(markdown):
    """The prose blocks (paragraphs and list items) of a page with its values in, each
    as one line of text."""
    for pattern in (FRONT_MATTER, FENCE, COMMENT, SNIPPET, DISPLAY_MATH):
        markdown = pattern.sub("\n", markdown)
    blocks, current = [], []
    for line in markdown.splitlines() + [""]:
        if not line.strip() or NOT_PROSE.match(line) or ITEM.match(line):
            blocks.append(" ".join(current))
            current = []
        if line.strip() and not NOT_PROSE.match(line):
            current.append(ITEM.sub("", line).strip())
    for block in blocks:
        block = RUN_IN_HEADING.sub("", block)
        block = IMAGE.sub(" ", block)
        block = LINK.sub(r"\1", block)
        block = INLINE_CODE.sub(" C ", block)
        block = INLINE_MATH.sub(" X ", block)
        if re.search(r"[A-Za-z0-9]", block):
            yield block


def words(text):
    return [word for word in text.split() if re.search(r"[A-Za-z0-9]", word)]


def sentences(markdown):
    """The page's sentences, each as its list of words."""
    found = []
    for block in paragraphs(markdown):
        found += [words(sentence) for sentence in SENTENCE_END.split(block)]
    return [sentence for sentence in found if sentence]


def words_per_sentence(markdown):
    counted = sentences(markdown)
    return sum(map(len, counted)) / len(counted)


def test_sentences_are_read_as_a_reader_reads_them(sources):
    page = ("---\nlesson: x\n---\n# A heading is no sentence\n\n"
            "One two three. Four, e.g. five 0.8 six! Seven `a.b. C` and \\(p = 4\\) ends\n"
            "here. gloo too, i.e. this.\n"
            "Then {{ rec:LESSON.cpu:environment.deviceCount|d }} devices.\n\n"
            "| a table. | is not. |\n|---|---|\n\n- An item ends a sentence\n- and this\n"
            "- **A run-in heading.** Is none.\n"
            "\n```python\nx = 1. Not prose.\n```\n\n$$\nt = a. b\n$$\n\n"
            '!!! note "A title."\n\n    Inside a box. It counts.\n')
    recording = sources.recordings[f"{FIRST_LESSON.id}.cpu"].recording
    assert sentences(as_built(page.replace("LESSON", FIRST_LESSON.id), sources)) == [
        ["One", "two", "three."], ["Four,", "e.g.", "five", "0.8", "six!"],
        ["Seven", "C", "and", "X", "ends", "here."], ["gloo", "too,", "i.e.", "this."],
        ["Then", str(recording["environment"]["deviceCount"]), "devices."],
        ["An", "item", "ends", "a", "sentence"], ["and", "this"], ["Is", "none."],
        ["Inside", "a", "box."], ["It", "counts."]]


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT / "docs").as_posix()
                                              for p in PAGES])
def test_every_page_averages_at_most_twenty_words_a_sentence(page, sources):
    average = words_per_sentence(as_built(page.read_text(), sources))
    assert average <= MAX_WORDS_PER_SENTENCE, \
        f"docs/{page.relative_to(ROOT / 'docs')} averages {average:.1f} words a sentence, " \
        f"over {MAX_WORDS_PER_SENTENCE}; split its longest sentences"

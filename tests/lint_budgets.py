"""Prose and size budgets for `make lint`: choices about the pages, not behaviour, so no tests.
Sentences average at most 20 words (the scaling book's sharding chapter: 21); a lesson page holds at
most 3,000 words (1.5 times the published lesson's); a lesson program at most 500 lines, 85 % of its
code in the sections pages show. One line per budget exceeded, naming the fix; exit 1 if any."""
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's scripts/, as `python scripts/record.py` does

from scripts.pages.directives import LESSON_LIST, expand_page  # noqa: E402
from scripts.pages.recorded_text import PageError, PageValues  # noqa: E402
from scripts.pages.sources import load_sources  # noqa: E402
from scripts.store.freshness import check  # noqa: E402
from scripts.store.lessons import load_lessons  # noqa: E402

WORDS_PER_SENTENCE, LESSON_PROSE_WORDS = 20, 3000
PROGRAM_LINES, SHOWN_SHARE = 500, 0.85

# Never read: front matter, code, comments, snippet includes (and directives, for a count
# of the words a page's author wrote; display math, for sentences).
NOT_WRITTEN = [re.compile(r"\A---\n.*?\n---\n", re.DOTALL),
               re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,}).*?^(?P=indent)(?P=fence)"
                          r"[ \t]*$", re.MULTILINE | re.DOTALL),
               re.compile(r"<!--.*?-->", re.DOTALL), re.compile(r"^[ \t]*--8<--.*$", re.MULTILINE)]
DIRECTIVE = re.compile(r"\{\{.*?\}\}", re.DOTALL)
DISPLAY_MATH = re.compile(r"^[ \t]*(\$\$|\\\[).*?(\$\$|\\\])[ \t]*$", re.MULTILINE | re.DOTALL)
# Lines that are not prose: headings, table rows, admonition and tab titles, raw HTML.
NOT_PROSE = re.compile(r"^\s*(#|\||!!!|\?\?\?|===|<)")
ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+")
RUN_IN_HEADING = re.compile(r"^\*\*[^*]+\.\*\*\s*")  # "**Timing.** The calls...": a heading
AS_ONE_WORD = [(re.compile(r"!\[[^\]]*\]\([^)]*\)(\{[^}]*\})?"), " "),  # an image
               (re.compile(r"\[([^\]]*)\]\([^)]*\)(\{[^}]*\})?"), r"\1"),  # a link's text
               (re.compile(r"`[^`\n]+`"), " C "), (re.compile(r"\\\(.+?\\\)|\$[^$\n]+\$"), " X ")]
# A sentence ends at . ! or ? (after any closing quote or bracket) and a space, unless the
# full stop ends an abbreviation: "e.g. the" goes on, "chain. gloo's" starts anew.
SENTENCE_END = re.compile(r"""(?<![ (]e\.g\.)(?<![ (]i\.e\.)(?<![ (]cf\.)(?<![ (]vs\.)"""
                          r"""(?<=[.!?])["'”’)\]*]*\s+(?=[\w"'“‘(\[*])""")
SECTION = re.compile(r"^# --8<-- \[start:(\w+)\]\n(.*?)^# --8<-- \[end:\1\]$",
                     re.MULTILINE | re.DOTALL)


def words(text):
    return [word for word in text.split() if re.search(r"[A-Za-z0-9]", word)]


def prose(markdown):
    """Paragraphs and list items, each as one line; inline code or a formula is one word."""
    for pattern in [*NOT_WRITTEN, DISPLAY_MATH]:
        markdown = pattern.sub("\n", markdown)
    blocks, current = [], []
    for line in [*markdown.splitlines(), ""]:
        if not line.strip() or NOT_PROSE.match(line) or ITEM.match(line):
            blocks.append(" ".join(current))
            current = []
        if line.strip() and not NOT_PROSE.match(line):
            current.append(ITEM.sub("", line).strip())
    for block in blocks:
        block = RUN_IN_HEADING.sub("", block)
        for pattern, replacement in AS_ONE_WORD:
            block = pattern.sub(replacement, block)
        if words(block):
            yield block


def written(markdown):
    """What a page's author wrote: its Markdown without code, includes and directives."""
    for pattern in [*NOT_WRITTEN, DIRECTIVE]:
        markdown = pattern.sub(" ", markdown)
    return markdown


def as_built(markdown, sources):
    """The page as readers see it, less the course's list of lessons: the build writes
    that, one line a lesson, and it must not fail the home page as the course grows."""
    markdown, values = LESSON_LIST.sub("", markdown), PageValues()
    expanded = expand_page(markdown, sources, values)
    return values.marker.sub(lambda marker: values.values[int(marker[1])], expanded)


def over_budget(root=ROOT):
    sources = load_sources(root, root / "docs")
    for page in sorted((root / "docs").rglob("*.md")):
        name = page.relative_to(root).as_posix()
        sentences = [words(sentence) for block in prose(as_built(page.read_text(), sources))
                     for sentence in SENTENCE_END.split(block) if words(sentence)]
        average = sum(map(len, sentences)) / max(1, len(sentences))
        if average > WORDS_PER_SENTENCE:
            yield (f"{name} averages {average:.1f} words a sentence, over "
                   f"{WORDS_PER_SENTENCE}; split its longest sentences")
    for lesson in sources.lessons.values():
        page = root / "docs" / "lessons" / f"{lesson.id}.md"
        count = len(words(written(page.read_text()))) if page.is_file() else 0
        if count > LESSON_PROSE_WORDS:
            yield (f"{page.relative_to(root)} has {count} words of prose, over "
                   f"{LESSON_PROSE_WORDS}; move the deeper material to docs/going-further/")
        program = lesson.path().read_text()
        shown, code = shown_lines(program)
        if len(program.splitlines()) > PROGRAM_LINES or len(shown) < SHOWN_SHARE * len(code):
            first = min(code - shown, default=PROGRAM_LINES + 1)  # the line a reader looks at
            yield (f"{lesson.path().relative_to(root)}:{first}: {len(program.splitlines())} "
                   f"lines, {len(shown)} of {len(code)} code lines shown (the first not shown "
                   f"here); keep it to {PROGRAM_LINES} lines, {SHOWN_SHARE:.0%} in the sections "
                   f"pages show (what a page does not teach belongs in another module)")


def shown_lines(program):
    """(numbers of the code lines in the sections, of all code lines): blank lines, section
    markers, the module's docstring and its `__main__` guard are no code a page could show."""
    tree = ast.parse(program)
    after = tree.body[0].end_lineno if ast.get_docstring(tree) else 0
    code = {n for n, line in enumerate(program.split('\nif __name__ == "__main__":')[0]
                                       .splitlines(), 1)
            if n > after and line.strip() and not line.startswith("# --8<-- [")}
    shown = {n for match in SECTION.finditer(program) for n in range(
        program.count("\n", 0, match.start(2)) + 1, program.count("\n", 0, match.end(2)) + 1)}
    return code & shown, code


if __name__ == "__main__":
    try:
        problems = list(over_budget())
    except PageError as error:  # pages that cannot be read as built: --check's first line
        stale = check(load_lessons(ROOT), ROOT) or [str(error)]
        problems = [stale[0] + ("; `python scripts/record.py --check` lists them all"
                                if len(stale) > 1 else "")]
    print("\n".join(problems), file=sys.stderr)
    sys.exit(1 if problems else 0)

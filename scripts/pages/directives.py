"""The page language: what a page writes to show what was recorded.

    {{ rec:<recording>:<dotted.path>|<format> }}   one value, e.g.
    {{ rec:<lesson>.cpu:environment.jax }}          (a missing value fails the build;
    {{ rec:<lesson>.cpu:generatedAt|date }}         |date writes a timestamp for people:
                                                    "30 November 2026")
    {{ rec:<lesson>.cpu.analysis:timing.host.words }}  a value of the analysis derived
                                                    from that recording
    {{ recordings:<lesson-id> }}                    one tab per recording of the lesson
    {{ recordings-table:<lesson-id> }}              one table row per recording
    {{ recordings-table }}                          ... of every lesson
    {{ lessons }}                                   the course: one entry per registered
                                                    lesson, with its notebook and program
    {{ json:<recording>:<dotted.path>#<id> }}       a recorded object for a page's script:
                                                    <script type="application/json"
                                                    id="<id>"> (on a line of its own)
    {{ if-recorded:<recording> }}A{{ else }}B{{ end }}  A if recordings/<recording>.json
                                                    exists, else B (inline or across lines;
                                                    not nested)

Each directive becomes Markdown of ours with markers in it; the recorded text replaces the
markers only once the page is HTML (pages/recorded_text.py: a recording is untrusted input,
so no Markdown extension may ever read it). pages/page_language.py runs this as a
Python-Markdown extension.
"""
import re

from scripts.outputs import ANALYSES, RECORD as FIX
from scripts.outputs import recording_fix, stem_source
from scripts.pages.course import lesson_list
from scripts.pages.recorded_text import PageError, formatted, human_date
from scripts.pages.recording_views import recording_table, recording_tabs

VALUE = re.compile(r"\{\{\s*rec:([\w.-]+):([\w.-]+)(?:\|([^}]*?))?\s*\}\}")
# A block directive ends at the end of its own line ([ \t]*$, not \s*$, which would eat the
# blank line after it and glue the next paragraph onto the table as more rows).
TABS = re.compile(r"^\{\{\s*recordings:([\w-]+)[ \t]*\}\}[ \t]*$", re.MULTILINE)
TABLE = re.compile(r"^\{\{\s*recordings-table(?::([\w-]+))?[ \t]*\}\}[ \t]*$", re.MULTILINE)
LESSON_LIST = re.compile(r"^\{\{\s*lessons[ \t]*\}\}[ \t]*$", re.MULTILINE)
JSON_BLOCK = re.compile(r"^\{\{\s*json:([\w.-]+):([\w.-]+)#([a-z][\w-]*)[ \t]*\}\}[ \t]*$",
                        re.MULTILINE)
IF_RECORDED = re.compile(r"\{\{\s*if-recorded:([\w.-]+)\s*\}\}(.*?)"
                         r"\{\{\s*else\s*\}\}(.*?)\{\{\s*end\s*\}\}", re.DOTALL)
DIRECTIVE = re.compile("|".join(f"(?P<{name}>{pattern.pattern})" for name, pattern in
                                (("value", VALUE), ("tabs", TABS), ("table", TABLE),
                                 ("lessons", LESSON_LIST), ("json", JSON_BLOCK))),
                       re.MULTILINE)
# Directive-looking text left after expansion: a typo, a missing part, a bad character,
# a missing `}}`, or a block directive that is not on a line of its own.
LEFTOVER = re.compile(r"\{\{\s*[A-Za-z][\w-]*\s*(?::|\||\}\}|$)[^\n]*", re.MULTILINE)


def expand_page(markdown, sources, values):
    """The page's Markdown with every directive expanded, its recorded text held in
    `values` (a recorded_text.PageValues)."""
    markdown = choose_recorded_branches(markdown, sources)
    markdown = DIRECTIVE.sub(lambda match: expand(match, sources, values), markdown)
    reject_leftover_directives(markdown)
    return markdown


def expand(match, sources, values):
    text = match.group(0)
    if match.group("tabs"):
        return recording_tabs(TABS.match(text).group(1), sources, values)
    if match.group("table"):
        return recording_table(TABLE.match(text).group(1), sources, values)
    if match.group("lessons"):
        return lesson_list(sources, values)
    if match.group("json"):
        return recorded_json(*JSON_BLOCK.match(text).groups(), sources, values)
    return recorded_value(*VALUE.match(text).groups(), sources, values, directive=text)


def choose_recorded_branches(markdown, sources):
    """Keep the text written for whether a recording exists, so that a page can say
    "not yet recorded" until it does; the other branch, with its values, is dropped."""
    markdown = IF_RECORDED.sub(lambda m: m.group(2) if m.group(1) in sources.recordings
                               else m.group(3), markdown)
    if "if-recorded:" in markdown:
        raise PageError("an {{ if-recorded:... }} without its {{ else }} and {{ end }}; "
                        "add them")
    return markdown


def reject_leftover_directives(markdown):
    leftover = LEFTOVER.search(markdown)
    if leftover:
        line = markdown.count("\n", 0, leftover.start()) + 1
        text = leftover.group(0).strip()
        text = text if len(text) <= 80 else text[:77] + "..."
        raise PageError(f"line {line}: malformed page directive {text!r}; write "
                        f"{{{{ rec:<recording>:<dotted.path>|<format> }}}}, or "
                        f"{{{{ recordings:<lesson> }}}} on a line of its own")


def lookup(recording, dotted):
    value = recording
    for part in dotted.split("."):
        if isinstance(value, list) and part.lstrip("-").isdigit():
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            raise KeyError(part)
    return value


def recorded(stem, dotted, sources):
    source = stem_source(stem)  # a recording, or an analysis derived from one
    if stem not in sources.recordings:
        fix = FIX if source.startswith(ANALYSES) else recording_fix(sources.lessons, source)
        raise PageError(f"asks for {stem}:{dotted} but {source} does not exist; "
                        + (f"run `{fix}`" if fix else "no lesson in lesson_code/lessons.toml "
                           "makes it; fix the directive"))
    try:
        return lookup(sources.recordings[stem], dotted)
    except (KeyError, IndexError):
        raise PageError(f"{source} has no value at {dotted!r}") from None


def recorded_json(stem, dotted, element_id, sources, values):
    """A recorded object as the JSON of a <script type="application/json"> element, for a
    script on the page to read (JSON.parse of its text): the data reaches the reader from
    the recording, through the build, as the figures do. The JSON itself is made safe for
    that element when it is held (recorded_text.script_json)."""
    value = recorded(stem, dotted, sources)
    try:
        held = values.hold_json(value)
    except ValueError as error:
        raise PageError(f"{stem_source(stem)}'s {dotted!r} is not plain JSON ({error}); "
                        f"rerun `{FIX}`") from None
    return f'<script type="application/json" id="{element_id}">{held}</script>\n'


def recorded_value(stem, dotted, spec, sources, values, directive):
    value = recorded(stem, dotted, sources)
    if isinstance(value, (dict, list)):
        raise PageError(f"{directive} is a {type(value).__name__}, not one value; name an "
                        f"item inside it")
    try:
        text = human_date(value) if spec == "date" else formatted(value, spec)
    except (ValueError, TypeError) as error:
        raise PageError(f"{directive} cannot format a {type(value).__name__} with "
                        f"'|{spec}' ({error}); change the format code") from None
    return values.hold(text)  # a recording is data: it joins the page after Markdown

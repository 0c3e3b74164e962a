"""The page language: what a page writes to show what was recorded.

Each directive (lesson_code/CONTRACT.md, "The page language", lists them) becomes
Markdown of ours with markers in it; the recorded text replaces the markers only once the
page is HTML (pages/recorded_text.py: a recording is untrusted input, so no Markdown
extension may ever read it). pages/page_language.py runs this as a Python-Markdown
extension.
"""
import re

from scripts.pages.course import lesson_list
from scripts.pages.recorded_text import PageError, formatted, human_date, read
from scripts.pages.recording_views import recording_table, recording_tabs, stale_warning
from scripts.store.outputs import RECORD as FIX
from scripts.store.outputs import recording_fix, stem_parts, stem_source

VALUE = re.compile(r"\{\{\s*rec:([\w.-]+):([\w.-]+)(?:\|([^}]*?))?\s*\}\}")
# A block directive ends at the end of its own line ([ \t]*$, not \s*$, which would eat the
# blank line after it and glue the next paragraph onto the table as more rows).
TABS = re.compile(r"^\{\{\s*recordings:([\w-]+)[ \t]*\}\}[ \t]*$", re.MULTILINE)
TABLE = re.compile(r"^\{\{\s*recordings-table(?::([\w-]+))?[ \t]*\}\}[ \t]*$", re.MULTILINE)
STALE = re.compile(r"^\{\{\s*stale-warning:([\w.-]+)[ \t]*\}\}[ \t]*$", re.MULTILINE)
LESSON_LIST = re.compile(r"^\{\{\s*lessons[ \t]*\}\}[ \t]*$", re.MULTILINE)
JSON_BLOCK = re.compile(r"^\{\{\s*json:([\w.-]+):([\w.-]+)#([a-z][\w-]*)[ \t]*\}\}[ \t]*$",
                        re.MULTILINE)
# Its cells may run over several lines, never across a blank line or another directive.
ROWS = re.compile(r"^\{\{\s*rec-table:([\w.-]+):([\w.-]+)(?:@([\w.-]+))?\s*\|"
                  r"((?:(?!\{\{)[^\n]|\n(?![ \t]*\n))*?)\}\}[ \t]*$", re.MULTILINE)
FIELD = re.compile(r"\{(/?)([\w.*-]+)(?:\|([^{}|]*))?\}")
CELL_BORDER = re.compile(r"\|(?![^{}]*\})")  # a | that is not inside a {field|format}
IF_RECORDED = re.compile(r"\{\{\s*if-recorded:([\w.-]+)\s*\}\}(.*?)"
                         r"\{\{\s*else\s*\}\}(.*?)\{\{\s*end\s*\}\}", re.DOTALL)
DIRECTIVE = re.compile("|".join(f"(?P<{name}>{pattern.pattern})" for name, pattern in (
    ("value", VALUE), ("tabs", TABS), ("table", TABLE), ("stale", STALE),
    ("lessons", LESSON_LIST), ("json", JSON_BLOCK), ("rows", ROWS))), re.MULTILINE)
# A notebook's page, expanded later by page_language.py: it needs the Markdown instance.
NOTEBOOK = re.compile(r"^\{\{\s*notebook:([\w-]+)\s*\}\}[ \t]*$", re.MULTILINE)
# Directive-looking text left after expansion: a typo, a missing part, a bad character,
# a missing `}}`, or a block directive that is not on a line of its own.
LEFTOVER = re.compile(r"\{\{\s*[A-Za-z][\w-]*\s*(?::|\||\}\}|$)[^\n]*", re.MULTILINE)


def expand_page(markdown, sources, values, folder=""):
    """The page's Markdown with every directive expanded, its recorded text held in
    `values` (a recorded_text.PageValues); `folder`, the page's below docs/, for links."""
    markdown = choose_recorded_branches(markdown, sources)
    markdown = DIRECTIVE.sub(lambda match: expand(match, sources, values, folder), markdown)
    rest = NOTEBOOK.sub("", markdown)  # a notebook's page: page_language.py expands it
    if leftover := LEFTOVER.search(rest):
        line = rest.count("\n", 0, leftover.start()) + 1
        text = leftover.group(0).strip()
        text = text if len(text) <= 80 else text[:77] + "..."
        raise PageError(f"line {line}: malformed page directive {text!r}; write "
                        f"{{{{ rec:<recording>:<dotted.path>|<format> }}}}, or "
                        f"{{{{ recordings:<lesson> }}}} on a line of its own")
    return markdown


def expand(match, sources, values, folder):
    text = match.group(0)
    if match.group("tabs"):
        return recording_tabs(TABS.match(text).group(1), sources, values)
    if match.group("table"):
        return recording_table(TABLE.match(text).group(1), sources, values)
    if match.group("stale"):
        return "\n".join(stale_warning(read(sources, STALE.match(text).group(1)), sources, values))
    if match.group("lessons"):
        return lesson_list(sources, values, folder)
    if match.group("json"):
        return recorded_json(*JSON_BLOCK.match(text).groups(), sources, values)
    if match.group("rows"):
        return recorded_rows(*ROWS.match(text).groups(), sources, values)
    return recorded_value(*VALUE.match(text).groups(), sources, values, directive=text)


def choose_recorded_branches(markdown, sources):
    """Keep the text written for whether a recording exists, so that a page can say
    "not yet recorded" until it does; the other branch, with its values, is dropped."""
    markdown = IF_RECORDED.sub(lambda m: m.group(2) if read(sources, m.group(1)) is not None
                               else m.group(3), markdown)
    if "if-recorded:" in markdown:
        raise PageError("an {{ if-recorded:... }} without its {{ else }} and {{ end }}; "
                        "add them")
    return markdown


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
    loaded = read(sources, stem)  # a recording, or an analysis derived from one
    if loaded is None:
        fix = FIX if stem_parts(stem)[2] else recording_fix(sources.lessons, stem)
        raise PageError(f"asks for {stem}:{dotted} but {stem_source(stem)} does not exist; "
                        + (f"run `{fix}`" if fix else "no lesson in lesson_code/lessons.toml "
                           "makes it; fix the directive"))
    try:
        return lookup(loaded.recording, dotted)
    except (KeyError, IndexError):
        raise PageError(f"{loaded.path} has no value at {dotted!r}") from None


def recorded_json(stem, dotted, element_id, sources, values):
    """A recorded object as the JSON of a <script type="application/json"> element, for a
    script on the page to read (JSON.parse of its text): the data reaches the reader from
    the recording, through the build, as the figures do. The JSON itself is made safe for
    that element when it is held (recorded_text.script_json)."""
    value = recorded(stem, dotted, sources)
    try:
        held = values.hold_json(value)
    except ValueError as error:
        raise PageError(f"{sources.recordings[stem].path}'s {dotted!r} is not plain JSON "
                        f"({error}); rerun `{FIX}`") from None
    return f'<script type="application/json" id="{element_id}">{held}</script>\n'


def recorded_value(stem, dotted, spec, sources, values, directive):
    return values.hold(value_text(recorded(stem, dotted, sources), spec, directive))


def value_text(value, spec, directive):
    """One recorded value as the page shows it; `directive` names it in an error."""
    if isinstance(value, (dict, list)):
        raise PageError(f"{directive} is a {type(value).__name__}, not one value; name an "
                        f"item inside it")
    try:
        return human_date(value) if spec == "date" else formatted(value, spec)
    except (ValueError, TypeError) as error:
        raise PageError(f"{directive} cannot format a {type(value).__name__} with "
                        f"'|{spec}' ({error}); change the format code") from None


def recorded_rows(stem, dotted, order, cells, sources, values):
    """Table rows, one per element of a recorded list or dict: a table the page writes
    once (its header, its alignment and a template of one row), not cell by cell."""
    found = recorded(stem, dotted, sources)
    if isinstance(found, list):
        if order is not None:
            raise PageError(f"{stem}:{dotted} is a list, whose rows come in its own order; "
                            f"drop @{order}")
        rows = list(enumerate(found))
    elif isinstance(found, dict):
        keys = list(found) if order is None else recorded(stem, order, sources)
        if not isinstance(keys, list):
            raise PageError(f"{stem}:{order} is not a list of keys; name a list after @")
        if missing := [key for key in keys if str(key) not in found]:
            raise PageError(f"{sources.recordings[stem].path} has no value at "
                            f"{f'{dotted}.{missing[0]}'!r}")
        rows = [(key, found[str(key)]) for key in keys]
    else:
        raise PageError(f"{stem}:{dotted} is a {type(found).__name__}: a rec-table needs "
                        f"a list, or a dict with its keys in order (@<dotted.keys>)")
    templates = [" ".join(template.split()) for template in CELL_BORDER.split(cells)]
    return "\n".join("| " + " | ".join(cell(template, stem, key, row, dotted, sources, values)
                                       for template in templates) + " |" for key, row in rows)


def cell(template, stem, key, row, dotted, sources, values):
    """One cell: the template's text, its {fields} filled from the row (held back, like
    every recorded value, until the page is HTML)."""
    if {"{", "}"} & set(FIELD.sub("", template)):
        raise PageError(f"a rec-table cell of {stem}:{dotted}, {template!r}, has a brace "
                        f"that is no {{field}}; write {{name}}, {{name|format}}, {{*}} or "
                        f"{{/dotted.path}}")
    return FIELD.sub(lambda field: field_text(field, stem, key, row, dotted, sources, values),
                     template)


def field_text(field, stem, key, row, dotted, sources, values):
    from_top, name, spec = field.groups()
    if name == "*":
        value = key
    elif from_top:
        value = recorded(stem, name.replace("*", str(key)), sources)
    else:
        try:
            value = lookup(row, name)
        except (KeyError, IndexError):
            raise PageError(f"{sources.recordings[stem].path} has no value at "
                            f"{f'{dotted}.{key}.{name}'!r}") from None
    return values.hold(value_text(value, spec, f"{{{{ rec-table:{stem}:{dotted} }}}}'s {field[0]}"))

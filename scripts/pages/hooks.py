"""mkdocs hooks: put recorded values, recordings and figures into the pages.

The build reads recordings; it never imports JAX and never runs lesson code. Page
directives. Before Markdown runs each becomes Markdown of ours with markers in it; after
Markdown, the recorded text replaces the markers, escaped (pages/recorded_text.py: a recording
is untrusted input, so no Markdown extension may ever read it):

    {{ rec:<recording>:<dotted.path>|<format> }}   one value, e.g.
    {{ rec:<lesson>.cpu:environment.jax }}          (a missing value fails the build;
    {{ rec:<lesson>.cpu:generatedAt|date }}         |date writes a timestamp for people:
                                                    "30 November 2026")
    {{ recordings:<lesson-id> }}                    one tab per recording of the lesson
    {{ recordings-table:<lesson-id> }}              one table row per recording
    {{ json:<recording>:<dotted.path>#<id> }}       a recorded object for a page's script:
                                                    <script type="application/json"
                                                    id="<id>"> (on a line of its own)
    {{ if-recorded:<recording> }}A{{ else }}B{{ end }}  A if recordings/<recording>.json
                                                    exists, else B (inline or across lines;
                                                    not nested)
"""
import logging
import re
import sys
from datetime import datetime
from pathlib import Path

from mkdocs.exceptions import Abort, PluginError
from mkdocs.structure.files import File

# mkdocs loads this file by path; the `scripts` package lives one level up.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts import FIGURES, ROOT
from scripts.freshness import load_all
from scripts.lessons import RegistryError, load_lessons
from scripts.outputs import RECORD as FIX
from scripts.recordings import RecordingError
from scripts.pages.recorded_text import PageValues

VALUE = re.compile(r"\{\{\s*rec:([\w.-]+):([\w.-]+)(?:\|([^}]*?))?\s*\}\}")
# A block directive ends at the end of its own line ([ \t]*$, not \s*$, which would eat the
# blank line after it and glue the next paragraph onto the table as more rows).
TABS = re.compile(r"^\{\{\s*recordings:([\w-]+)[ \t]*\}\}[ \t]*$", re.MULTILINE)
TABLE = re.compile(r"^\{\{\s*recordings-table:([\w-]+)[ \t]*\}\}[ \t]*$", re.MULTILINE)
JSON_BLOCK = re.compile(r"^\{\{\s*json:([\w.-]+):([\w.-]+)#([a-z][\w-]*)[ \t]*\}\}[ \t]*$",
                        re.MULTILINE)
IF_RECORDED = re.compile(r"\{\{\s*if-recorded:([\w.-]+)\s*\}\}(.*?)"
                         r"\{\{\s*else\s*\}\}(.*?)\{\{\s*end\s*\}\}", re.DOTALL)

lessons = {}  # lesson id -> Lesson, from the registry on_config read
recordings = {}  # recording stem ("<lesson>.cpu") -> loaded recording
page_values = {}  # page src_uri -> its PageValues, from on_page_markdown to on_page_content


def on_config(config):
    """Load every recording of every registered lesson, validated; a broken recording,
    or a stale one this machine can remake, stops the build here with one line each."""
    lessons.clear()
    recordings.clear()
    try:
        lessons.update(load_lessons())
        loaded, problems = load_all(lessons)
    except (RegistryError, RecordingError) as error:
        raise PluginError(str(error)) from None
    if problems:
        raise PluginError("; ".join(problems))
    recordings.update(loaded)
    return config


def on_serve(server, config, builder):
    """Under `mkdocs serve`, a broken recording is reported and the server keeps answering.

    mkdocs holds every request after a failed rebuild ("the server will appear stuck"),
    so a reader's browser would hang until the file is fixed. The failed build has
    already logged its one line; the next change to a watched file rebuilds.
    """
    def build_or_keep_serving():
        try:
            builder()
        except Abort:  # raised after the build logged its error; a bug still tracebacks
            logging.getLogger("mkdocs").warning(
                "still serving the pages built before; fix the error above to rebuild")

    server.builder = build_or_keep_serving
    return server


def on_files(files, config):
    """Serve figures/, the lesson program from the site itself."""
    for svg in sorted(FIGURES.glob("*.svg")):
        files.append(File(f"figures/{svg.name}", str(ROOT), config["site_dir"],
                          config["use_directory_urls"]))
    # Each lesson program, downloadable beside its notebook: it runs as is, on its own.
    for lesson in lessons.values():
        files.append(File(lesson.path().relative_to(ROOT).as_posix(), str(ROOT),
                          config["site_dir"], config["use_directory_urls"]))
    return files


DIRECTIVE = re.compile("|".join(f"(?P<{name}>{pattern.pattern})" for name, pattern in
                                (("value", VALUE), ("tabs", TABS), ("table", TABLE),
                                 ("json", JSON_BLOCK))),
                       re.MULTILINE)


# Directive-looking text left after expansion: a typo, a missing part, a bad character,
# a missing `}}`, or a block directive that is not on a line of its own.
LEFTOVER = re.compile(r"\{\{\s*[A-Za-z][\w-]*\s*(?::|\||\}\}|$)[^\n]*", re.MULTILINE)


def on_page_markdown(markdown, page, config, files):
    if not page.file.src_uri.endswith(".md"):
        return markdown  # a notebook page is converted from its own file
    markdown = choose_recorded_branches(markdown, page)
    values = page_values[page.file.src_uri] = PageValues(page.file.src_uri)
    markdown = DIRECTIVE.sub(lambda m: expand(m, page, values), markdown)
    reject_leftover_directives(markdown, page)
    return markdown


def on_page_content(html_text, page, config, files):
    """Put the held recorded text into the finished HTML, its toc and its title."""
    values = page_values.pop(page.file.src_uri, None)
    if values is None:
        return html_text
    values.fill_toc(page.toc)
    # The first heading becomes page.title, which the theme puts through `striptags` (it
    # unescapes) into <title>: no escaping survives there, so no recorded text either.
    if values.marker.search(getattr(page, "_title_from_render", None) or ""):
        raise PluginError(f"{page.file.src_uri}: a {{{{ rec:... }}}} value is in the page's "
                          f"first heading, its title, which the theme shows unescaped; "
                          f"move the value below the heading")
    # mkdocs checks #anchor links after every page is converted: both sides get the ids
    # that the headings now have.
    if page.present_anchor_ids is not None:
        page.present_anchor_ids = {values.text(anchor) for anchor in page.present_anchor_ids}
    if page.links_to_anchors:
        page.links_to_anchors = {target: {values.text(anchor): link
                                          for anchor, link in anchors.items()}
                                 for target, anchors in page.links_to_anchors.items()}
    return values.fill(html_text)


def reject_leftover_directives(markdown, page):
    leftover = LEFTOVER.search(markdown)
    if leftover:
        line = markdown.count("\n", 0, leftover.start()) + 1
        text = leftover.group(0).strip()
        text = text if len(text) <= 80 else text[:77] + "..."
        raise PluginError(f"{page.file.src_uri}: line {line}: malformed page directive "
                          f"{text!r}; write {{{{ rec:<recording>:<dotted.path>|<format> }}}}, "
                          f"or {{{{ recordings:<lesson> }}}} on a line of its own")


def expand(match, page, values):
    text = match.group(0)
    if match.group("tabs"):
        return recording_tabs(TABS.match(text).group(1), page, values)
    if match.group("table"):
        return recording_table(TABLE.match(text).group(1), page, values)
    if match.group("json"):
        return recorded_json(*JSON_BLOCK.match(text).groups(), page=page, values=values)
    return recorded_value(*VALUE.match(text).groups(), page=page, values=values,
                          directive=text)


def choose_recorded_branches(markdown, page):
    """Keep the text written for whether a recording exists, so that a page can say
    "not yet recorded" until it does; the other branch, with its values, is dropped."""
    markdown = IF_RECORDED.sub(lambda m: m.group(2) if m.group(1) in recordings
                               else m.group(3), markdown)
    if "if-recorded:" in markdown:
        raise PluginError(f"{page.file.src_uri}: an {{{{ if-recorded:... }}}} without its "
                          f"{{{{ else }}}} and {{{{ end }}}}; add them")
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


def recorded(stem, dotted, page):
    if stem not in recordings:
        raise PluginError(f"{page.file.src_uri}: asks for {stem}:{dotted} but "
                          f"recordings/{stem}.json does not exist; run `{FIX}`")
    try:
        return lookup(recordings[stem], dotted)
    except (KeyError, IndexError):
        raise PluginError(f"{page.file.src_uri}: recordings/{stem}.json has no value at "
                          f"{dotted!r}") from None


def recorded_json(stem, dotted, element_id, page, values):
    """A recorded object as the JSON of a <script type="application/json"> element, for a
    script on the page to read (JSON.parse of its text): the data reaches the reader from
    the recording, through the build, as the figures do. The JSON itself is made safe for
    that element when it is held (recorded_text.script_json)."""
    value = recorded(stem, dotted, page)
    try:
        held = values.hold_json(value)
    except ValueError as error:
        raise PluginError(f"{page.file.src_uri}: recordings/{stem}.json's {dotted!r} is "
                          f"not plain JSON ({error}); rerun `{FIX}`") from None
    return f'<script type="application/json" id="{element_id}">{held}</script>\n'


def recorded_value(stem, dotted, spec, page, values, directive):
    value = recorded(stem, dotted, page)
    if isinstance(value, (dict, list)):
        raise PluginError(f"{page.file.src_uri}: {directive} is a {type(value).__name__}, "
                          f"not one value; name an item inside it")
    try:
        text = human_date(value) if spec == "date" else format(value, spec) if spec \
            else str(value)
    except (ValueError, TypeError) as error:
        raise PluginError(f"{page.file.src_uri}: {directive} cannot format a "
                          f"{type(value).__name__} with '|{spec}' ({error}); change the "
                          f"format code") from None
    return values.hold(text)  # a recording is data: it joins the page after Markdown


def human_date(timestamp):
    """An ISO 8601 timestamp as a reader writes the day: "30 November 2026" (UTC as
    recorded; a reader does not need the second a recording was made)."""
    when = datetime.fromisoformat(str(timestamp))
    return f"{when.day} {when:%B %Y}"


def machine_label(recording):
    env = recording["environment"]
    processes = env.get("processCount", 1)
    units = f"{processes} processes" if processes > 1 else f"{env['deviceCount']} devices"
    label = f"{env['backend'].upper()} · {units}"
    kind = env.get("deviceKind", env["backend"])
    # "CPU · 4 devices · cpu" says cpu twice; a TPU's kind ("TPU v5 lite") says more.
    return label if kind.lower() == env["backend"].lower() else f"{label} · {kind}"


def tab_label(recording):
    date = human_date(recording["generatedAt"])
    return f"{machine_label(recording)} · {date} · JAX {recording['environment']['jax']}"


def fenced(marker, indent="    "):
    """A text code fence around a marker: the recorded text itself arrives after Markdown
    (pages/recorded_text.py), so no backtick of it can end the fence."""
    return f"{indent}```text\n{indent}{marker}\n{indent}```"


def executed_recordings(lesson_id, page):
    chosen = [r for stem, r in sorted(recordings.items())
              if stem.startswith(f"{lesson_id}.") and r.get("kind") == "executed"]
    # The CPU recording first: every reader can reproduce it.
    chosen.sort(key=lambda r: (r["environment"]["backend"] != "cpu",
                               r["environment"].get("processCount", 1), r["_stem"]))
    if not chosen:
        raise PluginError(f"{page.file.src_uri}: no recording of {lesson_id}; run `{FIX}`")
    return chosen


# Every recorded string below goes in through values.hold: the Markdown around it is ours,
# the text inside it is the recording's and is never read as Markdown.
def recording_table(lesson_id, page, values):
    rows = ["| recording | provenance | ran on | recorded | JAX | status |",
            "|---|---|---|---|---|---|"]
    for recording in executed_recordings(lesson_id, page):
        env = recording["environment"]
        status = "stale: " + ", ".join(recording["_staleFiles"]) \
            if recording["_staleFiles"] else "current"
        path = f"recordings/{recording['_stem']}.json"
        rows.append(f"| `{values.hold(path)}` | "
                    f"`{values.hold(recording['provenance'])}` | "
                    f"{values.hold(machine_label(recording))} | "
                    f"{values.hold(human_date(recording['generatedAt']))} | "
                    f"{values.hold(env['jax'])} | "
                    f"{values.hold(status)} |")
    return "\n".join(rows) + "\n"  # a table ends at a blank line, whatever follows


def recording_tabs(lesson_id, page, values):
    blocks = []
    for recording in executed_recordings(lesson_id, page):
        env = recording["environment"]
        lines = [f'=== "{values.hold(tab_label(recording))}"', ""]
        if recording["_staleFiles"]:
            changed = ", ".join(f"`{values.hold(name)}`" for name in recording["_staleFiles"])
            lines += ['    !!! warning "Stale recording"',
                      f"        Recorded from older code: {changed} changed since. "
                      f"The values below are what that older code printed; rerun the "
                      f"hardware job to refresh them.", ""]
        lines += [f"    *Provenance:* `{values.hold(recording['provenance'])}` · generated "
                  f"{values.hold(recording['generatedAt'])} · "
                  f"{values.hold(env['deviceCount'])} × "
                  f"{values.hold(env.get('deviceKind', '?'))} · "
                  f"NumPy {values.hold(env['numpy'])} · "
                  f"`{values.hold(' '.join(recording.get('command', [])))}`", "",
                  fenced(values.hold(recording["stdout"].rstrip("\n"))), ""]
        blocks.append("\n".join(lines))
    return "\n".join(blocks)

"""mkdocs hooks: put recorded values, recordings and figures into the pages.

The build reads recordings; it never imports JAX and never runs lesson code. Page
directives. Before Markdown runs each becomes Markdown of ours with markers in it; after
Markdown, the recorded text replaces the markers, escaped (pages/recorded_text.py: a recording
is untrusted input, so no Markdown extension may ever read it):

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

The site is the course (lesson_code/lessons.toml): its name and summary are the registry's
[course], a lesson the nav leaves out is listed after the last one it names, and each
lesson page ends with its downloads.
    {{ if-recorded:<recording> }}A{{ else }}B{{ end }}  A if recordings/<recording>.json
                                                    exists, else B (inline or across lines;
                                                    not nested)
"""
import logging
import posixpath
import re
import shutil
import sys
import tempfile
from datetime import datetime
from pathlib import Path

from mkdocs.exceptions import Abort, PluginError
from mkdocs.structure.files import File

# mkdocs loads this file by path; the `scripts` package lives one level up.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts import FIGURES, ROOT
from scripts.freshness import load_all
from scripts.hardware.chips import accelerators_for
from scripts.hashes import ClosureError, import_closure
from scripts.lessons import RegistryError, load_course, load_lessons
from scripts.outputs import ANALYSES, RECORD as FIX
from scripts.outputs import for_lesson, recording_fix, stem_source
from scripts.recordings import RecordingError
from scripts.pages.recorded_text import PageValues, formatted

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

lessons = {}  # lesson id -> Lesson, from the registry on_config read
recordings = {}  # recording stem ("<lesson>.cpu") -> loaded recording
page_values = {}  # page src_uri -> its PageValues, from on_page_markdown to on_page_content
DOCS = [ROOT / "docs"]  # the docs_dir of the build, set by on_config


# SITE_URL goes into every canonical link, the sitemap and the 404 page, where the theme
# writes it unescaped: an address of these characters only cannot end an attribute.
SITE_URL = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%/-]*)?")


def check_site_url(config):
    url = config.get("site_url")
    if url and not SITE_URL.fullmatch(url):  # no site_url: mkdocs writes no canonical link
        raise PluginError(f"site_url (the SITE_URL environment variable, read by mkdocs.yml) "
                          f"is {url[:80]!r}: it must be an http(s) address of letters, "
                          f"digits and . - _ ~ % / only; set SITE_URL to one, such as "
                          f"https://user.github.io/lesson/")


def on_config(config):
    """Load every recording of every registered lesson, validated; a broken recording,
    or a stale one this machine can remake, stops the build here with one line each."""
    check_site_url(config)
    lessons.clear()
    recordings.clear()
    try:
        lessons.update(load_lessons())
        course = load_course()
        loaded, problems = load_all(lessons)
    except (RegistryError, RecordingError, ClosureError) as error:
        raise PluginError(str(error)) from None
    if problems:
        raise PluginError("; ".join(problems))
    recordings.update(loaded)
    config["site_name"], config["site_description"] = course["title"], course["description"]
    DOCS[0] = Path(config["docs_dir"])
    add_unlisted_lessons(config["nav"], DOCS[0])
    return config


def lesson_title(lesson, docs):
    """The first heading of the lesson's page (docs/lessons/<id>.md), else its id."""
    page = docs / "lessons" / f"{lesson.id}.md"
    heading = next((line[2:].strip() for line in page.read_text(encoding="utf-8").splitlines()
                    if line.startswith("# ")), None) if page.is_file() else None
    return heading or lesson.id


def nav_paths(nav):
    for item in nav or []:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        if isinstance(value, list):
            yield from nav_paths(value)
        else:
            yield value


def add_unlisted_lessons(nav, docs):
    """Put each registered lesson the nav does not list (its page and its notebook) after
    the last lesson it does list, so a new lesson needs no nav lines."""
    if nav is None:
        return  # no nav: mkdocs lists every page itself
    listed = set(nav_paths(nav))
    where = max((number + 1 for number, item in enumerate(nav)
                 if set(nav_paths([item])) & {f"lessons/{lesson}.md" for lesson in lessons}),
                default=min(1, len(nav)))
    for lesson in lessons.values():
        page, notebook = f"lessons/{lesson.id}.md", for_lesson(lesson).notebook_page
        if page in listed or not (docs / page).is_file():
            continue  # listed already, or no page yet (the strict build names it)
        title = lesson_title(lesson, docs)
        entries = [{f"Lesson: {title}": page}]
        if notebook not in listed and (docs / notebook).is_file():
            entries.append({f"Notebook: {title}": notebook})
        nav[where:where] = entries
        where += len(entries)


def on_serve(server, config, builder):
    """Under `mkdocs serve`, a broken recording is reported and the server keeps answering.

    mkdocs holds every request after a failed rebuild ("the server will appear stuck"),
    so a reader's browser would hang until the file is fixed. The failed build has
    already logged its one line; the next change to a watched file rebuilds.
    """
    site = Path(config["site_dir"])  # the folder the server answers from

    def build_or_keep_serving():
        # mkdocs empties the site folder before it builds the pages, so a page that fails
        # left every address answering 404: the last good site is kept aside and put back.
        with tempfile.TemporaryDirectory(prefix="mkdocs-last-good-") as kept:
            shutil.copytree(site, kept, dirs_exist_ok=True)
            try:
                builder()
            except Abort:  # raised after the build logged its error; a bug still tracebacks
                shutil.rmtree(site, ignore_errors=True)
                shutil.copytree(kept, site, dirs_exist_ok=True)
                logging.getLogger("mkdocs").warning(
                    "still serving the pages built before; fix the error above to rebuild")

    server.builder = build_or_keep_serving
    return server


def on_files(files, config):
    """Serve figures/, each lesson program from the site itself."""
    for svg in sorted(FIGURES.glob("*.svg")):
        files.append(File(f"figures/{svg.name}", str(ROOT), config["site_dir"],
                          config["use_directory_urls"]))
    # Each lesson program (and its exercises, where the registry names them),
    # downloadable beside its notebook.
    for lesson in lessons.values():
        for path in downloadable_modules(lesson):
            files.append(File(path, str(ROOT), config["site_dir"],
                              config["use_directory_urls"]))
    return files


def downloadable_modules(lesson):
    """The lesson's module, then its exercise module if the registry names one
    (`exercises`), as paths relative to the repository root."""
    modules = [lesson.module, getattr(lesson, "exercises", None)]
    return [lesson.path(module).relative_to(lesson.root).as_posix()
            for module in modules if module and lesson.path(module).is_file()]


DIRECTIVE = re.compile("|".join(f"(?P<{name}>{pattern.pattern})" for name, pattern in
                                (("value", VALUE), ("tabs", TABS), ("table", TABLE),
                                 ("lessons", LESSON_LIST), ("json", JSON_BLOCK))),
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
    lesson = lessons.get(page.file.src_uri.removeprefix("lessons/").removesuffix(".md"))
    if lesson is not None and page.file.src_uri == f"lessons/{lesson.id}.md":
        markdown += downloads(lesson, page, config)
    return markdown


def downloads(lesson, page, config):
    """The lesson page's last section: its program and its executed notebook, as files.

    The program is served beside the pages (on_files); the notebook's .ipynb is copied
    beside its page by mkdocs-jupyter, a file mkdocs does not list, hence a plain link.
    """
    program, *exercises = downloadable_modules(lesson)
    here = posixpath.dirname(page.file.src_uri)
    # It runs once downloaded only if it imports nothing else of this repository.
    alone = import_closure(lesson.path(), lesson.root) == [lesson.path()]
    lines = ["", "", "## Downloads", "",
             f"- [`{posixpath.basename(program)}`]({posixpath.relpath(program, here)})"
             f"{{ download }}: the lesson program" +
             (f"; it runs on its own (`python {posixpath.basename(program)}`)" if alone
              else ", run from a checkout of the repository (it imports other modules)")]
    for path in exercises:
        lines.append(f"- [`{posixpath.basename(path)}`]({posixpath.relpath(path, here)})"
                     f"{{ download }}: its exercises")
    notebook = for_lesson(lesson).notebook_page
    if (Path(config["docs_dir"]) / notebook).is_file():
        served = (f"notebooks/{lesson.id}/{lesson.id}.ipynb" if config["use_directory_urls"]
                  else notebook)
        link = posixpath.relpath(served, page.url if config["use_directory_urls"] else here)
        lines.append(f'- <a href="{link}" download><code>{lesson.id}.ipynb</code></a>: the '
                     f"notebook companion, executed by `scripts/record.py`")
    return "\n".join(lines) + "\n"


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
    if match.group("lessons"):
        return lesson_list(page, values)
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
    source = stem_source(stem)  # a recording, or an analysis derived from one
    if stem not in recordings:
        fix = FIX if source.startswith(ANALYSES) else recording_fix(lessons, source)
        raise PluginError(f"{page.file.src_uri}: asks for {stem}:{dotted} but "
                          f"{source} does not exist; "
                          + (f"run `{fix}`" if fix else "no lesson in lesson_code/lessons.toml "
                             "makes it; fix the directive"))
    try:
        return lookup(recordings[stem], dotted)
    except (KeyError, IndexError):
        raise PluginError(f"{page.file.src_uri}: {source} has no value at "
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
        raise PluginError(f"{page.file.src_uri}: {stem_source(stem)}'s {dotted!r} is "
                          f"not plain JSON ({error}); rerun `{FIX}`") from None
    return f'<script type="application/json" id="{element_id}">{held}</script>\n'


def recorded_value(stem, dotted, spec, page, values, directive):
    value = recorded(stem, dotted, page)
    if isinstance(value, (dict, list)):
        raise PluginError(f"{page.file.src_uri}: {directive} is a {type(value).__name__}, "
                          f"not one value; name an item inside it")
    try:
        text = human_date(value) if spec == "date" else formatted(value, spec)
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
    """The executed recordings of a lesson (of every lesson when `lesson_id` is None)."""
    ids = list(lessons) if lesson_id is None else [lesson_id]
    chosen = [r for stem, r in sorted(recordings.items())
              if any(stem.startswith(f"{name}.") for name in ids)
              and r.get("kind") == "executed"]
    # Lesson by lesson in the registry's order, the CPU recording first: every reader can
    # reproduce it.
    order = {name: number for number, name in enumerate(ids)}
    chosen.sort(key=lambda r: (order.get(r["lessonId"], len(order)),
                               r["environment"]["backend"] != "cpu",
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
        path = stem_source(recording["_stem"])
        rows.append(f"| `{values.hold(path)}` | "
                    f"`{values.hold(recording['provenance'])}` | "
                    f"{values.hold(machine_label(recording))} | "
                    f"{values.hold(human_date(recording['generatedAt']))} | "
                    f"{values.hold(env['jax'])} | "
                    f"{values.hold(status)} |")
    return "\n".join(rows) + "\n"  # a table ends at a blank line, whatever follows


def lesson_list(page, values):
    """One entry per registered lesson: its page, notebook and program, the devices it
    runs on, and whether it was recorded on TPU (`tpu_job.py --lesson <id>`)."""
    docs, here = DOCS[0], posixpath.dirname(page.file.src_uri)

    def link(target):
        return posixpath.relpath(target, here)

    items = []
    for lesson in lessons.values():
        program = lesson.path().relative_to(lesson.root).as_posix()
        parts = [f"**[{lesson_title(lesson, docs)}]({link(f'lessons/{lesson.id}.md')})** "
                 f"(`{values.hold(lesson.id)}`, on {lesson.devices} logical CPU devices)"]
        notebook = for_lesson(lesson).notebook_page
        if (docs / notebook).is_file():
            parts.append(f"[notebook companion]({link(notebook)})")
        parts.append(f"[the program]({link(program)}) (`python -m {lesson.module}`)")
        tpu = "recorded there" if for_lesson(lesson).stem("tpu") in recordings else \
            "not yet recorded on TPU"
        vms = accelerators_for(lesson.devices)
        parts.append(f"on a TPU VM with {lesson.devices} chips (`{vms[0]}`) it takes "
                     f"`--platform tpu` ({tpu})" if vms else
                     f"no single-host TPU VM has {lesson.devices} chips")
        items.append("- " + " · ".join(parts))
    return "\n".join(items)


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

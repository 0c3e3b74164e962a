"""mkdocs hooks: put recorded values, recordings and figures into the pages.

The build reads recordings; it never imports JAX and never runs lesson code. Three page
directives, resolved before Markdown is converted:

    {{ rec:<recording>:<dotted.path>|<format> }}   one value, e.g.
    {{ rec:distributed-03.cpu:environment.jax }}    (a missing value fails the build)
    {{ recordings:<lesson-id> }}                    one tab per recording of the lesson
    --8<-- "docs/sections/<name>.md"                a page fragment, inlined here so its
                                                    own {{ rec:... }} values resolve too
"""
import html
import json
import re
import sys
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lesson_hashes import ROOT, discover_lessons  # noqa: E402
from recordings import RECORDINGS, RecordingError, display, lesson_recordings, load_recording  # noqa: E402
from staleness import FIX, refresh_command, refreshable_here, stale_files  # noqa: E402

VALUE = re.compile(r"\{\{\s*rec:([\w.-]+):([\w.-]+)(?:\|([^}]*?))?\s*\}\}")
TABS = re.compile(r"^\{\{\s*recordings:([\w-]+)\s*\}\}\s*$", re.MULTILINE)
TABLE = re.compile(r"^\{\{\s*recordings-table:([\w-]+)\s*\}\}\s*$", re.MULTILINE)
FRAGMENT = re.compile(r'^--8<-- "(docs/sections/[\w./-]+\.md)"\s*$', re.MULTILINE)

recordings = {}  # recording stem ("distributed-03.cpu") -> loaded recording


def on_config(config):
    """Load every recording once; a broken or stale CPU recording stops the build here."""
    recordings.clear()
    stale = []
    for lesson_id, module_path in discover_lessons().items():
        for path in lesson_recordings(lesson_id):
            try:
                recording = load_recording(path)
            except RecordingError as error:
                raise PluginError(str(error)) from None
            recording["_stem"] = path.name.removesuffix(".json")
            recording["_staleFiles"] = stale_files(recording, module_path)
            if recording["_staleFiles"] and refreshable_here(recording):
                stale.append(f"{display(path)}: stale, "
                             f"{', '.join(recording['_staleFiles'])} changed since it was "
                             f"recorded; run `{refresh_command(recording)}`")
            recordings[recording["_stem"]] = recording
    if stale:
        raise PluginError("; ".join(stale))  # one line, every stale recording in it
    for extra in RECORDINGS.glob("*.json"):
        # Other kinds (a benchmark sweep, say) are validated by their own scripts; here
        # they only need to parse so their values can be shown.
        stem = extra.name.removesuffix(".json")
        if stem not in recordings and "schema" not in stem:
            try:
                recordings[stem] = json.loads(extra.read_text())
            except ValueError as error:
                raise PluginError(f"{display(extra)}: not valid JSON ({error})") from None
    return config


def on_files(files, config):
    """Serve figures/ from the site itself."""
    for svg in sorted((ROOT / "figures").glob("*.svg")):
        files.append(File(f"figures/{svg.name}", str(ROOT), config["site_dir"],
                          config["use_directory_urls"]))
    return files


DIRECTIVE = re.compile("|".join(f"(?P<{name}>{pattern.pattern})" for name, pattern in
                                (("value", VALUE), ("tabs", TABS), ("table", TABLE))),
                       re.MULTILINE)


def on_page_markdown(markdown, page, config, files):
    markdown = FRAGMENT.sub(lambda m: inline_fragment(m.group(1), page), markdown)
    # One pass: text that came out of a recording is never scanned for directives again.
    return DIRECTIVE.sub(lambda m: expand(m, page), markdown)


def expand(match, page):
    text = match.group(0)
    if match.group("tabs"):
        return recording_tabs(TABS.match(text).group(1), page)
    if match.group("table"):
        return recording_table(TABLE.match(text).group(1), page)
    return recorded_value(*VALUE.match(text).groups(), page=page)


def inline_fragment(relative, page):
    path = ROOT / relative
    if not path.exists():
        raise PluginError(f"{page.file.src_uri}: includes {relative}, which does not exist")
    return path.read_text()


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


def recorded_value(stem, dotted, spec, page):
    if stem not in recordings:
        raise PluginError(f"{page.file.src_uri}: asks for {stem}:{dotted} but "
                          f"recordings/{stem}.json does not exist; run `{FIX}`")
    try:
        value = lookup(recordings[stem], dotted)
    except (KeyError, IndexError):
        raise PluginError(f"{page.file.src_uri}: recordings/{stem}.json has no value at "
                          f"{dotted!r}") from None
    text = format(value, spec) if spec else str(value)
    return html.escape(text)  # a recording is data, never markup


def machine_label(recording):
    env = recording["environment"]
    processes = env.get("processCount", 1)
    units = f"{processes} processes" if processes > 1 else f"{env['deviceCount']} devices"
    return f"{env['backend'].upper()} · {units} · {env.get('deviceKind', env['backend'])}"


def tab_label(recording):
    date = recording["generatedAt"][:10]
    return f"{machine_label(recording)} · {date} · JAX {recording['environment']['jax']}"


def fenced(text, indent="    "):
    """A code fence longer than any backtick run inside, so recorded text stays text."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = "\n".join(indent + line for line in text.rstrip("\n").splitlines())
    return f"{indent}{fence}text\n{body}\n{indent}{fence}"


def executed_recordings(lesson_id, page):
    chosen = [r for stem, r in sorted(recordings.items())
              if stem.startswith(f"{lesson_id}.") and r.get("kind") == "executed"]
    # The CPU recording first: every reader can reproduce it.
    chosen.sort(key=lambda r: (r["environment"]["backend"] != "cpu",
                               r["environment"].get("processCount", 1), r["_stem"]))
    if not chosen:
        raise PluginError(f"{page.file.src_uri}: no recording of {lesson_id}; run `{FIX}`")
    return chosen


def recording_table(lesson_id, page):
    rows = ["| recording | provenance | ran on | recorded | JAX | status |",
            "|---|---|---|---|---|---|"]
    for recording in executed_recordings(lesson_id, page):
        env = recording["environment"]
        status = "stale: " + ", ".join(recording["_staleFiles"]) \
            if recording["_staleFiles"] else "current"
        rows.append(f"| `recordings/{recording['_stem']}.json` | "
                    f"`{recording['provenance']}` | {html.escape(machine_label(recording))} | "
                    f"{html.escape(recording['generatedAt'])} | {html.escape(env['jax'])} | "
                    f"{html.escape(status)} |")
    return "\n".join(rows)


def recording_tabs(lesson_id, page):
    blocks = []
    for recording in executed_recordings(lesson_id, page):
        env = recording["environment"]
        lines = [f'=== "{html.escape(tab_label(recording))}"', ""]
        if recording["_staleFiles"]:
            changed = ", ".join(f"`{name}`" for name in recording["_staleFiles"])
            lines += ['    !!! warning "Stale recording"',
                      f"        Recorded from older code: {changed} changed since. "
                      f"The values below are what that older code printed; rerun the "
                      f"hardware job to refresh them.", ""]
        lines += [f"    *Provenance:* `{recording['provenance']}` · generated "
                  f"{html.escape(recording['generatedAt'])} · "
                  f"{env['deviceCount']} × {html.escape(env.get('deviceKind', '?'))} · "
                  f"NumPy {html.escape(env['numpy'])} · "
                  f"`{' '.join(recording.get('command', []))}`", "",
                  fenced(recording["stdout"]), ""]
        blocks.append("\n".join(lines))
    return "\n".join(blocks)

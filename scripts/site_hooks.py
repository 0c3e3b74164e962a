"""mkdocs hooks: put recorded values, recordings, figures and MathJax into the pages.

The build reads recordings; it never imports JAX and never runs lesson code. Page
directives, resolved on every page before Markdown is converted:

    {{ rec:<recording>:<dotted.path>|<format> }}   one value, e.g.
    {{ rec:distributed-03.cpu:environment.jax }}    (a missing value fails the build)
    {{ recordings:<lesson-id> }}                    one tab per recording of the lesson
    {{ recordings-table:<lesson-id> }}              one table row per recording
    {{ if-recorded:<recording> }}A{{ else }}B{{ end }}  A if recordings/<recording>.json
                                                    exists, else B (inline or across lines;
                                                    not nested)
"""
import html
import re
import sys
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

# mkdocs loads this file by path; the `scripts` package lives one level up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts import ROOT
from scripts.freshness import load_all
from scripts.lessons import RegistryError, load_lessons
from scripts.outputs import RECORD as FIX
from scripts.recordings import RecordingError

VALUE = re.compile(r"\{\{\s*rec:([\w.-]+):([\w.-]+)(?:\|([^}]*?))?\s*\}\}")
TABS = re.compile(r"^\{\{\s*recordings:([\w-]+)\s*\}\}\s*$", re.MULTILINE)
TABLE = re.compile(r"^\{\{\s*recordings-table:([\w-]+)\s*\}\}\s*$", re.MULTILINE)
IF_RECORDED = re.compile(r"\{\{\s*if-recorded:([\w.-]+)\s*\}\}(.*?)"
                         r"\{\{\s*else\s*\}\}(.*?)\{\{\s*end\s*\}\}", re.DOTALL)
MATHJAX = ROOT / "node_modules" / "mathjax" / "es5"
# What MathJax's CHTML build loads at run time; speech (sre) is only fetched on request.
MATHJAX_PARTS = ("tex-mml-chtml.js", "output/chtml/fonts/woff-v2", "input/tex/extensions",
                 "a11y", "ui", "sre")

recordings = {}  # recording stem ("distributed-03.cpu") -> loaded recording


def on_config(config):
    """Load every recording of every registered lesson, validated; a broken recording,
    or a stale one this machine can remake, stops the build here with one line each."""
    recordings.clear()
    try:
        loaded, problems = load_all(load_lessons())
    except (RegistryError, RecordingError) as error:
        raise PluginError(str(error)) from None
    if problems:
        raise PluginError("; ".join(problems))
    recordings.update(loaded)
    return config


def on_files(files, config):
    """Serve figures/, the lesson program and the bundled MathJax from the site itself."""
    for svg in sorted((ROOT / "figures").glob("*.svg")):
        files.append(File(f"figures/{svg.name}", str(ROOT), config["site_dir"],
                          config["use_directory_urls"]))
    # Each lesson program, downloadable beside its notebook: it runs as is, on its own.
    for lesson in load_lessons().values():
        files.append(File(lesson.path().relative_to(ROOT).as_posix(), str(ROOT),
                          config["site_dir"], config["use_directory_urls"]))
    if not (MATHJAX / "tex-mml-chtml.js").exists():
        raise PluginError("node_modules/mathjax is missing; run `make install`")
    for part in MATHJAX_PARTS:
        source = MATHJAX / part
        for path in sorted([source] if source.is_file() else source.rglob("*")):
            if path.is_file():
                relative = path.relative_to(MATHJAX).as_posix()
                files.append(File(relative, str(MATHJAX),
                                  str(Path(config["site_dir"]) / "assets" / "mathjax"),
                                  config["use_directory_urls"]))
    return files


DIRECTIVE = re.compile("|".join(f"(?P<{name}>{pattern.pattern})" for name, pattern in
                                (("value", VALUE), ("tabs", TABS), ("table", TABLE))),
                       re.MULTILINE)


def on_page_markdown(markdown, page, config, files):
    markdown = choose_recorded_branches(markdown, page)
    # One pass: text that came out of a recording is never scanned for directives again.
    return DIRECTIVE.sub(lambda m: expand(m, page), markdown)


def expand(match, page):
    text = match.group(0)
    if match.group("tabs"):
        return recording_tabs(TABS.match(text).group(1), page)
    if match.group("table"):
        return recording_table(TABLE.match(text).group(1), page)
    return recorded_value(*VALUE.match(text).groups(), page=page)


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

"""mkdocs hook: what mkdocs-material does as a page starts that a long page pays for again
and again.

The browser computes the style of every element once before the first paint. Each of the
theme's start-up steps below made it compute all of them again, after the page was
painted, while a reader may already be scrolling: on a bare page that is 180 elements;
on the lesson page a trace counts 1,480 restyled (of about 1,700 in the page, formulas
and highlighted code included). Three such steps
are undone before they happen; each is found in a trace with Chromium's invalidation
tracking (`disabled-by-default-devtools.timeline.invalidationTracking`).

- **The switching attribute.** As its palette component starts, the theme puts
  `data-md-color-switching` on <body> and takes it off a frame later. Its palette
  stylesheet keys one rule on that attribute, `[data-md-color-switching] *` (no
  transitions while the colours switch), so each change restyles every element. Without
  the rule the attribute selects nothing. What is lost: a reader's palette toggle lets the
  theme's colour transitions (125-250 ms) run instead of snapping.
- **The colour-scheme meta element.** The palette component adds a
  `<meta name="color-scheme">` to the head and then sets its content. Chromium restyles
  the whole page for each of the two (a "platform colour change"), whether or not the
  scheme changes. The built bundle no longer adds it; the element is still made and kept
  up to date, detached (the theme never reads it back). docs/assets/lesson.css gives the
  root the dark scheme under the dark palette instead, which is all the element did (the
  page's own scroll bar and canvas); the theme's CSS already gives <body> its scheme.
  That rule needs `:has()` (Chromium 105, Safari 15.4, Firefox 121); an older browser
  draws the page's own scroll bar light under the dark palette.
- **The focus-visible class.** The theme's focus-visible polyfill adds `js-focus-visible`
  to <html>. That is docs/overrides/main.html's to undo: the page's head sets the class
  (and the js class the theme swaps for no-js) before any style is computed, so the
  theme's own changes change nothing.

Measured with Lighthouse on the lesson page (simulated mobile, three interleaved runs,
quiet host), for the switching rule and the js class: Style & Layout 833-933 ms before,
563-624 ms after; total blocking time 187-221 ms before, 117-121 ms after. `make audit`
measures what the page blocks now (scripts/audit/scores.json).

Both files are changed in the built site only, and only once: a file already changed (a
`--dirty` build keeps it) is left as it is. A theme whose files hold neither what is
changed nor the change fails the build, so an upgrade is looked at again instead of
silently keeping a patch that does nothing (the texts are mkdocs-material 9.8.2's,
requirements.txt). The meta element's statement is emptied in place, so no column
moves.

The same hook makes the bundle start the theme's components one per task
(scripts/pages/startup_tasks.py says why), the one change that makes it longer: its
source map is moved to match (scripts/pages/source_map.py), so a debugger still shows
the theme's own line and column for every column of the built bundle.
"""
import json
from pathlib import Path

from mkdocs.exceptions import PluginError

from scripts.pages.source_map import inserted, with_insertions
from scripts.pages.startup_tasks import check_the_hook, one_task_per_component
from scripts.recordings import Staging, write_atomically

CHECK_THE_HOOK = check_the_hook("scripts/pages/theme_startup.py")
SWITCHING_RULE = ("[data-md-color-switching] *,[data-md-color-switching] :after,"
                  "[data-md-color-switching] :before{transition-duration:0s!important}")
# What stands in the rule's place: it tells a file this hook changed from a theme's own.
RULE_REMOVED = "/*a switching rule was here: scripts/pages/theme_startup.py*/"
# In the theme's bundle: make the colour-scheme meta element, then add it to the head.
COLOR_SCHEME_META = 'let o=x("meta",{name:"color-scheme"});'
ADDED_TO_HEAD = "document.head.appendChild(o);"
# The same statement made empty, padded with spaces so that no column moves.
NOT_ADDED = COLOR_SCHEME_META + ";".ljust(len(ADDED_TO_HEAD))


def without_switching_rule(stylesheet):
    if SWITCHING_RULE in stylesheet:
        return stylesheet.replace(SWITCHING_RULE, RULE_REMOVED, 1)
    if RULE_REMOVED in stylesheet:  # changed by an earlier build
        return stylesheet
    raise PluginError(f"the theme's palette stylesheet no longer has the rule this hook "
                      f"removes; {CHECK_THE_HOOK}")


def without_color_scheme_meta(bundle):
    """The bundle, its colour-scheme meta element made but never added to the head."""
    times = bundle.count(COLOR_SCHEME_META + ADDED_TO_HEAD)
    if times == 1:
        return bundle.replace(COLOR_SCHEME_META + ADDED_TO_HEAD, NOT_ADDED, 1)
    if times == 0 and bundle.count(NOT_ADDED) == 1:  # changed by an earlier build
        return bundle
    raise PluginError(f"the theme's bundle holds the statement that adds its color-scheme "
                      f"meta element {times} times, not once; {CHECK_THE_HOOK}")


def built_theme_file(site, pattern):
    """The one file of the theme's that `pattern` names in the built site."""
    found = sorted(Path(site).glob(pattern))
    if len(found) != 1:
        raise PluginError(f"expected one {pattern} in the built site, found {len(found)}; "
                          f"{CHECK_THE_HOOK}")
    return found[0]


def read(path):
    # newline="": every byte but the changed ones stays as the theme shipped it.
    with open(path, encoding="utf-8", newline="") as original:
        return original.read()


def rewrite(path, change):
    write_atomically(path, change(read(path)))


def rewrite_bundle(bundle_path):
    """Write the built bundle with its colour-scheme meta element never added and its
    components started one per task (startup_tasks.py), and its source map moved to
    match the second change, the one that makes the bundle longer. Both files are
    written together or not at all: a map moved without its bundle would be moved again
    by the next build."""
    bundle = without_color_scheme_meta(read(bundle_path))
    insertions = one_task_per_component(bundle)
    source_map = bundle_path.with_name(bundle_path.name + ".map")
    with Staging() as staging:
        if insertions and source_map.exists():
            staging.add(source_map, moved_source_map(read(source_map), bundle, insertions))
        staging.add(bundle_path, inserted(bundle, insertions))
        staging.commit()


def moved_source_map(text, bundle, insertions):
    """The source map `text`, its columns moved by `insertions` into `bundle`; only its
    mappings change, the rest of the file stays byte for byte."""
    line = bundle.count("\n", 0, insertions[0][0])
    start_of_line = bundle.rfind("\n", 0, insertions[0][0]) + 1
    if bundle.count("\n", 0, insertions[-1][0]) != line:
        raise PluginError(f"the theme's bundle starts its components over more than one "
                          f"line; {CHECK_THE_HOOK}")
    try:
        written = json.loads(text)["mappings"]
    except (ValueError, KeyError, TypeError) as error:
        raise PluginError(f"the theme's source map cannot be read ({error!r}); "
                          f"{CHECK_THE_HOOK}") from None
    if not isinstance(written, str) or text.count(json.dumps(written)) != 1:
        raise PluginError(f"the theme's source map does not hold its mappings as one plain "
                          f"string; {CHECK_THE_HOOK}")
    moved = with_insertions(written, line, [(index - start_of_line, len(string))
                                            for index, string in insertions])
    return text.replace(json.dumps(written), json.dumps(moved), 1)


def on_post_build(config):
    site = config["site_dir"]
    rewrite(built_theme_file(site, "assets/stylesheets/palette.*.min.css"),
            without_switching_rule)
    rewrite_bundle(built_theme_file(site, "assets/javascripts/bundle.*.min.js"))

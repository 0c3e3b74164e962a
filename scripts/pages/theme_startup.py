"""mkdocs hook: what mkdocs-material does as a page starts that a long page pays for again
and again.

The browser computes the style of every element once before the first paint. Each of the
theme's start-up steps below made it compute all of them again, after the page was
painted, while a reader may already be scrolling: on a bare page that is 180 elements,
on a lesson page about 1,500, formulas and highlighted code included. Three such steps
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
  up to date, detached. docs/assets/lesson.css gives the root the dark scheme under the
  dark palette instead, which is all the element did (the page's own scroll bar and
  canvas); the theme's CSS already gives <body> its scheme.
- **The focus-visible class.** The theme's focus-visible polyfill adds `js-focus-visible`
  to <html>. That is docs/overrides/main.html's to undo: the page's head sets the class
  (and the js class the theme swaps for no-js) before any style is computed, so the
  theme's own changes change nothing.

Measured with Lighthouse on the lesson page (simulated mobile, three interleaved runs,
quiet host), for the switching rule and the js class: Style & Layout 833-933 ms before,
563-624 ms after; total blocking time 187-221 ms before, 117-121 ms after. `make audit`
measures the rest (scripts/audit/scores.json).

Both files are changed in the built site only. A theme whose files no longer hold exactly
what is changed fails the build, so an upgrade is looked at again instead of silently
keeping a patch that does nothing. The bundle keeps its length, so its source map still
points at the right columns.
"""
from pathlib import Path

from mkdocs.exceptions import PluginError

SWITCHING_RULE = ("[data-md-color-switching] *,[data-md-color-switching] :after,"
                  "[data-md-color-switching] :before{transition-duration:0s!important}")
# In the theme's bundle: make the colour-scheme meta element, then add it to the head.
COLOR_SCHEME_META = 'let o=x("meta",{name:"color-scheme"});'
ADDED_TO_HEAD = "document.head.appendChild(o);"


def without_switching_rule(stylesheet):
    if SWITCHING_RULE not in stylesheet:
        raise PluginError("the theme's palette stylesheet no longer has the rule "
                          "scripts/pages/theme_startup.py removes; check that hook against "
                          "the installed mkdocs-material")
    return stylesheet.replace(SWITCHING_RULE, "", 1)


def without_color_scheme_meta(bundle):
    """The bundle, its colour-scheme meta element made but never added to the head. The
    statement becomes an empty one padded with spaces, so no column moves."""
    found = bundle.count(COLOR_SCHEME_META + ADDED_TO_HEAD)
    if found != 1:
        raise PluginError(f"the theme's bundle adds its color-scheme meta element "
                          f"{found} times where scripts/pages/theme_startup.py expects once; "
                          f"check that hook against the installed mkdocs-material")
    return bundle.replace(COLOR_SCHEME_META + ADDED_TO_HEAD,
                          COLOR_SCHEME_META + ";".ljust(len(ADDED_TO_HEAD)), 1)


def the_one(site, pattern):
    found = sorted(Path(site).glob(pattern))
    if len(found) != 1:
        raise PluginError(f"expected one {pattern} in the built site, found {len(found)}; "
                          f"check scripts/pages/theme_startup.py against the installed "
                          f"mkdocs-material")
    return found[0]


def rewrite(path, change):
    path.write_text(change(path.read_text(encoding="utf-8")), encoding="utf-8")


def on_post_build(config):
    site = config["site_dir"]
    rewrite(the_one(site, "assets/stylesheets/palette.*.min.css"), without_switching_rule)
    rewrite(the_one(site, "assets/javascripts/bundle.*.min.js"), without_color_scheme_meta)

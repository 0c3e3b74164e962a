"""mkdocs hook: what mkdocs-material does as a page starts that a long page pays for twice.

As its palette component starts, the theme puts `data-md-color-switching` on <body> and
takes it off a frame later. Its palette stylesheet keys one rule on that attribute,
`[data-md-color-switching] *` (no transitions while the colours switch), so each of the
two changes makes the browser recompute the style of every element of the page, forced
at once by the theme's next read of a computed style. On a bare page that is 180
elements; on a lesson page 1,700, formulas and highlighted code included. Without the
rule the attribute selects nothing and costs nothing; what is lost is that a reader's
palette toggle lets the theme's colour transitions (125-250 ms) run instead of snapping.

Measured with Lighthouse on the lesson page (simulated mobile, three interleaved runs,
quiet host): Style & Layout 833-933 ms with the rule, 563-624 ms without it and with the
`js` class set in the page's head (docs/overrides/main.html), total blocking time
187-221 ms against 117-121 ms.

The rule is removed from the built copy of the stylesheet. A theme whose stylesheet no
longer has it fails the build, so an upgrade is looked at again instead of silently
keeping a patch that does nothing.
"""
from pathlib import Path

from mkdocs.exceptions import PluginError

SWITCHING_RULE = ("[data-md-color-switching] *,[data-md-color-switching] :after,"
                  "[data-md-color-switching] :before{transition-duration:0s!important}")


def without_switching_rule(stylesheet):
    if SWITCHING_RULE not in stylesheet:
        raise PluginError("the theme's palette stylesheet no longer has the rule "
                          "scripts/pages/theme_startup.py removes; check that hook against "
                          "the installed mkdocs-material")
    return stylesheet.replace(SWITCHING_RULE, "", 1)


def on_post_build(config):
    found = sorted(Path(config["site_dir"]).glob("assets/stylesheets/palette.*.min.css"))
    if len(found) != 1:
        raise PluginError(f"expected one palette stylesheet in the built site, found "
                          f"{len(found)}; check scripts/pages/theme_startup.py against the "
                          f"installed mkdocs-material")
    [stylesheet] = found
    stylesheet.write_text(without_switching_rule(stylesheet.read_text(encoding="utf-8")),
                          encoding="utf-8")

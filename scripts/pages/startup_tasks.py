"""The theme's set-up steps and components start one per task, so a long page answers a
reader's tap while the theme starts.

mkdocs-material starts all its components in two runs of script that nothing can
interrupt: the palette, search and the other controls while its bundle is evaluated,
and the header, table of contents, back-to-top button, sidebars and content (code
blocks, tabs, tooltips) when the page has been parsed (DOMContentLoaded). On a short
page both runs happen before the first paint. A long page is painted while it is still
being parsed, so both land after the reader can see it: a trace of the lesson page on
this project's 2-core machine found the two at 19-29 ms and 31-51 ms, which Lighthouse
scales four times for its mobile phone and counts, above 50 ms each, as total blocking
time (scripts/audit/lighthouse.py compares that with the bare theme's).

Six set-up steps the bundle takes as it is evaluated, before its components, are each
moved into a task of their own too (setTimeout), in the same order: the clipboard and
language-selector set-ups and four patches (SET_UP below). Their work leaves the
evaluation: traced over 20 interleaved loads each, its median went from 13.0 to 10.6 ms.
What this does not move is the theme's viewport watcher (`watchViewport`, bundle.ts
line 135), which reads the scroll position as the bundle is evaluated: when that comes
before the page's first layout, the browser lays out the whole page inside the
evaluation (11-22 ms more in traces, in loads with and without this change).

Here each component is started in a task of its own (RxJS `timer(0)` then the theme's
own mount: `timer(0).pipe(switchMap(() => mount(el)))`), in the order the theme starts
them, and none of them at the moment the bundle runs or the page is parsed. Each task
is shorter than the two runs were, and between two the browser can paint and take
input; the content component is still one task over the whole article. What is lost:
each component starts a task later, a millisecond or two. The palette the reader chose
is applied before that by the theme's inline script in <body>, but what a component
shows waits for it: the palette toggle (hidden until the palette starts), the header's
shadow, the table of contents' current entry. On a short page, painted after the
bundle has run, these can now appear just after the first paint instead of with it.

The text is mkdocs-material 9.8.2's minified bundle: `me` is its getComponentElements,
`He` RxJS's timer and `b` its switchMap (both are checked below). A theme whose bundle
does not start these components in this way fails the build, as theme_startup.py does.
"""
import re

from mkdocs.exceptions import PluginError

# Where the bundle starts its components: control$ (at evaluation), then content$ (on
# DOMContentLoaded), each a merge of `...me("<component>").map(e=>mount(e, ...))`.
COMPONENTS_START = 'Hs=L(...me("consent")'
COMPONENTS_END = ",Ki=ct.pipe(b(()=>$s),Ve(Hs),Z(1));Ki.subscribe();"
COMPONENT = re.compile(r'\.\.\.me\("([a-z-]+)"\)\.map\(e=>')
STARTED_BY_THE_THEME = ("consent", "dialog", "palette", "progress", "search", "source",
                        "announce", "content", "content", "header", "header-title",
                        "sidebar", "tabs", "toc", "top")
# The first six, control$: what the theme itself starts while its bundle is evaluated.
CONTROLS = STARTED_BY_THE_THEME[:6]
# RxJS's timer(dueTime, interval, scheduler), asyncScheduler by default. `b` is the
# switchMap of the bundle's own `document$.pipe(switchMap(() => content$))`, which
# COMPONENTS_END holds: `Ki=ct.pipe(b(()=>$s)...`.
TIMER = "function He(e,t,r){e===void 0&&(e=0),r===void 0&&(r=Wr);"
IN_A_TASK_OF_ITS_OWN = "He(0).pipe(b(()=>"
CLOSES_THE_TASK = "))"  # the pipe( and the b( that IN_A_TASK_OF_ITS_OWN opens
# The set-up steps the bundle takes as it is evaluated (bundle.ts in its source map):
# setupClipboardJS, setupAlternate, patchEllipsis, patchIndeterminate, patchScrollfix and
# patchScrolllock, each a statement of its own, once, before COMPONENTS_START.
SET_UP = ("di({alert$:fo});", "ui({document$:ct});", "Fi({viewport$:ke,document$:ct});",
          "ji({document$:ct,tablet$:Lr});", "Ui({document$:ct});",
          "Wi({viewport$:ke,tablet$:Lr});")
LATER = "setTimeout(()=>"
# What closing_parenthesis() does not read: other strings, template literals, regular
# expressions and escapes, none of which the theme's start-up holds.
NOT_READ = ("'", "`", "/", "\\")


def check_the_hook(hook):
    """The end of a hook's error about a theme it does not know: what to do."""
    return (f"check {hook} against the installed mkdocs-material, or reinstall the "
            f"pinned one: pip install -r requirements.txt -c constraints.txt")


CHECK_THE_HOOK = check_the_hook("scripts/pages/startup_tasks.py")


def closing_parenthesis(text, opening, end):
    """Index of the `)` before `end` that closes the `(` at `opening`; double-quoted
    strings are skipped (the only strings the bundle's start-up holds)."""
    depth, quoted = 0, False
    for index in range(opening, end):
        character = text[index]
        if character == '"':
            quoted = not quoted
        elif not quoted and character == "(":
            depth += 1
        elif not quoted and character == ")":
            depth -= 1
            if depth == 0:
                return index
    raise PluginError(f"the theme's bundle has an unclosed component start; {CHECK_THE_HOOK}")


def start_up(bundle):
    """Where the bundle starts its components, found once, or a PluginError."""
    start, end = bundle.find(COMPONENTS_START), bundle.find(COMPONENTS_END)
    if (bundle.count(COMPONENTS_START) != 1 or bundle.count(COMPONENTS_END) != 1
            or end < start):
        raise PluginError(f"the theme's bundle does not start its components as this hook "
                          f"expects; {CHECK_THE_HOOK}")
    if bundle.count(TIMER) != 1:
        raise PluginError(f"the theme's bundle does not define RxJS's timer as this hook "
                          f"expects; {CHECK_THE_HOOK}")
    if any(character in bundle[start:end] for character in NOT_READ):
        raise PluginError(f"the theme's start-up holds text this hook cannot read "
                          f"({', '.join(NOT_READ)}); {CHECK_THE_HOOK}")
    return start, end


def set_up_later(bundle, start):
    """The insertions that make each SET_UP statement `setTimeout(()=>statement)`; none
    where the bundle already does."""
    found = [bundle.find(statement) for statement in SET_UP]
    later = [bundle.find(LATER + statement[:-1] + ");") for statement in SET_UP]
    if all(index == -1 for index in found) and all(-1 < index < start for index in later):
        return []
    if any(bundle.count(statement) != 1 for statement in SET_UP) or \
            found != sorted(found) or found[-1] > start:
        raise PluginError(f"the theme's bundle does not take its set-up steps as this hook "
                          f"expects; {CHECK_THE_HOOK}")
    return [insertion for index, statement in zip(found, SET_UP)
            for insertion in ((index, LATER), (index + len(statement) - 1, ")"))]


def one_task_per_component(bundle):
    """The insertions, (index in `bundle`, text), that take each set-up step and start
    each component in a task of its own; none where the bundle already does (a
    `--dirty` build keeps the changed file)."""
    start, end = start_up(bundle)
    components = list(COMPONENT.finditer(bundle, start, end))
    if tuple(found.group(1) for found in components) != STARTED_BY_THE_THEME:
        raise PluginError(f"the theme's bundle starts other components than this hook "
                          f"expects; {CHECK_THE_HOOK}")
    # Each match ends just after `.map(e=>`: the mount is what follows, up to the `)`
    # that closes `.map(`.
    mounts = [(found.end(), closing_parenthesis(bundle, found.end() - len("(e=>"), end))
              for found in components]
    changed = [bundle.startswith(IN_A_TASK_OF_ITS_OWN, mount) for mount, _ in mounts]
    set_up = set_up_later(bundle, start)
    if all(changed) and not set_up:
        return []
    if any(changed) or not set_up:
        raise PluginError(f"the theme's bundle starts some of its steps in tasks of their "
                          f"own and not others (a site built by an older version of this "
                          f"hook: build without --dirty); {CHECK_THE_HOOK}")
    return set_up + [insertion for mount, end_of_mount in mounts
                     for insertion in ((mount, IN_A_TASK_OF_ITS_OWN),
                                       (end_of_mount, CLOSES_THE_TASK))]

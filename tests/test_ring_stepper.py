"""The ring step-through (docs/assets/ring-stepper.js) as a reader meets it: every value
the recorded trace's, read as the static figures read it (scripts/figures/ring.py)."""
import json
import re

import numpy as np
import pytest

from conftest import ROOT, SEED, recording_name
from scripts.figures.palette import DARK, LIGHT
from scripts.figures.ring import cell_look, phases
from site_pages import page_file, site_pages
import test_browser
from harness import skip_or_fail
from test_browser import (AXE, VARIANT, PageWatch, axe_findings, in_page, load_images, new_page,
                          settle)
from test_figures import contrast

browser, serve, served = test_browser.browser, test_browser.serve, test_browser.served

# The pages that show it.
LESSON = f"lessons/{SEED.id}/"
SHOWN_ON = [LESSON, "going-further/ring-simulator/"]
# Words for controls that exist only once the script has run.
CONTROL_WORDS = re.compile(r"\bbuttons?\b|arrow keys?|Next step|Previous step|\bPlay\b", re.I)


def recorded_trace():
    return json.loads((ROOT / recording_name(SEED, "simulation")).read_text())["data"]


@pytest.mark.browser
def test_without_script_figures_are_static_and_the_stepper_hidden_where_it_loads(
        browser, served, built_site):
    """With JavaScript off the page stays light, each figure the file the page names. D17:
    only the stepper's pages fetch its script; with script off it stays hidden, no visible
    text speaks of its controls, and a <noscript> line says what shows instead."""
    loading = [path for path in site_pages(built_site)
               if "ring-stepper.js" in page_file(built_site, path).read_text()]
    assert sorted(loading) == sorted(SHOWN_ON) and LESSON in SHOWN_ON
    context = browser.new_context(java_script_enabled=False, color_scheme="dark",
                                  viewport={"width": 1280, "height": 900})
    for path in SHOWN_ON:
        page = context.new_page()
        page.goto(f"{served}/{path}")  # its load event; load_images() waits for each figure
        assert not page.locator(".ring-stepper").is_visible()
        shown = page.inner_text("article")
        assert "needs JavaScript" in shown and not CONTROL_WORDS.findall(shown), path
        figures = load_images(page)
        assert figures and all(figure["loaded"] for figure in figures)
        assert [VARIANT.sub(".svg", figure["src"]) for figure in figures] == \
            [figure["src"] for figure in figures]
    context.close()


SHOWS = in_page("ring_stepper_state")
RANK_0_IN_VIEW = in_page("ring_stepper_rank_0_in_view")
NAME_TO_BUTTONS = ("root.querySelector('.ring-stepper__controls').getBoundingClientRect().bottom"
                   " - root.querySelector('.ring-stepper__position').getBoundingClientRect().top")


def expected_ring_steps(trace):
    """Every state of the step-through as scripts/figures/ring.py reads the same trace:
    step names, each cell's label, values and arrival, the sends, the live text."""
    p = trace["ranks"]
    chunks = np.asarray(trace["contributions"], dtype=np.float32).reshape(p, p, -1)
    chunk_bytes, drawn = trace["vectorBytes"] // p, phases(trace)
    expected = []
    for phase, key, name in (("Reduce-scatter", "reduceScatter", "reduce_scatter"),
                             ("All-gather", "allGather", "all_gather")):
        total = trace[key]["bytesSent"][0]
        for step, (label, state, sends) in enumerate(drawn[name].rows):
            got = {dst: chunk for _, dst, chunk in sends}

            def values(r, c):
                return ", ".join(f"{v:g}" for v in chunks[list(state[r][c]), c].sum(axis=0)) \
                    if state[r][c] else ""

            ranks = [[[cell_look(state[r][c], p, LIGHT)[2], values(r, c), got.get(r) == c,
                       "new" if got.get(r) == c else ""] for c in range(p)] for r in range(p)]
            said = []
            for src, dst, c in sends:
                held = "finished" if phase == "All-gather" else "now fully reduced" \
                    if len(state[dst][c]) == p else \
                    f"now ranks {cell_look(state[dst][c], p, LIGHT)[2]}"
                said.append(f"c{c} from rank {src} to rank {dst}, {held} ({values(dst, c)})")
            said.append(f"Each rank has sent {step * chunk_bytes} of its {total} bytes."
                        if step else f"{total} bytes per rank")
            # The figure's row names the step: "start" (or "start: ..."), "step k".
            position = f"{phase}, {label.split(':')[0]}" + (f" of {p - 1}" if step else "")
            expected.append({"position": position, "ranks": ranks, "said": said,
                             "sends": [list(send) for send in sends]})
    return expected


def assert_shows(shown, expected):
    assert shown["position"] == expected["position"] and shown["ranks"] == expected["ranks"]
    for words in expected["said"]:
        assert words in shown["status"], (words, shown["status"])
    # One arrow per send, from the sender's card to the receiver's, named by its chunk.
    assert [arrow["send"] for arrow in shown["arrows"]] == expected["sends"]
    for arrow in shown["arrows"]:
        src, dst, chunk = arrow["send"]
        assert arrow["ends"] == [src, dst] and arrow["label"] == f"c{chunk}", arrow


def assert_a_screen_reader_gets_each_rank_as_a_list(page, root, trace):
    """The named group, its controls by role, each rank a list with one new item; the
    step and the sentence each spoken whole."""
    group = page.get_by_role("group", name="The ring, step by step")
    assert group.get_by_role("radio").count() == 1 + len(trace["byRanks"])
    assert group.get_by_role("button", name="Next step").count() == 1
    for r in range(trace["ranks"]):
        items = group.get_by_role("list", name=f"rank {r}").get_by_role("listitem")
        assert items.count() == trace["ranks"]
        texts = [" ".join(item.all_text_contents()).replace("\n", " ") for item in items.all()]
        assert sum("new" in text for text in texts) == 1, texts
    for part in ("position", "status"):
        assert root.locator(f".ring-stepper__{part}").get_attribute("aria-atomic") == "true"
    assert "step 1 of" in root.locator(".ring-stepper__position").text_content()


def open_stepper(browser, served, path=LESSON, scheme="light", width=1280, height=None,
                 motion="reduce", clock=False):
    """A page with the step-through, scrolled to its top (less motion unless asked)."""
    page = new_page(browser, scheme, width, height, reduced_motion=motion)
    watch = PageWatch(page, served)
    if clock:  # the page's timers run on a clock the test moves, once the page has settled
        page.clock.install()
    settle(page, watch, f"{served}/{path}")
    if clock:
        page.clock.pause_at(page.evaluate("Date.now()") + 1)
    root = page.locator(".ring-stepper")
    root.evaluate("root => root.scrollIntoView({block: 'start'})")
    return page, watch, root


def shows(root):
    return root.evaluate(SHOWS)


@pytest.mark.browser
@pytest.mark.parametrize("path, width", [(LESSON, 390), (SHOWN_ON[1], 1280)])
def test_the_ring_steps_through_the_recorded_trace_and_stays_still(browser, served, path, width):
    """Every state, forwards by button and back by arrow key, is the recorded trace as the
    figures read it, at every recorded ring size. N4, N5: ring and buttons stay still and,
    at p = 4, fit one screen; at p = 8 on a phone the ring scrolls in a named, focusable
    box that the arrow keys scroll, not step."""
    trace = recorded_trace()
    expected = expected_ring_steps(trace)
    assert len(expected) == 2 * trace["ranks"]
    page, watch, root = open_stepper(browser, served, path, width=width)
    # The page carries the recording's data itself, parsed back unchanged.
    assert page.evaluate("JSON.parse(document.getElementById('ring-trace').textContent)") == trace
    assert root.locator("input[type=radio]:checked").get_attribute("value") == str(trace["ranks"])
    seen = []
    for index, state in enumerate(expected):
        seen.append(shows(root))
        assert_shows(seen[-1], state)
        assert [seen[-1][part] for part in ("ring", "controls")] == \
            [seen[0][part] for part in ("ring", "controls")], state["position"]
        if index == 1:
            assert_a_screen_reader_gets_each_rank_as_a_list(page, root, trace)
        if index < len(expected) - 1:
            root.locator("[data-go=next]").click()
    header = page.evaluate("document.querySelector('.md-header').getBoundingClientRect().bottom")
    assert seen[0]["controls"] - seen[0]["ring"][0] <= page.viewport_size["height"] - header
    figure = root.locator(".ring-stepper__figure")
    assert figure.evaluate("box => box.scrollWidth <= box.clientWidth")
    assert figure.get_attribute("tabindex") is None  # nothing to scroll: no tab stop
    root.focus()
    for state in reversed(expected):
        assert_shows(shows(root), state)
        page.keyboard.press("ArrowLeft")
    page.keyboard.press("End")
    assert shows(root) == seen[-1]
    page.keyboard.press("Home")
    assert shows(root) == seen[0]
    # D15: Enter on a control past its end leaves the focus on it, marked unavailable, and
    # the step where it was (a disabled button would drop the focus to <body>).
    for go, at in (("previous", seen[0]), ("first", seen[0]), ("last", seen[-1]),
                   ("next", seen[-1])):
        root.locator(f"[data-go={go}]").focus()
        page.keyboard.press("Enter")
        assert shows(root) == at and page.evaluate("document.activeElement.dataset.go") == go
        assert root.locator(f"[data-go={go}]").get_attribute("aria-disabled") == "true"
    assert len({entry["status"] for entry in seen}) == len(seen)  # each step said anew
    sizes = sorted(int(n) for n in trace["byRanks"])
    assert 8 in sizes and [int(value) for value in root.locator("input[type=radio]").evaluate_all(
        "inputs => inputs.map(input => input.value)")] == sorted([trace["ranks"], *sizes])
    for ranks in sizes:
        other = trace["byRanks"][str(ranks)]
        root.locator(f"input[type=radio][value='{ranks}']").check()
        cue = root.locator(".ring-stepper__scroll")
        if ranks == 8 and width < 600:
            assert figure.evaluate("box => box.scrollWidth > box.clientWidth")
            assert figure.get_attribute("tabindex") == "0" and figure.get_attribute("aria-label")
            # Audit L2: it says so, and opens on rank 0's card, where the sentence starts.
            assert cue.is_visible() and figure.evaluate(RANK_0_IN_VIEW)
            start = figure.evaluate("box => box.scrollLeft")
            figure.focus()
            page.keyboard.press("ArrowLeft")
            page.wait_for_function(f"box => box.scrollLeft < {start}", arg=figure.element_handle())
        elif ranks == 8:  # audit L5: on a laptop's 800 px its name, ring and buttons show
            assert figure.evaluate("box => box.scrollWidth <= box.clientWidth")
            assert not cue.is_visible()
            page.set_viewport_size({"width": width, "height": 800})
            page.wait_for_function(f"root => {NAME_TO_BUTTONS} <= {800 - header}",
                                   arg=root.element_handle(), timeout=5000)
        steps = expected_ring_steps(other)
        for index, state in enumerate(steps):
            assert_shows(shows(root), state)  # the arrow key scrolled, it did not step
            if index < len(steps) - 1:
                root.locator("[data-go=next]").click()
        assert f"has sent {(ranks - 1) * other['vectorBytes'] // ranks} of its " \
            f"{other['allGather']['bytesSent'][0]} bytes" in shows(root)["status"]
    assert watch.problems == []
    page.close()


OFF_SCREEN = in_page("ring_stepper_off_screen")
CUT_BY_THE_BOX = """box => [...box.querySelectorAll('.ring-stepper__rank')].filter(card => {
    const [inner, outer] = [card, box].map(part => part.getBoundingClientRect());
    return inner.left < outer.left || inner.right > outer.right;
}).map(card => card.dataset.rank)"""
NAME_UNDER_THE_HEADER = """root => scrollBy(0, root.querySelector('.ring-stepper__position')
    .getBoundingClientRect().top - document.querySelector('.md-header')
    .getBoundingClientRect().bottom)"""


@pytest.mark.browser
@pytest.mark.parametrize("scheme, width, height", [("dark", 1366, 657), ("light", 320, 640)])
def test_p_8_on_a_short_laptop_and_a_320_px_phone_shows_every_rank_whole(
        browser, served, scheme, width, height):
    """At p = 8 no card is cut, nothing scrolls sideways, the text is 9 px or more and every step is
    the recorded trace. Audit L3: on a 768-px laptop's 1366 x 657, with the step's name just under
    the header, Next step leaves the name, all eight ranks and the buttons on screen. L4: at 320 px,
    where even the side of the ring it would open on is wider than the column, the ranks go down in
    one column. Nothing moves while stepping; axe finds nothing in it."""
    page, watch, root = open_stepper(browser, served, scheme=scheme, width=width, height=height)
    root.locator("input[type=radio][value='8']").check()
    root.evaluate(NAME_UNDER_THE_HEADER)
    steps, still = expected_ring_steps(recorded_trace()["byRanks"]["8"]), shows(root)
    for index, state in enumerate(steps):
        seen = shows(root)
        assert_shows(seen, state)
        assert [seen["ring"], seen["controls"]] == [still["ring"], still["controls"]]
        if index == 1 and width > 600:
            assert root.evaluate(OFF_SCREEN) == []
        if index < len(steps) - 1:
            root.locator("[data-go=next]").click()
    figure = root.locator(".ring-stepper__figure")
    assert figure.evaluate("box => box.scrollWidth <= box.clientWidth")
    assert figure.get_attribute("tabindex") is None
    assert not root.locator(".ring-stepper__scroll").is_visible()
    assert figure.evaluate(CUT_BY_THE_BOX) == []
    assert figure.locator("svg").evaluate(  # 10-unit text, drawn at the SVG's scale
        "svg => 10 * svg.getBoundingClientRect().width / svg.viewBox.baseVal.width") >= 8.99
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
    if AXE.exists():
        impacts = ("minor", "moderate", "serious", "critical")
        assert axe_findings(page, ".ring-stepper", impacts) == []
    assert watch.problems == []
    page.close()


def live(root):
    """How politely each part of the step-through speaks: its step, its sentence."""
    return [root.locator(f".ring-stepper__{part}").get_attribute("aria-live")
            for part in ("position", "status")]


@pytest.mark.browser
def test_play_moves_one_step_at_its_pace_announcing_only_the_step(browser, served):
    """Play moves one step a pace and says only which step (N6); Pause, the end or a step
    by hand stops it; an arrow moves, or is drawn at once where less motion is asked for."""
    page, watch, root = open_stepper(browser, served, motion="no-preference", clock=True)
    pace = int(root.get_attribute("data-pace-ms"))
    expected = [state["position"] for state in expected_ring_steps(recorded_trace())]
    page.clock.run_for(20 * pace)
    assert shows(root)["position"] == expected[0] and live(root) == ["polite", "polite"]
    play = root.locator("[data-go=play]")
    play.click()
    assert play.text_content() == "Pause" and live(root) == ["polite", "off"]
    page.clock.run_for(pace - 100)
    assert shows(root)["position"] == expected[0]
    page.clock.run_for(100)
    assert shows(root)["position"] == expected[1]
    animation = root.locator(".ring-stepper__arrow path").first.evaluate(
        "path => getComputedStyle(path).animationName")
    assert animation == "ring-stepper-send"
    page.clock.run_for(pace)
    assert shows(root)["position"] == expected[2]
    play.click()  # Pause
    assert play.text_content() == "Play" and live(root) == ["polite", "polite"]
    page.clock.run_for(10 * pace)
    assert shows(root)["position"] == expected[2]
    play.click()  # played on, it stops at the end; Play there starts from the start
    page.clock.run_for(len(expected) * pace)
    assert shows(root)["position"] == expected[-1] and play.text_content() == "Play"
    play.click()
    assert shows(root)["position"] == expected[0]
    root.locator("[data-go=next]").click()
    page.clock.run_for(3 * pace)
    assert shows(root)["position"] == expected[1] and play.text_content() == "Play"
    page.emulate_media(reduced_motion="reduce")
    assert root.locator(".ring-stepper__arrow path").first.evaluate(
        "path => getComputedStyle(path).animationName") == "none"
    assert watch.problems == []
    page.close()


def rgb(hex_colour):
    return "rgb({}, {}, {})".format(*(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)))


COLOURS = in_page("ring_stepper_colours")


@pytest.mark.browser
@pytest.mark.parametrize("scheme, width", [("light", 1280), ("dark", 390)])
def test_every_cell_holds_its_contrast_and_axe_finds_nothing_in_it(browser, served, scheme, width):
    """D16: each look takes its palette's figure colours, text 4.5:1 and the arrived outline
    3:1 against the card; at two steps showing every look and at p = 8, axe finds nothing
    inside it and the page is no wider than its screen (each palette, each width once)."""
    page, watch, root = open_stepper(browser, served, LESSON, scheme, width)
    palette, looks, p = {"light": LIGHT, "dark": DARK}[scheme], set(), recorded_trace()["ranks"]
    for steps in (p // 2, p + 1, "p = 8"):  # RS step p/2, AG step 1, then p = 8
        root.focus()
        page.keyboard.press("Home")
        if steps == "p = 8":
            root.locator("input[type=radio][value='8']").check()
        for _ in range(0 if steps == "p = 8" else steps):
            page.keyboard.press("ArrowRight")
        for cell in root.evaluate(COLOURS):
            looks.add(cell["look"])
            behind = cell["card"] if cell["look"] == "missing" else cell["fill"]
            assert contrast(cell["ink"], behind) >= 4.5, cell
            assert not cell["arrived"] or contrast(cell["outline"], cell["card"]) >= 3, cell
            if cell["look"] != "missing":
                assert cell["fill"] == rgb(getattr(palette, cell["look"])[0]), cell
        if AXE.exists():
            impacts = ("minor", "moderate", "serious", "critical")
            assert axe_findings(page, ".ring-stepper", impacts) == [], shows(root)["position"]
        assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
    assert looks == {"own", "partial", "full", "missing"} and watch.problems == []
    page.close()
    if not AXE.exists():
        skip_or_fail(f"{AXE.relative_to(ROOT)} is missing: run `make install`")

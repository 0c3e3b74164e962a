"""The lesson in Debian's chromium (Playwright), on the site as CI publishes it, under a
sub-path: each page visited once per screen it is checked on, read by every check of that
screen (`visits`); screenshots land in test-artifacts/ for a person to look at."""
import functools
import gzip
import http.server
import os
import re
import threading
import time
from pathlib import Path

import pytest

from conftest import LESSONS, ROOT, SEED, SUB_PATH
from harness import skip_or_fail
from scripts.store.outputs import figure_outputs
from site_pages import page_file, site_pages

CHROMIUM = "/usr/bin/chromium"
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
ARTIFACTS = ROOT / "test-artifacts"
# Without these, chromium phones home at start-up; this machine's closed network refuses.
QUIET = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
# The seed lesson's page, which the going-further pages link back to.
LESSON = f"lessons/{SEED.id}/"
GOING_FURTHER = sorted(path.stem for path in (ROOT / "docs" / "going-further").glob("*.md"))
SCREENS = [(scheme, width) for scheme in ("light", "dark") for width in (1280, 390)]
DESKTOP = ("light", 1280)
# The seed's pages and the course's own (home, going further, 404) are visited on every
# screen. Another lesson's pages are the same templates, extensions and renderers over its
# own content: its lesson page is visited on the desktop (its first-load budget, axe, its
# figures); both are laid out at every width, without an error or a request off the site, by
# the scrollbar test; each drawing's variants are checked for legibility by test_figures.py.
# A lesson costs three page loads, not one per screen and check.
# Both sides of the narrow drawing's breakpoint: up to 720 px it is shown; 721 px is the
# narrowest content column that shows the wide drawing. Only the figures are read there.
BREAKPOINT = [("light", 720), ("dark", 721)]
# A page's first load as a compressing host sends it: the heaviest measured (the lesson's,
# December 2026) was 131 KB, the budget that and half again, for the course to grow.
FIRST_LOAD_LIMIT = 200_000
SMALLEST_READABLE_PX = 9  # issue 12: a figure's smallest text at the desktop width


def in_page(name):
    """The function tests/page_scripts/NAME.js, for page.evaluate() to call in a page."""
    return (ROOT / "tests" / "page_scripts" / f"{name}.js").read_text()


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium, one Playwright per module: a second cannot start beside it."""
    if not os.path.exists(CHROMIUM):
        skip_or_fail(f"{CHROMIUM} is missing: apt-get install chromium (make test does, as root)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=QUIET)
        yield instance
        instance.close()


@pytest.fixture(scope="module")
def serve():
    """serve(folder) -> its address: a static server like GitHub Pages, where a missing path
    gets `not_found_page` (the site's 404.html)."""
    servers = []

    def start(directory, not_found_page=None):
        handler = type("Handler", (http.server.SimpleHTTPRequestHandler,), {
            "log_message": lambda *args: None, "error_content_type": "text/html; charset=utf-8",
            **({"error_message_format": not_found_page.read_text().replace("%", "%%")}
               if not_found_page else {})})
        server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(handler, directory=str(directory)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server in servers:
        server.shutdown()


@pytest.fixture(scope="module")
def served(built_site, serve):
    """The published site's address, /<repository>/ on the server: every page lives there."""
    return f"{serve(built_site.parent, not_found_page=built_site / '404.html')}/{SUB_PATH}"


@pytest.fixture(scope="module")
def pages(built_site):
    """Every page of the built site: "", "lessons/<id>/", ..., "404.html"."""
    found = site_pages(built_site)
    assert {"", LESSON, "404.html"} <= set(found)
    assert {f"going-further/{name}/" for name in GOING_FURTHER} <= set(found)
    return found


class PageWatch:
    """Everything a page did that a reader would not want: errors and requests off the site
    (anything outside `origin`, the published site's own folder)."""

    def __init__(self, page, origin):
        self.problems, self.requests = [], []
        page.on("console", lambda m: m.type == "error" and self.problems.append(
            f"console error: {m.text}"))
        page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        page.on("requestfailed", lambda r: self.problems.append(f"failed: {r.url}"))
        page.on("request", lambda r: self.requests.append(r.url))
        page.on("request", lambda r: r.url.startswith((origin, "data:", "blob:"))
                or self.problems.append(f"left the site: {r.url}"))
        page.on("response", lambda r: r.status >= 400 and self.problems.append(
            f"HTTP {r.status}: {r.url}"))
        # Requests sent and not yet answered (data: and blob: URLs never leave the page).
        self.in_flight = set()
        page.on("request", lambda r: r.url.startswith(("data:", "blob:")) or self.in_flight.add(r))
        for answered in ("requestfinished", "requestfailed"):  # Playwright takes no builtin
            page.on(answered, lambda r: self.in_flight.discard(r))


NEXT_FRAME = "new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"


def settle(page, watch, url, timeout_s=15):
    """Load `url`, wait for its fonts laid out and no request unanswered: "networkidle"
    would wait 500 ms more on every page; a watch still sees a later request."""
    page.goto(url, wait_until="load")
    page.evaluate(f"document.fonts.ready.then(() => {NEXT_FRAME})")
    deadline = time.monotonic() + timeout_s
    while watch.in_flight and time.monotonic() < deadline:
        page.wait_for_timeout(20)  # lets Playwright deliver the pending answers' events


def new_page(browser, scheme="light", width=1280, height=None, **options):
    """A page of `browser` as that screen shows it: a phone below 600 px."""
    phone = width < 600
    return browser.new_page(viewport={"width": width, "height": height or (844 if phone else 900)},
                            color_scheme=scheme, is_mobile=phone, has_touch=phone, **options)


def open_page(browser, url, origin, scheme="light", width=1280):
    page = new_page(browser, scheme, width)
    watch = PageWatch(page, origin)
    settle(page, watch, url)
    return page, watch


def open_every_details(page):
    """Open each collapsed answer or hint, as a reader would; returns them, to close."""
    return page.evaluate_handle("""[...document.querySelectorAll('details:not([open])')]
        .map(details => (details.open = true, details))""")


def close_again(opened):
    opened.evaluate("all => all.forEach(details => { details.open = false; })")


DRAWN = "[...document.images].filter(img => img.getClientRects().length)"


def load_images(page):
    """Scroll each drawn image into view (a lazy one loads only then), wait until all
    have arrived, return the figures drawn (the other palette's are not, nor fetched)."""
    for image in page.locator("img").all():
        if image.is_visible():
            image.scroll_into_view_if_needed()
    try:
        page.wait_for_function(f"{DRAWN}.every(img => img.complete)", timeout=10000)
    except Exception:
        pass  # the assertions name the images that never arrived
    return [figure for figure in page.evaluate(in_page("figures_on_screen")) if figure["drawn"]]


# What a compressing host (GitHub Pages) sends: text gzipped, fonts and images as they are.
COMPRESSED = re.compile(r"text/|application/(javascript|json)|image/svg\+xml")


def sent_bytes(response):
    body = response.body()
    if COMPRESSED.match(response.headers.get("content-type", "")):
        return len(gzip.compress(body, compresslevel=6))
    return len(body)


# The theme names each code block's <pre> "__code_..." as it sets the block up.
SET_UP_BY_THE_THEME = "code => code.parentElement.id.startsWith('__code_')"


def read_the_lesson_page(page, requests):
    """Its math font, a display sum's size, an answer opened, a code block copied, a word
    of its code searched for, found, and marked on the page the result opens."""
    shows = {"math font loaded": page.evaluate("""[...document.fonts].some(face =>
        face.family.includes('Lesson Math') && face.status === 'loaded')""")}
    # A display Σ at display size: 15 px tall at 16 px text in fallback glyphs, 25 in ours.
    shows["sigma"] = page.evaluate(in_page("sigma_height"))
    answer = page.locator("details", has_text="Answer").first
    shows["answer closed at first"] = answer.get_attribute("open") is None
    answer.locator("summary").click()
    page.wait_for_function("el => el.open", arg=answer.element_handle())
    shows["answer opens"] = answer.get_attribute("open") is not None
    block = page.locator("article pre > code").nth(1)
    block.scroll_into_view_if_needed()  # content.lazy: the theme sets up a block in view
    page.wait_for_function(SET_UP_BY_THE_THEME, arg=block.element_handle())
    button = block.locator("xpath=..").locator("button[data-md-type='copy']")
    shows["copy buttons"] = button.count()
    button.click()
    page.locator(".md-dialog--active", has_text="Copied to clipboard").wait_for()
    shows["copied"] = [page.evaluate("navigator.clipboard.readText()"), block.inner_text().rstrip()]
    # Audit L1: the theme's <nav> around each copy button, two or more now, is no landmark.
    shows["code navs as landmarks"] = [found["key"] for found in axe_findings(
        page, impacts=("moderate",)) if found["key"].startswith("landmark")] \
        if page.locator("nav.md-code__nav").count() > 1 and AXE.exists() \
        else ["fewer than two set up"] * AXE.exists()
    shows["index fetched before search"] = [url for url in requests if SEARCH_INDEX in url]
    page.keyboard.press("/")  # the theme's shortcut: opens search, focuses its box
    page.keyboard.type("invarying")
    results = page.locator(".md-search-result__item a")
    results.first.wait_for(timeout=15000)
    shows["index fetched by search"] = [url for url in requests if SEARCH_INDEX in url]
    hrefs = results.evaluate_all("links => links.map(link => link.href)")
    with page.expect_navigation():
        results.nth([f"/{LESSON}?h=invarying" in href for href in hrefs].index(True)).click()
    page.locator("article mark", has_text="invarying").first.wait_for(timeout=10000)
    return shows


def read_a_notebook_page(page):
    """A notebook page in the dark palette: its code's colours, its two download buttons."""
    code = page.locator(".highlight pre > code").first
    page.screenshot(path=str(ARTIFACTS / f"notebook-{page.url.rstrip('/').rsplit('/', 1)[1]}.png"))
    shows = {"code background": code.evaluate("el => getComputedStyle(el).backgroundColor"),
             "page background": page.evaluate("getComputedStyle(document.body).backgroundColor"),
             "ipynb links": page.locator("a[download][href$='.ipynb']").count(), "downloads": []}
    for kind in ("ipynb", "py"):
        button = page.locator(f"a.md-button[download][href$='.{kind}']")
        shows[f"{kind} button"] = button.is_visible()
        with page.expect_download() as download:
            button.click()
        shows["downloads"].append((download.value.suggested_filename, download.value.failure()))
    return shows


def wide_block_tabindex(page):
    wide = page.locator("article pre > code[data-wide]:not(details:not([open]) code)").last
    wide.scroll_into_view_if_needed()
    page.wait_for_function(SET_UP_BY_THE_THEME, arg=wide.element_handle())
    page.evaluate("new Promise(done => requestAnimationFrame(() => setTimeout(done)))")
    return wide.get_attribute("tabindex")


def visit(browser, origin, path, scheme, width):
    """What one page did and showed on one screen, read so that no step changes what a
    later one sees: the first load, axe, the images with every answer open, clicks last."""
    page = new_page(browser, scheme, width)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=origin)
    watch, responses, full = PageWatch(page, origin), [], (scheme, width) in SCREENS
    page.on("response", lambda response: responses.append(response))
    seen = {"problems": watch.problems, "requests": watch.requests}
    if (scheme, width) == DESKTOP:  # the budget counts all the first load fetched
        page.goto(f"{origin}/{path}", wait_until="networkidle")  # 500 ms of silence
        seen["first load"] = {response.url.removeprefix(origin): sent_bytes(response)
                              for response in responses}
    else:
        settle(page, watch, f"{origin}/{path}")
    seen["scheme"] = page.evaluate("document.body.dataset.mdColorScheme")
    if full and AXE.exists():
        seen["axe"] = axe_findings(page)
    opened = open_every_details(page)  # a hint's figure is narrower, and loads once open
    seen["figures"] = load_images(page)
    seen["broken"] = page.evaluate(f"""{DRAWN}
        .filter(img => !(img.complete && img.naturalWidth > 0)).map(img => img.src)""")
    close_again(opened)
    if path == LESSON and full:
        seen["jax calls"] = page.evaluate(in_page("jax_calls"))
        page.screenshot(path=str(ARTIFACTS / f"lesson-{scheme}-{width}.png"))
    if path == LESSON and (scheme, width) == ("light", 390):
        seen["wide block's tabindex"] = wide_block_tabindex(page)
    if (scheme, width) == DESKTOP:
        seen["links to the lesson"] = page.locator(f"a[href*='{LESSON}']").count()
        if path == LESSON:
            seen.update(read_the_lesson_page(page, watch.requests))
    if path.startswith("notebooks/") and (scheme, width) == ("dark", 1280):
        seen.update(read_a_notebook_page(page))
    page.close()
    return seen


@pytest.fixture(scope="module")
def visits(browser, served, built_site, pages):
    """visits(scheme, width) -> {page: what it showed}, every page that screen visits (at
    the breakpoint, every page that names a figure), the first time a test asks for it."""
    ARTIFACTS.mkdir(exist_ok=True)

    @functools.cache
    def on(scheme, width):
        shown = [path for path in pages if visited_on(path, (scheme, width))
                 and ((scheme, width) in SCREENS
                      or "figures/" in page_file(built_site, path).read_text())]
        return {path: visit(browser, served, path, scheme, width) for path in shown}

    return on


def lesson_of(path):
    """The registered lesson whose page or notebook page `path` is, if any."""
    folder, _, rest = path.partition("/")
    return LESSONS.get(rest.split("/")[0]) if folder in ("lessons", "notebooks") else None


def visited_on(path, screen):
    return lesson_of(path) in (None, SEED) or (screen == DESKTOP and path.startswith("lessons/"))


def figures_shown_on(screen):
    """The figures the pages visited on `screen` show, each by its light, wide file name."""
    lessons = LESSONS.values() if screen == DESKTOP else [SEED]
    return {Path(output.path).name for lesson in lessons for output in figure_outputs(lesson)
            if not output.variant.suffix}


# It grows with the course: fetched when the reader opens search (search-on-demand.js).
SEARCH_INDEX = "/search/search_index.json"


def test_what_the_lesson_its_going_further_and_notebook_pages_show(visits):
    """Going-further pages link back; the lesson's formulas take their font, answers open,
    copy copies, search finds a word of its code; its JAX calls fit the box (N3); a touch
    screen's wide code block keeps its tabindex; a dark notebook page takes the theme's
    colours and offers two downloads; each first load fits its budget, search index aside."""
    desktop, phone, dark = visits(*DESKTOP), visits("light", 390), visits("dark", 1280)
    for name in GOING_FURTHER:
        assert desktop[f"going-further/{name}/"]["links to the lesson"] >= 1, name
    shows = desktop[LESSON]
    assert shows["math font loaded"]
    assert shows["sigma"] >= 1.4, f"a display sum drawn {shows['sigma']:.2f} times the text size"
    assert shows["answer closed at first"] and shows["answer opens"]
    # The theme's copy button (content.code.copy) copies its own block and says so.
    assert shows["copy buttons"] == 1 and shows["copied"][0] == shows["copied"][1]
    assert "def " in shows["copied"][0] and shows["code navs as landmarks"] == []
    # The index is fetched once, when the reader opens search; `invarying` (in the code as
    # `to="invarying"`) is a word of its own (N9), marked on the page a result opens.
    assert shows["index fetched before search"] == [] and len(shows["index fetched by search"]) == 1
    for calls in (desktop[LESSON]["jax calls"], phone[LESSON]["jax calls"]):
        assert [text.split("(")[0] for text, _ in calls] == ["psum", "psum_scatter", "all_gather"]
        assert all(inside for _, inside in calls), calls
    assert phone[LESSON]["wide block's tabindex"] == "0"
    notebooks = [path for path in dark if path.startswith("notebooks/")]
    assert notebooks == [f"notebooks/{SEED.id}/"]  # the machinery's, on the seed
    shows = dark[notebooks[0]]
    assert shows["code background"] not in ("rgb(245, 245, 245)", shows["page background"])
    assert shows["ipynb links"] == 2 and shows["ipynb button"] and shows["py button"]
    assert shows["downloads"] == [(f"{SEED.id}.ipynb", None), (SEED.path().name, None)]
    over = {}
    for path, seen in desktop.items():
        sizes = seen["first load"]
        total = sum(sizes.values())
        print(f"/{path} first load: {total:,} bytes in {len(sizes)} requests "
              f"({total / FIRST_LOAD_LIMIT:.2f} of the budget)")
        assert SEARCH_INDEX not in sizes, path
        if total > FIRST_LOAD_LIMIT:
            over[path] = sorted(sizes.items(), key=lambda item: -item[1])
    assert over == {}


FONT_SIZE = re.compile(r"font-size\s*[:=]\s*[\"']?\s*([0-9.]+)([a-z%]*)")


def smallest_text(svg):
    """(the smallest font size of an SVG's text, the width of its viewBox), both in the
    SVG's own units: the text's size on screen is their ratio times the drawn width."""
    view_box = re.search(r'viewBox="([^"]*)"', re.search(r"<svg\b[^>]*>", svg).group(0))
    assert view_box, "a figure without a viewBox does not scale with the page"
    view_width = float(view_box.group(1).split()[2])
    if "<text" not in svg:
        return None, view_width
    sizes = FONT_SIZE.findall(svg)
    assert sizes, "a figure's text has no font size (drawn as paths?): it cannot be checked"
    assert {unit for _, unit in sizes} <= {"", "px"}, "font sizes in user units expected"
    return min(float(size) for size, _ in sizes), view_width


VARIANT = re.compile(r"-(narrow-dark|narrow|dark)\.svg$")


def expected_variant(name, scheme, width):
    """The drawing a reader should see (scripts/figures/variants.py): narrow on a phone,
    dark in the dark palette; a figure drawn in one variant only is always that one."""
    stem = name.removesuffix(".svg")
    if not (ROOT / "figures" / f"{stem}-dark.svg").exists():
        return name
    narrow = width <= 720  # NARROW_MEDIA, (max-width: 45em)
    return f"{stem}{'-narrow' if narrow else ''}{'-dark' if scheme == 'dark' else ''}.svg"


def axe_findings(page, within="document", impacts=("serious", "critical")):
    """axe-core's violations (of these impacts) in `within`, each with its rule (and colour
    pair: on the reference page too, the theme's palette, not ours) and its element."""
    if page.evaluate("typeof axe") == "undefined":  # once per page, however often asked
        page.add_script_tag(path=str(AXE))
    return page.evaluate(in_page("axe_findings"), [within, list(impacts)])


@pytest.fixture(scope="module")
def reference_findings(browser, serve, reference_site):
    """What axe finds on the bare theme, per colour scheme and width: each rule on each
    element, so the same rule broken on one of the site's own elements is still found."""
    origin, findings = serve(reference_site), {}
    for scheme, width in SCREENS:
        page, _ = open_page(browser, f"{origin}/", origin, scheme, width)
        findings[scheme, width] = {(finding["key"], finding["where"])
                                   for finding in axe_findings(page)}
        page.close()
    return findings


@pytest.mark.parametrize("scheme, width", [*SCREENS, *BREAKPOINT])
def test_every_page_on_each_screen_with_its_figures_and_no_accessibility_finding(
        visits, reference_findings, built_site, served, scheme, width):
    """Every page loads whole in the reader's palette, no axe finding beyond the bare theme's
    on that screen; each figure (issue 20.3) the variant for that palette and width, the
    only one fetched, linked to its SVG, its smallest text 9 CSS px or more where drawn."""
    problems, measured, requests, findings = [], {}, [], []
    for path, seen in visits(scheme, width).items():
        assert seen["problems"] == [] and seen["broken"] == [], path
        assert seen["scheme"] == ("slate" if scheme == "dark" else "default"), path
        requests += seen["requests"]
        findings += [f"/{path}: {finding['key']} at {finding['where']}"
                     for finding in seen.get("axe", [])
                     if (finding["key"], finding["where"])
                     not in reference_findings[scheme, width]]
        for figure in seen["figures"]:
            file = built_site / figure["src"].removeprefix(f"{served}/")
            wanted = expected_variant(VARIANT.sub(".svg", file.name), scheme, width)
            if file.name != wanted:
                problems.append(f"/{path}: {file.name} shown, {wanted} expected")
            if not figure["loaded"]:
                problems.append(f"/{path}: {file.name} did not load")
            if not figure["link"] or not figure["link"].endswith(".svg"):
                problems.append(f"/{path}: {file.name} is no link to its SVG")
            font, view_width = smallest_text(file.read_text())
            if font is None:
                continue
            shown = font * figure["drawn"] / view_width  # CSS px
            measured[file.name] = round(min(measured.get(file.name, shown), shown), 2)
            if shown < SMALLEST_READABLE_PX:
                problems.append(f"/{path}: {file.name} text {shown:.1f} px at "
                                f"{figure['drawn']:.0f} px")
    print(f"smallest figure text at {width} px, {scheme}, CSS px:", measured)
    expected = {expected_variant(name, scheme, width) for name in figures_shown_on((scheme, width))}
    fetched = {url.rsplit("/", 1)[-1] for url in requests if "/figures/" in url}
    assert set(measured) == expected
    assert fetched == expected, sorted(fetched ^ expected)
    assert problems == [], "\n".join(problems)
    assert findings == []
    if (scheme, width) in SCREENS and not AXE.exists():
        skip_or_fail(f"{AXE.relative_to(ROOT)} is missing: run `make install`")


def test_a_mistyped_address_gets_the_styled_404_page(browser, served):
    """Under the sub-path, with its stylesheets; the missing page the one failure."""
    url = f"{served}/no/such/page/"
    page, watch = open_page(browser, url, served)
    assert "404" in page.inner_text("article") and page.evaluate("document.styleSheets.length") >= 2
    others = [problem for problem in watch.problems if problem != f"HTTP 404: {url}"]
    assert len(watch.problems) == 2 and len(others) == 1
    assert others[0].startswith("console error: Failed to load resource")
    page.close()


def test_a_figure_follows_the_palette_toggle_and_opens_full_size(browser, served):
    """The toggle swaps the figure for its dark drawing at once (a <picture> media query
    alone could not), print shows the light one, a tap opens the full-size SVG."""
    page, watch = open_page(browser, f"{served}/{LESSON}", served, "light", 390)
    before = load_images(page)
    assert before and all("-narrow.svg" in figure["src"] for figure in before)
    page.locator("label[for='__palette_1']").first.click()  # "Switch to dark mode"
    assert page.evaluate("document.body.dataset.mdColorScheme") == "slate"
    after = load_images(page)
    assert [figure["src"].replace("-narrow-dark.svg", "-narrow.svg") for figure in after] \
        == [figure["src"] for figure in before]
    assert all(figure["loaded"] for figure in after)
    page.emulate_media(media="print")  # on paper the light drawing (lesson.css)
    printed = load_images(page)
    assert printed and not [figure for figure in printed if "-dark" in figure["src"]]
    page.emulate_media(media="screen")
    assert watch.problems == []
    # (An SVG opened on its own asks for /favicon.ico, which the site has not: not counted.)
    with page.expect_navigation() as opened:
        page.locator("article a.figure-link--dark").first.tap()
    assert opened.value.ok and "svg" in opened.value.headers["content-type"]
    assert page.evaluate("document.documentElement.tagName") == "svg"
    assert page.url.endswith("-dark.svg")
    page.close()


@pytest.fixture(scope="module")
def classic_scrollbars(browser):
    """Chromium with scrollbars that take room (15 px), as on Windows and most Linux."""
    instance = browser.browser_type.launch(executable_path=CHROMIUM, ignore_default_args=[
        "--hide-scrollbars"], args=[*QUIET, "--disable-features=OverlayScrollbar"])
    yield instance
    instance.close()


def shown_tab(page, index):
    """Show the index-th tab of every tab set that has one; False once none has."""
    return page.evaluate("""index => [...document.querySelectorAll('.tabbed-set')]
        .map(set => set.querySelectorAll(':scope > input')[index]).filter(Boolean)
        .map(input => (input.checked = true)).length > 0""", index)


def test_no_page_breaks_with_classic_scrollbars_and_each_keeps_its_table_of_contents(
        classic_scrollbars, served, pages):
    """Issues 36.4, 20.4, N7: with scrollbars that take room, every answer open and each tab
    shown, no layout_defects.js finding; N1: at 1600 and 1280 px the table of contents lists
    every section. Each page loads once at 1600 px and narrows to 1280, 390, 320 as a window does
    (a phone's emulation would widen its viewport to fit, hiding what this looks for)."""
    defects, missing = [], {}
    for path in pages:
        page, watch = open_page(classic_scrollbars, f"{served}/{path}", served, width=1600)
        for width in (1600, 1280, 390, 320):
            page.set_viewport_size({"width": width, "height": 900})
            page.evaluate(NEXT_FRAME)
            if width >= 1280:
                toc = page.evaluate(in_page("table_of_contents"))
                if set(toc["sections"]) - set(toc["linked"]):
                    missing[path, width] = sorted(set(toc["sections"]) - set(toc["linked"]))
                if path == LESSON:
                    assert len(toc["sections"]) >= 20
            if width == 1600:
                continue  # the table of contents only
            opened, tab = open_every_details(page), 0
            while True:
                for defect in page.evaluate(in_page("layout_defects"), width >= 1280):
                    if f"/{path} at {width} px: {defect}" not in defects:
                        defects.append(f"/{path} at {width} px: {defect}")
                tab += 1
                if not shown_tab(page, tab):
                    break
            shown_tab(page, 0)
            close_again(opened)
        assert watch.problems == [], path
        page.close()
    assert missing == {}
    assert defects == [], "\n".join(defects)
# --- the site built from hostile recordings (tests/site_hostile.py), in chromium ----------

LIVE_MARKUP = in_page("live_markup")


def test_hostile_pages_stay_inert_in_chromium(browser, hostile_site, serve):
    """On each page showing recorded or notebook text, tabs opened, search run, stepper
    drawn: no payload runs or becomes live markup; each is on the page as text."""
    from site_hostile import CANARY, ID

    origin, problems = serve(hostile_site), []
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.on("dialog", lambda dialog: (problems.append(f"dialog: {dialog.message}"),
                                      dialog.dismiss()))
    page.on("console", lambda m: "XSS" in m.text and problems.append(f"console: {m.text}"))
    page.on("request", lambda r: (r.url.lower().startswith("javascript:")
                                  or re.search(r"/(x|y)(\?|$)", r.url))
            and problems.append(f"request: {r.url}"))
    for path in (f"notebooks/{ID}/", f"lessons/{ID}/"):
        page.goto(f"{origin}/{path}", wait_until="networkidle")
        for label in page.locator(".tabbed-labels label").all():  # every recording's tab
            label.click()
        assert page.evaluate(LIVE_MARKUP) == [], path
        shown = page.inner_text("article")
        assert '<script>console.error("XSS script"); alert("XSS script")</script>' in shown
        assert '--8<-- ".git/config"' in shown and CANARY not in shown
        if path.startswith("notebooks/"):  # its cells and outputs: no element of theirs
            assert page.locator("article iframe, article script").count() == 0
    # Formulas are MathML from the build: nothing typesets the page in the browser.
    assert page.locator("article math").count() > 0
    assert page.evaluate("typeof window.MathJax") == "undefined"
    page.locator("input.md-search__input").click()  # results are built from the index
    page.keyboard.type("onerror")  # Material searches on key presses, not on fill()
    page.wait_for_selector(".md-search-result__item", state="attached", timeout=20000)
    page.wait_for_timeout(500)
    assert "XSS" in page.inner_text(".md-search-result") and page.evaluate(LIVE_MARKUP) == []
    # The ring step-through parses the hostile trace as data and draws its steps.
    page.goto(f"{origin}/going-further/ring-simulator/", wait_until="networkidle")
    assert page.locator(".ring-stepper__rank").count() == 4
    assert page.evaluate("JSON.parse(document.getElementById('ring-trace').textContent)"
                         ".readerNote.includes('</SCRIPT >')")
    # The home page's table of recordings, the stale TPU one among them.
    page.goto(f"{origin}/", wait_until="networkidle")
    assert re.search(r"stale: \d+ inputs? changed", page.inner_text("article"))
    assert page.evaluate(LIVE_MARKUP) == [] and problems == []
    page.close()

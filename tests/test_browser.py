"""The lesson as a reader's browser sees it: Debian's chromium driven by Playwright.

The strictly built site, served on 127.0.0.1, on four screens (light and dark, 1280 and
390 px), each page visited once per screen and read by every check of that screen (the
`visits` fixture): no console error, no request off the site, every image loaded, the
math in its font, a table of contents at desktop widths, figures in the reader's palette
and width with readable text, no page wider than a phone, a first load within its
compressed budget, and no axe-core finding a bare mkdocs-material page does not show as
well. It serves the site a second time under a sub-path, as a GitHub Pages project site
is. Screenshots land in test-artifacts/ for a person to look at.
"""
import functools
import gzip
import http.server
import os
import re
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pytest

from conftest import LESSONS, ROOT, SEED
from site_build import build
from site_pages import site_pages

CHROMIUM = "/usr/bin/chromium"
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
ARTIFACTS = ROOT / "test-artifacts"
# Without these, chromium phones home at start-up; this machine's closed network refuses.
QUIET = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--disable-quic"]
# The seed lesson's page: the checks of its own figures, formulas and first screen, and the
# page the going-further pages (its own) link back to. Every other check reads every page.
LESSON = f"lessons/{SEED.id}/"
GOING_FURTHER = sorted(path.stem for path in (ROOT / "docs" / "going-further").glob("*.md"))
SCREENS = [(scheme, width) for scheme in ("light", "dark") for width in (1280, 390)]
DESKTOP = ("light", 1280)
SUB_PATH = "lesson-site"  # as https://<owner>.github.io/<repository>/
# Every request of a page's first load, as a compressing host sends it (sent_bytes). Chosen
# from a measurement (Chromium here, December 2026): the heaviest first load, the lesson
# page's, was 131 KB (its HTML 30 KB, the theme's CSS and JavaScript 72 KB, the math font
# 15 KB); the budget is that and half again, for the course to grow.
FIRST_LOAD_LIMIT = 200_000
SMALLEST_READABLE_PX = 9  # issue 12: a figure's smallest text at the desktop width


def skip_or_fail(reason, what="browser test"):
    """Skip when a tool is missing here; under CI, where it must be there, fail."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} cannot run under CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def playwright():
    """One Playwright for the module: a second one cannot start while the first runs."""
    if not os.path.exists(CHROMIUM):
        skip_or_fail(f"{CHROMIUM} is missing: apt-get install chromium "
                     f"(make test does, as root)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as running:
        yield running


@pytest.fixture(scope="module")
def browser(playwright):
    instance = playwright.chromium.launch(executable_path=CHROMIUM, args=QUIET)
    yield instance
    instance.close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """A static server like GitHub Pages: a missing path gets the site's 404.html."""

    not_found_page = None

    def log_message(self, *args):
        pass

    def send_error(self, code, message=None, explain=None):
        if code != 404 or self.not_found_page is None:
            return super().send_error(code, message, explain)
        body = self.not_found_page.read_bytes()
        self.send_response(404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def serve():
    servers = []

    def start(directory, not_found_page=None):
        handler = type("Handler", (QuietHandler,), {"not_found_page": not_found_page})
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
    return serve(built_site)


@pytest.fixture(scope="module")
def pages(built_site):
    """Every page of the built site: "", "lessons/<id>/", ..., "404.html"."""
    found = site_pages(built_site)
    assert {"", LESSON, "404.html"} <= set(found)
    assert {f"going-further/{name}/" for name in GOING_FURTHER} <= set(found)
    return found


class PageWatch:
    """Everything a page did that a reader would not want: errors and outside requests."""

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
        page.on("request", lambda r: r.url.startswith(("data:", "blob:"))
                or self.in_flight.add(r))
        page.on("requestfinished", lambda r: self.in_flight.discard(r))
        page.on("requestfailed", lambda r: self.in_flight.discard(r))


def settle(page, watch, url, timeout_s=15):
    """Load `url` and wait until the page has settled: its load event, its fonts laid out
    (two frames after document.fonts.ready), and no request of its left unanswered.
    (Playwright's "networkidle" would wait 500 ms of silence more on every page; a watch
    still sees a later request, since it listens until the page is closed.)"""
    page.goto(url, wait_until="load")
    page.evaluate("""document.fonts.ready.then(() => new Promise(done =>
        requestAnimationFrame(() => requestAnimationFrame(done))))""")
    deadline = time.monotonic() + timeout_s
    while watch.in_flight and time.monotonic() < deadline:
        page.wait_for_timeout(20)  # lets Playwright deliver the pending answers' events


def new_page(browser, scheme="light", width=1280, **options):
    """A page of `browser` as that screen shows it: a phone below 600 px."""
    return browser.new_page(viewport={"width": width, "height": 844 if width < 600 else 900},
                            color_scheme=scheme, is_mobile=width < 600, has_touch=width < 600,
                            **options)


def open_page(browser, url, origin, scheme="light", width=1280):
    page = new_page(browser, scheme, width)
    watch = PageWatch(page, origin)
    settle(page, watch, url)
    return page, watch


def open_every_details(page):
    """Open each collapsed answer or hint, as a reader would; returns them, for
    close_again()."""
    return page.evaluate_handle("""[...document.querySelectorAll('details:not([open])')]
        .map(details => (details.open = true, details))""")


def close_again(opened):
    opened.evaluate("all => all.forEach(details => { details.open = false; })")


def broken_images(page):
    """Scroll every drawn image into view (with every answer open: a figure inside one
    loads when the reader opens it), give it time to arrive, and return those that did
    not load. The other palette's figure is not drawn, so never fetched."""
    closed = open_every_details(page)
    for image in page.locator("img").all():
        if image.is_visible():
            image.scroll_into_view_if_needed()
    drawn = "[...document.images].filter(img => img.getClientRects().length)"
    try:
        page.wait_for_function(f"{drawn}.every(img => img.complete)", timeout=10000)
    except Exception:
        pass  # the assertion names the images that never arrived
    broken = page.evaluate(f"""{drawn}
        .filter(img => !(img.complete && img.naturalWidth > 0)).map(img => img.src)""")
    close_again(closed)
    return broken


# Every check below that reads a page as a screen shows it reads it from one visit of
# that page on that screen, read in an order where no step changes what a later one sees
# (the first load's requests, axe on the page as loaded, the images scrolled in, the
# figures with every answer open, the clicks last).

@dataclass
class Visit:
    """What one page did and showed on one screen."""
    problems: list  # PageWatch's: console errors, failed or outside requests, HTTP errors
    requests: list
    first_load: dict  # what the first load fetched, bytes by path (desktop only)
    scheme: str  # the theme's colour scheme on <body>
    axe: list  # serious and critical findings (None when axe-core is missing)
    broken: list  # images that did not load once scrolled into view
    figures: list = field(default_factory=list)  # FIGURES_ON_SCREEN, every answer opened
    shows: dict = field(default_factory=dict)  # what one page's own checks read off it


# What a compressing host (GitHub Pages) sends: text gzipped, fonts and images as they are.
COMPRESSED = re.compile(r"text/|application/(javascript|json)|image/svg\+xml")


def sent_bytes(response):
    body = response.body()
    if COMPRESSED.match(response.headers.get("content-type", "")):
        return len(gzip.compress(body, compresslevel=6))
    return len(body)


# The page's h2 sections, and those a visible table of contents beside the article links
# to (mkdocs.yml's toc.integrate: the page's sections in the navigation sidebar).
TABLE_OF_CONTENTS = """() => {
    const sidebar = document.querySelector('.md-sidebar--primary');
    const box = sidebar.getBoundingClientRect();
    const shown = box.width > 0 && box.left >= 0 && box.right <= innerWidth
        && sidebar.checkVisibility({visibilityProperty: true});
    return {sections: [...document.querySelectorAll('article h2[id]')].map(h => h.id),
            linked: shown ? [...sidebar.querySelectorAll('nav.md-nav--secondary a')]
                .filter(a => a.checkVisibility({visibilityProperty: true}))
                .map(a => a.hash.slice(1)) : []};
}"""

# The first screen's box: where each JAX call ends, against the right edge of the table's
# box as it scrolls (not at all, yet): a phone must show the call without a scroll.
JAX_CALLS = """() => {
    const box = document.querySelector('.takeaway .table-scroll');
    const right = box.getBoundingClientRect().right;
    return [...box.querySelectorAll('tbody td:nth-child(2) code')]
        .map(code => [code.textContent, code.getBoundingClientRect().right <= right + 1]);
}"""


def read_the_lesson_page(page):
    """The seed lesson's page: its math font, a display sum's size, an answer opened."""
    page.evaluate("document.fonts.ready.then(() => true)")
    shows = {"math font loaded": page.evaluate("""[...document.fonts].some(face =>
        face.family.includes('Lesson Math') && face.status === 'loaded')""")}
    # In the site's math font a display Σ is drawn at display size (15 px tall at 16 px
    # text in the `math` family's fallback glyphs, 25 px in a font with a MATH table).
    shows["sigma"] = page.evaluate("""(() => { const sum = [...document.querySelectorAll(
        '.math-display mo')].find(mo => mo.textContent === '\u2211');
        return sum.getBoundingClientRect().height
        / parseFloat(getComputedStyle(sum).fontSize); })()""")
    answer = page.locator("details", has_text="Answer").first
    shows["answer closed at first"] = answer.get_attribute("open") is None
    answer.locator("summary").click()
    page.wait_for_function("el => el.open", arg=answer.element_handle())
    shows["answer opens"] = answer.get_attribute("open") is not None
    return shows


def read_a_notebook_page(page):
    """A notebook page in the dark palette: its code takes the theme's colours."""
    code = page.locator(".highlight pre > code").first
    page.screenshot(path=str(ARTIFACTS / f"notebook-{page.url.rstrip('/').rsplit('/', 1)[1]}"
                             f".png"))
    return {"code background": code.evaluate("el => getComputedStyle(el).backgroundColor"),
            "page background": page.evaluate("getComputedStyle(document.body).backgroundColor"),
            "ipynb links": page.locator("a[download][href$='.ipynb']").count(),
            "ipynb button": page.locator("a.md-button[download][href$='.ipynb']").is_visible(),
            "py button": page.locator("a.md-button[download][href$='.py']").is_visible()}


def visit(browser, origin, path, scheme, width):
    page = new_page(browser, scheme, width)
    watch = PageWatch(page, origin)
    responses = []
    page.on("response", lambda response: responses.append(response))
    if (scheme, width) == DESKTOP:
        # The budget counts all the first load fetched: wait for 500 ms of silence.
        page.goto(f"{origin}/{path}", wait_until="networkidle")
    else:
        settle(page, watch, f"{origin}/{path}")
    seen = Visit(problems=watch.problems, requests=watch.requests,
                 first_load={response.url.removeprefix(origin): sent_bytes(response)
                             for response in responses} if (scheme, width) == DESKTOP else {},
                 scheme=page.evaluate("document.body.dataset.mdColorScheme"),
                 axe=axe_findings(page) if AXE.exists() else None, broken=broken_images(page))
    opened = open_every_details(page)  # a hint's figure is narrower
    seen.figures = page.evaluate(FIGURES_ON_SCREEN)
    close_again(opened)
    seen.shows["links to the lesson"] = page.locator(f"a[href*='{LESSON}']").count()
    seen.shows["table of contents"] = page.evaluate(TABLE_OF_CONTENTS)
    if path == LESSON:
        seen.shows["jax calls"] = page.evaluate(JAX_CALLS)
        page.screenshot(path=str(ARTIFACTS / f"lesson-{scheme}-{width}.png"))
    if path == LESSON and (scheme, width) == DESKTOP:
        seen.shows.update(read_the_lesson_page(page))
    if path.startswith("notebooks/") and (scheme, width) == ("dark", 1280):
        seen.shows.update(read_a_notebook_page(page))
    page.close()
    return seen


@pytest.fixture(scope="module")
def visits(browser, served, pages):
    """visits(scheme, width) -> {page: Visit}, every page of the site on that screen,
    visited the first time a test asks for that screen."""
    ARTIFACTS.mkdir(exist_ok=True)
    screens = {}

    def on(scheme, width):
        if (scheme, width) not in screens:
            screens[scheme, width] = {path: visit(browser, served, path, scheme, width)
                                      for path in pages}
        return screens[scheme, width]

    return on


def test_the_lesson_and_its_going_further_pages_in_a_browser(visits):
    """Each loads whole, and each going-further page links back to the lesson it deepens;
    the lesson's formulas are in their font, its answers open."""
    for name in GOING_FURTHER:
        seen = visits(*DESKTOP)[f"going-further/{name}/"]
        assert seen.broken == [] and seen.problems == [], name
        assert seen.shows["links to the lesson"] >= 1, name
    seen = visits(*DESKTOP)[LESSON]
    shows = seen.shows
    assert seen.broken == [] and seen.problems == []
    assert shows["math font loaded"]
    assert shows["sigma"] >= 1.4, f"a display sum drawn {shows['sigma']:.2f} times the text size"
    assert shows["answer closed at first"] and shows["answer opens"]


@pytest.mark.parametrize("width", [1280, 1600])
def test_every_page_has_its_table_of_contents_at_desktop_widths(browser, served, pages,
                                                               visits, width):
    """N1: a wide table scrolls in its own box; the table of contents stays, on the lesson
    (28 sections), processes and sweep pages as on every other, at 1280 and 1600 px."""
    missing = {}
    for path in pages:
        if width == 1280:
            toc = visits(*DESKTOP)[path].shows["table of contents"]
        else:
            page, watch = open_page(browser, f"{served}/{path}", served, width=width)
            toc = page.evaluate(TABLE_OF_CONTENTS)
            assert watch.problems == [], path
            page.close()
        if set(toc["sections"]) - set(toc["linked"]):
            missing[path] = sorted(set(toc["sections"]) - set(toc["linked"]))
    assert missing == {}
    assert len(visits(*DESKTOP)[LESSON].shows["table of contents"]["sections"]) >= 20


@pytest.mark.parametrize("scheme, width", [("light", 390), DESKTOP])
def test_the_first_screen_shows_each_jax_call_without_a_scroll(visits, scheme, width):
    """N3: on a phone the box's JAX calls sit beside their collective, inside the screen."""
    calls = visits(scheme, width)[LESSON].shows["jax calls"]
    assert [text.split("(")[0] for text, _ in calls] == ["psum", "psum_scatter", "all_gather"]
    assert all(inside for _, inside in calls), calls


# The theme names each code block's <pre> "__code_..." as it sets the block up.
SET_UP_BY_THE_THEME = "code => code.parentElement.id.startsWith('__code_')"


def test_a_code_blocks_copy_button_copies_that_block(browser, served):
    """The theme's copy button (mkdocs.yml's content.code.copy) copies its own block and
    says so; a theme upgrade that breaks it fails here, not in a reader's hands."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=served)
    page = context.new_page()
    watch = PageWatch(page, served)
    settle(page, watch, f"{served}/{LESSON}")
    block = page.locator("article pre > code").nth(1)
    block.scroll_into_view_if_needed()  # content.lazy: the theme sets up a block in view
    page.wait_for_function(SET_UP_BY_THE_THEME, arg=block.element_handle())
    button = block.locator("xpath=..").locator("button[data-md-type='copy']")
    assert button.count() == 1
    button.click()
    page.locator(".md-dialog--active", has_text="Copied to clipboard").wait_for()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == block.inner_text().rstrip() and "def " in copied
    assert watch.problems == []
    context.close()


def test_a_wide_code_block_keeps_its_keyboard_focus_on_a_touch_screen(browser, served):
    """On a screen without hover the theme takes a code block's tabindex away as it sets
    the block up; docs/assets/keyboard-scroll.js gives it back to the blocks the build
    marked as wider than a phone (pages/layout.py), the only ones that scroll."""
    page, watch = open_page(browser, f"{served}/{LESSON}", served, width=390)
    wide = page.locator("article pre > code[data-wide]:not(details:not([open]) code)").last
    wide.scroll_into_view_if_needed()
    page.wait_for_function(SET_UP_BY_THE_THEME, arg=wide.element_handle())
    page.evaluate("new Promise(done => requestAnimationFrame(() => setTimeout(done)))")
    assert wide.get_attribute("tabindex") == "0"
    assert watch.problems == []
    page.close()


# The site-wide search index grows with the course, not with the page: it is fetched when
# the reader first opens search (docs/overrides/partials/search-on-demand.js), so a first
# load carries the page alone, and the budget counts every byte of it.
SEARCH_INDEX = "/search/search_index.json"


@pytest.mark.parametrize("path", ["", *(f"{kind}/{lesson}/" for lesson in LESSONS
                                        for kind in ("lessons", "notebooks")),
                                  *(f"going-further/{name}/" for name in GOING_FURTHER)])
def test_first_load_is_within_its_compressed_budget(visits, path):
    """Everything the first load of a page requests at a desktop size: the page, the
    theme's CSS and JavaScript, the search worker, the math font where a formula is shown,
    and the figures near enough to the screen to be fetched; lazy figures further down,
    and the search index, wait."""
    sizes = visits(*DESKTOP)[path].first_load
    total = sum(sizes.values())
    print(f"/{path} first load: {total:,} bytes in {len(sizes)} requests "
          f"({total / FIRST_LOAD_LIMIT:.2f} of the budget)")
    assert SEARCH_INDEX not in sizes  # waits for the reader to search
    assert total <= FIRST_LOAD_LIMIT, sorted(sizes.items(), key=lambda item: -item[1])


def test_search_fetches_the_index_when_opened_and_finds_and_marks_a_word_of_the_code(
        browser, served):
    """The held request is sent, once, when the reader opens search; then the theme's
    search answers as before: `invarying`, written in the code as `to="invarying"`, is a
    word of its own (mkdocs.yml's separator, N9), and the page a result opens marks it
    (search.highlight, for which search-on-demand.js fetches the index at once)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    watch = PageWatch(page, served)
    page.goto(f"{served}/{LESSON}", wait_until="networkidle")
    fetched = []
    page.on("request", lambda request: fetched.append(request.url)
            if request.url.endswith(SEARCH_INDEX) else None)
    page.wait_for_timeout(300)  # after 500 ms of silence and 300 more, still held
    assert fetched == []
    page.keyboard.press("/")  # the theme's shortcut: opens search, focuses its box
    page.keyboard.type("invarying")
    results = page.locator(".md-search-result__item a")
    results.first.wait_for(timeout=15000)
    assert len(fetched) == 1
    hrefs = results.evaluate_all("links => links.map(link => link.href)")
    with page.expect_navigation():
        results.nth([f"/{LESSON}?h=invarying" in href for href in hrefs].index(True)).click()
    page.locator("article mark", has_text="invarying").first.wait_for(timeout=10000)
    assert watch.problems == []
    page.close()


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


# Every figure image of the article: the file it shows (a <picture> picks its source), how
# wide it is drawn (0 when hidden: the other palette's), and the link around it.
FIGURES_ON_SCREEN = """() => [...document.querySelectorAll('article img[src$=".svg"]')]
    .map(img => ({src: img.currentSrc || img.src, drawn: img.getBoundingClientRect().width,
    link: img.closest('a') ? img.closest('a').href : null,
    loaded: img.complete && img.naturalWidth > 0}))"""
VARIANT = re.compile(r"-(narrow-dark|narrow|dark)\.svg$")


def expected_variant(name, scheme, width):
    """The drawing a reader should see (scripts/figures/variants.py): narrow on a phone,
    dark in the dark palette; a figure drawn in one variant only is always that one."""
    stem = name.removesuffix(".svg")
    if not (ROOT / "figures" / f"{stem}-dark.svg").exists():
        return name
    narrow = width <= 720  # NARROW_MEDIA, (max-width: 45em)
    return f"{stem}{'-narrow' if narrow else ''}{'-dark' if scheme == 'dark' else ''}.svg"


def shown_figures(page):
    """Scroll to each shown figure and wait until it has arrived; returns them all."""
    for image in page.locator("article img[src$='.svg']").all():
        if image.is_visible():
            image.scroll_into_view_if_needed()
    try:
        page.wait_for_function("""[...document.querySelectorAll('article img[src$=".svg"]')]
            .every(img => !img.getBoundingClientRect().width || img.complete)""", timeout=10000)
    except Exception:
        pass  # the assertions name what never arrived
    return [figure for figure in page.evaluate(FIGURES_ON_SCREEN) if figure["drawn"]]


def figure_problems(path, figures, built_site, scheme, width, measured):
    """What is wrong with the figures a page showed on one screen: each must be the
    drawing made for that palette and width, loaded, a link to its SVG, with its smallest
    text at 9 CSS px or more where it is drawn; `measured` gathers that smallest text."""
    problems = []
    for figure in (found for found in figures if found["drawn"]):  # 0: the other palette's
        file = built_site / urlsplit(figure["src"]).path.lstrip("/")
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
    return problems


def assert_each_drawing_shown_alone(problems, measured, requests, scheme, width):
    """Every drawing of this palette and width is seen somewhere, no other is fetched."""
    print(f"smallest figure text at {width} px, {scheme}, CSS px:", measured)
    expected = {expected_variant(path.name, scheme, width)
                for path in (ROOT / "figures").glob("*.svg") if not VARIANT.search(path.name)}
    fetched = {url.rsplit("/", 1)[-1] for url in requests if "/figures/" in url}
    assert set(measured) == expected
    assert fetched == expected, sorted(fetched ^ expected)
    assert problems == [], "\n".join(problems)


# The four screens, and both sides of the narrow drawing's breakpoint: up to 720 px it is
# shown; 721 px is the narrowest content column that shows the wide drawing.
@pytest.mark.parametrize("scheme, width", [*SCREENS, ("light", 720), ("dark", 721)])
def test_each_figure_shown_is_its_palettes_and_widths_drawing_with_9_px_text(
        visits, built_site, scheme, width):
    """Issue 20, item 3: the figure a reader sees is the drawing made for that palette and
    width, it loaded, only it was fetched of its variants, it links to its full-size SVG,
    and its smallest text renders at 9 CSS px or more (inside collapsed answers too)."""
    problems, measured, requests = [], {}, []
    for path, seen in visits(scheme, width).items():
        problems += figure_problems(path, seen.figures, built_site, scheme, width, measured)
        requests += seen.requests
        assert seen.problems == [], path
    assert_each_drawing_shown_alone(problems, measured, requests, scheme, width)


def test_without_scripts_a_reader_sees_the_static_figure(browser, served):
    """With JavaScript off the theme cannot switch palettes: the page stays light and each
    figure is the static light drawing, the file the page names."""
    context = browser.new_context(java_script_enabled=False, color_scheme="dark",
                                  viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(f"{served}/{LESSON}")  # its load event; shown_figures() waits for each figure
    shown = shown_figures(page)
    assert shown and all(figure["loaded"] for figure in shown)
    assert [VARIANT.sub(".svg", figure["src"]) for figure in shown] == \
        [figure["src"] for figure in shown]
    context.close()


def test_a_figure_follows_the_palette_toggle_and_opens_full_size(browser, served):
    """The palette is the reader's choice, not only the system's: the toggle swaps the
    figure for its dark drawing at once (a <picture> media query alone could not), print
    shows the light one, and a tap on a phone opens the figure's full-size SVG."""
    page, watch = open_page(browser, f"{served}/{LESSON}", served, "light", 390)
    before = shown_figures(page)
    assert before and all("-narrow.svg" in figure["src"] for figure in before)
    page.locator("label[for='__palette_1']").first.click()  # "Switch to dark mode"
    assert page.evaluate("document.body.dataset.mdColorScheme") == "slate"
    after = shown_figures(page)
    assert [figure["src"].replace("-narrow-dark.svg", "-narrow.svg") for figure in after] \
        == [figure["src"] for figure in before]
    assert all(figure["loaded"] for figure in after)
    page.emulate_media(media="print")  # on paper the light drawing (lesson.css)
    printed = shown_figures(page)
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


def test_dark_palette_and_notebook_page(visits):
    dark = visits("dark", 1280)
    assert dark[LESSON].scheme == "slate"
    notebooks = [path for path in dark if path.startswith("notebooks/")]
    assert notebooks == sorted(f"notebooks/{lesson}/" for lesson in LESSONS)
    for path in notebooks:
        shows = dark[path].shows
        # Its code is the theme's code block, so it takes the theme's colours in dark mode.
        assert shows["code background"] not in ("rgb(245, 245, 245)",
                                                 shows["page background"])
        # The theme's icon, and a visible button under the title; the program beside it.
        assert shows["ipynb links"] == 2 and shows["ipynb button"] and shows["py button"]
        assert dark[path].problems == [], path


def axe_findings(page, within="document", impacts=("serious", "critical")):
    """axe-core's violations (of these impacts) in `within`, one signature per failing
    element kind: a contrast finding keyed by its colour pair, which on the reference page
    too means the theme's palette, not ours."""
    if page.evaluate("typeof axe") == "undefined":  # once per page, however often asked
        page.add_script_tag(path=str(AXE))
    return page.evaluate("""async ([within, impacts]) => {
        const result = await axe.run(within === 'document' ? document : within,
                                     {resultTypes: ['violations']});
        return result.violations.filter(v => impacts.includes(v.impact))
            .flatMap(v => v.nodes.map(node => {
                const data = (node.any[0] || node.all[0] || {}).data || {};
                const colours = data.fgColor ? ` ${data.fgColor} on ${data.bgColor}` : '';
                return {key: v.id + colours, where: node.target.join(' ')};
            }));
    }""", [within, list(impacts)])


@pytest.fixture(scope="module")
def reference_findings(browser, serve, reference_site):
    """What axe finds on the bare theme, per colour scheme and width."""
    origin = serve(reference_site)
    findings = {}
    for scheme, width in SCREENS:
        page, _ = open_page(browser, f"{origin}/", origin, scheme, width)
        findings[scheme, width] = {finding["key"] for finding in axe_findings(page)}
        page.close()
    return findings


@pytest.mark.parametrize("scheme, width", SCREENS)
def test_no_accessibility_finding_beyond_the_theme(visits, reference_findings, scheme, width):
    if not AXE.exists():
        skip_or_fail(f"{AXE.relative_to(ROOT)} is missing: run `make install`")
    ours = []
    for path, seen in visits(scheme, width).items():
        assert seen.scheme == ("slate" if scheme == "dark" else "default"), path
        ours += [f"/{path}: {finding['key']} at {finding['where']}" for finding in seen.axe
                 if finding["key"] not in reference_findings[scheme, width]]
        assert seen.problems == [], path
    assert ours == []


def test_the_site_works_under_a_sub_path(browser, serve, pages, tmp_path):
    """Published as a project site, every page lives under /<repository>/."""
    root = tmp_path / "pages"
    site = root / SUB_PATH
    run = build(ROOT, site, {"SITE_URL": f"http://127.0.0.1/{SUB_PATH}/"})
    assert run.returncode == 0, run.stderr[-3000:]
    origin = serve(root, not_found_page=site / "404.html")
    for path in pages:
        if path == "404.html":
            continue  # reached below, the way a reader reaches it: a mistyped address
        page, watch = open_page(browser, f"{origin}/{SUB_PATH}/{path}", origin)
        assert broken_images(page) == []
        if path.startswith("notebooks"):
            # notebooks/<lesson id>/ offers that lesson's notebook and its program.
            lesson = LESSONS[path.split("/")[1]]
            for button, name in (("a.md-button[href$='.ipynb']", f"{lesson.id}.ipynb"),
                                 ("a.md-button[href$='.py']", lesson.path().name)):
                with page.expect_download() as download:
                    page.locator(button).click()
                assert download.value.suggested_filename == name
                assert download.value.failure() is None
        assert watch.problems == [], path
        page.close()
    # A mistyped address gets the 404 page, styled: its own stylesheets load. The one
    # expected failure is the missing page itself (its status and the console's note).
    page, watch = open_page(browser, f"{origin}/{SUB_PATH}/no/such/page/", origin)
    assert "404" in page.inner_text("article")
    assert page.evaluate("document.styleSheets.length") >= 2
    missing = f"HTTP 404: {origin}/{SUB_PATH}/no/such/page/"
    assert missing in watch.problems and len(watch.problems) == 2
    assert [problem for problem in watch.problems if problem != missing
            and not problem.startswith("console error: Failed to load resource")] == []
    page.close()


@pytest.fixture(scope="module")
def classic_scrollbars(playwright):
    """Chromium as Windows and most Linux desktops draw it: scrollbars take room (15 px).
    Playwright passes --hide-scrollbars by default, which hides every stray scrollbar, and
    Chromium on Linux may draw overlay scrollbars, which take none."""
    instance = playwright.chromium.launch(
        executable_path=CHROMIUM, args=[*QUIET, "--disable-features=OverlayScrollbar"],
        ignore_default_args=["--hide-scrollbars"])
    yield instance
    instance.close()


# Layout a reader trips over, measured on the page as drawn. Every table box that scrolls
# must hold a table wider than the box (nothing else makes it scroll); at a desktop width
# no table may scroll at all (its last columns would be hidden); a code block that scrolls
# must be one the build made focusable (pages/layout.py); a row with text in its first
# cell only, or a cell of more than 30 words, is prose that Markdown read as a table.
LAYOUT_DEFECTS = """(desktop) => {
    const defects = [];
    const name = box => box.getAttribute('aria-label') || box.textContent.slice(0, 40);
    for (const box of document.querySelectorAll('.table-scroll')) {
        const table = box.querySelector('table');
        const needed = Math.ceil(table.getBoundingClientRect().width);
        if (box.scrollWidth > Math.max(box.clientWidth, needed) + 1)
            defects.push(`table box wider than its table: ${name(box)} `
                         + `(${box.scrollWidth} px for a ${needed} px table)`);
        if (desktop && box.scrollWidth > box.clientWidth + 1)
            defects.push(`table hides columns at ${innerWidth} px: ${name(box)} `
                         + `(${box.scrollWidth - box.clientWidth} px)`);
        for (const row of table.querySelectorAll('tbody tr')) {
            const cells = [...row.cells].map(cell => cell.innerText.trim());
            if (cells.length > 1 && cells[0] && cells.slice(1).every(text => !text))
                defects.push(`prose read as a table row: "${cells[0].slice(0, 60)}"`);
            for (const text of cells)
                if (text.split(/\\s+/).length > 30)
                    defects.push(`prose in a table cell: "${text.slice(0, 60)}"`);
        }
    }
    for (const row of document.querySelectorAll('.math-display'))  // its parts wrap
        if (row.scrollWidth > row.clientWidth + 1)
            defects.push(`display formula wider than its row: ${name(row)}`);
    for (const code of document.querySelectorAll('pre > code'))
        if (code.scrollWidth > code.clientWidth + 1 && !code.hasAttribute('data-wide'))
            defects.push(`code block scrolls but the build did not make it focusable: `
                         + `${code.id} "${code.textContent.slice(0, 40)}"`);
    return defects;
}"""

# What breaks a page for a reader, whatever the page: the document scrolls sideways; a
# box of the article (a formula, a table, a code block, a tab bar) shows a vertical
# scrollbar; or an element taken out of the flow (position: absolute) inside a box that
# scrolls has its containing block outside that box, so it widens the page instead.
PAGE_BREAKS = """() => {
    const defects = [], root = document.documentElement;
    if (root.scrollWidth > root.clientWidth)
        defects.push(`the page scrolls sideways by ${root.scrollWidth - root.clientWidth} px`);
    const name = element => element.tagName.toLowerCase()
        + [...element.classList].map(kind => `.${kind}`).join('') + ' "'
        + (element.getAttribute('aria-label') || element.textContent)
            .replace(/\\s+/g, ' ').trim().slice(0, 40) + '"';
    const scrolling = element => {
        const style = getComputedStyle(element);
        return (['auto', 'scroll'].includes(style.overflowX)
                && element.scrollWidth > element.clientWidth)
            || (['auto', 'scroll'].includes(style.overflowY)
                && element.scrollHeight > element.clientHeight);
    };
    const article = document.querySelector('article');
    for (const element of article.querySelectorAll('*')) {
        if (!element.getClientRects().length) continue;  // not drawn
        const style = getComputedStyle(element);
        if (['auto', 'scroll'].includes(style.overflowY)
                && element.scrollHeight > element.clientHeight)
            defects.push(`${name(element)} scrolls vertically by `
                         + `${element.scrollHeight - element.clientHeight} px`);
        if (style.position !== 'absolute' && style.position !== 'fixed') continue;
        for (let box = element.parentElement; box !== article; box = box.parentElement)
            if (scrolling(box) && (style.position === 'fixed' || !element.offsetParent
                                   || !box.contains(element.offsetParent)))
                defects.push(`${name(element)} leaves its scroll box ${name(box)}`);
    }
    return defects;
}"""


def shown_tab(page, index):
    """Show the index-th tab of every tab set that has one; False once none has."""
    return page.evaluate("""index => [...document.querySelectorAll('.tabbed-set')]
        .map(set => set.querySelectorAll(':scope > input')[index]).filter(Boolean)
        .map(input => (input.checked = true)).length > 0""", index)


@pytest.mark.browser
@pytest.mark.parametrize("scheme, width", [*SCREENS, ("light", 320)])
def test_no_page_breaks_with_classic_scrollbars(classic_scrollbars, served, pages, scheme,
                                                width):
    """Issue 36, item 4, issue 20, item 4, and N7: on every page, with scrollbars that take
    room, every answer opened and each tab shown in turn, the page never scrolls
    sideways (at 320 px neither), no formula, table, code or tab box scrolls vertically,
    no element leaves its scroll box, no table or code block shows a scrollbar it does not
    need, no table hides a column at 1280 px, and no paragraph became table rows."""
    defects = []
    for path in pages:
        # A desktop browser at a phone's width: a phone's emulation widens its layout
        # viewport to fit a page too wide, which would hide exactly what this looks for.
        page = classic_scrollbars.new_page(viewport={"width": width, "height": 900},
                                           color_scheme=scheme)
        watch = PageWatch(page, served)
        settle(page, watch, f"{served}/{path}")
        opened = open_every_details(page)
        tab = 0
        while True:
            for defect in page.evaluate(PAGE_BREAKS) + page.evaluate(LAYOUT_DEFECTS,
                                                                     width >= 1280):
                if f"/{path} at {width} px, {scheme}: {defect}" not in defects:
                    defects.append(f"/{path} at {width} px, {scheme}: {defect}")
            tab += 1
            if not shown_tab(page, tab):
                break
        close_again(opened)
        assert watch.problems == [], path
        page.close()
    assert defects == [], "\n".join(defects)


# --- the site built from hostile recordings (tests/site_hostile.py), in chromium ----------

LIVE_MARKUP = """() => [...document.querySelectorAll('*')].flatMap(el => [...el.attributes]
    .filter(a => /^\\s*javascript:/i.test(a.value)
                 || (a.name.startsWith('on') && /XSS/.test(a.value)))
    .map(a => `${el.tagName} ${a.name}=${a.value}`))"""


def test_hostile_pages_stay_inert_in_chromium(browser, hostile_site, serve):
    """Every page that shows recorded or notebook text, its tabs opened, its search run
    and its step-through drawn: no payload runs (no dialog, no console line, no request)
    and none becomes live markup; the payloads are on the page as text."""
    from site_hostile import CANARY, ID, MODULE

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
    assert "XSS" in page.inner_text(".md-search-result")
    assert page.evaluate(LIVE_MARKUP) == []
    # The ring step-through parses the hostile trace as data and draws its steps.
    page.goto(f"{origin}/going-further/ring-simulator/", wait_until="networkidle")
    assert page.locator(".ring-stepper__rank").count() == 4
    assert page.evaluate("JSON.parse(document.getElementById('ring-trace').textContent)"
                         ".readerNote.includes('</SCRIPT >')")
    # The home page's table of recordings, the stale TPU one among them.
    page.goto(f"{origin}/", wait_until="networkidle")
    assert "stale: " in page.inner_text("article") and MODULE in page.inner_text("article")
    assert page.evaluate(LIVE_MARKUP) == [] and problems == []
    page.close()

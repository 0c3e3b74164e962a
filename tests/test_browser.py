"""The lesson as a reader's browser sees it: Debian's chromium driven by Playwright.

Serves the strictly built site on 127.0.0.1 and fails on any console error, any request
that leaves 127.0.0.1, an image that did not load, math left untypeset, or a collapsed
answer that does not open. Screenshots land in test-artifacts/ for a person to look at.
"""
import functools
import http.server
import os
import threading

import pytest

from conftest import ROOT

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = ROOT / "test-artifacts"
# Without these, chromium phones home at start-up; this machine's closed network refuses.
QUIET = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--disable-quic"]


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        reason = f"{CHROMIUM} is missing: apt-get install chromium (make test does, as root)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"browser test cannot run under CI: {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=QUIET)
        yield instance
        instance.close()


@pytest.fixture(scope="module")
def served(built_site):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler,
                                directory=str(built_site))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


class PageWatch:
    """Everything a page did that a reader would not want: errors and outside requests."""

    def __init__(self, page, origin):
        self.problems = []
        page.on("console", lambda m: m.type == "error" and self.problems.append(
            f"console error: {m.text}"))
        page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        page.on("requestfailed", lambda r: self.problems.append(f"failed: {r.url}"))
        page.on("request", lambda r: r.url.startswith((origin, "data:", "blob:"))
                or self.problems.append(f"left the site: {r.url}"))
        page.on("response", lambda r: r.status >= 400 and self.problems.append(
            f"HTTP {r.status}: {r.url}"))


def open_page(browser, url, origin, scheme="light", math=True):
    page = browser.new_page(viewport={"width": 1280, "height": 900}, color_scheme=scheme)
    watch = PageWatch(page, origin)
    page.goto(url, wait_until="networkidle")
    if math:
        page.wait_for_function("document.querySelectorAll('mjx-container').length > 0",
                               timeout=20000)
    return page, watch


def assert_images_loaded(page):
    broken = page.evaluate("""[...document.images]
        .filter(img => !(img.complete && img.naturalWidth > 0)).map(img => img.src)""")
    assert broken == []


def test_lesson_page_in_a_browser(browser, served):
    page, watch = open_page(browser, f"{served}/lessons/distributed-03/", served)
    assert page.locator("img[src$='.svg']").count() >= 2  # mechanism, storage and payload
    page.locator("img").last.scroll_into_view_if_needed()
    page.wait_for_load_state("networkidle")
    assert_images_loaded(page)
    # Every math span was typeset: none is left as raw \( ... \) text.
    raw = page.evaluate("""[...document.querySelectorAll('.arithmatex')]
        .filter(el => !el.querySelector('mjx-container')).length""")
    assert raw == 0
    answer = page.locator("details", has_text="Answer").first
    assert answer.get_attribute("open") is None
    answer.locator("summary").click()
    page.wait_for_function("el => el.open", arg=answer.element_handle())
    assert answer.get_attribute("open") is not None
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "lesson.png"), full_page=True)
    assert watch.problems == []
    page.close()


@pytest.mark.parametrize("name", ["ring-simulator", "processes", "sweep", "tpu"])
def test_each_going_further_page_loads(browser, served, name):
    page, watch = open_page(browser, f"{served}/going-further/{name}/", served, math=False)
    page.wait_for_load_state("networkidle")
    assert_images_loaded(page)
    # Each deepens a point of the lesson and links back to it.
    assert page.locator("a[href*='lessons/distributed-03/']").count() >= 1
    assert watch.problems == []
    page.close()


def test_dark_palette_and_notebook_page(browser, served):
    page, watch = open_page(browser, f"{served}/lessons/distributed-03/", served, "dark")
    scheme = page.evaluate("document.body.getAttribute('data-md-color-scheme')")
    assert scheme == "slate"
    page.screenshot(path=str(ARTIFACTS / "lesson-dark.png"))
    page.close()
    notebook, notebook_watch = open_page(browser, f"{served}/notebooks/distributed-03/",
                                         served, math=False)
    # The bundled MathJax, not a CDN copy, is what the notebook page loaded.
    assert notebook.evaluate("typeof window.MathJax") == "object"
    assert "PASS: distributed-03" in notebook.content()
    assert notebook.locator("a[download][href$='.ipynb']").count() == 1
    notebook.screenshot(path=str(ARTIFACTS / "notebook.png"))
    assert watch.problems == [] and notebook_watch.problems == []
    notebook.close()

"""Under every figure of every built page: its data (CSV, JSON) and where it was recorded.

Read from the built site's HTML (no browser): each figure a page shows is followed by
its line (scripts/pages/figure_data.py); the line's links reach the committed CSV and
JSON, served byte for byte (tests/test_figures.py holds them to the renderer's rows); and
the line says what that recording's header holds.
"""
import html
import json
import posixpath
import re
from html.parser import HTMLParser

import pytest

from conftest import LESSONS, ROOT
from scripts.figures.variants import BY_SUFFIX
from scripts.store.outputs import figure_data_outputs
from scripts.pages.recorded_text import human_date
from site_pages import page_file, site_pages

DATA = {output.figure: {o.path.rsplit(".", 1)[1]: o for o in figure_data_outputs(lesson)
                        if o.figure == output.figure}
        for lesson in LESSONS.values() for output in figure_data_outputs(lesson)}


class FiguresAndLines(HTMLParser):
    """In page order: each figure's static drawing (the light link's image) and each data
    line: its text, and each of its links by the link's text."""

    def __init__(self):
        super().__init__()
        self.figures, self.lines, self.line, self.link = [], [], None, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        source = attrs.get("src") or ""
        if tag == "img" and source.endswith(".svg") and not any(
                source.endswith(f"{suffix}.svg") for suffix in BY_SUFFIX if suffix):
            self.figures.append(source)
        elif tag == "span" and "figure-data" in (attrs.get("class") or "").split():
            self.line = {"links": {}, "text": ""}
            self.lines.append(self.line)
        elif tag == "a" and self.line is not None:
            self.link = [attrs["href"], ""]

    def handle_endtag(self, tag):
        if tag == "a" and self.link:
            href, text = self.link
            self.line["links"][text] = href
            self.link = None
        elif tag == "span":  # the line holds no span of its own
            self.line = None

    def handle_data(self, data):
        if self.line is not None:
            self.line["text"] += data
        if self.link:
            self.link[1] += data


def page_url(page):
    return "" if page == "404.html" else page


def site_path(page, href):
    """The site file a page's relative link names."""
    return posixpath.normpath(posixpath.join(page_url(page), href))


@pytest.fixture(scope="module")
def shown(built_site):
    """[(page, figure path below the root, its line)] for every figure of every page."""
    found = []
    for page in site_pages(built_site):
        parser = FiguresAndLines()
        parser.feed(page_file(built_site, page).read_text())
        figures = [site_path(page, src) for src in parser.figures]
        assert len(parser.lines) == len(figures), (page, figures, parser.lines)
        found += [(page, figure, line) for figure, line in zip(figures, parser.lines)]
    assert {figure for _, figure, _ in found} == set(DATA)  # every figure is on a page
    return found


def test_every_figure_s_line_links_its_csv_and_json_and_both_answer(built_site, shown):
    for page, figure, line in shown:
        outputs = DATA[figure]
        for name, ending in (("CSV", "csv"), ("JSON", "json")):
            target = site_path(page, line["links"][name])
            assert target == outputs[ending].path, (page, line)
            assert (built_site / target).read_bytes() == (ROOT / target).read_bytes()


def header_words(recording):
    """What the line must say of a recording, read from its header here, independently of
    the build: platform, devices or processes (a sweep's per row), day, JAX, and the commit
    it was recorded at (or, recorded outside a git checkout, its code digest)."""
    env = recording["environment"]
    processes = env.get("processCount", 1)
    if processes > 1:
        count = f"{processes} processes"
    elif "deviceCount" in env:
        count = f"{env['deviceCount']} devices"
    else:
        ranks = sorted({row["ranks"] for row in recording.get("rows", [])})
        count = f"{', '.join(map(str, ranks[:-1]))} and {ranks[-1]} devices" if ranks else ""
    commit = recording.get("commit")
    source = [f"commit {commit['sha'][:8]}", *([] if commit["clean"] else ["local changes"])] \
        if commit else [f"code digest {recording['contentHash'][:8]}", "no commit recorded"]
    return [env["backend"].upper(), count, human_date(recording["generatedAt"]),
            f"JAX {env['jax']}", *source]


def test_the_line_says_where_and_when_the_recording_was_made_and_links_it(built_site,
                                                                          shown):
    for page, figure, line in shown:
        output, text = DATA[figure]["json"], " ".join(line["text"].split())
        if output.recording is None:  # drawn from a lesson's data file: a model
            assert "modelled, not measured" in text, (page, text)
            named = output.source
        else:
            recording = json.loads((ROOT / output.recording).read_text())
            for words in filter(None, header_words(recording)):
                assert words in text, (page, figure, words, text)
            simulated = recording["kind"] == "simulation"
            assert ("simulated with NumPy, not measured" in text) == simulated, text
            named = output.recording
        name = posixpath.basename(named)
        assert site_path(page, line["links"][name]) == named, (page, line)
        assert (built_site / named).read_bytes() == (ROOT / named).read_bytes()


def test_the_line_stays_out_of_the_search_index(built_site, shown):
    index = json.loads((built_site / "search" / "search_index.json").read_text())
    texts = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", doc["text"]))
                     for doc in index["docs"])
    assert shown and not any(words in texts for words in ("no commit recorded", "code digest",
                                                          "local changes"))

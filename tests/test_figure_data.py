"""Under every figure of every built page, a line whose links reach the committed CSV, JSON
and recording, served byte for byte, and which says what that recording's header holds."""
import html
import json
import posixpath
import re

import pytest

from conftest import LESSONS, ROOT
from scripts.figures.variants import BY_SUFFIX
from scripts.pages.layout import text_of
from scripts.store.outputs import figure_data_outputs
from scripts.pages.recorded_text import human_date
from site_pages import page_file, site_pages

DATA = {output.figure: {o.path.rsplit(".", 1)[1]: o for o in figure_data_outputs(lesson)
                        if o.figure == output.figure}
        for lesson in LESSONS.values() for output in figure_data_outputs(lesson)}


# In page order: each figure's static drawing (no variant's suffix) and each data line
# (which holds no span of its own), its links by their text.
IMAGE = re.compile(r'<img\b[^>]*\bsrc="([^"]+\.svg)"')
LINE = re.compile(r'<span class="figure-data"[^>]*>(.*?)</span>', re.S)
LINK = re.compile(r'<a href="([^"]+)">(.*?)</a>', re.S)


def site_path(page, href):
    return posixpath.normpath(posixpath.join("" if page == "404.html" else page, href))


@pytest.fixture(scope="module")
def shown(built_site):
    """[(page, figure path below the root, its line)] for every figure of every page."""
    found = []
    for page in site_pages(built_site):
        markup = page_file(built_site, page).read_text()
        figures = [site_path(page, html.unescape(src)) for src in IMAGE.findall(markup)
                   if not any(src.endswith(f"{suffix}.svg") for suffix in BY_SUFFIX if suffix)]
        lines = [{"text": text_of(line), "links": {text_of(text): html.unescape(href)
                                                   for href, text in LINK.findall(line)}}
                 for line in LINE.findall(markup)]
        assert len(lines) == len(figures), (page, figures, lines)
        found += [(page, figure, line) for figure, line in zip(figures, lines)]
    assert {figure for _, figure, _ in found} == set(DATA)  # every figure is on a page
    return found


def header_words(recording):
    """Read here, apart from the build: platform, devices or processes, day, JAX, and the
    commit (or, recorded outside a git checkout, the code digest)."""
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


def test_the_line_links_the_data_and_the_recording_and_says_where_and_when_it_was_made(
        built_site, shown):
    for page, figure, line in shown:
        for name, ending in (("CSV", "csv"), ("JSON", "json")):
            target = site_path(page, line["links"][name])
            assert target == DATA[figure][ending].path, (page, line)
            assert (built_site / target).read_bytes() == (ROOT / target).read_bytes()
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
    texts = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", doc["text"])) for doc in index["docs"])
    assert shown and not any(words in texts for words in ("no commit recorded", "code digest",
                                                          "local changes"))

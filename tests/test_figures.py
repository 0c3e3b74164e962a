"""Every figure: render(data) -> SVG text, deterministic, accessible, and confined."""
import json
import re
import subprocess
import sys

import matplotlib
import pytest

from conftest import ROOT, clean_env
from scripts.figures import KINDS
from scripts.hashes import digest_bytes
from scripts.lessons import load_lessons
from scripts.outputs import figure_outputs, read_lock

LESSON = load_lessons()["distributed-03"]
FIGURES = {output.path: output for output in figure_outputs(LESSON)}


def source(output):
    return json.loads((ROOT / output.source).read_text())


def draw(path):
    output = FIGURES[path]
    kind = next(k for k in KINDS.values() if k.module_path() == output.code)
    return kind.render(source(output))


@pytest.mark.parametrize("path", sorted(FIGURES))
def test_the_committed_figure_is_what_its_renderer_draws_from_its_input(path):
    svg = draw(path)
    assert svg == draw(path)  # deterministic
    assert (ROOT / path).read_text() == svg, f"{path}: run python scripts/record.py " \
                                             f"--render-only"
    assert read_lock()[path]["sha256"] == digest_bytes(svg)


@pytest.mark.parametrize("path", sorted(FIGURES))
def test_each_figure_is_accessible_text_without_a_date(path):
    svg = (ROOT / path).read_text()
    assert re.search(r"<svg [^>]*role=\"img\"", svg)
    assert re.search(r"<title>[^<]+</title>", svg)
    assert re.search(r"<desc>[^<]+</desc>", svg)
    assert "\\(" not in svg and "\\[" not in svg  # MathJax delimiters are not read aloud
    assert svg.count("<text") >= 5  # svg.fonttype none: labels stay text
    assert "DejaVuSans-" not in svg  # ... not glyph outlines
    assert "dc:date" not in svg and not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d", svg)


def test_the_figures_show_the_recorded_values():
    panels = (ROOT / "figures" / "distributed-03.svg").read_text()
    desc = re.search(r"<desc>([^<]+)</desc>", panels).group(1)
    assert "all-reduce 8, reduce-scatter 2, after gather 8" in desc
    assert "all-reduce 48, reduce-scatter 24, scatter + gather 48" in desc
    mechanism = (ROOT / "figures" / "distributed-03-mechanism.svg").read_text()
    for cell in ("Participant 0", "Reduce-scatter", "[1+3 = 4]", "[2+4 = 6]", "[4, 6]"):
        assert cell in mechanism
    # The page's heading says "Reduce-scatter followed by all-gather"; the figure does not.
    assert "followed by" not in mechanism


@pytest.mark.parametrize("path", sorted(FIGURES))
def test_global_matplotlib_settings_neither_change_a_figure_nor_are_changed(path):
    expected = draw(path)
    with matplotlib.rc_context({"font.size": 23, "axes.facecolor": "#ff00ff",
                                "lines.linewidth": 9}):
        before = dict(matplotlib.rcParams)
        assert draw(path) == expected
        assert dict(matplotlib.rcParams) == before


def test_renderers_import_neither_jax_nor_lesson_code():
    probe = ("import sys, json; sys.modules['jax'] = None; "
             "from scripts.figures import KINDS; from scripts.lessons import load_lessons; "
             "from scripts.outputs import figure_outputs; "
             "[KINDS[k].render(json.load(open(o.source))) for k, o in "
             "zip(load_lessons()['distributed-03'].figures, "
             "figure_outputs(load_lessons()['distributed-03']))]; "
             "print(sorted(m for m in sys.modules if m.startswith('lesson_code')))")
    run = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=clean_env(),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "[]"


# At the desktop content width (about 690 px) a figure is shown at min(its own width, 690
# px); its smallest text must then be at least 9 px (content review M6, L12).
CONTENT_PX, SMALLEST_PX = 690, 9
PAGE_WIDTH_FIGURES = ["figures/distributed-03-traffic.svg",
                      "figures/distributed-03-ring-reduce-scatter.svg",
                      "figures/distributed-03-ring-all-gather.svg"]


@pytest.mark.parametrize("path", PAGE_WIDTH_FIGURES)
def test_the_smallest_text_is_9_px_at_the_page_content_width(path):
    svg = (ROOT / path).read_text()
    width_pt = float(re.search(r'<svg [^>]*width="([\d.]+)pt"', svg).group(1))
    view_width = float(re.search(r'viewBox="[\d.]+ [\d.]+ ([\d.]+) ', svg).group(1))
    shown_px = min(width_pt * 4 / 3, CONTENT_PX)
    sizes = [float(size) for size in re.findall(r"font-size: ([\d.]+)px", svg)]
    assert sizes, f"{path}: no text sizes found"
    smallest = min(sizes) * shown_px / view_width
    assert smallest >= SMALLEST_PX, f"{path}: smallest text {smallest:.1f} px at {CONTENT_PX} px"


def test_the_ring_figures_name_each_send_and_receive_from_the_ranks_side():
    for phase in ("reduce-scatter", "all-gather"):
        svg = (ROOT / f"figures/distributed-03-ring-{phase}.svg").read_text()
        assert "sends c" not in svg  # the old label sat under the received cell
        # p = 4, step 1: rank 0 passes to rank 1 and gets from rank 3.
        assert re.search(r"sent c\d → r1", svg) and re.search(r"got c\d ← r3", svg)
    scatter = (ROOT / "figures/distributed-03-ring-reduce-scatter.svg").read_text()
    assert "sent c3 → r1" in scatter and "got c2 ← r3" in scatter  # step 1 of the trace


@pytest.mark.parametrize("path", sorted(FIGURES))
def test_each_figure_names_its_font_once(path):
    """The font-family list is one rule of the SVG's stylesheet, not 200 bytes on every
    <text> (scripts/figures/svg.py compact): a ring figure was 82 KB, 37 of them that list."""
    svg = draw(path)
    assert "font-family" not in "".join(re.findall(r"<text\b[^>]*>", svg))
    assert svg.count("font-family") == (1 if "<text" in svg else 0)
    assert 'transform="rotate(-0 ' not in svg

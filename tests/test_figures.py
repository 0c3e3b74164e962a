"""Every figure: render(data) -> SVG text, deterministic, accessible, and confined."""
import json
import re
import subprocess
import sys

import matplotlib
import pytest

from conftest import LESSONS, ROOT, SEED, clean_env, recording_name
from scripts.figures import LESSON_RENDERER
from scripts.hashes import digest_bytes
from scripts.outputs import figure_outputs, read_lock

# Every figure of every registered lesson; the tests of what a figure shows read the seed
# lesson's, whose content they are.
FIGURES = {output.path: output for lesson in LESSONS.values()
           for output in figure_outputs(lesson)}
assert FIGURES, "no registered lesson draws a figure: the tests below would test nothing"
ID = SEED.id


def source(output):
    return json.loads((ROOT / output.source).read_text())


def draw(path):
    output = FIGURES[path]
    return output.kind.render(source(output))


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
    panels = (ROOT / "figures" / f"{ID}.svg").read_text()
    desc = re.search(r"<desc>([^<]+)</desc>", panels).group(1)
    assert "all-reduce 8, reduce-scatter 2, after gather 8" in desc
    assert "all-reduce 48, reduce-scatter 24, scatter + gather 48" in desc
    mechanism = (ROOT / "figures" / f"{ID}-mechanism.svg").read_text()
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
    """Every lesson's every figure drawn in one process: no JAX, and of lesson_code/ only
    the renderers a lesson brings itself (lesson_code/CONTRACT.md), never a lesson program."""
    probe = ("import sys, json; sys.modules['jax'] = None; "
             "from scripts.lessons import load_lessons; "
             "from scripts.outputs import figure_outputs; "
             "[o.kind.render(json.load(open(o.source))) for lesson in load_lessons().values() "
             "for o in figure_outputs(lesson)]; "
             "print(sorted(m for m in sys.modules if m.startswith('lesson_code')))")
    run = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=clean_env(),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    own = sorted({kind for lesson in LESSONS.values() for kind in lesson.figures
                  if LESSON_RENDERER.fullmatch(kind)})
    assert run.stdout.strip() == str(["lesson_code", *own] if own else [])


# At the desktop content width (about 690 px) a figure is shown at min(its own width, 690
# px); its smallest text must then be at least 9 px (content review M6, L12).
CONTENT_PX, SMALLEST_PX = 690, 9
PAGE_WIDTH_FIGURES = [f"figures/{ID}-traffic.svg", f"figures/{ID}-ring-reduce-scatter.svg",
                      f"figures/{ID}-ring-all-gather.svg"]


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
        svg = (ROOT / f"figures/{ID}-ring-{phase}.svg").read_text()
        assert "sends c" not in svg  # the old label sat under the received cell
        # p = 4, step 0: rank 0 passes to rank 1 and gets from rank 3.
        assert re.search(r"sent c\d → r1", svg) and re.search(r"got c\d ← r3", svg)
    scatter = (ROOT / f"figures/{ID}-ring-reduce-scatter.svg").read_text()
    assert "sent c3 → r1" in scatter and "got c2 ← r3" in scatter  # step 0 of the trace


@pytest.mark.parametrize("phase", ["reduce_scatter", "all_gather"])
def test_no_ring_figure_text_runs_past_its_canvas(phase):
    """Every text's drawn extent lies inside the figure (the all-gather's footnote once
    ran past it: content review L1)."""
    import json

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from scripts.figures import ring

    trace = json.loads((ROOT / recording_name(SEED, "simulation")).read_text())["data"]
    with ring.figure_style(ring.DETERMINISTIC):
        fig = ring.ring_figure(trace, ring.phases(trace)[phase])
        renderer = FigureCanvasAgg(fig).get_renderer()
        canvas = fig.bbox
        for text in fig.findobj(lambda artist: hasattr(artist, "get_text")
                                and artist.get_text()):
            box = text.get_window_extent(renderer)
            assert canvas.x0 - 0.5 <= box.x0 and box.x1 <= canvas.x1 + 0.5, \
                f"{text.get_text()[:60]!r} spans x {box.x0:.0f}-{box.x1:.0f} of {canvas.x1:.0f}"


TWO_SERIES = {"lessonId": "x", "data": {"panelsTitle": "Two series", "panels": [
    {"kind": "bar", "labels": ["a", "b", "c"], "ylabel": "µs",
     "series": [{"label": "min", "y": [1, 2, 3]}, {"label": "median", "y": [2, 3, 4]}]}]}}


def test_several_series_are_drawn_side_by_side_with_a_legend():
    from scripts.figures import panels
    from scripts.figures.svg import figure_style, new_figure

    with figure_style():
        fig, ax = new_figure()
        panels.side_by_side(ax, TWO_SERIES["data"]["panels"][0])
        spans = sorted((bar.get_x(), bar.get_x() + bar.get_width()) for bar in ax.patches)
        legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert len(spans) == 6  # every bar of both series is drawn
    assert all(right <= next_left + 1e-9 for (_, right), (next_left, _) in
               zip(spans, spans[1:])), spans  # and none covers another
    assert legend == ["min", "median"]
    svg = panels.render(TWO_SERIES)
    assert ">min<" in svg and ">median<" in svg and "min vs median" in svg
    assert "µs (min): a 1, b 2, c 3; µs (median): a 2, b 3, c 4" in svg


def test_a_panel_kind_no_renderer_draws_is_refused():
    from scripts.figures import panels

    heat = {**TWO_SERIES["data"]["panels"][0], "kind": "heatmap"}
    with pytest.raises(ValueError, match="panel 0 is of kind 'heatmap'; only bar panels"):
        panels.render({"lessonId": "x", "data": {"panels": [heat]}})


@pytest.mark.parametrize("path", sorted(FIGURES))
def test_each_figure_names_its_font_once(path):
    """The font-family list is one rule of the SVG's stylesheet, not 200 bytes on every
    <text> (scripts/figures/svg.py compact): a ring figure was 82 KB, 37 of them that list."""
    svg = draw(path)
    assert "font-family" not in "".join(re.findall(r"<text\b[^>]*>", svg))
    assert svg.count("font-family") == (1 if "<text" in svg else 0)
    assert 'transform="rotate(-0 ' not in svg

"""Every figure as a reader gets it: drawn from its input as committed, in four variants,
accessible text with legible sizes and contrast, and its data beside it as CSV and JSON."""
import copy
import csv
import html
import importlib.util
import io
import json
import re
import sys
from contextlib import contextmanager
from dataclasses import replace
from xml.etree import ElementTree

import numpy as np
import pytest

from conftest import LESSONS, ROOT, SEED, each_lesson, recording_name
from harness import passed, raised_in_one_line, run
from scripts.figures import KINDS, LESSON_RENDERER, FigureKind, mechanism, panels, ring
from scripts.figures import data as figure_data
from scripts.figures.palette import DARK, LIGHT
from scripts.figures.svg import figure_style, new_figure, svg_text
from scripts.figures.variants import VARIANTS
from scripts.store.derive import DeriveError, render as derive_render
from scripts.store.hashes import digest_bytes
from scripts.store.lessons import Lesson
from scripts.store.outputs import figure_data_outputs, figure_outputs, read_lock

# Every figure of every lesson; the tests of what a figure shows read the seed's.
FIGURES = {output.path: output for lesson in LESSONS.values() for output in figure_outputs(lesson)}
assert FIGURES, "no registered lesson draws a figure: the tests below would test nothing"
STATIC_FIGURES = sorted(path for path, output in FIGURES.items() if not output.variant.suffix)
DATA = {output.path: output for lesson in LESSONS.values()
        for output in figure_data_outputs(lesson)}
ID = SEED.id
# CSS px: a wide drawing is shown at most 660 px wide, a narrow one at its own width,
# within a 360 px phone's 328 px column; its smallest text then 9 px at least.
WIDE_SHOWN_PX, PHONE_COLUMN_PX, SMALLEST_PX = 660, 328, 9


def inputs(output):
    overlay = ROOT / output.overlay if output.overlay else None
    return (json.loads((ROOT / output.source).read_text()),
            json.loads(overlay.read_text()) if overlay and overlay.exists() else None)


@contextmanager
def texts_off_the_canvas():
    """Texts drawn in this block that leave their canvas (a tick label never drawn: none)."""
    from matplotlib.text import Text

    off, drawn, draw = [], [], Text.draw

    def checked(text, renderer):
        if text.get_visible() and text.get_text():
            drawn.append(text)
            box, canvas = text.get_window_extent(renderer), text.get_figure(root=True).bbox
            if not (canvas.x0 - 0.5 <= box.x0 and box.x1 <= canvas.x1 + 0.5
                    and canvas.y0 - 0.5 <= box.y0 and box.y1 <= canvas.y1 + 0.5):
                off.append(f"{text.get_text()[:60]!r} spans x {box.x0:.0f}-{box.x1:.0f}, "
                           f"y {box.y0:.0f}-{box.y1:.0f} of {canvas.x1:.0f} x {canvas.y1:.0f}")
        return draw(text, renderer)

    Text.draw = checked
    try:
        yield off
    finally:
        Text.draw = draw
    assert drawn, "no text drawn"


def print_every_drawing(paths):
    """In drawn_in_a_fresh_process, without JAX: each figure of `paths`, its texts off the
    canvas and the lesson_code modules imported, as JSON."""
    drawings = {}
    for path in paths:
        output = FIGURES[path]
        with texts_off_the_canvas() as off:
            drawings[path] = [output.kind.render(*inputs(output), output.variant), off]
    modules = sorted(m for m in sys.modules if m.startswith("lesson_code"))
    sys.stdout.write(json.dumps({"modules": modules, "drawings": drawings}))


@pytest.fixture(scope="session")
def drawn(request):
    """The figures the selected tests compare, drawn once in a fresh process: `-k <id>` draws that
    lesson's, not the course's; a test of no one lesson asks for every figure."""
    chosen = {getattr(item, "callspec", None) and item.callspec.params.get("lesson")
              for item in request.session.items if "drawn" in item.fixturenames}
    lessons = LESSONS.values() if None in chosen else chosen
    paths = sorted(output.path for lesson in lessons for output in figure_outputs(lesson))
    return json.loads(passed(run(
        "-c", "import sys; sys.modules['jax'] = None; sys.path.insert(0, 'tests'); "
        "import test_figures; test_figures.print_every_drawing(sys.argv[1:])", *paths,
        timeout=120)).stdout)


def figures_of(lesson):
    found = sorted(output.path for output in figure_outputs(lesson))
    assert found or not lesson.figures, lesson.id
    return found


@pytest.mark.slow
@each_lesson
def test_the_committed_figure_is_what_its_renderer_draws_from_its_input(lesson, drawn):
    """Drawn in another process than the committed one: drawing is deterministic, and
    every text stays on the canvas, in every variant."""
    lock = read_lock()
    for path in figures_of(lesson):
        svg, off_canvas = drawn["drawings"][path]
        assert (ROOT / path).read_text() == svg, f"{path}: run python scripts/record.py " \
                                                 f"--render-only"
        assert lock[path]["sha256"] == digest_bytes(svg), path
        assert off_canvas == [], path


def test_renderers_import_neither_jax_nor_lesson_code(drawn):
    """Of lesson_code/ only a lesson's own renderers (CONTRACT.md), never its program."""
    modules, drawings = drawn["modules"], drawn["drawings"]
    assert sorted(drawings) == sorted(FIGURES)
    own = sorted({kind for lesson in LESSONS.values() for kind in lesson.figures
                  if LESSON_RENDERER.fullmatch(kind)})
    assert modules == (["lesson_code", *own] if own else [])
    # Each figure in the variants its renderer takes, with a CSV and a JSON of its data.
    assert len(FIGURES) == sum(len(FIGURES[path].kind.variants(ROOT)) for path in STATIC_FIGURES)
    assert sorted(DATA) == sorted(f"{path.removesuffix('.svg')}{ending}"
                                  for path in STATIC_FIGURES for ending in (".csv", ".json"))


@each_lesson
def test_each_drawing_is_accessible_text_legible_where_the_page_shows_it(lesson):
    """XML with a title and a description, text not outlines, no date; its smallest text
    9 px where the page shows it; a dark drawing on the dark paper."""
    for path in figures_of(lesson):
        svg = (ROOT / path).read_text()
        ElementTree.fromstring(svg.encode())  # XML, as every browser needs it
        assert re.search(r"<svg [^>]*role=\"img\"", svg), path
        assert re.search(r"<title>[^<]+</title>", svg), path
        assert re.search(r"<desc>[^<]+</desc>", svg), path
        assert "\\(" not in svg and "\\[" not in svg, path  # MathJax delimiters are not read aloud
        assert svg.count("<text") >= 5, path  # svg.fonttype none: labels stay text
        assert "DejaVuSans-" not in svg, path  # ... not glyph outlines
        assert "dc:date" not in svg and not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d", svg), path
        own = float(re.search(r'<svg [^>]*width="([\d.]+)pt"', svg).group(1)) * 4 / 3
        if FIGURES[path].variant.narrow:
            assert own <= PHONE_COLUMN_PX, f"{path}: {own:.0f} px is wider than a phone's column"
        shown = own if FIGURES[path].variant.narrow else min(own, WIDE_SHOWN_PX)
        view_width = float(re.search(r'viewBox="[\d.]+ [\d.]+ ([\d.]+) ', svg).group(1))
        size, text = min((float(size), html.unescape(text)) for size, text in re.findall(
            r'<text style="font-size: ([\d.]+)px[^>]*>([^<]*)<', svg))
        assert size * shown / view_width >= SMALLEST_PX, (
            f"{path}: the text {text!r} is {size * shown / view_width:.1f} px where the page shows "
            f"the figure {shown:.0f} px wide; the rule (lesson_code/CONTRACT.md, Figures): at "
            f"least {SMALLEST_PX} px; draw it larger in {FIGURES[path].code}")
        if FIGURES[path].variant.palette is DARK:
            assert "#ffffff" not in svg.lower() and "fill: white" not in svg
            assert f"fill: {DARK.paper}" in svg


def svg_texts(path):
    return [html.unescape(text).strip() for text in
            re.findall(r"<text\b[^>]*>([^<]*)</text>", (ROOT / path).read_text())]


def test_the_seed_s_figures_print_the_recorded_values_and_their_data_rows_hold_them():
    desc = re.search(r"<desc>([^<]+)</desc>", (ROOT / "figures" / f"{ID}.svg").read_text())[1]
    assert "all-reduce 8, reduce-scatter 2, after gather 8" in desc
    assert "all-reduce 48, reduce-scatter 24, scatter + gather 48" in desc
    mechanism = (ROOT / "figures" / f"{ID}-mechanism.svg").read_text()
    for cell in ("Participant 0", "Reduce-scatter", "[1+3 = 4]", "[2+4 = 6]", "[4, 6]"):
        assert cell in mechanism
    # The page's heading says "Reduce-scatter followed by all-gather"; the figure does not.
    assert "followed by" not in mechanism

    def rows(name):
        found = json.loads((ROOT / f"figures/{ID}{name}.json").read_text())
        return [dict(zip(found["columns"], row)) for row in found["rows"]]

    def printed(name):
        return set(svg_texts(f"figures/{ID}{name}.svg"))

    # The panels' bar labels, the mechanism's cells, the TPU table's times, a ring cell's.
    assert {f"{row['value']:g}" for row in rows("")} <= printed("")
    assert {value for row in rows("-mechanism") for value in row.values()} <= printed("-mechanism")
    assert {f"{row['predictedUs']:,.1f} µs" for row in rows("-tpu-predictions")
            if row["part"] == "table"} <= printed("-tpu-predictions")
    held = [row for row in rows("-ring-reduce-scatter") if row["sums"]]
    assert held and {f"{row['value1']:g}, {row['value2']:g}" for row in held} <= \
        printed("-ring-reduce-scatter")


@pytest.mark.parametrize("phase", ["reduce_scatter", "all_gather"])
def test_the_ring_figures_count_steps_by_sends_and_name_each_from_the_rank_s_side(phase):
    """"start", then step 1 to p - 1, as the pages count; at p = 4 rank 0 passes to rank 1
    and gets from rank 3; the note never breaks inside "(r+1)·[1, …, 8]"."""
    trace = json.loads((ROOT / recording_name(SEED, "simulation")).read_text())["data"]
    labels = [label.split(":")[0] for label, _, _ in ring.phases(trace)[phase].rows]
    assert labels == ["start", *(f"step {k}" for k in range(1, trace["ranks"]))]
    path = f"figures/{ID}-ring-{phase.replace('_', '-')}.svg"
    texts = svg_texts(path)
    assert "step 0" not in texts and f"step {trace['ranks'] - 1}" in texts
    svg = (ROOT / path).read_text()
    assert "sends c" not in svg  # the old label sat under the received cell
    assert re.search(r"sent c\d → r1", svg) and re.search(r"got c\d ← r3", svg)
    if phase == "reduce_scatter":
        assert "sent c3 → r1" in svg and "got c2 ← r3" in svg  # the trace's first step
    for variant in VARIANTS:  # the narrow drawings wrap the note
        opened = [text for text in svg_texts(variant.path(path)) if "·[1," in text]
        assert len(opened) == 1 and re.search(r"·\[1,\s…,\s\d+\]", opened[0]), opened


TWO_SERIES = {"lessonId": "x", "data": {"panelsTitle": "Two series", "panels": [
    {"kind": "bar", "labels": ["a", "b", "c"], "ylabel": "µs",
     "series": [{"label": "min", "y": [1, 2, 3]}, {"label": "median", "y": [2, 3, 4]}]}]}}


def test_several_series_are_drawn_side_by_side_with_a_legend_and_only_bars():
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
    heat = {**TWO_SERIES["data"]["panels"][0], "kind": "heatmap"}
    with pytest.raises(ValueError, match="panel 0 is of kind 'heatmap'; only bar panels"):
        panels.render({"lessonId": "x", "data": {"panels": [heat]}})


def accessible_words(path):
    return re.search(r"<title>.*?</desc>", (ROOT / path).read_text(), re.S).group(0)


def same_cell(text, value):
    if value is None or isinstance(value, str):
        return text == (value or "")
    return float(text) == value and ("." in text or "e" in text) == isinstance(value, float)


@each_lesson
def test_each_variant_says_the_same_and_the_data_is_the_renderer_s_rows_each_locked(lesson):
    for figure in [path for path in figures_of(lesson) if path in STATIC_FIGURES]:
        lock, expected = read_lock(), FIGURES[figure].kind.variants(ROOT)
        if "." not in FIGURES[figure].kind.renderer:  # this repository's: all four, always
            assert tuple(expected) == tuple(VARIANTS), figure
        assert {FIGURES[variant.path(figure)].variant for variant in expected} == set(expected)
        for variant in expected:  # same recording, same title and description
            assert variant.path(figure) in lock, f"{variant.path(figure)} is not locked"
            assert accessible_words(variant.path(figure)) == accessible_words(figure), variant
        stem = figure.removesuffix(".svg")
        for output in (DATA[f"{stem}.csv"], DATA[f"{stem}.json"]):
            text = (ROOT / output.path).read_text()
            assert text == output.kind.render(*inputs(output)), \
                f"{output.path}: run python scripts/record.py --render-only"
            assert lock[output.path]["sha256"] == digest_bytes(text), output.path
        data = json.loads((ROOT / f"{stem}.json").read_text())
        header, *rows = csv.reader(io.StringIO((ROOT / f"{stem}.csv").read_text()))
        assert header == data["columns"] and len(rows) == len(data["rows"]) > 0
        for text_row, row in zip(rows, data["rows"]):
            assert len(text_row) == len(row) and all(
                same_cell(text, value) for text, value in zip(text_row, row)), (text_row, row)
        assert data["figure"] == figure and data["drawnFrom"] == output.source
        assert data["recording"] == output.recording
        assert (data["recording"] is None) == (not output.source.startswith("recordings/"))


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.suffix or "static")
def test_a_tpu_sweep_over_the_prediction_fits_every_drawing_and_adds_its_data(variant):
    """The measured overlay's ratio panel fits every canvas; its medians join the rows."""
    from test_tpu_predictions import DATA as PREDICTIONS
    from test_tpu_predictions import tpu_sweep_fixture

    from scripts.figures import tpu_predictions

    data, fixture = json.loads(PREDICTIONS.read_text()), tpu_sweep_fixture()
    with texts_off_the_canvas() as off:
        svg = KINDS["tpu-predictions"].render(data, fixture, variant)
    assert off == [] and "own cost: all-reduce" in svg and "measured /" in svg
    assert "<title>Measured on 4 × TPU v6 lite (v6e-4) against the prediction</title>" in svg
    # Made exactly the prediction: measured over predicted is 1 at every size drawn.
    assert "own cost in the size sweep at p = 2 and 4 is 1 to 1 times the v6e-4 " \
           "prediction" in svg
    name, points = tpu_predictions.measured(data, fixture)
    rows = tpu_predictions.rows(data, fixture)
    assert [row for row in rows if row["part"] != "measured"] == tpu_predictions.rows(data)
    assert [(row["machine"], row["collective"], row["ranks"], row["bytes"], row["ownCostUs"],
             row["measuredOverPredicted"]) for row in rows if row["part"] == "measured"] == [
        (name, collective, ranks, *point) for (collective, ranks), drawn in points.items()
        for point in drawn] != []
    fixture["environment"]["deviceKind"] = "TPU v4"
    with pytest.raises(ValueError, match="'TPU v4' is none of the predicted VMs'"):
        KINDS["tpu-predictions"].render(data, fixture, variant)


def relative_luminance(colour):
    """Of "#rrggbb", or "rgb(r, g, b)" as a browser computes a style (test_ring_stepper.py)."""
    channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)] if colour[0] == "#" \
        else [int(value) / 255 for value in re.findall(r"\d+", colour)[:3]]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a, b):
    high, low = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize("palette", [LIGHT, DARK], ids=["light", "dark"])
def test_each_palette_keeps_text_legible(palette):
    """WCAG contrast: text 4.5:1 (ink 7:1), and on the dark paper lines 4.5:1, bars 3:1."""
    assert contrast(palette.ink, palette.paper) >= 7
    assert contrast(palette.muted, palette.paper) >= 4.5
    for fill, ink in (palette.own, palette.partial, palette.full, palette.missing):
        assert contrast(fill, ink) >= 4.5, (palette.name, fill, ink)
    for colours, floor in ((palette.series, 4.5), (palette.bars, 3)) if palette is DARK else ():
        assert min(contrast(colour, palette.paper) for colour in colours) >= floor, colours


@pytest.mark.parametrize("signature, body, expected", [
    ("def render(recording):", "'light wide'", lambda variant: "light wide"),
    ("def render(recording, variant):", "variant.suffix or 'light wide'",
     lambda variant: variant.suffix or "light wide")])
def test_a_lesson_renderer_is_drawn_in_the_variants_its_render_takes(tmp_path, monkeypatch,
                                                                      signature, body, expected):
    """Light and wide only, unless its render() takes the variant (read from its source,
    not imported): then every drawing gets it, the light wide one too (CONTRACT.md)."""
    (tmp_path / "lesson_code").mkdir()
    path = tmp_path / "lesson_code" / "bars.py"
    path.write_text(f"{signature}\n    return {body}\n")
    lesson = Lesson("x-1", "lesson_code.x_1", figures=("lesson_code.bars",), root=tmp_path)
    outputs = figure_outputs(lesson)
    assert [output.variant for output in outputs] == list(VARIANTS[:len(outputs)])
    assert [output.path for output in outputs] == [variant.path("figures/x-1-bars.svg")
                                                   for variant in VARIANTS[:len(outputs)]]
    assert len(outputs) == (4 if "variant" in signature else 1)
    spec = importlib.util.spec_from_file_location("lesson_code.bars", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "lesson_code.bars", module)
    for variant in VARIANTS:
        assert KINDS["lesson_code.bars"].render({"data": {}}, None, variant) == expected(variant)


def test_a_renderer_without_rows_fails_in_one_line():
    no_rows = FigureKind("svg", "recordings/{id}.cpu.json", "figures/x.svg")
    kind, output = figure_data.FigureDataKind(no_rows, ".csv", ()), DATA[f"figures/{ID}.csv"]
    assert str(raised_in_one_line(DeriveError, derive_render, replace(output, kind=kind), {})) == (
        f"figures/{ID}.csv: svg renderer failed on recordings/{ID}.cpu.json (ValueError: "
        f"scripts/figures/svg.py has no rows(data): every figure's data (its CSV and JSON) "
        f"is what that function returns); fix {output.code}")


def test_rows_hold_text_numbers_and_none_only():
    assert figure_data.table([{"a": 1, "b": "x"}, {"b": 2.5, "c": None}]) == (
        ["a", "b", "c"], [[1, "x", None], [None, 2.5, None]])
    assert type(figure_data.cell(np.float32(3.0))) is float
    for bad in (float("nan"), float("inf"), True, [1], {"a": 1}):
        with pytest.raises(ValueError):
            figure_data.cell(bad)
    with pytest.raises(ValueError):
        figure_data.table([])


# --- what no figure can draw is one line, never a broken SVG ------------------------------

MECHANISM = {"title": "t", "alt": "a", "table": {"headers": ["h", "i"], "rows": [["x", "y"]]}}


@pytest.mark.parametrize("change, words", [
    (lambda d: d.update(title=3), "`title`"), (lambda d: d.update(alt=["x"]), "`alt`"),
    (lambda d: d.update(title="x" * 2001), "`title`"),
    (lambda d: d["table"].update(rows=[["x", "y"]] * 3000), "`table`"),
    (lambda d: d["table"].update(rows=[["x"]]), "`table`"),
    (lambda d: d["table"].update(headers="hi"), "`table`"),
    (lambda d: d["table"].update(rows=[["x", 3]]), "every cell"),
    (lambda d: d["table"].update(rows=[["$" + "{" * 400 + "x" + "}" * 400 + "$", "y"]]),
     "every cell"),
    (lambda d: d.pop("table"), "`table`"),
    (lambda d: d.update(title="t\x00"), "`title` holds U+0000"),
    (lambda d: d.update(alt="a\x01"), "`alt` holds U+0001"),
    (lambda d: d["table"].update(rows=[["x\ufffe", "y"]]), "every cell")])
def test_figure_data_a_lesson_owns_is_refused_in_one_line_before_drawing(change, words):
    diagram = copy.deepcopy(MECHANISM)
    change(diagram)
    assert words in str(raised_in_one_line(ValueError, mechanism.render, diagram))


def test_no_renderer_writes_an_svg_that_is_not_xml():
    fig, ax = new_figure()
    ax.set_title("a title from a recording\x01")
    with pytest.raises(ValueError, match=r"^the figure's text holds U\+0001, a character no "
                       r"SVG can hold; remove it from the figure's data$"):
        svg_text(fig, "title", "desc")


def test_a_dollar_sign_in_a_table_cell_is_text_not_mathtext():
    # As mathtext, this is a ParseFatalException inside matplotlib.
    diagram = {**MECHANISM, "table": {"headers": ["cost", "$"],
                                      "rows": [["$\\nocommand{$", "$x^$"]]}}
    assert mechanism.render(diagram).lstrip().startswith("<?xml")

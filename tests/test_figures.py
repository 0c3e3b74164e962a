"""Every figure: render(data) -> SVG text, deterministic, accessible, and confined."""
import hashlib
import json
import re
import subprocess
import sys

import matplotlib
import pytest

from conftest import ROOT, clean_env
from scripts.figures import KINDS
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
    assert read_lock()[path]["sha256"] == hashlib.sha256(svg.encode()).hexdigest()


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

"""Formulas: TeX to MathML at build time (scripts/pages/mathml.py, Temml under Node) and the
math font the build cuts for them (scripts/pages/math_font.py)."""
import re

import markdown
import pytest
from fontTools.ttLib import TTFont
from material.plugins.search.plugin import Parser as SearchParser
from mkdocs.exceptions import PluginError

from conftest import ROOT
from harness import raised_in_one_line
from scripts.pages import math_font, mathml
from scripts.pages.mathml import MathError, formula, temml, typeset
from site_pages import page_file, site_pages

TIGHT = '<mo lspace="0" rspace="0">'


def inline(tex):
    return typeset(f'<p><span class="arithmatex">\\({tex}\\)</span></p>', "x.md")


def displayed(tex):
    return typeset(f'<div class="arithmatex">\\[{tex}\\]</div>', "x.md")


def drawn(markup):
    return re.sub(r"<annotation\b.*?</annotation>", "", markup, flags=re.S)


def test_formulas_are_set_as_tex_sets_them():
    # The whole norm is the base of its square, both bars alike and not stretched.
    norm = drawn(inline(r"\lVert g\rVert^2"))
    assert re.search(r"<msup><mrow><mo [^>]*stretchy=\"false\">‖</mo><mi>g</mi>"
                     r"<mo [^>]*stretchy=\"false\">‖</mo></mrow><mn>2</mn></msup>", norm)
    # max and min are functions, not operators spaced on both sides.
    assert "<mi>max</mi><mo>\u2061</mo>" in drawn(displayed(r"T=\max(a, b)"))
    # A final full stop is an ordinary symbol.
    assert "<mi>.</mi>" in drawn(displayed(r"n_{1/2} = \alpha\,\beta ."))
    # An inline fraction's parts are in script style: tight; displayed, they are not.
    assert f"<mi>p</mi>{TIGHT}−</mo><mn>1</mn>" in inline(r"\frac{p-1}{p}G")
    assert "<mi>p</mi><mo>−</mo><mn>1</mn>" in displayed(r"\frac{p-1}{p}G")
    # Under and over a display Σ, "=" and "−" are tight; the "=" after g, in the line, and
    # the Σ itself are spaced as the dictionary says.
    sigma = displayed(r"g=\sum_{r=0}^{p-1}g_r")
    assert f"<mi>r</mi>{TIGHT}=</mo><mn>0</mn>" in sigma
    assert f"<mi>p</mi>{TIGHT}−</mo><mn>1</mn>" in sigma
    assert "<mi>g</mi><mo>=</mo>" in sigma and '<mo movablelimits="false">∑</mo>' in sigma
    # A large operator keeps its space in a script, as in TeX: e^{x \sum y}.
    assert '<mi>x</mi><mo movablelimits="false">∑</mo>' in inline(r"e^{x \sum y}")
    # Temml's own spacing is kept (\bmod is spaced in the line); \pmod's empty operator
    # takes no space.
    assert '<mo lspace="0.2222em" rspace="0.2222em">mod</mo>' in inline(r"r+1 \bmod p")
    assert f"{TIGHT}</mo>" in re.sub(r"<mo ([^>]*) />", r"<mo \1></mo>", inline(r"c \pmod p"))


def test_punctuation_stays_with_its_formula_and_displays_split_at_qquad():
    assert re.search(r'<span class="math-nowrap"><math display="inline">.*</math>,</span> then',
                     typeset('<p>each <span class="arithmatex">\\(G/p\\)</span>, then</p>', "x.md"))
    assert displayed(r"a=1,\qquad b=\frac{1}{2}").count('<math display="block">') == 2


def test_display_formulas_are_named_by_what_they_say():
    labels = re.findall(r'role="group" aria-label="([^"]*)"', displayed(
        r"t(S) = \alpha + \frac{S}{\beta},") + displayed(r"g=\sum_{r=0}^{p-1}g_r,"))
    assert labels == ["t(S)=α+S/β ,", "g=∑_(r=0)^(p−1)g_r,"]


@pytest.mark.parametrize("tex, reading", [
    (r"\frac{p-1}{p}\,G", "(p−1)/p G"), (r"c_0", "c₀"), (r"2^{20}", "2²⁰"),
    (r"\sqrt{2}", "√(2)"), (r"\langle c, f(v)\rangle", "⟨c,f(v)⟩"),
    (r"\min(1, c/\lVert g\rVert)", "min(1,c/‖g‖)"), (r"T_\text{hop}", "T_hop")])
def test_each_formula_carries_a_plain_reading(tex, reading):
    assert f'<annotation encoding="text/plain">{reading}</annotation>' in inline(tex)


def test_search_indexes_the_reading_not_the_tex():
    """Neither the TeX nor the drawn formula flattened ("p−1pG") reaches the index."""
    parser = SearchParser()
    parser.feed(typeset('<p>every rank sends <span class="arithmatex">\\(\\frac{p-1}{p}\\,G'
                        '\\)</span> bytes, <span class="arithmatex">\\(c_0\\)</span> first</p>',
                        "x.md"))
    indexed = " ".join("".join(section.text) for section in parser.data)
    assert re.sub(r"<[^>]+>", " ", indexed).split() == [  # the few tags it keeps left out
        "every", "rank", "sends", "(p−1)/p", "G", "bytes,", "c₀", "first"]


def test_tex_cannot_close_a_formula_early():
    page = typeset(markdown.Markdown(extensions=["pymdownx.arithmatex"], extension_configs={
        "pymdownx.arithmatex": {"generic": True}}).convert(
        "$$x + \\text{</math>} + y$$\n\nand $\\text{<b>}$"), "x.md")
    assert len(re.findall(r"<math\b", page)) == page.count("</math>") == 2
    assert "&lt;/math&gt;" in page and "&lt;b&gt;" in page and not re.search(r"<b\b", page)


@pytest.mark.parametrize("tex", [r"\href{javascript:alert(1)}{x}",
                                 r"\style{background:url(http://example.com/x)}{x}",
                                 r"\class{md-nav}{x}", r"\frac{1}{", "x^^2"])
def test_a_formula_temml_refuses_stops_the_build_in_one_line(tex):
    formulas = markdown.Markdown(extensions=["scripts.pages.mathml"]).postprocessors["mathml"]
    assert str(raised_in_one_line(PluginError, formulas.run, f'<p><span class="arithmatex">'
                                  f'\\({tex}\\)</span></p>')).startswith(
        f"the page: cannot typeset the formula {tex!r}")


def test_only_presentation_markup_reaches_the_page():
    """Behind Temml: MathML elements and presentation attributes only; no url() style."""
    markup, _ = formula('<math><mi onclick="alert(1)" href="x" id="y" class="tml-sml-pad" '
                        'style="background:url(http://example.com/x)">a</mi>'
                        '<mtd style="padding-left:0em;">b</mtd></math>', "a")
    assert '<mi class="tml-sml-pad">a</mi>' in markup
    assert '<mtd style="padding-left:0em;">b</mtd>' in markup
    with pytest.raises(MathError, match="Temml wrote a <script> element"):
        formula("<math><script>alert(1)</script></math>", "x")


def test_one_node_process_typesets_page_after_page_and_a_dead_one_is_replaced():
    temml.close()
    assert "<math" in inline("x") and "<math" in displayed("y")
    first = temml.node
    assert first is not None and first.poll() is None
    first.kill()
    first.wait()
    assert "<math" in inline("z") and temml.node is not first


def test_a_node_that_is_missing_or_cannot_typeset_is_one_line(monkeypatch, tmp_path):
    script = tmp_path / "typeset.cjs"
    script.write_text('process.stderr.write("Temml is not installed: run `npm ci`\\n");'
                      'process.exit(3);\n')
    temml.close()
    monkeypatch.setattr(mathml, "TYPESET", script)
    assert str(raised_in_one_line(MathError, inline, "x")) == (
        "x.md: typeset.cjs failed: Temml is not installed: run `npm ci`")
    assert temml.node is None
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(MathError, match=r"^node is missing: install Node\.js"):
        inline("x")


def test_a_single_letter_identifier_needs_its_mathematical_italic():
    """MathML Core draws <mi>p</mi> as U+1D45D: that is the character the font needs."""
    assert [math_font.math_auto(c) for c in "phαΓß1"] == ["𝑝", "ℎ", "𝛼", "𝛤", "ß", "1"]
    assert math_font.drawn_characters(
        '<math><mi>p</mi><mi>max</mi><mi mathvariant="normal">Γ</mi><mo>\u2061</mo>'
        '<mo>⊕\ufe0e</mo><mtext>\xa0</mtext><annotation>TeX</annotation></math>'
    ) == {"𝑝", "m", "a", "x", "Γ", "⊕"}


def test_the_build_cuts_the_font_to_what_formulas_draw(built_site):
    """Never committed, renamed as the GUST licence asks, holding every drawn character."""
    assert not list((ROOT / "docs").rglob("*.woff*"))
    font = TTFont(built_site / math_font.FONT)
    covered, used = set(map(chr, font.getBestCmap())), set()
    for path in site_pages(built_site):
        used |= math_font.drawn_characters(page_file(built_site, path).read_text())
    assert used and used <= covered, "".join(sorted(used - covered))
    assert font["name"].getDebugName(1) == "Lesson Math" and "MATH" in font
    assert (built_site / "assets" / "fonts" / "README.txt").exists()  # its licence note
    assert "fonts/lesson-math.woff" in (built_site / "assets" / "lesson.css").read_text()


def test_any_character_the_font_has_can_be_used(tmp_path):
    (tmp_path / "page.html").write_text(typeset(
        '<p><span class="arithmatex">\\(\\partial H/\\partial D\\)</span></p>', "x.md"))
    path, count = math_font.make_font(tmp_path)
    covered = set(map(chr, TTFont(path).getBestCmap()))
    assert {"∂", "𝐻", "𝐷", "/"} <= covered and count == len(covered & (
        math_font.drawn_characters((tmp_path / "page.html").read_text()) | set("0123456789")))

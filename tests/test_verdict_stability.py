"""scripts/verdict_stability.py's reading of pages: what it masks, what it counts as a
verdict, and which pages it compares. Nothing is measured here."""
from scripts import verdict_stability as stability
from scripts.lessons import load_lessons

from conftest import ROOT


def test_numbers_are_masked_and_words_are_kept():
    one = "<article><p>4.47× (95 % interval 3,310–4.76): <em>supported</em></p></article>"
    two = "<article><p>2.02× (95 % interval 1,600–2.76): <em>supported</em></p></article>"
    flipped = "<article><p>2.02× (95 % interval 1,600–2.76): <em>inconclusive</em></p></article>"
    assert stability.masked_text(one) == stability.masked_text(two)
    assert stability.masked_text(one) != stability.masked_text(flipped)
    assert "N× (N % interval N–N)" in stability.masked_text(one)


def test_only_what_lies_outside_the_article_is_left_out():
    page = "<nav>7 pages</nav><article><p>kept 3</p></article><footer>2026</footer>"
    assert stability.masked_text(page) == "kept N"


def test_a_verdict_is_a_table_cell_that_is_one_verdict_word():
    page = ("<p>supported only when ...</p><table><tr><td>gloo</td><td><em>supported</em>"
            "</td><td>not applicable</td><td>inconclusive, because</td>"
            "<td>equivalent</td></tr></table>")
    assert stability.table_verdicts(page) == ["supported", "not applicable", "equivalent"]


def test_every_analysed_recording_is_read_by_some_page():
    """Each recording a lesson analyses (lessons.toml `analyses`) has a page to compare."""
    lessons = load_lessons().values()
    assert any(lesson.analyses for lesson in lessons)  # never a check of nothing
    for lesson in lessons:
        for variant in lesson.analyses:
            pages = stability.pages_reading(ROOT, lesson.id, variant)
            assert pages, f"no page reads rec:{lesson.id}.{variant}"
            assert all((ROOT / "docs").exists() and page.endswith("index.html")
                       for page in pages)

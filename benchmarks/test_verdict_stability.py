"""benchmarks/verdict_stability.py's reading of pages. Nothing is measured here."""
import pytest

from benchmarks import verdict_stability as stability
from scripts.store.lessons import load_lessons

from conftest import ROOT


def test_numbers_are_masked_words_kept_only_the_article_read_and_verdicts_found():
    one = "<article><p>4.47× (95 % interval 3,310–4.76): <em>supported</em></p></article>"
    two = "<article><p>2.02× (95 % interval 1,600–2.76): <em>supported</em></p></article>"
    flipped = "<article><p>2.02× (95 % interval 1,600–2.76): <em>inconclusive</em></p></article>"
    assert stability.masked_text(one) == stability.masked_text(two)
    assert stability.masked_text(one) != stability.masked_text(flipped)
    assert "N× (N % interval N–N)" in stability.masked_text(one)
    # A negative bound is a number too; the en dash between two bounds is not a sign.
    assert stability.masked_text("<article>(-3–5) (2–−5)</article>") == "(N–N) (N–N)"
    page = "<nav>7 pages</nav><article><p>kept 3</p></article><footer>2026</footer>"
    assert stability.masked_text(page) == "kept N"
    # A verdict is a table cell that is one verdict word.
    page = ("<p>supported only when ...</p><table><tr><td>gloo</td><td><em>supported</em>"
            "</td><td>not applicable</td><td>inconclusive, because</td>"
            "<td>equivalent</td></tr></table>")
    assert stability.table_verdicts(page) == ["supported", "not applicable", "equivalent"]


def test_every_analysed_recording_is_read_by_some_page():
    lessons = load_lessons().values()
    assert any(lesson.analyses for lesson in lessons)  # never a check of nothing
    for lesson in lessons:
        for variant in lesson.analyses:
            pages = stability.pages_reading(ROOT, lesson.id, variant)
            assert pages, f"no page reads rec:{lesson.id}.{variant}"
            assert all((ROOT / "docs").exists() and page.endswith("index.html")
                       for page in pages)


def test_recordings_that_are_missing_or_invalid_are_one_line_before_anything_is_cloned(
        tmp_path, monkeypatch):
    lesson = next(iter(load_lessons().values()))
    missing, broken = tmp_path / "run1.json", tmp_path / "run2.json"
    broken.write_text("{not json")  # what else the reader refuses: tests/test_recordings.py
    monkeypatch.setattr(stability, "clone", lambda into: pytest.fail("it cloned"))
    for given, words in [((missing, broken), "run1.json: missing"),
                         ((broken, broken), "run2.json: not valid JSON")]:
        with pytest.raises(SystemExit) as stopped:
            stability.main(["--lesson", lesson.id, "--variant", "cpu",
                            "--recordings", *map(str, given)])
        message = str(stopped.value)
        assert message.startswith("verdict_stability: ") and words in message, message
        assert "\n" not in message and message.endswith(f"valid {lesson.id} recordings")

"""`make audit`'s reading of its runs: a lesson page's blocking time against its bare
twin's, round by round. Nothing here runs Lighthouse."""
import pytest

from benchmarks import lighthouse
from benchmarks.long_pages import elements, long_page_path, long_pages
from site_reference import build_reference

PAGE = "lessons/some-lesson/"


def runs(pairs):
    return [{"round": number, "page": page, "metrics": {"total-blocking-time": ms}}
            for number, pair in enumerate(pairs, start=1)
            for page, ms in zip((PAGE, lighthouse.bare(PAGE)), pair)]


@pytest.mark.parametrize("pairs, verdict, estimate", [
    ([(100, 100), (105, 100), (95, 98), (102, 100), (98, 101)], "meets", None),
    ([(857, 68), (600, 70), (900, 80), (700, 60), (800, 75)], "misses", None),
    ([(90, 80), (300, 90), (70, 60), (400, 100), (80, 70)], "inconclusive", None),
    ([(100, 100), (105, 100)], "inconclusive", None),  # too few rounds decide nothing
    ([(50, 0), (60, 0)], "no ratio", None),  # never a division by a bare page that never blocked
    ([(40, 0)] * 3 + [(0, 10)] * 3, "inconclusive", 4.0),  # rounds of 0 ms still count
])
def test_each_reading_of_the_rounds_says_its_verdict_of_the_target(pairs, verdict, estimate):
    ratio = lighthouse.blocking_ratio(runs(pairs), PAGE)
    assert ratio["verdict"] == verdict
    if verdict in ("meets", "misses"):
        assert ratio["words"].endswith(f"{verdict} the target of 1.2x")
    if estimate is not None:
        assert ratio["estimate"] == pytest.approx(estimate)


@pytest.mark.slow  # marked here too: tests/conftest.py's tiers apply where it is loaded
def test_the_audit_covers_every_registered_lesson(built_site, tmp_path):
    """Each against a bare page about as long: the comparison holds only then."""
    pages = lighthouse.lesson_pages()
    assert pages
    lengths = {page: elements((built_site / page / "index.html").read_text())
               for page in pages}
    reference = build_reference(tmp_path, pages=long_pages(lengths))
    for page, length in lengths.items():
        found = elements((reference / long_page_path(page) / "index.html").read_text())
        assert 0.75 <= found / length <= 1.33, (page, found, length)

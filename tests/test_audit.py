"""`make audit`'s reading of its runs: a lesson page's blocking time against the bare
theme's, round by round. Synthetic runs: nothing here runs Lighthouse or times anything."""
from scripts.audit import lighthouse

PAGE = "lessons/some-lesson/"


def runs(pairs):
    """(lesson ms, bare ms) per round -> the runs lighthouse.py keeps."""
    found = []
    for number, (lesson, bare) in enumerate(pairs, start=1):
        for page, ms in ((PAGE, lesson), (lighthouse.BARE, bare)):
            found.append({"round": number, "page": page,
                          "metrics": {"total-blocking-time": ms}})
    return found


def test_a_page_within_the_target_in_every_round_meets_it():
    ratio = lighthouse.blocking_ratio(runs([(90, 80), (100, 90), (70, 60), (120, 100),
                                            (80, 70)]), PAGE)
    assert ratio["verdict"] == "meets" and ratio["high"] <= lighthouse.BLOCKING_TARGET


def test_a_page_far_over_the_target_misses_it():
    ratio = lighthouse.blocking_ratio(runs([(857, 68), (600, 70), (900, 80), (700, 60),
                                            (800, 75)]), PAGE)
    assert ratio["verdict"] == "misses" and ratio["low"] > lighthouse.BLOCKING_TARGET


def test_rounds_that_straddle_the_target_are_inconclusive():
    ratio = lighthouse.blocking_ratio(runs([(90, 80), (300, 90), (70, 60), (400, 100),
                                            (80, 70)]), PAGE)
    assert ratio["verdict"] == "inconclusive"


def test_a_bare_page_that_never_blocked_gives_no_ratio_rather_than_a_division():
    ratio = lighthouse.blocking_ratio(runs([(50, 0), (60, 0)]), PAGE)
    assert ratio["verdict"] == "no ratio" and ratio["roundsWithoutBareBlocking"] == 2


def test_the_audit_covers_every_registered_lesson():
    import tomllib

    registry = tomllib.loads((lighthouse.ROOT / "lesson_code/lessons.toml").read_text())
    assert lighthouse.lesson_pages() == [f"lessons/{entry['id']}/"
                                         for entry in registry["lesson"]]
    assert lighthouse.lesson_pages()  # never an audit of nothing


def test_too_few_rounds_decide_nothing():
    ratio = lighthouse.blocking_ratio(runs([(857, 68)]), PAGE)
    assert ratio["verdict"] == "inconclusive"


def test_the_ratio_can_be_taken_against_the_long_bare_page():
    found = runs([(120, 5), (110, 4), (130, 6), (125, 5), (118, 4)])
    for number, ms in enumerate((110, 115, 120, 118, 112), start=1):
        found.append({"round": number, "page": lighthouse.LONG_BARE,
                      "metrics": {"total-blocking-time": ms}})
    assert lighthouse.blocking_ratio(found, PAGE)["verdict"] == "misses"
    against_long = lighthouse.blocking_ratio(found, PAGE, lighthouse.LONG_BARE)
    assert against_long["verdict"] == "meets"
    assert lighthouse.LONG_BARE in against_long["words"]


def test_the_long_reference_page_is_about_as_long_as_a_lesson_page(reference_site):
    import re

    from scripts.audit.reference import LONG_PAGE_PATH
    elements = len(re.findall(r"<[a-zA-Z]", (reference_site / LONG_PAGE_PATH /
                                             "index.html").read_text()))
    assert 1200 <= elements <= 2500, elements

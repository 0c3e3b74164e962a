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

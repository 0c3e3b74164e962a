"""`make audit`'s reading of its runs: a lesson page's blocking time against the bare
theme's on a page as long, round by round. Synthetic runs: nothing here runs Lighthouse
or times anything."""
import json

import pytest

from scripts.audit import lighthouse

PAGE = "lessons/some-lesson/"


def runs(pairs):
    """(lesson ms, bare ms) per round -> the runs lighthouse.py keeps."""
    found = []
    for number, (lesson, bare) in enumerate(pairs, start=1):
        for page, ms in ((PAGE, lesson), (lighthouse.bare(PAGE), bare)):
            found.append({"round": number, "page": page,
                          "metrics": {"total-blocking-time": ms}})
    return found


# Rounds where the lesson page blocks about as long as the bare page.
ALIKE = [(100, 100), (105, 100), (95, 98), (102, 100), (98, 101)]


def test_a_page_within_the_target_in_every_round_meets_it():
    ratio = lighthouse.blocking_ratio(runs(ALIKE), PAGE)
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
    assert ratio["verdict"] == "no ratio" and ratio["rounds"] == [[50, 0], [60, 0]]


def test_every_round_counts_those_where_either_page_blocked_for_0_ms_included():
    """A round where the bare page blocked for 0 ms and the lesson page did not counts
    against the lesson page (a median of round-by-round ratios had to leave it out)."""
    only_the_page_blocked = [(40, 0), (40, 0), (40, 0), (0, 10), (0, 10), (0, 10)]
    ratio = lighthouse.blocking_ratio(runs(only_the_page_blocked), PAGE)
    assert ratio["estimate"] == pytest.approx(4.0) and ratio["verdict"] != "meets"
    assert ratio["rounds"] == [list(pair) for pair in only_the_page_blocked]
    mostly_idle = [(0, 40), (10, 0), (0, 30), (8, 0), (0, 20), (0, 25), (0, 35)]
    ratio = lighthouse.blocking_ratio(runs(mostly_idle), PAGE)
    assert ratio["meanBlockingTimeMs"] == {"page": pytest.approx(18 / 7),
                                           "reference": pytest.approx(150 / 7)}
    assert ratio["n"] == 7 and ratio["verdict"] == "meets"
    assert "(mean blocking 2.6 ms against 21.4 ms over 7 rounds; 95% interval" \
        in ratio["words"]


def test_the_audit_covers_every_registered_lesson():
    import tomllib

    registry = tomllib.loads((lighthouse.ROOT / "lesson_code/lessons.toml").read_text())
    assert lighthouse.lesson_pages() == [f"lessons/{entry['id']}/"
                                         for entry in registry["lesson"]]
    assert lighthouse.lesson_pages()  # never an audit of nothing


def test_too_few_rounds_decide_nothing():
    ratio = lighthouse.blocking_ratio(runs([(857, 68)]), PAGE)
    assert ratio["verdict"] == "inconclusive"


def test_the_bare_page_is_about_as_long_as_each_lesson_page(built_site, tmp_path):
    """The comparison holds only while the bare page is as long as the page it is held
    against: within a quarter of each lesson page's element count, for every lesson."""
    from scripts.audit.reference import build_reference, elements, long_page_path

    lengths = {page: elements((built_site / page / "index.html").read_text())
               for page in lighthouse.lesson_pages()}
    reference = build_reference(tmp_path, lengths=lengths)
    for page, length in lengths.items():
        bare = elements((reference / long_page_path(page) / "index.html").read_text())
        assert 0.75 <= bare / length <= 1.33, (page, bare, length)


def test_each_verdict_is_said_as_a_sentence_about_the_target():
    said = [lighthouse.blocking_ratio(runs(pairs), PAGE)["words"].split(": ", 1)[1] for pairs in
            (ALIKE,
             [(857, 68), (600, 70), (900, 80), (700, 60), (800, 75)],
             [(90, 80), (300, 90), (70, 60), (400, 100), (80, 70)])]
    assert said == ["meets the target of 1.2x", "misses the target of 1.2x",
                    "cannot tell whether it meets the target of 1.2x"]


def audited_runs():
    """Runs as lighthouse.py keeps them: every page of a round, with its host."""
    found = runs([(857, 68), (600, 70), (900, 80), (700, 60), (800, 75)])
    for run in found:
        run["hostBefore"] = {"loadAverage1m": 0.5 + run["round"] / 10, "cores": 2}
    return found


def test_render_only_derives_the_words_again_from_the_kept_runs_alone(tmp_path,
                                                                       monkeypatch):
    # What scores.json says of its runs is derived like a figure: a reworded verdict or
    # a new threshold is redone from the runs it keeps, and Lighthouse never starts.
    scores = tmp_path / "scores.json"
    kept = {"pages": [PAGE], "reference": [lighthouse.bare(PAGE)], "measuredAt": "then",
            "blockingAgainstBare": {PAGE: {"words": "said in an older way"}},
            "runs": audited_runs()}
    scores.write_text(json.dumps(kept))
    monkeypatch.setattr(lighthouse, "SCORES", scores)
    monkeypatch.setattr(lighthouse, "one_run", lambda url: pytest.fail("Lighthouse ran"))
    assert lighthouse.main(["--render-only"]) == 0
    again = json.loads(scores.read_text())
    assert again["runs"] == kept["runs"] and again["measuredAt"] == "then"
    assert again["blockingAgainstBare"][PAGE]["verdict"] == "misses"
    assert again["blockingAgainstBare"][PAGE]["words"].endswith("misses the target of 1.2x")
    assert again["blockingAgainstBare"][PAGE]["rounds"][0] == [857, 68]
    assert again["loadAverage1m"] == {"min": 0.6, "max": 1.0}
    assert list(again)[:3] == ["pages", "reference", "measuredAt"]  # its order, as kept


def kept_with(change):
    """The kept file of audited_runs() with `change` made to its first run."""
    found = audited_runs()
    change(found[0])
    return json.dumps({"pages": [PAGE], "runs": found})


def blocking(value):
    return lambda run: run["metrics"].update({"total-blocking-time": value})


@pytest.mark.parametrize("text", ['{"pages": ["lessons/some-lesson/"]', "[]",
                                  '{"pages": [], "runs": []}',
                                  json.dumps({"pages": [PAGE], "runs": runs([(90, 80)])}),
                                  json.dumps({"pages": ["lessons/another/"],
                                              "runs": audited_runs()}),
                                  kept_with(lambda run: run.update(hostBefore=[0.5])),
                                  kept_with(lambda run: run.update(round="one")),
                                  kept_with(lambda run: run.update(page=["x"])),
                                  kept_with(lambda run: run["metrics"].clear()),
                                  kept_with(blocking(float("nan"))),
                                  kept_with(blocking(-5)),
                                  kept_with(blocking(float("inf"))),
                                  '{"pages": [], "runs": [' + "9" * 5000 + "]}",
                                  "[" * 100_000 + "]" * 100_000],
                         ids=["cut short", "not a record", "no runs", "runs cut short",
                              "a page never audited", "a host that is a list",
                              "a round that is text", "a page that is a list",
                              "no metrics", "NaN blocking", "negative blocking",
                              "infinite blocking", "a 5,000-digit integer",
                              "100,000 nested arrays"])
def test_render_only_of_a_file_without_runs_to_read_is_one_line_naming_the_fix(
        tmp_path, monkeypatch, text):
    scores = tmp_path / "scores.json"
    scores.write_text(text)
    monkeypatch.setattr(lighthouse, "SCORES", scores)
    with pytest.raises(SystemExit) as stopped:
        lighthouse.main(["--render-only"])
    message = str(stopped.value)
    assert "\n" not in message and message.endswith("run `make audit` to measure afresh")
    assert scores.read_text() == text  # left as it was


def test_the_math_comparison_asks_for_a_built_site_in_one_line(tmp_path):
    from scripts.audit import math_side_by_side

    with pytest.raises(SystemExit, match=r"index\.html not found; run `make build` first"):
        math_side_by_side.main(["--site", str(tmp_path), "--out", str(tmp_path / "math")])
    assert not (tmp_path / "math").exists()


@pytest.mark.parametrize("pairs, verdict", [
    ([(0, 0)] * 4 + [(0, 10)], "meets"),          # resamples where neither page blocked
    ([(40, 0)] * 4 + [(0, 10)], "misses"),        # resamples where only this page did
])
def test_rounds_where_a_page_never_blocked_give_an_interval_not_nan(pairs, verdict):
    import math

    ratio = lighthouse.blocking_ratio(runs(pairs), PAGE)
    assert not math.isnan(ratio["low"]) and not math.isnan(ratio["high"])
    assert ratio["verdict"] == verdict and "nan" not in ratio["words"]

"""The analysis of made-up timings with outcomes known in advance: intervals, ratios and verdicts,
in bytes the recording and code decide, not the processor. Nothing here times this machine."""
import importlib
import json
import math

import numpy as np
import pytest

from conftest import ROOT, SEED
from scripts import intervals
from scripts.analysis_text import analysis_text
from scripts.store.outputs import for_lesson

# The seed's analyses: its registry's `analysis`, and its sweep's, named after the sweep.
analysis = importlib.import_module(SEED.analysis)
sweep_analysis = importlib.import_module(f"{SEED.sweep}_analysis")
program_facts = importlib.import_module(SEED.sweep).program_facts

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def same_draws():
    """Each test draws the same samples whichever tests ran before it."""
    RNG.bit_generator.state = np.random.default_rng(0).bit_generator.state


def blocks(median, spread=0.05, count=7, samples=5):
    """`count` blocks of `samples` times around `median`, each block shifted a little."""
    return [list(median * (1 + spread * RNG.uniform(-1, 1)) * RNG.uniform(0.97, 1.03, samples))
            for _ in range(count)]


@pytest.mark.parametrize("values, ends, covered", [
    # n = 21: the 6th smallest and largest hold the median with P = 1 - 2 P(Bin(21, 1/2) < 6)
    ([10, 19, 17, 14, 0, 18, 11, 2, 3, 9, 5, 7, 4, 20, 6, 15, 16, 8, 1, 13, 12], (5, 15),
     1 - 2 * sum(math.comb(21, i) for i in range(6)) / 2**21),  # 97.3 %
    ([5, 1, 4, 2, 3, 7, 6, 9, 8], (2, 8), 1 - 2 * 10 / 2**9),  # k = 2: 96.1 %
    ([3, 1, 2, 7, 5, 4, 6], (1, 7), 1 - 2 / 2**7),  # k = 1: 98.4 %
    ([3, 1, 2, 5, 4], (1, 5), 1 - 2 / 2**5)])  # 93.75 %: the best five values can do
def test_the_median_interval_is_the_binomial_order_statistics_one(values, ends, covered):
    stat = intervals.median_interval(values)
    assert (stat["low"], stat["high"]) == ends and stat["coverage"] == pytest.approx(covered)


@pytest.mark.parametrize("top, bottom, spread, above, below", [
    (300, 100, 0.05, "supported", "contradicted"),  # a clear effect, and its reverse
    (100, 300, 0.05, "contradicted", "supported"),
    (100, 100, 0.6, "inconclusive", "inconclusive"),  # overlapping samples
    (110, 100, 0.01, "equivalent", "equivalent")])  # clears 1, but not by a quarter
def test_paired_blocks_earn_the_verdict_their_interval_allows(top, bottom, spread, above, below):
    tops, bottoms = (intervals.block_medians(blocks(m, spread)) for m in (top, bottom))
    ratio = intervals.median_interval([t / b for t, b in zip(tops, bottoms)])  # block by block
    assert ratio["low"] <= ratio["median"] <= ratio["high"]
    assert ratio["low"] <= top / bottom <= ratio["high"]
    assert [intervals.verdict(ratio, True), intervals.verdict(ratio, False)] == [above, below]


@pytest.mark.parametrize("low, high, twin, expected", [
    (1.1, 1.3, None, "inconclusive"),  # across the margin
    (0.7, 0.9, None, "inconclusive"),
    (0.8, 1.25, None, "equivalent"),  # the band's own edges
    (2.6, 3.4, 3.8, "inconclusive"),  # one configuration measured twice, farther apart
    (2.6, 3.4, 1.2, "supported"),  # ... than the effect, or not
    (0.95, 1.1, 1.2, "equivalent"),  # no effect: a twin within the margin leaves it so
    (0.95, 1.1, 1.4, "inconclusive")])  # ... one past it does not
def test_an_interval_earns_a_verdict_only_clear_of_the_margin_and_its_twin(low, high, twin,
                                                                          expected):
    estimate = (low * high) ** 0.5
    ratio = {"estimate": estimate, "median": estimate, "low": low, "high": high, "n": 5}
    assert intervals.verdict(ratio, True, replicate_disagreement=twin) == expected


def test_the_paired_bootstrap_covers_a_ratio_of_means_about_as_often_as_it_says():
    """25 paired blocks of true mean ratio 2: the "95 %" interval holds it in about 95 %
    of 300 runs (a percentile bootstrap runs a little under, at 25 blocks)."""
    rng, hits = np.random.default_rng(2), []
    for _ in range(300):
        bottom = 100 * rng.lognormal(0, 0.5, 25)
        top = 2 * bottom * rng.lognormal(-0.02, 0.2, 25)  # E[lognormal(-s²/2, s)] = 1
        found = intervals.paired_mean_ratio([[t] for t in top], [[b] for b in bottom],
                                            resamples=1000)
        hits.append(found["low"] <= 2.0 <= found["high"])
    assert 0.88 <= np.mean(hits) <= 0.99


@pytest.mark.parametrize("top, bottom, low, high", [
    # Blocks that vary tenfold, top twice bottom in each: drawn in pairs, every resample's
    # ratio is 2; drawn apart, the interval would span most of 1 to 4.
    ([20.0, 200.0, 60.0, 120.0, 30.0, 180.0], [10.0, 100.0, 30.0, 60.0, 15.0, 90.0], 2.0, 2.0),
    # Every block alike: SciPy's default (BCa) gives NaN; the percentile interval is the one ratio.
    ([5.0] * 6, [2.5] * 6, 2.0, 2.0),
    # Resamples whose bottom mean is 0 (x over 0): the upper end is infinite, not NaN.
    ([40.0] * 4 + [0.0], [0.0] * 4 + [10.0], 2.6, np.inf),
    # Resamples where both sides are 0 count as equal (0 over 0 is 1), not NaN.
    ([0.0] * 4 + [1.0], [0.0] * 4 + [10.0], 0.0, 1.0)])
def test_the_bootstrap_pairs_blocks_and_gives_a_number_never_nan(top, bottom, low, high):
    found = intervals.paired_mean_ratio([[t] for t in top], [[b] for b in bottom])
    assert found["low"] == pytest.approx(low, abs=0.1) and found["high"] == pytest.approx(high)
    assert not np.isnan([found["estimate"], found["low"], found["high"]]).any()
    assert intervals.verdict(found, True) in intervals.VERDICTS


def test_one_block_leaves_every_ratio_possible_and_none_an_error():
    """SciPy refuses to resample one value; one block says nothing of the spread, so
    its interval is 0 to infinity and no verdict is earned. No block is an error."""
    found = intervals.paired_mean_ratio([[300.0, 310.0]], [[100.0, 90.0]])
    assert found["estimate"] == pytest.approx(305 / 95)
    assert (found["low"], found["high"], found["n"]) == (0.0, np.inf, 1)
    assert intervals.verdict(found, True) == "inconclusive"
    with pytest.raises(ValueError, match="no blocks"):
        intervals.paired_mean_ratio([], [])


def rounds_recording(many_per_round, few_per_round, cores=2, lesson_rs=None, lesson_scale=1.0):
    """A four-process recording's timings, its medians given per round."""
    samples = {}
    for side, per_round, ranks in (("p4", many_per_round, 4), ("p2", few_per_round, 2)):
        for algorithm in ("gloo", "ring"):
            for collective in ("reduce_scatter", "all_gather", "all_reduce"):
                samples.setdefault(side, {}).setdefault(algorithm, {})[collective] = \
                    blocks(per_round * analysis.dependent_rounds(algorithm, collective, ranks))
    host = {"cores": cores, "loadAverage1m": 0.5}
    method = {"order": [], "blocks": 7, "samplesPerBlock": 5, "warmupCallsPerBlock": 1,
              "hostBefore": host, "hostAfter": host}
    rs_median = lesson_rs if lesson_rs is not None else many_per_round * 3
    timing = {"samplesUs": {"all_reduce": blocks(many_per_round * 6 * lesson_scale),
                            "reduce_scatter": blocks(rs_median * lesson_scale),
                            "all_gather_only": blocks(many_per_round * 3 * lesson_scale)}, **method}
    rounds = {"samplesUs": samples, "gradientBytes": 32, **method}
    return {"data": {"timing": timing, "roundsTiming": rounds},
            "environment": {"processCount": 4, "busyCoresAtStart": 0.1, "loadAverage1m": 0.5}}


@pytest.mark.parametrize("per_round_at_4, verdict", [
    (300.0, "supported"),  # a round costs 3x at p = 4
    # Equal per-round times: inside the 25 % band, "no effect", not only "not shown".
    (100.0, "equivalent")])
def test_the_rounds_hypothesis_earns_one_verdict_per_algorithm(per_round_at_4, verdict):
    result = analysis.analyse("cpu-processes", rounds_recording(per_round_at_4, 100.0))["rounds"]
    assert result["premiseHolds"]
    assert {found["verdict"] for found in result["verdicts"].values()} == {verdict}
    assert result["verdictCounts"] == {**dict.fromkeys(intervals.VERDICTS, 0), verdict: 2}
    row = result["rows"]["gloo_all_gather"]
    assert "(about 95% interval " in row["perRoundRatio"]["words"]  # a bootstrap's
    for ratio in (row["perRoundRatio"], result["verdicts"]["ring"]["ratio"]):
        assert ratio["estimate"] == pytest.approx(per_round_at_4 / 100, rel=0.15)
    assert "verdict" not in row  # one verdict per algorithm, not per collective


@pytest.mark.parametrize("changes, widest, pooled, gloo", [
    # The same gloo collectives measured 3.8x apart, more than the effect: undecided.
    (dict(lesson_scale=1 / 3.8), 3.8, 3.8, "inconclusive"),
    # One collective 3.8x apart, two in agreement: pooled (1.56x), below the 3x effect.
    (dict(lesson_rs=900 / 3.8), 3.8, 3.8 ** (1 / 3), "supported"),
    (dict(lesson_scale=1 / 1.5), 1.5, 1.5, "supported")])  # noise smaller than the effect
def test_twin_measurements_decide_only_where_they_disagree_past_the_effect(changes, widest,
                                                                           pooled, gloo):
    result = analysis.analyse("cpu-processes", rounds_recording(300.0, 100.0, **changes))
    verdicts = result["rounds"]["verdicts"]
    assert max(row["twinDisagreement"] for name, row in result["rounds"]["rows"].items()
               if name.startswith("gloo")) == pytest.approx(widest, rel=0.1)
    assert verdicts["gloo"]["widestTwin"] == pytest.approx(widest, rel=0.1)
    assert verdicts["gloo"]["twinDisagreement"] == pytest.approx(pooled, rel=0.1)
    assert verdicts["gloo"]["verdict"] == gloo
    assert verdicts["ring"]["verdict"] == "supported"  # the ring was not timed twice
    # The factor compares means: the row shows the first table's mean beside it.
    row = result["rounds"]["rows"]["gloo_all_reduce"]
    assert row["twinWords"] == f"{row['twinMeanUs']:,.0f}, {row['twinDisagreement']:.1f}× apart"
    assert row["twinDisagreement"] == pytest.approx(row["timing"]["p4"]["mean"] / row["twinMeanUs"])


def test_other_work_holding_a_core_takes_the_premise_away():
    """2 cores, one busy with other work: 2 processes do not have a core each either."""
    recording = rounds_recording(300.0, 100.0)
    recording["environment"]["busyCoresAtStart"] = 1.2
    result = analysis.analyse("cpu-processes", recording)["rounds"]
    assert not result["premiseHolds"] and result["freeCores"] == 1
    assert {v["verdict"] for v in result["verdicts"].values()} == {"not applicable"}
    assert "did not have a core each" in result["premiseWords"]


def test_a_mean_keeps_its_verdict_where_a_median_of_two_kinds_jumps():
    """12 or 14 slow blocks of 25 (waiting out a time slice, as processes that outnumber the
    cores give): the median ratio jumps kinds, the mean moves a little."""
    bottom = blocks(100, spread=0.02, count=25, samples=9)
    runs = [[list((1000 if i < slow else 110) * RNG.uniform(0.95, 1.05, 9)) for i in range(25)]
            for slow in (12, 14)]
    medians = [np.median(np.divide(*map(intervals.block_medians, (t, bottom)))) for t in runs]
    means = [intervals.paired_mean_ratio(top, bottom) for top in runs]
    assert medians[0] < 1.25 < 5 < medians[1]
    assert [intervals.verdict(mean, True) for mean in means] == ["supported", "supported"]
    assert means[1]["estimate"] / means[0]["estimate"] == pytest.approx(1.14, rel=0.05)
    assert intervals.paired_mean_ratio(runs[0], bottom) == means[0]  # seeded: the same


def test_pooling_one_claim_narrows_its_interval():
    """Three noisy measurements of one ratio, pooled: narrower than any one, same value."""
    pairs = [(blocks(300, spread=0.5, count=25), blocks(100, spread=0.5, count=25))
             for _ in range(3)]
    alone = [intervals.paired_mean_ratio(top, bottom) for top, bottom in pairs]
    pooled = intervals.pooled_mean_ratio(pairs, [1.0, 1.0, 1.0])
    width = lambda found: found["high"] / found["low"]  # noqa: E731
    assert width(pooled) < min(width(found) for found in alone)
    assert pooled["estimate"] == pytest.approx(3.0, rel=0.2) and pooled["pooled"] == 3
    with pytest.raises(ValueError, match="differ in number"):
        intervals.pooled_mean_ratio([(pairs[0][0], pairs[0][1][:5])], [1.0])


def test_gloo_messages_and_dependent_rounds_follow_its_source():
    """gloo keeps two messages in flight: twice the messages, the ring's rounds."""
    assert [(analysis.messages_per_rank("gloo", c, 4), analysis.dependent_rounds("gloo", c, 4),
             analysis.dependent_rounds("ring", c, 4))
            for c in ("reduce_scatter", "all_gather", "all_reduce")] == [(3, 3, 3), (6, 3, 3),
                                                                        (12, 6, 6)]


def test_retransmissions_are_quoted_as_their_range_over_the_ranks():
    traffic = [{"retransmittedBytesPerRank": [1.44, 10.1, 4.04, 0.48]},
               {"retransmittedBytesPerRank": [0.0, 0.0, 0.0, 0.0]}]
    assert analysis.resent_bytes(traffic) == [{"min": 0.48, "max": 10.1}, {"min": 0.0, "max": 0.0}]


def test_the_gradient_size_is_derived_and_checked_against_the_recorded_payload():
    """The payload the run printed must be the ring model's for G, or the analysis stops."""
    recording = rounds_recording(100.0, 100.0)
    del recording["data"]["roundsTiming"]
    recording["environment"]["deviceCount"] = 4
    recording["data"]["gradient"] = [0.5] * 8
    recording["data"]["panels"] = [{}, {"series": [{"y": [48.0, 24.0, 48.0]}]}]
    assert analysis.analyse("cpu", recording)["gradient"] == {"values": 8, "bytes": 32, "ranks": 4}
    recording["data"]["panels"][1]["series"][0]["y"][0] = 96.0  # a float64 gradient's
    with pytest.raises(ValueError, match="not the ring model's for 8 float32 values"):
        analysis.analyse("cpu", recording)


def test_a_host_that_other_work_kept_busy_says_so():
    """busyCoresAtStart decides, not the load during the timing (the run's own)."""
    during = [{"cores": 2, "loadAverage1m": 5.5}, {"cores": 2, "loadAverage1m": 6.0}]
    busy = intervals.host(during, {"busyCoresAtStart": 1.8, "loadAverage1m": 3.0}, "workers")
    assert busy["busyAtStart"]
    assert "the host was busy, so these times also measure other work" in busy["words"]
    quiet = intervals.host(during, {"busyCoresAtStart": 0.1, "loadAverage1m": 2.4}, "workers")
    assert not quiet["busyAtStart"] and "otherwise idle" in quiet["words"]
    assert "load average was 5.5 to 6.0 on 2 cores, its own workers included" in quiet["words"]
    same = intervals.host(during[:1] * 2, {}, "workers")  # not "5.5 to 5.5"
    assert "load average was 5.5 at every reading on 2 cores" in same["words"]
    # An older recording without busyCoresAtStart: the load at the start decides.
    assert intervals.host(during, {"loadAverage1m": 2.5}, "workers")["busyAtStart"]
    assert not intervals.host(during, {"loadAverage1m": 1.0}, "workers")["busyAtStart"]


def test_every_interval_is_printed_one_way():
    """One vocabulary: a median's interval as measured, a bootstrap's 'about' (nominal)."""
    median = intervals.median_interval([1.0, 2.0, 2.25, 2.5, 3.0, 3.5, 4.0])
    assert intervals.words(median, unit="×", note="; 7 of 9 blocks") == \
        "2.50× (98% interval 1.00–4.00; 7 of 9 blocks)"
    ratio = intervals.paired_mean_ratio([[2.0], [2.2], [1.8]], [[1.0], [1.0], [1.0]])
    assert intervals.words(ratio, digits=1).startswith("2.0 (about 95% interval ")


def sweep_recording(time_of, ranks=(2, 4, 8), sizes=(8, 512, 32768, 2**21, 2**25),
                    count=5, faults_of=lambda collective, p, nbytes: 0,
                    own_cost_of=None, looping=8, loop_of=lambda *_: (0, 0)):
    """A sweep whose call takes `time_of(collective, p, S)` us with `faults_of` faults; a
    looped call's extras cost `own_cost_of` each, plus `loop_of(block, ...)` (us, faults)."""
    own_cost_of, rows = own_cost_of or time_of, []
    for block in range(count):
        for p in ranks:
            for nbytes in sizes:
                for collective in program_facts(p):
                    t, faults = time_of(collective, p, nbytes), faults_of(collective, p, nbytes)
                    more, more_faults = loop_of(block, collective, p, nbytes)
                    looped = t + (looping - 1) * own_cost_of(collective, p, nbytes) + more
                    for k, per_call, faulted in ((1, t, faults),
                                                 (looping, looped, faults + more_faults)):
                        rows.append({"collective": collective, "ranks": p, "block": block,
                                     "position": 0, "requestedBytes": nbytes, "bytes": nbytes,
                                     "callsPerSample": 2, "warmupCalls": 1, "wrong": 0,
                                     "collectivesPerCall": k, "minorFaults": [2 * faulted] * 3,
                                     "samplesUs": list(per_call * RNG.uniform(0.98, 1.02, 3))})
    host = {"cores": 2, "loadAverage1m": 0.2}
    return {"rows": rows, "programs": {str(p): program_facts(p) for p in ranks},
            "hosts": [{"block": 0, "ranks": 2, "before": host, "after": host}],
            "memcpyGBps": 10.0, "memcpyBytes": 2**28, "l2CacheBytes": 2 * 2**20,
            "method": {"blocks": count}, "pageBytes": 4096, "donation": [],
            "environment": {"busyCoresAtStart": 0.1, "loadAverage1m": 0.2}}


def ring_model_times(collective, p, nbytes):
    """Times that follow the ring model exactly: 50 us per step plus bytes at 1 GB/s."""
    facts = program_facts(p)[collective]
    return 50.0 * p * facts["steps"] + facts["phases"] * (p - 1) / p * nbytes / 1e3


def analysed(time_of=ring_model_times, **options):
    return sweep_analysis.analyse(sweep_recording(time_of, **options))


def test_a_sweep_that_follows_the_ring_model_supports_it_and_counts_every_verdict():
    result = analysed()
    warm = result["ratios"]["warm"]
    assert result["ratios"]["bytes"] == 2**25  # the largest size, warm and allocation-free
    assert warm["4"]["arOverRs"]["median"] == pytest.approx(2.0, rel=0.05)
    assert warm["4"]["arOverRs"]["ringModelVerdict"] == "supported"
    assert warm["4"]["agOverRs"]["ringModelVerdict"] == "supported"
    # No byte is sent in one process: the page says a match of its number (review L4).
    assert warm["4"]["arOverRs"]["ringModelMatch"] == "a match" and result["ringModelMatches"] == 9
    # The step table's d and a come from the same lines, fitted block by block (L3).
    steps = result["steps"]["4"]
    assert steps["dispatch"]["n"] == steps["perStep"]["n"] == steps["blockMiss"]["n"] == 5
    assert result["coverageWords"] == "about 94% of the time"
    # alpha was made to grow with p (50 us x p per step): supported for every program.
    assert {entry["verdict"] for entry in result["alphaWithRanks"].values()} == {"supported"}
    assert result["stepSummary"]["verdict"] == "supported"
    assert result["stepSummary"]["fitVerdict"] in intervals.VERDICTS
    # Every verdict the page prints is counted: alpha per program, the step cost, the one
    # line, and both predictions of every ratio.
    assert list(result["verdictCounts"]) == list(intervals.VERDICTS)  # "equivalent" too
    shown = (len(result["alphaWithRanks"]) + 2
             + sum(1 + (entry["touchedVerdict"] is not None)
                   for by_name in warm.values() for entry in by_name.values()))
    assert sum(result["verdictCounts"].values()) == shown == 6 + 2 + 9 + 6
    # Recorded before the allocator probe: the page says so.
    kept = result["faults"]["keepFreed"]
    assert kept["byRanks"] == {"2": {}, "4": {}, "8": {}} and kept["programs"] == []
    assert kept["words"].startswith("this recording holds no such run")
    json.dumps(result, allow_nan=False)  # what the derived file will hold: finite JSON


@pytest.mark.parametrize("misses, reading, verdict", [
    ([0.05, 0.08, 0.10, 0.07, 0.06], "which is what equal costs per rendezvous would give",
     "supported"),
    ([0.40, 0.50, 0.45, 0.60, 0.38], "so the rendezvous do not all cost the same",
     "contradicted"),
    ([0.21, 0.24, 0.25, 0.29, 0.22], "across the 25% margin: inconclusive", "inconclusive")])
def test_whether_one_line_fits_every_program_is_decided_by_its_block_interval(misses, reading,
                                                                              verdict):
    # The medians' worst miss (0.21) alone never decides: read as a point, it flipped.
    table = {"2": {"maxRelResidualByBlock": [m / 2 for m in misses]},
             "4": {"maxRelResidualByBlock": misses}}
    words = sweep_analysis.fit_words(table, worst=0.21)
    assert words["fitWords"].startswith("one line fits every program within 21% at each p "
                                        f"(block by block, {min(misses):.0%}–")
    assert words["fitWords"].endswith(reading) and words["fitVerdict"] == verdict
    assert words["worstMissByBlock"]["median"] == pytest.approx(sorted(misses)[2])


def test_the_sweep_analysis_contradicts_the_ring_model_when_ratios_are_far_from_it():
    def times(collective, p, nbytes):
        # reduce-scatter ten times faster than everything else at every size
        return (10.0 if "reduce_scatter" == collective else 100.0) + nbytes / 1e3
    entry = analysed(times)["ratios"]["warm"]["2"]["arOverRs"]
    assert (entry["ringModelVerdict"], entry["touchedVerdict"]) == ("contradicted", "contradicted")
    assert entry["ringModelMatch"] == "a miss"


def test_bytes_touched_predicts_what_the_review_computed():
    programs = {str(p): program_facts(p) for p in (2, 4, 8)}
    for p in (2, 4, 8):
        assert sweep_analysis.touched_prediction("all_gather", "reduce_scatter", programs, p) \
            == pytest.approx(2 * p / (p + 1))
        assert sweep_analysis.touched_prediction("all_reduce", "reduce_scatter", programs, p) \
            == pytest.approx((3 * p - 1) / (p + 1))


def test_a_noisy_sweep_is_inconclusive_rather_than_a_trend():
    noisy = analysed(lambda collective, p, nbytes: (100.0 + nbytes / 1e3) * RNG.uniform(0.3, 3.0))
    verdicts = [entry["verdict"] for entry in noisy["alphaWithRanks"].values()]
    assert verdicts.count("inconclusive") >= len(verdicts) - 1


def output_pages(collective, p, nbytes):
    """Minor faults of a call that maps all p of its outputs afresh, 4 KiB pages."""
    output_over_s = importlib.import_module(f"{SEED.sweep}_faults").output_over_s
    return p * output_over_s(collective, p) * nbytes / 4096


def faulting_at_the_largest(collective, p, nbytes):
    return output_pages(collective, p, nbytes) if nbytes == 2**25 and \
        collective in ("all_reduce", "all_gather") else 3  # a few stray runtime faults


def test_the_fits_and_the_busbw_comparison_stand_below_the_fault_onset():
    """From 32 MiB each all-reduce and all-gather call faults its outputs in afresh: the
    onset is read from the recorded counts, and the fits stop below it."""
    result = analysed(faults_of=faulting_at_the_largest)
    table = result["faults"]
    assert table["onsetBytes"] == 2**25 and table["belowOnsetBytes"] == 2**21
    assert result["sizeLabels"]["belowOnset"] == "2 MiB"
    assert {fit["fitMaxBytes"] for by_p in result["fits"].values() for fit in by_p.values()} \
        == {2**21}
    assert table["atLargest"]["4"]["all_reduce"]["faultedShare"] == pytest.approx(1.0)
    assert table["atLargest"]["4"]["all_reduce"]["callFaults"] == pytest.approx(32768)
    # The loop's extra collectives reuse the buffers: no fault is theirs.
    assert table["atLargest"]["4"]["all_reduce"]["extraFaults"] == 0
    # One size at the onset is not "from 32 MiB up, at every size".
    assert table["onsetWords"] == ("only at 32 MiB, the largest size, the calls of the "
                                   "all-reduce and the all-gather at every p fault in their "
                                   "outputs: 32 MiB is the onset")
    # Below the onset nothing faulted here, so no busbw cell says it did.
    assert {fall["faultedBlocks"] for fall in result["busbwFallsWithRanks"].values()} == {0}
    assert next(row for row in result["rows"] if row["collective"] == "all_reduce"
                and row["ranks"] == 4 and row["bytes"] == 2**25)["faultsPerCall"] == \
        pytest.approx(32768)


def faulting_from_2_mib(collective, p, nbytes):
    return output_pages(collective, p, nbytes) if nbytes >= 2**21 else 0


@pytest.mark.parametrize("faults_of, onset, below, words", [
    (faulting_from_2_mib, 2**21, 32768, "from 2 MiB up (2 sizes), the calls of every program "
     "at every p fault in their outputs: 2 MiB is the onset"),
    # Whose calls set the onset, and that others fault from a larger size.
    (lambda c, p, nbytes: faulting_from_2_mib(c, p, nbytes) if c == "all_gather" and p < 8
     else faulting_at_the_largest(c, p, nbytes), 2**21, 32768,
     "from 2 MiB up (2 sizes), the calls of the all-gather at p = 2 and 4 fault in their "
     "outputs, some others' from 32 MiB: 2 MiB is the onset"),
    # Three faults outweigh an 8-byte output, but larger sizes do not fault: no onset.
    (lambda *_: 3, None, 2**25, "there is no onset")])
def test_the_onset_is_the_size_from_which_every_larger_one_faults(faults_of, onset, below, words):
    table = analysed(faults_of=faults_of)["faults"]
    assert (table["onsetBytes"], table["belowOnsetBytes"]) == (onset, below)
    assert words in table["onsetWords"]


def looped(blocks, collective, us=lambda *_: 0.0, faulted_share=0.0):
    """A `loop_of`: in `blocks`, the looped call of `collective` at 32 MiB takes `us` more
    and maps `faulted_share` of its outputs afresh."""
    def loop_of(block, c, p, nbytes):
        if block in blocks and c == collective and nbytes == 2**25:
            return us(c, p, nbytes), faulted_share * output_pages(c, p, nbytes)
        return 0.0, 0
    return loop_of


def test_the_ratio_table_counts_only_blocks_whose_loop_neither_faulted_nor_beat_one_call():
    """The ratios are of warm, allocation-free collectives: block 2's looped all-reduce
    faults half its outputs in and takes 0.2 s longer, so it must not count."""
    def slow_block(share):
        return analysed(faults_of=faulting_at_the_largest, loop_of=looped(
            {2}, "all_reduce", lambda *_: 200_000.0, share))
    result = slow_block(0.5)
    warm = result["ratios"]["warm"]
    # The page's note on how often an interval covers its median names these (review L2).
    assert result["coverageWords"] == "about 94% of the time, 88% for the 3 resting on 4 blocks"
    for p in ("2", "4", "8"):
        entry = warm[p]["arOverRs"]
        assert entry["n"] == 4 and "; 4 of 5 blocks)" in entry["words"]
        assert entry["high"] < 2.5 and entry["ringModelVerdict"] == "supported"
        assert warm[p]["agOverRs"]["n"] == 5  # its blocks all count
    kept = slow_block(0.0)["ratios"]["warm"]["4"]["arOverRs"]  # without faults, it counts
    assert kept["n"] == 5 and kept["high"] > 2.5
    # A looped call faster than one call is noise, not a ratio.
    entry = analysed(loop_of=looped({1}, "all_gather", lambda *at: -8 * ring_model_times(
        *at)))["ratios"]["warm"]["4"]["agOverRs"]
    assert entry["n"] == 4 and entry["low"] > 0 and "; 4 of 5 blocks)" in entry["words"]


def too_few_blocks(node, where="analysis"):
    """Where an analysis holds a verdict other than "inconclusive" in a dict of fewer
    blocks ("n") than the course's rule, intervals.MIN_BLOCKS."""
    node = dict(enumerate(node)) if isinstance(node, list) else node
    return [] if not isinstance(node, dict) else [
        f"{where}.{key}" for key, value in node.items() if str(key).endswith("erdict")
        and value not in (None, "inconclusive") and node.get("n", 0) < 3] + [
        bad for key, value in node.items() for bad in too_few_blocks(value, f"{where}.{key}")]


def test_no_verdict_rests_on_fewer_blocks_than_the_rule():
    """Turn 6's M1: a per-step cost at p = 2 about zero (the review's blocks, us) gave a
    ratio over noise, "supported" on 2 blocks. The growth is a difference now, judged on
    a(2)/a(8); with a(8) left in 2 blocks it is inconclusive, as is anything on 2 blocks."""
    assert intervals.MIN_BLOCKS == 3
    low, high = [-5.8, -6.6, -9.5, 0.5, 0.1], [49.1, 51.9, 65.2, 45.1, 55.9]
    growth = sweep_analysis.step_growth(low, high)
    assert growth["words"] == "56 µs (94% interval 45–75 µs)" and growth["verdict"] == "supported"
    few = sweep_analysis.step_growth(low, [49.1, -1, -2, -3, 55.9])
    assert few["n"] == 2 and few["verdict"] == "inconclusive" and "; 2 of 5 blocks)" in few["words"]
    assert too_few_blocks({"x": [{"n": 2, "ringModelVerdict": "supported"}]}) == \
        ["analysis.x.0.ringModelVerdict"]
    # Two allocation-free blocks of five decide nothing, anywhere in the analysis.
    result = analysed(loop_of=looped({0, 1, 2}, "all_reduce", faulted_share=0.5))
    assert result["ratios"]["warm"]["4"]["arOverRs"]["n"] == 2
    committed = ROOT / for_lesson(SEED).analysis("sweep")
    assert too_few_blocks(result) == too_few_blocks(json.loads(committed.read_text())) == []


def test_the_loop_gives_each_collective_s_own_cost_without_the_call_s():
    """A call costs 100 us over its collective: the loop's extra collectives recover it alone."""
    def own(collective, p, nbytes):
        return 20.0 + nbytes / 1e3
    result = analysed(lambda c, p, nbytes: own(c, p, nbytes) + 100.0, own_cost_of=own)
    entry = result["faults"]["atLargest"]["4"]["reduce_scatter"]
    assert entry["extra"]["median"] == pytest.approx(own("", 4, 2**25), rel=0.05)
    share = result["faults"]["smallestCall"]
    assert share["byRanks"]["4"]["share"]["min"] == pytest.approx(20 / 120, abs=0.03)
    assert share["words"] == ("one more all-reduce, reduce-scatter or all-gather inside the loop "
                              "costs, of a whole call, 17% at p = 2, 17% at p = 4 and 17% at p = 8")
    assert {entry["shareWords"] for entry in share["byRanks"].values()} == {"17%"}
    # Beside what a separate call pays, alpha (about 120 us): combining is about calls.
    assert [entry["alphaWords"][0] for entry in result["inProgram"].values()] == ["1"] * 3


STEP_SIZES = (8, 512, 2**21, 2**23, 3 * 2**22, 2**24, 3 * 2**23, 2**25)


def cached_reduction(collective, p, nbytes):
    """1 us per KiB while each device's S/p fits a 2 MiB cache, twice that per byte past it."""
    return nbytes / 1024 * (1.0 if nbytes / p <= 2**21 else 2.0)


def test_the_step_says_which_warm_collective_outgrew_the_bytes_and_where():
    """From 8 to 32 MiB, S/p leaves a 2 MiB cache at p = 4 and 8 (8x for 4x the bytes), not
    at p = 2 (already past it); the largest rise falls where S/p passes 2 MiB."""
    result = analysed(lambda c, p, nbytes: cached_reduction(c, p, nbytes) + 100.0,
                      sizes=STEP_SIZES, own_cost_of=cached_reduction,
                      faults_of=faulting_at_the_largest)
    step = result["faults"]["step"]
    assert step["labels"] == {"from": "8 MiB", "to": "32 MiB"} and step["bytesStep"] == 4
    by_p = {p: step["byRanks"][p]["reduce_scatter"] for p in ("2", "4", "8")}
    assert [by_p[p]["againstBytes"] for p in ("2", "4", "8")] == \
        ["as the bytes", "faster", "faster"]
    assert by_p["4"]["extra"]["median"] == pytest.approx(8.0, rel=0.05)
    assert by_p["4"]["extraWords"].startswith(f"{by_p['4']['extra']['median']:.1f}× (")
    assert step["words"].endswith(
        "Against the bytes, the warm cost grew faster for the all-reduce at p = 4 and 8, the "
        "reduce-scatter at p = 4 and 8 and the all-gather at p = 4 and 8. It grew as the bytes for "
        "the all-reduce at p = 2, the reduce-scatter at p = 2 and the all-gather at p = 2")
    assert [row["label"] for row in step["located"]] == \
        ["2 MiB", "8 MiB", "12 MiB", "16 MiB", "24 MiB", "32 MiB"]
    words = step["locationWords"]
    for p, start, end in ((2, 1, 4), (4, 2, 3), (8, 2, 3)):
        assert f"At p = {p} it rises 2.0× as S/p goes from {start} MiB to {end} MiB." in words
    assert words.endswith("This host's Linux reports an L2 cache of 2 MiB per core. Each of "
                          "these rises comes where S/p passes 2 MiB, as the hypothesis predicts.")
    # Turn 6's M2: the review's us per MiB, whose rises fall elsewhere, contradict it.
    step_module = importlib.import_module(f"{SEED.sweep}_step")
    rows = [{"bytes": mib * 2**20, **{str(p): {"usPerMiB": us} for p, us in zip((2, 4, 8), costs)}}
            for mib, *costs in ((2, 159, 167, 405), (8, 110, 198, 351), (12, 111, 199, 509),
                                (16, 117, 197, 554), (24, 103, 214, 569), (32, 113, 288, 595))]
    said = step_module.location_words(rows, (2, 4, 8), 2**21)
    # p = 2's largest rise, 1.1x (12 to 16 MiB), is within the margin: no rise (review L5).
    assert "At p = 2 no rise passes the 25% margin. At p = 4 it rises 1.3× as" in said
    assert said.endswith("Where S/p passes 2 MiB, the cost per MiB changes 0.7×, 1.0× and 1.0× at "
                         "p = 2, 4 and 8: none of the largest rises comes there. As stated, the "
                         "hypothesis does not fit this recording, and what sets the step is open.")
    assert sum(result["faults"]["verdictCounts"].values()) == 9  # 3 programs x 3 p


def keep_freed_recording(kept_faults=0, kept_factor=0.5):
    """A sweep faulting at 32 MiB, with an allocator probe per block and p whose calls
    fault `kept_faults` times each and take `kept_factor` of the sweep's time."""
    recording = sweep_recording(lambda c, p, nbytes: 1000.0 + nbytes / 1e3,
                                faults_of=faulting_at_the_largest)
    recording["allocator"] = [
        {"ranks": p, "block": block, "glibc": "2.36",
         "mallopt": {"M_MMAP_MAX": 0, "M_TRIM_THRESHOLD": 2**30, "M_TOP_PAD": 2**28},
         "rows": [{**row, "samplesUs": [t * kept_factor for t in row["samplesUs"]],
                   "minorFaults": [kept_faults] * 3}
                  for row in recording["rows"]
                  if (row["ranks"], row["block"], row["bytes"]) == (p, block, 2**25)
                  and row["collectivesPerCall"] == 1
                  and row["collective"] in ("all_reduce", "reduce_scatter", "all_gather")]}
        for block in range(5) for p in (2, 4, 8)]
    return recording


def test_keeping_freed_memory_is_read_against_the_same_blocks_calls():
    """With glibc keeping freed memory, the all-reduce faults in nothing, in half the time."""
    kept = sweep_analysis.analyse(keep_freed_recording())["faults"]["keepFreed"]
    entry = kept["byRanks"]["4"]["all_reduce"]
    assert entry["faultedShare"] == pytest.approx(1.0) and entry["keptFaultedShare"] == 0
    assert entry["fasterWords"].startswith("2.0× (94% interval 2.0–2.0")
    assert entry["verdict"] == "supported"
    assert kept["programs"] == ["all_reduce", "reduce_scatter", "all_gather"]
    # Nothing faulted: "under 1%", never "more than 0%" (content review L5).
    assert kept["words"] == ("in the median block each program faulted in under 1% of its "
                             "outputs, against up to 100% as the sweep ran them. None of the 135 "
                             "timed samples faulted in more than 5% of its outputs")
    assert len(kept["verdicts"]) == 9
    unchanged = sweep_analysis.analyse(keep_freed_recording(kept_faults=2 * 32768, kept_factor=1.0))
    assert unchanged["faults"]["keepFreed"]["words"].endswith(
        ". Still, 135 of the 135 timed samples faulted in 50–400% of theirs")
    entry = unchanged["faults"]["keepFreed"]["byRanks"]["4"]["all_reduce"]
    assert entry["keptFaultedShare"] == pytest.approx(1.0) and entry["verdict"] == "equivalent"


def test_floats_are_kept_to_the_digits_every_processor_agrees_on_and_nothing_else_changes():
    # Two machines' means of the same committed sweep (AVX-512 and not), as first seen.
    here = {"perStepUs": 122.64892127501959, "blocks": [125.05236074681406, 120.3],
            "n": 123456789, "words": "1.23456789", "flag": True, "none": None,
            "pair": (1e-05, 2.0000001e9)}
    there = {**here, "perStepUs": 122.64892127501956, "blocks": [125.05236074681409, 120.3]}
    assert analysis_text(here) == analysis_text(there)
    assert json.loads(analysis_text(here)) == {
        "perStepUs": 122.649, "blocks": [125.052, 120.3], "n": 123456789,
        "words": "1.23456789", "flag": True, "none": None, "pair": [1e-05, 2e9]}

"""The message-size sweep: its arithmetic, its fit, its CLI, and the committed recording."""
import json
import re
import subprocess
import sys

import jax
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from conftest import ROOT, clean_env, project_copy
from lesson_code import distributed_03_sweep as sweep_measure
from scripts import bench, hashes
from scripts.figures.sweep import render
from scripts.recordings import load_recording, validate
from scripts import sweep_analysis as analysis
from scripts.sizes import COLLECTIVES, SIZES, XLA_COLLECTIVES, element_count, sizes_for
from scripts.sweep.analysis import (algbw_gbps, busbw_gbps, dependent_steps, fit_alpha_beta,
                                    fit_below_cache, fit_steps, order_of_magnitude)

# A partial sweep for the tests: p = 4, three sizes, few samples.
QUICK = {"ranks": [4], "sizes": [8, 8192, 2**20], "samples": 5, "minSamples": 3,
         "rowBudgetS": 0.2, "minSampleMs": 0.5}
RECORDING = ROOT / "recordings" / "distributed-03.sweep.json"
FIGURE = ROOT / "figures" / "distributed-03-sweep.svg"


def quick_sweep_program(out):
    """A `python -c` program: bench.py's main on the QUICK plan, writing `out`."""
    return (f"import sys; from scripts import bench; "
            f"sys.exit(bench.main(['--out', {str(out)!r}], plan={QUICK!r}))")


# --- arithmetic -----------------------------------------------------------------------

@pytest.mark.parametrize("collective, ranks, busbw", [
    # nccl-tests doc/PERFORMANCE.md: S = 1e9 B in 0.1 s is algbw 10 GB/s, then
    ("all_reduce", 8, 10 * 2 * 7 / 8),               # 2(n-1)/n
    ("all_reduce", 2, 10.0),
    ("reduce_scatter", 4, 10 * 3 / 4),              # (n-1)/n
    ("all_gather", 8, 10 * 7 / 8),                  # (n-1)/n
    ("reduce_scatter_all_gather", 4, 10 * 2 * 3 / 4),  # both phases, like all-reduce
    ("ring_all_reduce", 4, 10 * 2 * 3 / 4),
    ("ring_reduce_scatter", 8, 10 * 7 / 8),
])
def test_bandwidths_follow_nccl_tests(collective, ranks, busbw):
    assert algbw_gbps(1e9, 0.1) == pytest.approx(10.0)
    assert busbw_gbps(collective, ranks, 1e9, 0.1) == pytest.approx(busbw)


def test_element_counts_round_up_to_a_multiple_of_ranks():
    assert SIZES[0] == 8 and SIZES[-1] == 32 * 2**20 and len(SIZES) == 12
    assert element_count(8, 2) == 2
    assert element_count(8, 4) == 4  # 16 B actually moved
    assert element_count(8, 8) == 8
    assert element_count(32 * 2**20, 8) == 8 * 2**20


def test_sizes_that_round_alike_are_measured_once():
    assert sizes_for(SIZES[:3], 8) == [(8, 32), (128, 128)]  # 8 B and 32 B are both 8 floats
    assert sizes_for(SIZES[:3], 4) == [(8, 16), (32, 32), (128, 128)]
    assert [b for _, b in sizes_for(SIZES, 2)] == list(SIZES)


def test_steps_count_rendezvous_in_one_call():
    assert [dependent_steps(c, 8) for c in COLLECTIVES] == [1, 1, 1, 2, 7, 14]
    assert dependent_steps("ring_all_reduce", 8, np.log2) == 6


def test_step_fit_prefers_the_count_that_made_the_latencies():
    collectives = list(COLLECTIVES)
    alphas = [20e-6 + dependent_steps(c, 8) * 30e-6 for c in collectives]
    dispatch, per_step, worst = fit_steps(alphas, collectives, 8)
    assert (dispatch, per_step, worst) == pytest.approx((20e-6, 30e-6, 0), abs=1e-9)
    assert fit_steps(alphas, collectives, 8, np.log2)[2] > 0.2
    assert analysis.verdict(0.04, 0.3, 8) == "p - 1 steps per phase"
    assert analysis.verdict(0.3, 0.04, 8) == "log2 p steps per phase"
    assert analysis.verdict(0.1, 0.12, 4).endswith("too noisy to say")
    assert analysis.verdict(0.6, 0.9, 4).endswith("too noisy to say")
    assert analysis.verdict(0.1, 0.1, 2).startswith("either")


def test_fit_stops_below_the_cache_and_records_the_cliff():
    sizes = np.array(SIZES, dtype=float)
    times = 100e-6 + sizes / 1e9
    times[sizes >= 2**24] *= 5  # past a 16 MiB cache every size is five times slower
    fit = fit_below_cache(sizes, times, 2**24)
    assert fit["alphaUs"] == pytest.approx(100) and fit["betaGBps"] == pytest.approx(1)
    assert fit["maxRelResidual"] == pytest.approx(0, abs=1e-9)
    assert fit["fitMaxBytes"] == 8 * 2**20 and fit["fittedSizes"] == len(SIZES) - 1
    assert fit["largestOverFit"] == pytest.approx(5)
    assert fit["nHalfOrderKiB"] == 100  # n1/2 = 1e5 B = 98 KiB
    assert fit_below_cache(sizes, times, None)["maxRelResidual"] > 0.5  # the cliff, fitted
    assert order_of_magnitude(400) == 1000 and order_of_magnitude(300) == 100


def test_words_for_the_page_follow_the_numbers():
    assert analysis.trend([4.1, 2.9, 1.8]) == "falls"
    assert analysis.trend([1.0, 2.0, 3.0]) == "rises"
    assert analysis.trend([1.0, 2.0, 1.5]).startswith("neither")
    assert analysis.versus_model([1.9, 2.2], 2) == "close to"
    assert analysis.versus_model([4.1, 4.6], 2) == "far from"
    assert analysis.versus_model([2.1, 4.6], 2) == "around"


@settings(max_examples=40, deadline=None)
@given(alpha=st.floats(1e-6, 1e-2), beta=st.floats(1e8, 1e11))
def test_fit_recovers_exact_alpha_beta(alpha, beta):
    sizes = np.array(SIZES, dtype=float)
    fitted_alpha, fitted_beta = fit_alpha_beta(sizes, alpha + sizes / beta)
    assert fitted_alpha == pytest.approx(alpha, rel=1e-6)
    assert fitted_beta == pytest.approx(beta, rel=1e-6)


def test_fit_tolerates_relative_noise():
    sizes = np.array(SIZES, dtype=float)
    noise = np.random.default_rng(0).uniform(0.95, 1.05, sizes.size)
    alpha, beta = fit_alpha_beta(sizes, (150e-6 + sizes / 2e9) * noise)
    assert alpha == pytest.approx(150e-6, rel=0.1)
    assert beta == pytest.approx(2e9, rel=0.1)


def test_fit_never_reports_negative_latency():
    sizes = np.array(SIZES, dtype=float)
    # Time growing faster than size pulls the free fit below zero latency.
    alpha, beta = fit_alpha_beta(sizes, sizes / 1e9 * np.linspace(0.7, 1.3, sizes.size))
    assert alpha == 0 and beta > 0


# --- the command line -----------------------------------------------------------------

def test_quick_sweep_end_to_end(tmp_path):
    out = tmp_path / "sweep.json"
    done = subprocess.run([sys.executable, "-c", quick_sweep_program(out)], cwd=ROOT,
                          env=clean_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    recording = json.loads(out.read_text())
    validate(recording)
    assert {(r["collective"], r["ranks"]) for r in recording["rows"]} == {
        (c, 4) for c in COLLECTIVES}
    assert set(recording["ratios"]["byRanks"]["4"]) >= {"bytes", "arOverRs", "ringArOverRingRs"}
    assert all(r["wrong"] == 0 for r in recording["rows"])
    assert recording["provenance"] == "recorded_cpu_computation"
    assert (tmp_path / "sweep.svg").read_text() == render(recording)


def in_process_measure(ranks, sizes, plan):
    # conftest gave this interpreter 8 devices; a sub-mesh stands in for a fresh process.
    rows = sweep_measure.measure_ranks(jax.devices()[:ranks], sizes, plan)
    return {"backend": sweep_measure.describe_backend(), "rows": rows}


TINY = {"samples": 3, "minSamples": 3, "rowBudgetS": 0.1, "minSampleMs": 0.2}


def test_a_wrong_result_fails_and_writes_nothing(tmp_path, monkeypatch, capsys):
    true_reference = sweep_measure.reference

    def off_by_one(collective, contributions):
        expected = true_reference(collective, contributions).copy()
        expected[-1] += 1
        return expected

    monkeypatch.setattr(sweep_measure, "reference", off_by_one)
    monkeypatch.setattr(bench, "measure_in_subprocess",
                        lambda module, *args, root: in_process_measure(*args))
    out = tmp_path / "sweep.json"
    assert bench.main(["--out", str(out)], plan={**QUICK, "sizes": [8, 1024], "samples": 3}) == 1
    message = capsys.readouterr().err
    assert "differ from the NumPy reference" in message and "nothing was written" in message
    assert list(tmp_path.iterdir()) == []


def test_the_ring_series_is_checked_like_xla_collectives():
    mesh = Mesh(np.array(jax.devices()[:4]), ("data",))
    contributions = np.arange(4 * 8, dtype=np.float32).reshape(4, 8) % 5
    for collective in ("ring_reduce_scatter", "ring_all_reduce"):
        body, in_spec, out_spec = sweep_measure.PROGRAMS[collective]
        call = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=in_spec, out_specs=out_spec))
        result = call(jax.device_put(contributions, NamedSharding(mesh, in_spec)))
        expected = sweep_measure.reference(collective, contributions)
        assert sweep_measure.count_wrong(result, expected) == 0
        assert sweep_measure.count_wrong(result, expected + 1) == result.size


def test_large_sizes_get_fewer_samples():
    assert sweep_measure.sample_count(8, 10e-6, 15, 5, 0.6) == 15  # 80 us a sample
    assert sweep_measure.sample_count(1, 0.3, 15, 5, 0.6) == 5  # 300 ms a call
    assert sweep_measure.sample_count(1, 0.125, 15, 5, 1.0) == 8


def test_wrong_values_are_counted_on_every_device_copy():
    mesh = Mesh(np.array(jax.devices()[:4]), ("data",))
    expected = np.zeros(8, np.float32)
    expected[3] = 1
    replicated = jax.device_put(np.zeros(8, np.float32), NamedSharding(mesh, P()))
    assert sweep_measure.count_wrong(replicated, expected) == 4  # one per device's copy
    split = jax.device_put(np.zeros(8, np.float32), NamedSharding(mesh, P("data")))
    assert sweep_measure.count_wrong(split, expected) == 1


def test_the_recording_figure_and_lock_move_into_place_together(tmp_path):
    root = project_copy(tmp_path / "repo")
    from scripts.lessons import load_lessons

    lesson = load_lessons(root)["distributed-03"]
    bench.record_sweep(lesson, None, [4], [8, 8192, 2**20], TINY, measure=in_process_measure)
    recording = load_recording(root / "recordings" / "distributed-03.sweep.json")
    assert (root / "figures" / "distributed-03-sweep.svg").read_text() == render(recording)
    lock = json.loads((root / "recordings" / "outputs.lock.json").read_text())
    assert lock["figures/distributed-03-sweep.svg"]["inputs"][
        "recordings/distributed-03.sweep.json"] == hashes.digest(
        root / "recordings" / "distributed-03.sweep.json")
    assert list(root.rglob("*.tmp")) == []


def test_a_failed_figure_leaves_the_committed_sweep_as_it_was(tmp_path, monkeypatch):
    root = project_copy(tmp_path / "repo")
    from scripts.figures import sweep as sweep_figure
    from scripts.lessons import load_lessons

    def broken(recording):
        raise RuntimeError("renderer broke")

    monkeypatch.setattr(sweep_figure, "render", broken)
    before = {p: p.read_bytes() for p in [root / "recordings" / "distributed-03.sweep.json",
                                          root / "figures" / "distributed-03-sweep.svg"]}
    with pytest.raises(RuntimeError, match="renderer broke"):
        bench.record_sweep(load_lessons(root)["distributed-03"], None, [4], [8, 8192, 2**20],
                           TINY, measure=in_process_measure)
    assert {p: p.read_bytes() for p in before} == before
    assert list(root.rglob("*.tmp")) == []


# --- the committed sweep --------------------------------------------------------------

@pytest.fixture(scope="module")
def committed():
    return json.loads(RECORDING.read_text())


def test_committed_sweep_is_complete_and_right(committed):
    validate(committed)
    assert committed["provenance"] == "recorded_cpu_computation"
    method = committed["method"]
    for collective in COLLECTIVES:
        for ranks in (2, 4, 8):
            rows = [r for r in committed["rows"]
                    if r["collective"] == collective and r["ranks"] == ranks]
            assert [(r["requestedBytes"], r["bytes"]) for r in rows] == sizes_for(SIZES, ranks)
            assert all(r["wrong"] == 0 and r["samples"] >= method["minSamples"] for r in rows)
            shortest_us = 1000 * method["minSampleMs"]
            assert all(r["callsPerSample"] * r["medianUs"] >= shortest_us for r in rows)
            fit = committed["fits"][collective][str(ranks)]
            assert fit["fitMaxBytes"] < committed["lastLevelCacheBytes"]


def test_committed_figure_is_rendered_from_committed_sweep(committed):
    assert FIGURE.read_text() == render(committed)


def test_committed_figure_text_is_readable_at_page_width():
    """At the ~700 px the desktop page gives the figure, no text may render under 9 px."""
    svg = FIGURE.read_text()
    view_width = float(re.search(r'viewBox="0 0 ([\d.]+) ', svg).group(1))
    smallest = min(float(size) for size in re.findall(r"font-size: ([\d.]+)px", svg))
    assert smallest * 700 / view_width >= 9


def medians(committed, collective, ranks):
    return {r["bytes"]: r["medianUs"] for r in committed["rows"]
            if r["collective"] == collective and r["ranks"] == ranks}


def test_claims_on_the_page_hold_for_committed_sweep(committed):
    """docs/going-further/sweep.md reads its numbers and its verdicts from the recording;
    the verdicts must say what the recording's own numbers say."""
    ranks = (2, 4, 8)
    largest = committed["ratios"]["largestBytes"]
    fastest = all(min(XLA_COLLECTIVES, key=lambda c: medians(committed, c, p)[largest])
                  == "reduce_scatter" for p in ranks)
    assert committed["ratios"]["reduceScatterAtLargest"].startswith(
        "the fastest" if fastest else "not the fastest")
    alphas = {c: [by_p[str(p)]["alphaUs"] for p in ranks] for c, by_p in committed["fits"].items()}
    grows = all(a == sorted(a) for a in alphas.values())
    assert committed["fitSummary"]["alphaWithRanks"].startswith("grows" if grows else "does not")
    per_step = [committed["steps"][str(p)]["ringCount"]["perStepUs"] for p in ranks]
    assert committed["stepSummary"]["perStepWithRanks"] == analysis.trend(per_step)
    peaks = committed["busbwPeakGBps"]["all_reduce"]
    assert peaks["withRanks"] == analysis.trend([peaks[str(p)] for p in ranks])
    # "the transfer term is at most ... of alpha, so ... decided by dispatch and
    # synchronisation": true for any fit whose latency is microseconds and rate GB/s.
    assert committed["fitSummary"]["lessonTransferShare"] < 0.01


def test_the_page_reads_what_the_sweep_did_from_the_recording(committed):
    """Warm-up calls, the memcpy's size and repeats and where the largest size stands
    against the cache come from the recording, made from what the code did, not typed."""
    from scripts.sweep.measure import MEMCPY_BYTES, MEMCPY_REPEATS
    page = (ROOT / "docs" / "going-further" / "sweep.md").read_text()
    for path in ("method.warmupCalls|d", "memcpyRepeats|d", "sizeLabels.memcpy }}",
                 "sizeLabels.largestAgainstCache }}"):
        assert f"{{{{ rec:distributed-03.sweep:{path}" in page, path
    for typed in ("One warm-up call", "np.copyto` of 256 MiB", "past it every copy",
                  "orders of magnitude", "share one memory bus.", "wait for a core at every"):
        assert typed not in page, typed  # content review: typed or untested causes
    assert {row["warmupCalls"] for row in committed["rows"]} == {sweep_measure.WARMUP_CALLS}
    assert committed["method"]["warmupCalls"] == sweep_measure.WARMUP_CALLS
    assert (committed["memcpyBytes"], committed["memcpyRepeats"]) == (MEMCPY_BYTES,
                                                                      MEMCPY_REPEATS)
    largest, cache = max(r["bytes"] for r in committed["rows"]), committed["lastLevelCacheBytes"]
    assert committed["sizeLabels"]["largestAgainstCache"] == analysis.largest_against_cache(
        largest, cache)


def test_where_the_largest_size_stands_against_the_cache_in_words():
    assert analysis.largest_against_cache(2**25, 2**25) == \
        "the size of the last-level cache, not past it"
    assert analysis.largest_against_cache(2**26, 2**25) == "2 times the last-level cache"
    assert analysis.largest_against_cache(2**24, 2**25) == "smaller than the last-level cache"
    assert "unknown" in analysis.largest_against_cache(2**24, None)


def test_bench_takes_the_warm_up_count_from_the_rows():
    assert bench.warmup_calls([{"warmupCalls": 2}, {"warmupCalls": 2}]) == 2
    with pytest.raises(bench.WorkerFailed, match="different warm-up counts"):
        bench.warmup_calls([{"warmupCalls": 1}, {"warmupCalls": 2}])


def test_the_ring_model_rejects_what_one_process_measures_and_says_so():
    """A recording built from times that follow the ring model says 'close to'; one whose
    all-reduce takes four times a reduce-scatter says 'far from'."""
    def rows_with(ar_over_rs):
        rows = []
        for p in (2, 4):
            for nbytes in (2**10, 2**20, 2**24):
                # 100 us per rendezvous, and bytes at 1 GB/s (times ar_over_rs for the
                # all-reduce), so only the ratio at the largest size tells them apart.
                rs = 100 + nbytes / 1e3
                times = {"reduce_scatter": rs, "all_reduce": 100 + ar_over_rs * nbytes / 1e3,
                         "all_gather": rs, "reduce_scatter_all_gather": 2 * rs,
                         "ring_reduce_scatter": 100 * (p - 1) + nbytes / 1e3,
                         "ring_all_reduce": 200 * (p - 1) + nbytes / 5e2}
                rows += [{"collective": c, "ranks": p, "bytes": nbytes, "medianUs": t,
                          "busbwGBps": 1.0} for c, t in times.items()]
        return rows

    for ratio, words in ((2.0, "close to"), (4.0, "far from")):
        rows = rows_with(ratio)
        fits = analysis.fit_rows(rows, None)
        assert analysis.time_ratios(rows, fits)["atLargest"]["arOverRs"]["versusModel"] == words
        steps = analysis.step_fits(fits)
        assert steps["4"]["supports"] == "p - 1 steps per phase"

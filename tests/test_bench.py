"""The message-size sweep: its arithmetic, its fit, its CLI, and the committed recording."""
import json
import subprocess
import sys

import jax
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from conftest import ROOT, clean_env, project_copy
from lesson_code import distributed_03_sweep as sweep_measure
from scripts import bench
from scripts.figures.sweep import render
from scripts.recordings import load_recording, validate
from scripts.sweep_model import (COLLECTIVES, SIZES, algbw_gbps, busbw_gbps, element_count,
                                 fit_alpha_beta)

BENCH = ROOT / "scripts" / "bench.py"
RECORDING = ROOT / "recordings" / "distributed-03.sweep.json"
FIGURE = ROOT / "figures" / "distributed-03-sweep.svg"


# --- arithmetic -----------------------------------------------------------------------

@pytest.mark.parametrize("collective, ranks, busbw", [
    # nccl-tests doc/PERFORMANCE.md: S = 1e9 B in 0.1 s is algbw 10 GB/s, then
    ("all_reduce", 8, 10 * 2 * 7 / 8),               # 2(n-1)/n
    ("all_reduce", 2, 10.0),
    ("reduce_scatter", 4, 10 * 3 / 4),              # (n-1)/n
    ("all_gather", 8, 10 * 7 / 8),                  # (n-1)/n
    ("reduce_scatter_all_gather", 4, 10 * 2 * 3 / 4),  # both phases, like all-reduce
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
    done = subprocess.run([sys.executable, str(BENCH), "--quick", "--out", str(out)],
                          env=clean_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    recording = json.loads(out.read_text())
    validate(recording)
    assert {(r["collective"], r["ranks"]) for r in recording["rows"]} == {
        (c, 4) for c in COLLECTIVES}
    assert all(r["wrong"] == 0 for r in recording["rows"])
    assert recording["provenance"] == "recorded_cpu_computation"
    assert (tmp_path / "sweep.svg").read_text() == render(recording)


def in_process_measure(ranks, sizes, samples, min_sample_ms):
    # conftest gave this interpreter 8 devices; a sub-mesh stands in for a fresh process.
    rows = sweep_measure.measure_ranks(jax.devices()[:ranks], sizes, samples,
                                       min_sample_ms / 1e3)
    return {"backend": sweep_measure.describe_backend(), "rows": rows}


def test_a_wrong_result_fails_and_writes_nothing(tmp_path, monkeypatch, capsys):
    true_reference = sweep_measure.reference

    def off_by_one(collective, contributions):
        expected = true_reference(collective, contributions).copy()
        expected[-1] += 1
        return expected

    monkeypatch.setattr(sweep_measure, "reference", off_by_one)
    monkeypatch.setattr(bench, "measure_in_subprocess",
                        lambda module, *args: in_process_measure(*args))
    monkeypatch.setattr(bench, "QUICK", {**bench.QUICK, "sizes": [8, 1024], "samples": 3})
    out = tmp_path / "sweep.json"
    assert bench.main(["--quick", "--out", str(out)]) == 1
    message = capsys.readouterr().err
    assert "differ from the NumPy reference" in message and "nothing was written" in message
    assert list(tmp_path.iterdir()) == []


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
    bench.record_sweep(lesson, None, [4], [8, 8192, 2**20], 3, 0.2,
                       measure=in_process_measure)
    recording = load_recording(root / "recordings" / "distributed-03.sweep.json")
    assert (root / "figures" / "distributed-03-sweep.svg").read_text() == render(recording)
    lock = json.loads((root / "recordings" / "outputs.lock.json").read_text())
    assert lock["figures/distributed-03-sweep.svg"]["inputs"][
        "recordings/distributed-03.sweep.json"] == __import__("hashlib").sha256(
        (root / "recordings" / "distributed-03.sweep.json").read_bytes()).hexdigest()
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
                           3, 0.2, measure=in_process_measure)
    assert {p: p.read_bytes() for p in before} == before
    assert list(root.rglob("*.tmp")) == []


# --- the committed sweep --------------------------------------------------------------

@pytest.fixture(scope="module")
def committed():
    return json.loads(RECORDING.read_text())


def test_committed_sweep_is_complete_and_right(committed):
    validate(committed)
    assert committed["provenance"] == "recorded_cpu_computation"
    for collective in COLLECTIVES:
        for ranks in (2, 4, 8):
            rows = [r for r in committed["rows"]
                    if r["collective"] == collective and r["ranks"] == ranks]
            assert [r["requestedBytes"] for r in rows] == list(SIZES)
            assert all(r["bytes"] == 4 * element_count(r["requestedBytes"], ranks) for r in rows)
            assert all(r["wrong"] == 0 and r["samples"] >= 7 for r in rows)
            shortest_us = 1000 * committed["method"]["minSampleMs"]
            assert all(r["callsPerSample"] * r["medianUs"] >= shortest_us for r in rows)
            assert str(ranks) in committed["fits"][collective]


def test_committed_figure_is_rendered_from_committed_sweep(committed):
    assert FIGURE.read_text() == render(committed)


def test_claims_on_the_page_hold_for_committed_sweep(committed):
    """docs/going-further/sweep.md states these in words; a new recording must bear them out."""
    rows, fits = committed["rows"], committed["fits"]
    # "Every crossover lies at hundreds of KiB, thousands of times the 32-byte gradient."
    assert all(100 <= fit["nHalfKiB"] < 1024 for by_p in fits.values() for fit in by_p.values())
    # "The bus bandwidth stays below the memcpy line."
    assert max(r["busbwGBps"] for r in rows) < committed["memcpyGBps"]

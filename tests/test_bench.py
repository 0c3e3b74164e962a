"""The message-size sweep: its arithmetic, its fit, its CLI, and the committed recording."""
import json
import shutil
import subprocess
import sys

import jax
import jsonschema
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import bench
import sweep_measure
from sweep_figure import render_sweep_svg
from sweep_freshness import FIGURE, RECORDING, ROOT, hashed_sources
from sweep_model import (COLLECTIVES, SIZES, algbw_gbps, busbw_gbps, element_count,
                         fit_alpha_beta)
from sweep_record import SCHEMA

BENCH = ROOT / "scripts" / "bench.py"


def validate(recording):
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(recording)


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
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    recording = json.loads(out.read_text())
    validate(recording)
    assert {(r["collective"], r["ranks"]) for r in recording["rows"]} == {
        (c, 4) for c in COLLECTIVES}
    assert all(r["wrong"] == 0 for r in recording["rows"])
    assert recording["provenance"] == "recorded_cpu_computation"
    assert (tmp_path / FIGURE.name).read_text() == render_sweep_svg(recording)
    check = [sys.executable, str(BENCH), "--check", "--out", str(out)]
    assert subprocess.run(check, capture_output=True).returncode == 0


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
    monkeypatch.setattr(bench, "measure_in_subprocess", in_process_measure)
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


def run_check(bench_path, *paths):
    return subprocess.run([sys.executable, str(bench_path), "--check", *map(str, paths)],
                          capture_output=True, text=True, timeout=60)


def test_check_does_not_start_jax_or_matplotlib():
    probe = ("import sys; sys.path.insert(0, 'scripts'); import bench; bench.main(['--check']); "
             "print(sorted({'jax', 'matplotlib'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stderr


def copy_tree(destination):
    # lesson_hashes.py: the hashing the sweep shares with the lessons.
    for path in [*hashed_sources(), ROOT / "scripts" / "lesson_hashes.py", RECORDING, FIGURE,
                 SCHEMA]:
        target = destination / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    return destination / "scripts" / "bench.py"


def test_check_fresh_then_stale_code(tmp_path):
    copied = copy_tree(tmp_path)
    assert run_check(copied).returncode == 0
    copied.write_text(copied.read_text() + "\n# an edit after recording\n")
    done = run_check(copied)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert "recordings/distributed-03.sweep.json is stale" in done.stderr
    assert "run: python scripts/bench.py" in done.stderr


def test_check_notices_a_figure_from_another_recording(tmp_path):
    copy_tree(tmp_path)
    figure = tmp_path / FIGURE.relative_to(ROOT)
    figure.write_text(figure.read_text().replace("recorded at", "recorded on"))
    done = run_check(tmp_path / "scripts" / "bench.py")
    assert done.returncode == 1 and "figures/distributed-03-sweep.svg" in done.stderr


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
    assert FIGURE.read_text() == render_sweep_svg(committed)


def test_committed_sweep_is_current():
    done = run_check(BENCH)
    assert done.returncode == 0, done.stderr


def test_claims_on_the_page_hold_for_committed_sweep(committed):
    """docs/going-further/sweep.md states these in words; a new recording must still bear them out."""
    rows, fits = committed["rows"], committed["fits"]
    # "Every crossover lies at hundreds of KiB, thousands of times the 32-byte gradient."
    assert all(100 <= fit["nHalfKiB"] < 1024 for by_p in fits.values() for fit in by_p.values())
    # "This host has N cores, so p = 4 and 8 run more device threads than there are cores."
    assert committed["environment"]["cpuCount"] < 4
    # "The bus bandwidth stays below the memcpy line."
    assert max(r["busbwGBps"] for r in rows) < committed["memcpyGBps"]

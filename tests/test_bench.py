"""The message-size sweep (bench.py on the seed lesson's `sweep` module): its arithmetic,
bookkeeping, command line and committed recording; no test asserts how fast anything ran."""
import importlib
import json
import platform
from unittest.mock import Mock

import jax
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from jax.sharding import NamedSharding, PartitionSpec as P

from conftest import ROOT, SEED, module_file, recording_name
from harness import (changed, leftover_temp_files, passed, project, refused, run, snapshot,
                     unchanged)
from scripts import bench
from scripts.store import hashes
from scripts.figures import KINDS, sweep_times
from scripts.host import host_at_start, warn_if_busy
from scripts.store.lessons import load_lessons
from scripts.store.outputs import AnalysisKind, for_lesson, read_lock, recording_outputs
from scripts.store.recordings import load_recording, validate
from scripts.sweep.analysis import algbw_gbps, bus_factor, fit_alpha_beta, one_significant_figure

# A partial sweep for the tests: p = 4, three sizes, two blocks, few samples.
QUICK = {"ranks": [4], "sizes": [8, 8192, 2**20], "blocks": 2, "samples": 2, "minSampleMs": 0.2}
TINY = {"samples": 2, "minSampleMs": 0.2}

sweep_programs = importlib.import_module(SEED.sweep)
COLLECTIVES, SIZES = sweep_programs.COLLECTIVES, sweep_programs.SIZES
element_count, sizes_for = sweep_programs.element_count, sweep_programs.sizes_for
LESSON = ["--lesson", SEED.id]
FILES = for_lesson(SEED)
RECORDING_FILE, ANALYSIS_FILE, FIGURE_FILE = (
    FILES.recording("sweep"), FILES.analysis("sweep"), FILES.figure(KINDS["sweep"]))
RECORDING, ANALYSIS = ROOT / RECORDING_FILE, ROOT / ANALYSIS_FILE
COMMITTED = json.loads(RECORDING.read_text())


def analysed(recording):
    return json.loads(AnalysisKind(SEED.analysis, "sweep").render(recording))


def replayed(ranks, sizes, plan, block):
    """bench.py's measure of one p and block, answered from the committed sweep: no JAX."""
    [host] = [h for h in COMMITTED["hosts"] if (h["block"], h["ranks"]) == (block, ranks)]
    return {"backend": {k: COMMITTED["environment"][k] for k in ("backend", "deviceKind", "jax")},
            "rows": [r for r in COMMITTED["rows"] if (r["ranks"], r["block"]) == (ranks, block)],
            "programs": COMMITTED["programs"][str(ranks)],
            "host": {"before": host["before"], "after": host["after"]}}


# --- arithmetic -----------------------------------------------------------------------

@pytest.mark.parametrize("phases, ranks, factor", [
    # nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n, reduce-scatter and all-gather (n-1)/n
    (2, 8, 2 * 7 / 8), (2, 2, 1.0), (1, 4, 3 / 4), (1, 8, 7 / 8)])
def test_bus_factors_follow_nccl_tests(phases, ranks, factor):
    assert algbw_gbps(1e9, 0.1) == pytest.approx(10.0)
    assert bus_factor(phases, ranks) == pytest.approx(factor)


def test_each_program_says_how_many_phases_it_moves_and_each_size_is_measured_once():
    facts = sweep_programs.program_facts(4)
    assert set(facts) == set(COLLECTIVES)
    assert {c for c, f in facts.items() if f["phases"] == 2} == {
        "all_reduce", "reduce_scatter_all_gather", "ring_all_reduce"}
    assert facts["ring_reduce_scatter"]["steps"] == 3 and facts["ring_all_reduce"]["steps"] == 6
    # Sizes a factor 4 apart from 8 B, and 12, 16, 24 MiB between 8 and 32 MiB, each
    # measured once, as elements rounded up to a multiple of p.
    assert SIZES == tuple(sorted({8 * 4**k for k in range(12)}
                                 | {12 * 2**20, 16 * 2**20, 24 * 2**20}))
    assert [element_count(8, p) for p in (2, 4, 8)] == [2, 4, 8]  # 16 B moved at p = 4
    assert element_count(32 * 2**20, 8) == 8 * 2**20
    assert sizes_for([8, 32], 8) == [(8, 32)]  # sizes that round alike
    assert sizes_for([8, 32], 2) == [(8, 8), (32, 32)]


@settings(max_examples=40, deadline=None)
@given(alpha=st.floats(1e-6, 1e-2), beta=st.floats(1e8, 1e11))
def test_fit_recovers_exact_alpha_beta(alpha, beta):
    sizes = [8 * 4**k for k in range(10)]
    fitted_alpha, fitted_beta = fit_alpha_beta(sizes, [alpha + s / beta for s in sizes])
    assert fitted_alpha == pytest.approx(alpha, rel=1e-6)
    assert fitted_beta == pytest.approx(beta, rel=1e-6)


def test_fit_never_reports_negative_latency_and_says_when_times_do_not_grow():
    sizes = [2**k for k in range(10, 20)]
    alpha, beta = fit_alpha_beta(sizes, [s / 1e9 * 1.1 - 1e-7 for s in sizes])
    assert alpha == 0.0 and beta > 0
    flat = fit_alpha_beta(sizes, [1e-3] * len(sizes))
    assert flat[1] is None  # no bandwidth regime reached: no beta, and no error
    assert one_significant_figure(502) == 500 and one_significant_figure(257) == 300


# --- the measuring code: shape and bookkeeping ------------------------------------------

def test_blocks_take_turns_over_p_and_rotate_the_programs():
    calls = []

    def measure(ranks, sizes, plan, block):
        calls.append((block, ranks))
        return {"backend": {}, "rows": [], "programs": {}, "host": {"before": {}, "after": {}}}
    rows, order, hosts, _, _, _ = bench.measure_blocks(measure, [2, 4, 8], [8], TINY, 3)
    assert calls == [(0, 2), (0, 4), (0, 8), (1, 2), (1, 4), (1, 8), (2, 2), (2, 4), (2, 8)]
    assert order == [{"block": b, "ranks": p} for b, p in calls]
    rows = sweep_programs.measure_ranks(jax.devices()[:2], [8, 1024], TINY, block=1)
    firsts = [(row["collective"], row["collectivesPerCall"]) for row in rows
              if row["position"] == 0]
    assert len(set(firsts)) == 2  # each size's turn starts with another program
    assert all(len(row["samplesUs"]) == TINY["samples"] and row["block"] == 1 for row in rows)
    # Every sample keeps its minor page faults beside its time, and every program is timed
    # both ways at every size: one collective per call, and the looped calls.
    assert all(len(row["minorFaults"]) == len(row["samplesUs"]) and
               all(isinstance(f, int) and f >= 0 for f in row["minorFaults"]) for row in rows)
    assert sorted((r["collective"], r["bytes"], r["collectivesPerCall"]) for r in rows) == \
        sorted((c, nbytes, k) for c in COLLECTIVES for _, nbytes in sizes_for([8, 1024], 2)
               for k in (1, sweep_programs.LOOP_COLLECTIVES["cpu"]))


def test_the_donation_probe_reports_faults_aliasing_and_scratch_the_allocator_s_glibc(monkeypatch):
    probe = sweep_programs.donation_probe(jax.devices()[:2], 4096, calls=2)
    assert (probe["ranks"], probe["bytes"]) == (2, 4096)
    for name in ("kept", "donated"):
        assert len(probe[name]["faultsPerCall"]) == 2 and probe[name]["wrong"] == 0
    # XLA:CPU takes the donation: the output is the input's buffer, per device.
    assert probe["donated"]["aliasBytes"] == 4096 and probe["kept"]["aliasBytes"] == 0
    # The allocator's settings are glibc's: elsewhere none is set, and no probe recorded.
    monkeypatch.setattr(platform, "libc_ver", lambda: ("", ""))
    assert sweep_programs.keep_freed_memory() is False
    assert sweep_programs.allocator_probe(jax.devices()[:2], 4096, TINY) is None


def test_wrong_values_are_counted_on_every_device_copy_the_ring_and_looped_series_too():
    """A looped program's optimization barrier keeps XLA from hoisting the collective out
    of the loop or merging the iterations: one before the loop, one in its body."""
    mesh = sweep_programs.ring_mesh(jax.devices()[:4])
    contributions = np.arange(4 * 8, dtype=np.float32).reshape(4, 8) % 5
    body, in_spec, out_spec = sweep_programs.PROGRAMS["all_reduce"]
    arg = jax.device_put(contributions, NamedSharding(mesh, in_spec))
    compiled = jax.jit(jax.shard_map(sweep_programs.looped(body, 4), mesh=mesh,
                                     in_specs=in_spec, out_specs=out_spec)).lower(arg).compile()
    assert "while" in compiled.as_text() and compiled.as_text().count("all-reduce(") == 2
    assert sweep_programs.count_wrong(compiled(arg), sweep_programs.reference(
        "all_reduce", contributions)) == 0
    for collective in ("ring_reduce_scatter", "ring_all_reduce"):
        body, in_spec, out_spec = sweep_programs.PROGRAMS[collective]
        call = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=in_spec, out_specs=out_spec))
        result = call(jax.device_put(contributions, NamedSharding(mesh, in_spec)))
        expected = sweep_programs.reference(collective, contributions)
        assert sweep_programs.count_wrong(result, expected) == 0
        assert sweep_programs.count_wrong(result, expected + 1) == result.size
    expected = np.eye(8, dtype=np.float32)[3]
    replicated = jax.device_put(np.zeros(8, np.float32), NamedSharding(mesh, P()))
    assert sweep_programs.count_wrong(replicated, expected) == 4  # one per device's copy
    split = jax.device_put(np.zeros(8, np.float32), NamedSharding(mesh, P("data")))
    assert sweep_programs.count_wrong(split, expected) == 1


def test_the_host_is_read_once_before_a_run_and_a_busy_one_is_warned_of(capsys):
    """The load, and the cores other work keeps busy now (over half a second): what a
    recording's environment keeps as loadAverage1m and busyCoresAtStart."""
    reading = host_at_start()
    assert sorted(reading) == ["busyCores", "cores", "loadAverage1m"]
    assert 0 <= reading["busyCores"] <= reading["cores"] and reading["loadAverage1m"] >= 0
    assert warn_if_busy("bench.py", {"cores": 2, "loadAverage1m": 5.5})
    assert "bench.py: warning: the load average is 5.5 on 2 cores" in capsys.readouterr().err
    assert not warn_if_busy("bench.py", {"cores": 2, "loadAverage1m": 0.5})
    assert capsys.readouterr().err == ""


# --- the command line -----------------------------------------------------------------

@pytest.mark.slow
def test_quick_sweep_end_to_end_moves_recording_analysis_figures_and_lock_into_place(tmp_path):
    """The real command in a copy, worker processes and all; only the structure is checked."""
    root = project(tmp_path / "repo")
    before = snapshot(root)
    plan = {**QUICK, "sizes": [8, 2**20]}  # the probes' size, and one more for the fits
    passed(run("-c", f"import sys; from scripts import bench; "
               f"sys.exit(bench.main({LESSON!r}, plan={plan!r}))", cwd=root))
    recording = load_recording(root / RECORDING_FILE)
    assert {(r["collective"], r["ranks"], r["block"]) for r in recording["rows"]} == {
        (c, 4, b) for c in COLLECTIVES for b in range(QUICK["blocks"])}
    assert all(r["wrong"] == 0 for r in recording["rows"])
    # The donation probe ran once for the one p, at its largest size; the allocator probe
    # after every block, last, with glibc's malloc keeping freed memory (glibc here).
    assert [(d["ranks"], d["bytes"]) for d in recording["donation"]] == [(4, 2**20)]
    assert [(a["ranks"], a["block"]) for a in recording["allocator"]] == [(4, 0), (4, 1)]
    for probe in recording["allocator"]:
        assert probe["mallopt"] == {name: value for name, (_, value)
                                    in sweep_programs.KEEP_FREED_MEMORY.items()}
        assert [(r["collective"], r["bytes"], r["wrong"]) for r in probe["rows"]] == \
            [(c, 2**20, 0) for c in sweep_programs.ALLOCATOR_PROGRAMS]
    assert recording["pageBytes"] > 0 and recording["provenance"] == "recorded_cpu_computation"
    assert recording["environment"]["busyCoresAtStart"] is not None  # read before it ran
    assert "fits" not in recording and "ratios" not in recording  # measured, not read
    written = changed(before, root)
    assert written == sorted([RECORDING_FILE, ANALYSIS_FILE, "recordings/outputs.lock.json",
                              *(path for path in written if path.startswith("figures/"))])
    assert FIGURE_FILE in written and leftover_temp_files(root) == []
    analysis = json.loads((root / ANALYSIS_FILE).read_text())
    assert analysis == analysed(recording)
    assert (root / FIGURE_FILE).read_text() == sweep_times.render(analysis)
    assert (root / FILES.figure(KINDS["sweep-ratios"])).read_text() == \
        KINDS["sweep-ratios"].render(analysis)
    lock = read_lock(root)
    assert lock[ANALYSIS_FILE]["inputs"][RECORDING_FILE] == hashes.digest(root / RECORDING_FILE)
    assert lock[FIGURE_FILE]["inputs"][ANALYSIS_FILE] == hashes.digest(root / ANALYSIS_FILE)


@pytest.mark.slow
def test_a_wrong_result_fails_and_writes_nothing(tmp_path, monkeypatch, capsys):
    true_reference = sweep_programs.reference

    def off_by_one(collective, contributions):
        expected = true_reference(collective, contributions).copy()
        expected[-1] += 1
        return expected

    def in_process(module, ranks, sizes, plan, block, root):
        # conftest gave this interpreter 8 devices: a sub-mesh stands in for a worker.
        return {**replayed(ranks, sizes, plan, block), "rows": sweep_programs.measure_ranks(
            jax.devices()[:ranks], sizes, plan, block)}
    monkeypatch.setattr(sweep_programs, "reference", off_by_one)
    monkeypatch.setattr(bench, "measure_in_subprocess", in_process)
    plan = {**QUICK, "ranks": [2], "sizes": [8], "blocks": 1}
    assert bench.main([*LESSON, "--out", str(tmp_path / "sweep.json")], plan=plan) == 1
    message = capsys.readouterr().err
    assert "differ from the NumPy reference" in message and "nothing was written" in message
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_sweep_whose_figure_fails_moves_nothing(tmp_path, monkeypatch):
    """The committed sweep replayed (no JAX): the renderer breaks after the recording and
    its analysis are staged, and none of them moves (a failed lock move: test_faults.py)."""
    root = project(tmp_path / "repo", ("lesson_code", "scripts", "recordings", "figures",
                                       "requirements.txt", "constraints.txt"))
    monkeypatch.setattr(sweep_times, "render", Mock(side_effect=RuntimeError("renderer broke")))
    monkeypatch.setattr(bench, "measure_memcpy_gbps", lambda: COMMITTED["memcpyGBps"])
    with unchanged(root), pytest.raises(RuntimeError, match="renderer broke"):
        bench.record_sweep(load_lessons(root)[SEED.id], None, [4], None,
                           {key: COMMITTED["method"][key] for key in bench.TIMING_KEYS},
                           measure=replayed, blocks=2)


@pytest.mark.slow
def test_on_tpu_the_sweep_measures_the_p_the_lesson_s_chips_hold(tmp_path, monkeypatch):
    """As the TPU job runs it: each p the lesson's chips hold, in a worker told to use them,
    written as its tpu-sweep (the committed CPU sweep answers for the workers)."""
    plan = {**QUICK, "ranks": [2, 4, 8], "sizes": [8], "blocks": 1}
    fitting = [p for p in plan["ranks"] if p <= SEED.devices]
    assert 0 < len(fitting) < len(plan["ranks"])  # the seed's chips hold some p, not all
    asked = []

    def measure(module, ranks, sizes, plan, block, root, platform):
        asked.append((ranks, platform))
        measured = replayed(ranks, sizes, plan, block)
        measured["backend"].update(backend="tpu", deviceKind="TPU v6 lite")
        return measured
    monkeypatch.setattr(bench, "measure_in_subprocess", measure)
    out = tmp_path / "tpu-sweep.json"
    assert bench.main([*LESSON, "--platform", "tpu", "--out", str(out)], plan=plan) == 0
    assert asked == [(p, "tpu") for p in fitting]
    recording = load_recording(out)
    assert recording["command"] == ["python", "scripts/bench.py", "--platform", "tpu"]
    assert {row["ranks"] for row in recording["rows"]} == set(fitting)
    tpu_sweep = FILES.recording(bench.sweep_variant("tpu"))
    assert tpu_sweep == recording_name(SEED, "tpu-sweep")
    root = project(tmp_path / "repo", ("lesson_code", "scripts", "recordings",
                                       "requirements.txt", "constraints.txt"))
    (root / tpu_sweep).write_bytes(out.read_bytes())
    [hardware] = [o for o in recording_outputs(load_lessons(root)[SEED.id], root)
                  if o.path == tpu_sweep]
    assert hardware.module == module_file(SEED, SEED.sweep_on("tpu")) and not hardware.required
    assert hardware.fix.startswith("python scripts/tpu_job.py")


@pytest.mark.slow
def test_a_sweep_worker_on_a_machine_without_the_chips_says_so_in_one_line():
    config = {"module": SEED.sweep, "ranks": 2, "sizes": [8],
              "plan": TINY, "block": 0, "platform": "tpu"}
    done = run("-m", "scripts.sweep.measure", json.dumps(config), timeout=120)
    assert done.returncode == 1 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("sweep worker: no TPU backend on this machine (") and \
        line.endswith("run bench.py without --platform tpu, or on a TPU VM "
                      "(python scripts/tpu_job.py)")


# --- the committed sweep --------------------------------------------------------------

def test_committed_sweep_keeps_every_block_of_every_row_and_its_analysis_is_derived():
    """Every program, p, size and loop length in every block."""
    committed, method = COMMITTED, COMMITTED["method"]
    validate(committed)
    assert committed["provenance"] == "recorded_cpu_computation" and method["blocks"] >= 5
    rows = committed["rows"]
    loops = sorted({r["collectivesPerCall"] for r in rows})
    assert loops[0] == 1 and len(loops) == 2
    assert all(r["wrong"] == 0 and len(r["samplesUs"]) == method["samples"]
               == len(r["minorFaults"]) for r in rows)
    for ranks in (2, 4, 8):  # each program, block, loop and size exactly once
        sizes = sorted({(r["requestedBytes"], r["bytes"]) for r in rows if r["ranks"] == ranks})
        assert sizes == sizes_for([requested for requested, _ in sizes], ranks)
        assert sorted((r["collective"], r["block"], r["collectivesPerCall"], r["requestedBytes"],
                       r["bytes"]) for r in rows if r["ranks"] == ranks) == sorted(
            (c, b, k, *size) for c in COLLECTIVES for b in range(method["blocks"])
            for k in loops for size in sizes)
    assert sorted(d["ranks"] for d in committed["donation"]) == [2, 4, 8]
    assert [entry["ranks"] for entry in committed["order"][:3]] == [2, 4, 8]
    assert json.loads(ANALYSIS.read_text()) == analysed(committed)


def test_the_page_reads_the_analysis_and_types_no_verdict():
    page = "".join((ROOT / "docs" / "going-further" / name).read_text()
                   for name in ("sweep.md", "allocator.md"))
    for path in ("host.words }}", "verdictCounts.inconclusive|d", "stepSummary.verdict",
                 "alphaWithRanks.all_reduce.verdict", "ratios.warm.4.arOverRs.touchedVerdict",
                 "faults.onsetWords", "stepSummary.fitWords", "faults.donation.4.words",
                 "coverageWords", "sizeLabels.ratios", "faults.step.words", "ringModelMatches|d",
                 "faults.step.locationWords", "faults.keepFreed.words", "faults.donationWords",
                 "ratios.unexplainedWords", "faults.verdictCounts.inconclusive|d"):
        assert f"{{{{ rec:{FILES.stem('sweep', analysis=True)}:{path}" in page, path
    for typed in ("grows with p for every program", "log2 p steps per phase",
                  "is the size of the last-level cache, not past it",
                  "the step\ncount below predicts", "tens of per cent", "an eighth",
                  "no account here", "last-level cache", "own cost",
                  "They do not explain all of it", "In three sweeps back to back",
                  "times one collective per call"):
        # Typed, untestable, or a cache size a small virtual machine cannot show.
        assert typed not in page, typed


# --- the command line's refusals ------------------------------------------------------

TOO_MANY = 2 * SEED.devices  # chips the seed's TPU VM does not have


@pytest.mark.parametrize("argv, words", [
    *((["--ranks", n], "each device count must be 2 to 16") for n in ("0", "1000")),
    (["--ranks", "4", "4", "--out", "x.json"], "each once"),
    (["--ranks", "8", "4"], "measures part of the sweep"),  # the committed sweep is whole
    (["--platform", "tpu", "--ranks", "2", str(TOO_MANY)],
     f"p = {TOO_MANY} needs {TOO_MANY} chips, and {SEED.id}'s TPU VM has {SEED.devices}"),
    (["--platform", "tpu", "--ranks", "2"], "measures part of the sweep"),
    (["--platform", "gpu"], "invalid choice: 'gpu'"),
    (["--ranks", "2", "--out", "/dev/null"], "/dev/null is not a regular file")])  # not minutes
def test_a_sweep_that_cannot_work_is_refused_in_one_line_before_measuring(argv, words, capsys,
                                                                        monkeypatch):
    monkeypatch.setattr(bench, "measure_in_subprocess", lambda *a, **k: pytest.fail("ran"))
    with unchanged(ROOT):
        line = refused(bench.main, [*LESSON, *argv], capsys)
    assert words in line and ("gpu" in argv or "; run `python scripts/bench.py" in line
                              or "nothing was changed" in line)


def test_bench_accepts_the_full_plan_in_any_order():
    for argv in (["--ranks", "8", "2", "4"], ["--ranks", "2", "--out", "x.json"]):
        bench.refuse_what_cannot_work(bench.parse_args(argv), bench.FULL)  # no exception

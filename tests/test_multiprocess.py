"""Four real JAX processes over loopback: the same lesson, its gradient, measured bytes,
and a failed rank that takes the whole run down cleanly. One short run (5 calls per traffic
row), inside a cluster job's environment, serves every check of the data."""
import ast
import importlib
import json
import os
import re
import tempfile
from contextlib import suppress
from pathlib import Path

import numpy as np
import psutil
import pytest

from conftest import ROOT, SEED, module_file
from harness import finished, passed, raised_in_one_line
from scripts.store.outputs import for_lesson
from scripts.runners.processes import ProcessRunError, run_processes
from test_lesson import run_program

RANKS = 4
MIB = 2**20
SCRATCH = f"ranks-{os.getpid()}-*"  # this process's runs' scratch folders (plumbing.scratch)
RANK_MODULE = SEED.rank_module
FILES = for_lesson(SEED)
lesson_program = importlib.import_module(SEED.module)  # its problem and NumPy gradient
COLLECTIVES = ("reduce_scatter", "all_gather", "all_reduce")
COMMITTED = json.loads((ROOT / FILES.recording("cpu-processes")).read_text())["data"]


# What srun, mpirun or a Kubernetes job would have set around record.py: the ranks it
# starts must get none of it, or they would join that job and record its launcher.
CLUSTER = {"SLURM_JOB_ID": "4242", "SLURM_STEP_NODELIST": "localhost", "SLURM_NTASKS": "4",
           "SLURM_PROCID": "3", "SLURM_LOCALID": "3", "OMPI_COMM_WORLD_SIZE": "4",
           "OMPI_MCA_orte_hnp_uri": "1234.0;tcp://127.0.0.1:1", "OMPI_COMM_WORLD_RANK": "3",
           "PMIX_RANK": "3", "JOB_COMPLETION_INDEX": "3"}


@pytest.fixture(scope="module")
def run():
    with pytest.MonkeyPatch.context() as patch:
        for key, value in CLUSTER.items():
            patch.setenv(key, value)
        return run_processes(RANK_MODULE, ranks=RANKS, timeout_s=180, calls=5)


def traffic_row(data, collective, gradient_bytes):
    [row] = [row for row in data["traffic"]
             if row["collective"] == collective and row["gradientBytes"] == gradient_bytes]
    return row


def without_timings(stdout):
    """Timings differ from run to run; every other character must not."""
    return re.sub(r"^Completed \w+ median microseconds: .*$", lambda line: re.sub(
        r"-?[\d.]+(e[+-]?\d+)?(?=[,}])", "T", line.group(0)), stdout, flags=re.MULTILINE)


def assert_no_process_left(pids):
    """Nothing of any rank's group still runs (a zombie child aside), each rank reaped."""
    in_groups = []
    for process in psutil.process_iter():
        with suppress(ProcessLookupError):
            if os.getpgid(process.pid) in pids:
                in_groups.append(process.pid)
    assert [pid for pid in in_groups if not finished(pid)] == []
    assert [pid for pid in pids if psutil.pid_exists(pid)] == []


def test_every_rank_exits_zero_with_the_numpy_gradient_and_leaves_nothing(run):
    assert run.exit_codes == [0] * RANKS
    reference = lesson_program.reference_gradient(lesson_program.make_problem(RANKS))
    assert run.data["gradient"] == reference.tolist()
    np.testing.assert_allclose(run.data["gradientByRank"], np.tile(reference, (RANKS, 1)),
                               rtol=2e-6, atol=2e-6)
    assert [run.data["environment"][key] for key in ("processCount", "deviceCount")] == [RANKS] * 2
    assert run.data["launch"]["launcher"] == "processes.py"  # not the cluster's "mpirun"
    assert_no_process_left(run.pids)


SHARDS = "Reduce-scatter shards (device, index, values): "


def shard_line(stdout):
    [line] = [line for line in stdout.splitlines() if line.startswith(SHARDS)]
    return ast.literal_eval(line.removeprefix(SHARDS))


def test_process_0_prints_what_the_single_process_lesson_prints(run):
    single = passed(run_program()).stdout  # `python -m <module>`, once a session
    assert "Completed CPU median microseconds: {'all_reduce': T" in without_timings(single)
    # Process 0 can list only the shard it holds: device 0's, the same as in one process.
    assert shard_line(run.stdout) == shard_line(single)[:1]
    others = "\n".join(line for line in single.splitlines() if not line.startswith(SHARDS))
    mine = "\n".join(line for line in run.stdout.splitlines() if not line.startswith(SHARDS))
    assert without_timings(mine) == without_timings(others)


def test_each_collective_sends_what_its_algorithm_predicts(run):
    """gloo runs all-reduce and all-gather as rings: 2(p-1)/p·G and (p-1)/p·G, plus ~2 KB
    of headers. Its reduce-scatter halves recursively (ReduceScatterHalvingDoubling), after
    which rank r holds chunk bitreverse(r): ranks whose bits are no palindrome (1 and 2 at
    p = 4) swap a G/p chunk, which the ring model misses. The ppermute ring
    (lesson_code/ring_collectives.py) sends its model within 1 %, here and as recorded."""
    keys = [(row["collective"], row["gradientBytes"]) for row in run.data["traffic"]]
    assert keys == [(c, size) for size in (32, MIB)
                    for c in ("all_reduce", "reduce_scatter", "all_gather")]
    for row in run.data["traffic"]:
        share = (RANKS - 1) / RANKS * row["gradientBytes"]
        assert row["modelBytesPerRank"] == (2 * share if row["collective"] == "all_reduce"
                                            else share)
        assert len(row["observedBytesPerRank"]) == RANKS
    assert "TCP_INFO" in run.data["trafficMethod"]
    for collective in ("all_reduce", "all_gather"):
        row = traffic_row(run.data, collective, MIB)
        np.testing.assert_allclose(row["observedBytesPerRank"],
                                   [row["modelBytesPerRank"]] * RANKS, rtol=0.02)
    bits = RANKS.bit_length() - 1
    swaps = [int(format(r, f"0{bits}b")[::-1], 2) != r for r in range(RANKS)]
    np.testing.assert_allclose(
        traffic_row(run.data, "reduce_scatter", MIB)["observedBytesPerRank"],
        [(RANKS - 1) / RANKS * MIB + (MIB / RANKS if swap else 0) for swap in swaps], rtol=0.02)
    for data in (run.data, COMMITTED):
        for row in data["ringTraffic"]:
            if row["gradientBytes"] == MIB:
                assert all(1 <= ratio < 1.01 for ratio in row["observedOverModel"]), row
    for row in run.data["trafficBaseline"]:  # a program without collectives
        assert row["observedBytesPerRank"] == [0.0] * RANKS
    # processes.md: the bytes beyond the model 'are nearly the same at both sizes'; this run
    # averages 5 calls, where one stray message moves the mean by tens of bytes.
    for data, rtol in ((run.data, 0.1), (COMMITTED, 0.02)):
        for collective in ("all_reduce", "all_gather"):
            np.testing.assert_allclose(traffic_row(data, collective, MIB)["excessBytesPerRank"],
                                       traffic_row(data, collective, 32)["excessBytesPerRank"],
                                       rtol=rtol)


@pytest.mark.slow
@pytest.mark.parametrize("failure", ["exit", "hang"])
def test_a_failed_or_hung_rank_ends_the_run_and_leaves_nothing_behind(failure, monkeypatch):
    """exit: rank 0 exits 3, leaving a child of its own in its group (as platform.platform()
    leaves `uname -p`), the others asleep; the launcher returns once none runs. hang: rank 2
    hangs at its first collective, and the limit ends the run wherever the ranks are."""
    monkeypatch.setenv("FAILING_RANK", "hang-early")  # read by tests/fixtures/failing_rank.py
    scratch_before = set(Path(tempfile.gettempdir()).glob(SCRATCH))
    module, limit = {"exit": ("rank_with_child", 30), "hang": ("failing_rank", 6)}[failure]
    error = raised_in_one_line(ProcessRunError, run_processes, f"tests.fixtures.{module}",
                               ranks=RANKS, timeout_s=limit, calls=1)
    assert len(error.pids) == RANKS
    if failure == "exit":
        assert (error.rank, error.status) == (0, 3)
        assert str(error).startswith("rank 0 exited with status 3")
        [child] = re.findall(r"child (\d+)", error.stderr_tail)
        assert finished(int(child))
    else:
        assert f"still running after {limit} s" in str(error)
    assert_no_process_left(error.pids)
    # Nothing new is left; a run may also remove folders a killed run abandoned.
    assert set(Path(tempfile.gettempdir()).glob(SCRATCH)) - scratch_before == set()


def test_every_value_and_verdict_on_the_page_resolves(run):
    """Each value processes.md quotes, resolved by the build's parser in this run's recording."""
    from scripts.pages.directives import VALUE, lookup
    environment = dict(run.data["environment"], cpuCount=os.cpu_count())
    processes = FILES.stem("cpu-processes")
    recordings = {
        processes: {"data": run.data, "stdout": run.stdout, "environment": environment},
        FILES.stem("cpu"): json.loads((ROOT / FILES.recording("cpu")).read_text()),
        FILES.stem("cpu", analysis=True): json.loads(
            (ROOT / FILES.analysis("cpu")).read_text())}
    analyse = importlib.import_module(SEED.analysis).analyse
    recordings[FILES.stem("cpu-processes", analysis=True)] = analyse(
        "cpu-processes", recordings[processes])
    page = (ROOT / "docs/going-further/processes.md").read_text()
    assert page.startswith("# Going further: four real processes\n")
    placeholders = VALUE.findall(page)
    assert len(placeholders) > 40
    assert page.count("{{") == page.count("}}") == len(placeholders)  # none malformed
    for stem, dotted, spec in placeholders:
        format(lookup(recordings[stem], dotted), spec)
    assert f'--8<-- "{module_file(SEED, RANK_MODULE)}:' in page and "**Figure:**" in page
    rounds = f"rec:{FILES.stem('cpu-processes', analysis=True)}:rounds"
    for algorithm in ("gloo", "ring"):  # each verdict, and each ratio with its interval
        verdict = f"{rounds}.verdicts.{algorithm}"
        assert f"{{{{ {verdict}.verdict }}}}" in page and f"{{{{ {verdict}.ratio.words }}}}" in page
        for collective in COLLECTIVES:
            assert f"{{{{ {rounds}.rows.{algorithm}_{collective}.perRoundRatio.words }}}}" in page
    # Claims no recording backs; a typed verdict.
    for claim in ("real network", "hundreds of times", "records this pattern", "Only one line",
                  "That is what the hypothesis predicts", "2(p-1)$ rounds; its all-reduce"):
        assert claim not in page


def test_the_rounds_experiment_keeps_every_block_on_4_and_on_2_processes(run):
    """Blocks alternate 4, 2 / 2, 4; every sample of every block is kept, no statistics."""
    for data in (run.data, COMMITTED):
        rounds = data["roundsTiming"]
        assert "roundsVerdict" not in data and sorted(rounds["samplesUs"]) == ["p2", "p4"]
        assert rounds["blocks"] >= 5 and rounds["gradientBytes"] == 32
        assert rounds["order"][0] == ["p4", "p2"] and rounds["order"][1] == ["p2", "p4"]
        for side in ("p4", "p2"):
            assert sorted(rounds["samplesUs"][side]) == ["gloo", "ring"]
            for by_collective in rounds["samplesUs"][side].values():
                assert sorted(by_collective) == sorted(COLLECTIVES)
                for found in by_collective.values():
                    assert len(found) == rounds["blocks"]
                    assert all(len(block) == rounds["samplesPerBlock"] for block in found)
        assert sorted(rounds["hostBefore"]) == ["cores", "loadAverage1m"]

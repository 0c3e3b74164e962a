"""The ring built from ppermute: XLA's results on every shard, the simulator's schedule step
by step, only ppermutes compiled, and its measured bytes as the pages quote them."""
import json
import re

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, PartitionSpec as P

from conftest import SEED, recording_name
from lesson_code import ring
from lesson_code.ring_collectives import (AXIS, ring_all_gather, ring_programs,
                                          ring_reduce_scatter, xla_programs)
from lesson_code.ring_checks import collective_counts
from scripts import ROOT
from scripts.figures.ring import phases

RANKS = (2, 3, 4, 8)
COLLECTIVES = ("reduce_scatter", "all_gather", "all_reduce")
PROCESSES_RECORDING = ROOT / recording_name(SEED, "cpu-processes")
PAGE = ROOT / "docs" / "going-further" / "build-the-ring.md"
BYTES_PAGE = ROOT / "docs" / "going-further" / "processes.md"


def mesh_of(p):
    return Mesh(np.asarray(jax.devices()[:p]), (AXIS,))


@pytest.mark.parametrize("p", RANKS)
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_ring_equals_xla_on_every_shard_with_p_minus_1_ppermutes_per_phase(p, collective):
    mesh, features = mesh_of(p), 3 * p  # 3 values per chunk
    # Device r: g_local f32[F] of small integers, whose sums are exact in any order.
    g_locals = np.random.default_rng(p).integers(-4, 5, p * features).astype(np.float32)
    argument = g_locals if collective != "all_gather" else g_locals[:features]
    program = ring_programs(mesh)[collective]
    text, phases = program.lower(argument).as_text(), 2 if collective == "all_reduce" else 1
    counts = collective_counts(text)
    assert counts.pop("collective_permute") == phases * (p - 1)
    assert counts == dict.fromkeys(counts, 0)  # and no other collective
    # Each of them moves one chunk one place to the right, around the whole ring.
    ring_pairs = ", ".join(f"[{r}, {(r + 1) % p}]" for r in range(p))
    assert len(re.findall(re.escape(f"dense<[{ring_pairs}]>"), text)) == phases * (p - 1)
    xla = xla_programs(mesh)[collective]
    assert collective_counts(xla.lower(argument).as_text())[collective] == 1  # it sees XLA's
    ours, theirs = program(argument), xla(argument)
    assert len(ours.addressable_shards) == len(theirs.addressable_shards) == p
    for position, (mine, reference) in enumerate(zip(ours.addressable_shards,
                                                     theirs.addressable_shards)):
        assert mine.device == reference.device == mesh.devices[position]
        data = np.asarray(mine.data)
        if collective == "reduce_scatter":  # both split P('data'): the same chunk
            assert ours.shape == theirs.shape and mine.index == reference.index
        else:  # XLA's is replicated, P(); the ring's is this device's own row
            assert ours.shape == (p,) + theirs.shape and reference.index == (slice(None),)
            assert mine.index[0] == slice(position, position + 1)
            data = data[0]
        np.testing.assert_array_equal(data, np.asarray(reference.data))


@pytest.mark.parametrize("p, features", [(3, 4), (4, 6), (4, 10), (8, 12)])
@pytest.mark.parametrize("collective", ("reduce_scatter", "all_reduce"))
def test_sizes_the_chunking_cannot_split_are_rejected(p, features, collective):
    with pytest.raises(ValueError, match=rf"each device's {features} values into p = {p} "
                                         rf"equal chunks, and {features} is not divisible"):
        ring_programs(mesh_of(p))[collective](np.zeros(p * features, np.float32))


def per_device(function, mesh):
    return jax.jit(jax.shard_map(function, mesh=mesh, in_specs=P(AXIS), out_specs=P(AXIS)))


def shard_rows(result, p):
    rows = [None] * p
    for shard in result.addressable_shards:
        rows[(shard.index[0].start or 0) // shard.data.shape[0]] = np.asarray(shard.data)
    return rows


def simulated_running_sum(run, steps, rank):
    """(chunk, contributors) of the running sum `rank` holds after `steps` steps."""
    if steps == 0:  # nothing received yet: its own share of the chunk it will send first
        [chunk] = [t.chunk for t in run.steps[0].sends if t.src == rank]
        return chunk, run.initial[rank][chunk]
    [chunk] = [t.chunk for t in run.steps[steps - 1].sends if t.dst == rank]
    return chunk, run.steps[steps - 1].state[rank][chunk]


@pytest.mark.parametrize("p", RANKS)
def test_reduce_scatter_follows_the_simulator_step_by_step(p):
    mesh = mesh_of(p)
    # Chunk c of rank q holds [2**q, c * 2**q]: a sum's first value is the bitmask of
    # the ranks it adds up, its second over its first is the chunk's index.
    contributions = np.array([[v for c in range(p) for v in (2**q, c * 2**q)]
                              for q in range(p)], np.float32)  # f32[p, F], F = 2p
    run = ring.ring_reduce_scatter(contributions)
    for steps in range(p):
        program = per_device(lambda g, k=steps: ring_reduce_scatter(g, steps=k), mesh)
        for rank, (mask, weighted) in enumerate(shard_rows(program(contributions.ravel()), p)):
            summed = tuple(q for q in range(p) if int(mask) >> q & 1)
            assert (int(weighted) // int(mask), summed) == simulated_running_sum(
                run, steps, rank), f"rank {rank} after {steps} of {p - 1} steps"
    final = shard_rows(per_device(ring_reduce_scatter, mesh)(contributions.ravel()), p)
    np.testing.assert_array_equal(np.stack(final), run.result)


def test_the_pages_step_table_is_the_simulators_schedule_numbered_as_the_figures_do():
    """D6: "start", then one step per send, in the table, the figure and the stepper."""
    trace = json.loads((ROOT / recording_name(SEED, "simulation")).read_text())["data"]
    p = trace["ranks"]
    run = ring.ring_reduce_scatter(np.ones((p, 2 * p), np.float32))
    table = re.findall(r"^\| (start|\d) \|(.*)\|$", PAGE.read_text(), re.MULTILINE)
    assert [steps for steps, _ in table] == [label.removeprefix("step ") for label, _, _
                                             in phases(trace)["reduce_scatter"].rows]
    table = [(0 if steps == "start" else int(steps), cells) for steps, cells in table]
    assert [steps for steps, _ in table] == list(range(p))
    for steps, cells in table:
        held = [tuple(map(int, cell)) for cell in re.findall(r"chunk (\d), sums (\d)", cells)]
        expected = [simulated_running_sum(run, steps, rank) for rank in range(p)]
        assert held == [(chunk, len(summed)) for chunk, summed in expected], steps


@pytest.mark.parametrize("p", RANKS)
def test_all_gather_follows_the_simulator_step_by_step(p):
    mesh = mesh_of(p)
    shards = np.array([[q + 1, -(q + 1)] for q in range(p)], np.float32)  # f32[p, 2], no 0
    run = ring.ring_all_gather(shards)
    for steps in range(p):
        program = per_device(lambda c, k=steps: ring_all_gather(c, steps=k), mesh)
        for rank, held in enumerate(shard_rows(program(shards.ravel()), p)):
            chunks = held.reshape(p, 2)
            # A chunk not received yet is still the zeros the buffer started as.
            state = tuple((c,) if chunks[c, 0] == c + 1 else () for c in range(p))
            expected = run.initial[rank] if steps == 0 else run.steps[steps - 1].state[rank]
            assert state == expected, f"rank {rank} after {steps} of {p - 1} steps"
            np.testing.assert_array_equal(chunks[[c for c in range(p) if state[c]]],
                                          shards[[c for c in range(p) if state[c]]])
    final = shard_rows(per_device(ring_all_gather, mesh)(shards.ravel()), p)
    np.testing.assert_array_equal(np.stack(final), run.result)


def test_the_recording_holds_the_ring_beside_gloo_as_processes_md_describes_it():
    recording = json.loads(PROCESSES_RECORDING.read_text())
    ranks = recording["environment"]["processCount"]
    rows, gloo = ({(row["collective"], row["gradientBytes"]): row for row in
                   recording["data"][key]} for key in ("ringTraffic", "traffic"))
    assert set(rows) == set(gloo) == {(c, b) for c in COLLECTIVES for b in (32, 2**20)}
    for (collective, gradient_bytes), row in rows.items():
        phases = 2 if collective == "all_reduce" else 1
        assert row["modelBytesPerRank"] == phases * (ranks - 1) / ranks * gradient_bytes
        assert len(row["observedBytesPerRank"]) == ranks
        assert row["observedOverModel"] == [b / row["modelBytesPerRank"]
                                            for b in row["observedBytesPerRank"]]
    # The ring's excess at both sizes: "a cost per message, not per byte".
    small, large = (rows[("reduce_scatter", size)]["excessBytesPerRank"] for size in (32, 2**20))
    assert all(abs(a - b) <= 0.1 * b for a, b in zip(small, large)), (small, large)
    # "At 32 bytes no row is near its model."
    for table in (rows, gloo):
        for (_, size), row in table.items():
            if size == 32:
                assert min(row["observedOverModel"]) > 5, row
    # "ranks 0 and 3 send about the model, but ranks 1 and 2 ..." about a third more.
    ratios = gloo[("reduce_scatter", 2**20)]["observedOverModel"]
    assert max(ratios[0], ratios[3]) < 1.01 and min(ratios[1], ratios[2]) > 1.3, ratios


def test_the_bytes_tables_are_on_one_page_each_row_reading_the_row_it_names():
    assert "-byte gradient**" not in PAGE.read_text()
    assert "(processes.md#observed-against-the-model)" in PAGE.read_text()
    recording, page = json.loads(PROCESSES_RECORDING.read_text()), BYTES_PAGE.read_text()
    assert page.count("-byte gradient**") == 1
    keys, checked = {"ring (ppermute)": "ringTraffic", "XLA → gloo": "traffic"}, 0
    for size, table in zip((32, 2**20), page.split("-byte gradient**")[1].split("MiB gradient**")):
        for collective, algorithm, cells in re.findall(
                r"^\| ([a-z-]+) \| (ring \(ppermute\)|XLA → gloo) \|(.*)$", table, re.MULTILINE):
            used = re.findall(r"rec:" + re.escape(SEED.id)
                              + r"\.cpu-processes:data\.(\w+)\.(\d)\.(\w+)", cells)
            assert len(used) == 9, cells  # the model, then bytes and ratio on 4 ranks
            for key, index, _ in used:
                row = recording["data"][key][int(index)]
                assert (key, row["collective"], row["gradientBytes"]) == (
                    keys[algorithm], collective.replace("-", "_"), size)
            checked += 1
    assert checked == 12

"""The ring simulator against plain NumPy, against JAX's collectives, and its byte count.

The contributions are small integers, so every summation order gives the same float and
the comparisons can be exact.
"""
import json
from functools import partial

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from jax.sharding import Mesh, PartitionSpec as P

from conftest import ROOT, SEED, recording_name
from lesson_code.ring import recorded_traces, ring_all_gather, ring_reduce_scatter

RANKS = range(2, 9)


@st.composite
def ring_inputs(draw):
    p = draw(st.integers(2, 8))
    chunk = draw(st.integers(1, 3))
    dtype = draw(st.sampled_from([np.int16, np.int32, np.float32, np.float64]))
    return draw(hnp.arrays(dtype, (p, p * chunk), elements=st.integers(-100, 100)))


def example_contributions(p: int, n: int) -> np.ndarray:
    return np.random.default_rng(p).integers(-9, 10, size=(p, n)).astype(np.float32)


@settings(max_examples=60, deadline=None)
@given(ring_inputs())
def test_reduce_scatter_gives_rank_r_chunk_r_of_the_sum(contributions):
    p, n = contributions.shape
    run = ring_reduce_scatter(contributions)
    expected = contributions.sum(axis=0, dtype=contributions.dtype).reshape(p, n // p)
    np.testing.assert_array_equal(run.result, expected)
    assert run.result.dtype == contributions.dtype
    # p - 1 steps of a ring: each rank sends exactly one chunk, to its right-hand neighbour.
    assert len(run.steps) == p - 1
    for step in run.steps:
        assert [(t.src, t.dst) for t in step.sends] == [(r, (r + 1) % p) for r in range(p)]
    # Only the owned chunk is complete; the others are partial sums left behind.
    everyone, final = tuple(range(p)), run.steps[-1].state
    for r in range(p):
        assert final[r][r] == everyone
        assert all(final[r][c] != everyone for c in range(p) if c != r)


@settings(max_examples=60, deadline=None)
@given(ring_inputs())
def test_all_gather_gives_every_rank_the_whole_vector(shards):
    p = shards.shape[0]
    run = ring_all_gather(shards)
    np.testing.assert_array_equal(run.result, np.tile(shards.reshape(-1), (p, 1)))
    assert run.steps[-1].state == (tuple((c,) for c in range(p)),) * p


@settings(max_examples=60, deadline=None)
@given(ring_inputs())
def test_every_rank_sends_p_minus_1_over_p_of_the_array_per_phase(contributions):
    p, n = contributions.shape
    whole_bytes = n * contributions.itemsize
    scatter = ring_reduce_scatter(contributions)
    gather = ring_all_gather(scatter.result)
    assert scatter.bytes_sent == gather.bytes_sent == ((p - 1) * whole_bytes // p,) * p


def test_rejects_a_length_that_does_not_split_into_p_chunks():
    with pytest.raises(ValueError, match="divisible"):
        ring_reduce_scatter(np.zeros((3, 8)))


def shards_by_rank(global_array, mesh):
    """Map each addressable shard to the mesh position (rank) of the device holding it."""
    rank_of = {device: r for r, device in enumerate(mesh.devices.flat)}
    return {rank_of[s.device]: np.asarray(s.data) for s in global_array.addressable_shards}


@pytest.mark.parametrize("p", RANKS)
def test_simulator_matches_jax_collectives_on_every_shard(p):
    mesh = Mesh(np.asarray(jax.devices()[:p]), ("data",))
    contributions = example_contributions(p, 2 * p)

    # Each device receives one row: its own contribution.
    @jax.jit
    @partial(jax.shard_map, mesh=mesh, in_specs=P("data"), out_specs=P("data"))
    def jax_reduce_scatter(x):
        return jax.lax.psum_scatter(x[0], "data", tiled=True)  # (1, n) -> (n/p,)

    @jax.jit
    @partial(jax.shard_map, mesh=mesh, in_specs=P("data"), out_specs=P())
    def jax_all_gather(shard):
        # to='invarying' states the result is the same everywhere, so out_specs=P() passes.
        return jax.lax.all_gather(shard, "data", tiled=True, to="invarying")  # (n/p,) -> (n,)

    scatter = ring_reduce_scatter(contributions)
    scattered = jax_reduce_scatter(contributions)
    jax_scatter_shards = shards_by_rank(scattered, mesh)
    assert sorted(jax_scatter_shards) == list(range(p))
    for r, data in jax_scatter_shards.items():
        np.testing.assert_array_equal(data, scatter.result[r])

    gather = ring_all_gather(scatter.result)
    jax_gather_shards = shards_by_rank(jax_all_gather(scattered), mesh)
    assert sorted(jax_gather_shards) == list(range(p))
    for r, data in jax_gather_shards.items():
        np.testing.assert_array_equal(data, gather.result[r])


def test_the_recorded_trace_is_what_the_simulator_gives_today():
    """The ring figure is drawn from this recording; the simulator is its only source."""
    recorded = json.loads((ROOT / recording_name(SEED, "simulation")).read_text())
    assert recorded["data"] == json.loads(json.dumps(recorded_traces(4)))
    assert sorted(recorded["data"]["byRanks"]) == ["2", "8"]
    assert recorded["stdout"].endswith("Every rank ends with the full sum.\n")

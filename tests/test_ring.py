"""The ring simulator against plain NumPy, and its byte count. Small integers: every
summation order is exact."""
import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from conftest import ROOT, SEED, recording_name
from lesson_code.ring import recorded_traces, ring_all_gather, ring_reduce_scatter


@st.composite
def ring_inputs(draw):
    p, chunk = draw(st.integers(2, 8)), draw(st.integers(1, 3))
    dtype = draw(st.sampled_from([np.int16, np.int32, np.float32, np.float64]))
    return draw(hnp.arrays(dtype, (p, p * chunk), elements=st.integers(-100, 100)))


@settings(max_examples=60, deadline=None)
@given(ring_inputs())
def test_reduce_scatter_then_all_gather_give_the_sum_sending_p_minus_1_over_p(contributions):
    p, n = contributions.shape
    scatter = ring_reduce_scatter(contributions)
    expected = contributions.sum(axis=0, dtype=contributions.dtype).reshape(p, n // p)
    np.testing.assert_array_equal(scatter.result, expected)  # rank r: chunk r of the sum
    assert scatter.result.dtype == contributions.dtype
    # p - 1 steps of a ring: each rank sends exactly one chunk, to its right-hand neighbour.
    assert len(scatter.steps) == p - 1
    for step in scatter.steps:
        assert [(t.src, t.dst) for t in step.sends] == [(r, (r + 1) % p) for r in range(p)]
    # Only the owned chunk is complete; the others are partial sums left behind.
    everyone, final = tuple(range(p)), scatter.steps[-1].state
    for r in range(p):
        assert final[r][r] == everyone and all(final[r][c] != everyone for c in range(p) if c != r)
    gather = ring_all_gather(scatter.result)  # every rank ends with the whole vector
    np.testing.assert_array_equal(gather.result, np.tile(expected.reshape(-1), (p, 1)))
    assert gather.steps[-1].state == (tuple((c,) for c in range(p)),) * p
    whole_bytes = n * contributions.itemsize
    assert scatter.bytes_sent == gather.bytes_sent == ((p - 1) * whole_bytes // p,) * p


def test_rejects_a_length_that_does_not_split_into_p_chunks():
    with pytest.raises(ValueError, match="divisible"):
        ring_reduce_scatter(np.zeros((3, 8)))


def test_the_recorded_trace_is_what_the_simulator_gives_today():
    recorded = json.loads((ROOT / recording_name(SEED, "simulation")).read_text())
    assert recorded["data"] == json.loads(json.dumps(recorded_traces(4)))
    assert sorted(recorded["data"]["byRanks"]) == ["2", "8"]
    assert recorded["stdout"].endswith("Every rank ends with the full sum.\n")

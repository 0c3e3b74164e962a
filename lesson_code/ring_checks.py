"""The check of the ring all-gather exercise, apart from the scaffold a learner edits, in
two halves as every exercise's (lesson_code/exercise.py): `run_ring_all_gather` runs an
implementation on every device, in the learner's process; `compare_ring_all_gather`
judges, in the checker's, that device r, given chunk r of a known vector, returned the
whole vector, using p - 1 ppermutes and no other collective.
"""
import re

import jax
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

from lesson_code.ring_collectives import AXIS

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all",
               "collective_broadcast", "collective_permute")
CHUNK = 3  # values per device


def collective_counts(lowered_text):
    """How many of each collective a lowered program holds, by StableHLO op name."""
    return {op: len(re.findall(rf"stablehlo\.{op}\b", lowered_text)) for op in COLLECTIVES}


def whole_vector(p):
    """f32[p * CHUNK] for p devices (the exercise's answer): device r's input is chunk r;
    no zeros, so a hole shows."""
    return np.arange(p * CHUNK, dtype=np.float32) + 1


def run_ring_all_gather(implementation):
    """{"devices": [[r, device r's result], ...], "lowered": the program's StableHLO}."""
    devices = jax.devices()
    mesh = Mesh(np.asarray(devices), (AXIS,))
    whole = whole_vector(len(devices))
    # out_specs=P(AXIS) stacks each device's own f32[F]: every device is checked, not one.
    program = jax.jit(jax.shard_map(lambda c: implementation(c)[None], mesh=mesh,
                                    in_specs=P(AXIS), out_specs=P(AXIS)))
    result = program(whole)
    # Row r of the stacked results is device r's.
    return {"devices": [[shard.index[0].start or 0, np.asarray(shard.data).reshape(-1)]
                        for shard in result.addressable_shards],
            "lowered": program.lower(whole).as_text()}


def compare_ring_all_gather(got, whole):
    """Raise AssertionError (one line) unless every device holds `whole`, in p - 1
    ppermutes and no other collective."""
    p = len(whole) // CHUNK
    for device, values in got["devices"]:
        values = np.asarray(values, dtype=np.float64)
        assert values.shape == whole.shape, (
            f"device {device} returned shape {values.shape}, expected the whole vector "
            f"{whole.shape}")
        if not np.array_equal(values, whole):
            wrong = [c for c in range(p) if not np.array_equal(
                values[c * CHUNK:(c + 1) * CHUNK], whole[c * CHUNK:(c + 1) * CHUNK])]
            raise AssertionError(f"device {device} holds wrong values in chunk(s) {wrong} "
                                 f"of {p}: {values.tolist()} instead of {whole.tolist()}")
    assert len(got["devices"]) == p, f"{len(got['devices'])} devices answered, not {p}"
    counts = collective_counts(got["lowered"])
    others = {op: n for op, n in counts.items() if n and op != "collective_permute"}
    assert not others, f"uses {others}: a ring all-gather needs only ppermute"
    assert counts["collective_permute"] == p - 1, (
        f"{counts['collective_permute']} ppermutes for p = {p} devices; the ring takes "
        f"exactly p - 1 = {p - 1} steps")

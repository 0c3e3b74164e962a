"""The check of the ring all-gather exercise, apart from the scaffold a learner edits.

`check_ring_all_gather` runs an implementation on every device of `jax.devices()`:
device r passes in chunk r of a known vector and must return the whole vector, using
p - 1 ppermutes and no other collective, read from the lowered program.
"""
import re

import jax
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

from lesson_code.ring_collectives import AXIS

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all",
               "collective_broadcast", "collective_permute")


def collective_counts(lowered_text):
    """How many of each collective a lowered program holds, by StableHLO op name."""
    return {op: len(re.findall(rf"stablehlo\.{op}\b", lowered_text)) for op in COLLECTIVES}


def check_ring_all_gather(implementation):
    """Raise AssertionError (one line) unless `implementation` is a ring all-gather.

    Runs on every device of `jax.devices()`: device r passes in chunk r of a known vector
    and must return the whole vector, using p - 1 ppermutes and no other collective.
    """
    devices = jax.devices()
    p = len(devices)
    mesh = Mesh(np.asarray(devices), (AXIS,))
    chunk = 3
    whole = np.arange(p * chunk, dtype=np.float32) + 1  # f32[F]; no zeros, so holes show
    # out_specs=P(AXIS) stacks each device's own f32[F]: every device is checked, not one.
    program = jax.jit(jax.shard_map(lambda c: implementation(c)[None], mesh=mesh,
                                    in_specs=P(AXIS), out_specs=P(AXIS)))
    result = program(whole)
    for shard in result.addressable_shards:
        device = shard.index[0].start or 0  # row r of the stacked results is device r
        got = np.asarray(shard.data).reshape(-1)
        assert got.shape == whole.shape, (
            f"device {device} returned shape {got.shape}, expected the whole vector "
            f"{whole.shape}")
        if not np.array_equal(got, whole):
            wrong = [c for c in range(p) if not np.array_equal(
                got[c * chunk:(c + 1) * chunk], whole[c * chunk:(c + 1) * chunk])]
            raise AssertionError(f"device {device} holds wrong values in chunk(s) {wrong} "
                                 f"of {p}: {got.tolist()} instead of {whole.tolist()}")
    counts = collective_counts(program.lower(whole).as_text())
    others = {op: n for op, n in counts.items() if n and op != "collective_permute"}
    assert not others, f"uses {others}: a ring all-gather needs only ppermute"
    assert counts["collective_permute"] == p - 1, (
        f"{counts['collective_permute']} ppermutes for p = {p} devices; the ring takes "
        f"exactly p - 1 = {p - 1} steps")

"""The ring, built by hand: reduce-scatter and all-gather from `ppermute` alone.

`psum_scatter`, `all_gather` and `psum` leave the schedule to the runtime. Here every
message is written out: p devices sit on a ring, each cuts its vector into p chunks, and at
each of p - 1 steps every device sends ONE chunk to its right-hand neighbour (rank r ->
rank r + 1 mod p) with `jax.lax.ppermute`. This is the schedule lesson_code/ring.py
simulates in NumPy and the schedule the byte model (p - 1)/p * G per phase describes.

The functions below run per device, inside `jax.shard_map` over the mesh axis "data".
`steps` stops a phase early, after that many of its p - 1 steps, so a test can compare
every intermediate state with the NumPy simulator; the default runs the whole phase.

    python -m lesson_code.ring_collectives     # 4 logical CPU devices: check, print, exit
"""
import sys

# --8<-- [start:ring_setup]
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

AXIS = "data"


def chunk_length(size, ranks):
    """Values per chunk when `size` values are cut into `ranks` chunks."""
    if size % ranks:
        raise ValueError(
            f"the ring cuts each device's {size} values into p = {ranks} "
            f"equal chunks, and {size} is not divisible by {ranks}; pad "
            f"the vector to a multiple of {ranks} values")
    return size // ranks


def pass_right(value, ranks):
    """One ring step: send `value` to rank r + 1, get rank r - 1's."""
    to_the_right = [(r, (r + 1) % ranks) for r in range(ranks)]
    return jax.lax.ppermute(value, AXIS, perm=to_the_right)
# --8<-- [end:ring_setup]


# --8<-- [start:ring_reduce_scatter]
def ring_reduce_scatter(g_local, steps=None):
    """Per device: g_local f32[F] -> chunk f32[F/p], chunk r of the sum."""
    p = jax.lax.axis_size(AXIS)
    r = jax.lax.axis_index(AXIS)
    m = chunk_length(g_local.size, p)
    chunks = g_local.reshape(p, m)  # f32[F] -> f32[p, F/p]
    # Device r starts the lap of chunk r - 1 with its own share of it...
    running = chunks[(r - 1) % p]  # f32[F/p], 1 contribution
    for s in range(p - 1 if steps is None else steps):
        # ...passes its running sum right and adds its own share to the
        # one it receives: rank r - 1's sum of chunk r - s - 2, one
        # contribution longer on every step.
        running = pass_right(running, p) + chunks[(r - s - 2) % p]
    # After p - 1 steps the lap that started on rank r + 1 ends here:
    # chunk r, with all p contributions.
    return running
# --8<-- [end:ring_reduce_scatter]


# --8<-- [start:ring_all_gather]
def ring_all_gather(chunk, steps=None):
    """Per device: chunk f32[F/p] (chunk r) -> f32[F], chunks in order."""
    p = jax.lax.axis_size(AXIS)
    r = jax.lax.axis_index(AXIS)
    gathered = jnp.zeros((p,) + chunk.shape, chunk.dtype)  # f32[p, F/p]
    gathered = gathered.at[r].set(chunk)
    passing = chunk
    for s in range(p - 1 if steps is None else steps):
        # Forward what arrived last step (own chunk first), so this one
        # is rank r - 1's: chunk r - s - 1. A copy: nothing to add.
        passing = pass_right(passing, p)
        gathered = gathered.at[(r - s - 1) % p].set(passing)
    return gathered.reshape(-1)  # f32[p, F/p] -> f32[F]
# --8<-- [end:ring_all_gather]


# --8<-- [start:ring_all_reduce]
def ring_all_reduce(g_local):
    """Per device: g_local f32[F] -> the sum f32[F], in 2(p - 1) steps."""
    return ring_all_gather(ring_reduce_scatter(g_local))
# --8<-- [end:ring_all_reduce]


# --8<-- [start:ring_programs]
def ring_programs(mesh):
    """The three rings as jitted programs on global arrays; p = mesh size.

    reduce_scatter: f32[p*F] P('data'), device r holds its g_local f32[F]
                    -> f32[F] P('data'), device r holds chunk r of the sum
    all_gather:     f32[F] P('data') -> f32[p, F] P('data'), row r on device r
    all_reduce:     f32[p*F] P('data') -> f32[p, F] P('data'), row r on device r
    """
    def program(per_device):
        return jax.jit(jax.shard_map(per_device, mesh=mesh, in_specs=P(AXIS),
                                     out_specs=P(AXIS)))

    def copy_per_device(per_device):
        # JAX knows psum's result is the same on every device, so XLA's
        # version can promise out_specs=P(). After ppermutes it cannot know:
        # each device's f32[F] comes back as its own row, and the tests
        # check that the rows agree.
        return program(lambda v: per_device(v)[None])  # f32[F] -> f32[1, F]
    return {"reduce_scatter": program(ring_reduce_scatter),
            "all_gather": copy_per_device(ring_all_gather),
            "all_reduce": copy_per_device(ring_all_reduce)}
# --8<-- [end:ring_programs]


def xla_programs(mesh):
    """XLA's own collectives, with the same signatures as `ring_programs`."""
    def program(per_device, out_specs):
        return jax.jit(jax.shard_map(per_device, mesh=mesh, in_specs=P(AXIS),
                                     out_specs=out_specs))
    return {"reduce_scatter": program(
                lambda g: jax.lax.psum_scatter(g, AXIS, tiled=True), P(AXIS)),
            "all_gather": program(
                lambda c: jax.lax.all_gather(c, AXIS, tiled=True, to="invarying"), P()),
            "all_reduce": program(lambda g: jax.lax.psum(g, AXIS), P())}


def same_on_every_device(ours, theirs):
    """Every device's shard of the ring's result equals XLA's on that device."""
    for mine, reference in zip(ours.addressable_shards, theirs.addressable_shards):
        assert mine.device == reference.device, (mine.device, reference.device)
        data = np.asarray(mine.data)
        if ours.ndim > theirs.ndim:  # one row per device: this device's copy
            data = data[0]
        np.testing.assert_array_equal(data, np.asarray(reference.data))


def main(ranks=4):
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_num_cpu_devices", ranks)
    mesh = Mesh(np.asarray(jax.devices()[:ranks]), (AXIS,))
    features = 2 * ranks
    # Small integers: every order of summation gives the same float32, bit for bit.
    g_locals = np.arange(ranks * features, dtype=np.float32) % 7 - 3  # f32[p*F]
    ring, xla = ring_programs(mesh), xla_programs(mesh)
    chunks = ring["reduce_scatter"](g_locals)
    for name, argument in (("reduce_scatter", g_locals), ("all_gather", chunks),
                           ("all_reduce", g_locals)):
        ours, theirs = ring[name](argument), xla[name](argument)
        same_on_every_device(ours, theirs)
        print(f"ring {name} equals XLA's on all {ranks} devices:",
              np.asarray(theirs).tolist())
    return 0


if __name__ == "__main__":
    sys.exit(main())

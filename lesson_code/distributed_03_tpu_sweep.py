"""The TPU size sweep: the CPU sweep's programs (lesson_code/distributed_03_sweep.py), and a
reduce-scatter and an all-gather of a matrix, f32[m, c] per device, of the same bytes.

Compiled for a 2x2 v5e or v6e, XLA:TPU makes a vector's reduce-scatter an all-reduce and a
slice at every size, but keeps a matrix's a reduce-scatter from 128 KiB on (tests/fixtures/
tpu_v5e_2x2_compiled): only the matrix rows time the collective the predictions are about.
`bench.py --platform tpu` measures it (lessons.toml `tpu_sweep`), apart from the CPU sweep:
rows added there would ask for a new CPU sweep, a measurement on a quiet machine.
"""
import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

from lesson_code import distributed_03_sweep as vectors
from lesson_code.distributed_03_sweep import (LOOP_COLLECTIVES, SIZES, allocator_probe,
                                              configure_devices, describe_backend,
                                              donation_probe, sizes_for)

__all__ = ["LOOP_COLLECTIVES", "SIZES", "PROGRAMS", "COLLECTIVES", "configure_devices", "sizes_for",
           "measure_ranks", "program_facts", "donation_probe", "allocator_probe",
           "describe_backend", "programs_to_compile"]

# Rows of at most 4 KiB (eight of the TPU's 128-lane vectors), and at least p of them: at
# 32 MiB f32[8192, 1024], at 32 B and p = 4 f32[4, 2].
COLUMNS = 1024
MATRIX_ROWS, MATRIX_SPLIT = P("data", None, None), P("data", None)


def reduce_scatter_2d(x):  # per device: x f32[1, m, c] -> f32[m/p, c], row block r of the sum
    return jax.lax.psum_scatter(x[0], "data", scatter_dimension=0, tiled=True)


def all_gather_2d(g):  # per device: g f32[m/p, c] -> f32[m, c]
    return jax.lax.all_gather(g, "data", axis=0, tiled=True, to="invarying")


MATRICES = {"reduce_scatter_2d": (reduce_scatter_2d, MATRIX_ROWS, MATRIX_SPLIT),
            "all_gather_2d": (all_gather_2d, MATRIX_SPLIT, P())}
PROGRAMS = {**vectors.PROGRAMS, **MATRICES}  # collective: (body, input spec, output spec)
COLLECTIVES = tuple(PROGRAMS)


def program_facts(ranks):
    """A matrix program moves and touches what its vector twin does."""
    facts = vectors.program_facts(ranks)
    return {**facts, **{name: facts[name.removesuffix("_2d")] for name in MATRICES}}


def matrix_shape(n, ranks):
    """(m, c) of n floats: rows of at most COLUMNS floats, at least `ranks` rows."""
    columns = min(COLUMNS, n // ranks)
    return n // columns, columns


def as_matrices(values, ranks):
    """f32[..., n] as f32[..., m, c]."""
    return values.reshape(*values.shape[:-1], *matrix_shape(values.shape[-1], ranks))


def placed_inputs(mesh, contributions):
    """{collective: its input on the devices}, each layout placed once, before timing.
    (MATRIX_SPLIT equals the vectors' ROWS spec: the layouts are kept apart by program.)"""
    ranks = len(contributions)
    vector = vectors.placed_inputs(mesh, contributions)
    matrix = {spec: jax.device_put(as_matrices(values, ranks), NamedSharding(mesh, spec))
              for spec, values in ((MATRIX_ROWS, contributions), (MATRIX_SPLIT, contributions[0]))}
    return {name: (matrix if name in MATRICES else vector)[spec]
            for name, (_, spec, _) in PROGRAMS.items()}


def reference(collective, contributions):
    if collective in MATRICES:
        expected = vectors.reference(collective.removesuffix("_2d"), contributions)
        return as_matrices(expected, len(contributions))
    return vectors.reference(collective, contributions)


def program(collective, mesh, looping=1):
    body, in_spec, out_spec = PROGRAMS[collective]
    return jax.jit(jax.shard_map(vectors.looped(body, looping) if looping > 1 else body,
                                 mesh=mesh, in_specs=in_spec, out_specs=out_spec))


def measure_ranks(devices, sizes, plan, block=0, on_step=lambda text: None):
    """The CPU sweep's measure_ranks (its turns, rows and checks) over PROGRAMS."""
    ranks, mesh, looping = len(devices), vectors.ring_mesh(devices), vectors.loop_collectives()
    rng = np.random.default_rng(ranks)
    rows = []
    for index, (requested, nbytes) in enumerate(sizes_for(sizes, ranks)):
        contributions = vectors.small_integers(rng, ranks, nbytes // 4)
        placed = placed_inputs(mesh, contributions)
        turns = [(name, k) for name in PROGRAMS for k in (1, looping)]
        shift = (block + index) % len(turns)
        for position, (collective, k) in enumerate(turns[shift:] + turns[:shift]):
            arg = placed[collective]
            timing = vectors.time_collective(program(collective, mesh, k).lower(arg).compile(),
                                             arg, reference(collective, contributions), plan)
            rows.append({"collective": collective, "ranks": ranks, "block": block,
                         "position": position, "requestedBytes": requested,
                         "bytes": nbytes, "collectivesPerCall": k, **timing})
            on_step(f"{collective} x{k} {nbytes} B")
        del placed, contributions
    return rows


def programs_to_compile(devices, nbytes, looping=1):
    """{collective: (program, its argument's shape)} at `nbytes` on `devices`, which may be
    compile-only (a TPU slice described on a CPU host): what `tpu_job.py --dry-run` reads."""
    mesh, ranks, n = vectors.ring_mesh(devices), len(devices), nbytes // 4
    vector = {vectors.ROWS: (ranks, n), vectors.SPLIT: (n,)}
    matrix = {MATRIX_ROWS: (ranks, *matrix_shape(n, ranks)), MATRIX_SPLIT: matrix_shape(n, ranks)}
    return {name: (program(name, mesh, looping), (jax.ShapeDtypeStruct(
        (matrix if name in MATRICES else vector)[spec], np.float32,
        sharding=NamedSharding(mesh, spec)),)) for name, (_, spec, _) in PROGRAMS.items()}

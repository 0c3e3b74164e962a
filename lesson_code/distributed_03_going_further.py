"""distributed-03, going further: the gradients of the collectives, ZeRO and clipping.

The steps of docs/going-further/autodiff.md, built on the lesson's own problem and mesh
(lesson_code/distributed_03.py, which knows nothing of this file): what `jax.grad` writes
for each collective, the training gradients of data parallelism and ZeRO-3, and the
reference solutions of the ZeRO-accounting and clipping exercises. `run_lesson(devices,
run_going_further)` runs them before the lesson's PASS, so the one recorded run holds
them too.
"""
from functools import partial

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

from lesson_code.distributed_03 import (assert_matches, compiled_collectives, data_mesh,
                                        hlo_names, make_problem, place, reference_gradient,
                                        ring_payload_bytes)

# --8<-- [start:autodiff_transposes]
import jax.numpy as jnp

# Each collective is linear, so its gradient is its transpose: the gradient of
# <c, collective(v)> with respect to v is transpose(collective)(c). Each entry is the
# per-device function, where its input lives and where its output lives.
COLLECTIVES_UNDER_GRAD = {
    "psum": (lambda v: jax.lax.psum(v, "data"), P("data"), P()),
    "psum_scatter": (lambda v: jax.lax.psum_scatter(v, "data", tiled=True),
                     P("data"), P("data")),
    "all_gather": (lambda s: jax.lax.all_gather(s, "data", tiled=True),
                   P("data"), P("data")),
    "all_gather_invarying": (
        lambda s: jax.lax.all_gather(s, "data", tiled=True, to="invarying"),
        P("data"), P()),
}


def gradient_program(mesh, name):
    """jit(grad of <c, collective(v)>) for one collective, as a function of (v, c)."""
    per_device, in_spec, out_spec = COLLECTIVES_UNDER_GRAD[name]
    forward = jax.shard_map(per_device, mesh=mesh, in_specs=in_spec, out_specs=out_spec)
    return jax.jit(jax.grad(lambda v, c: jnp.vdot(forward(v), c)))


def lowered_ops(program, *args):
    """Collectives, and dynamic_slice, that the lowered program asks for."""
    text = str(program.lower(*args).compiler_ir(dialect="stablehlo"))
    ops = ("all_reduce", "reduce_scatter", "all_gather", "dynamic_slice")
    return sorted(op for op in ops if f"stablehlo.{op}" in text)


def transpose_cases(p, features):
    """Per collective: its input v, a cotangent c and the gradient worked out by hand."""
    stacked = np.arange(p * features, dtype=np.float32)  # p partial vectors, end to end
    whole = np.arange(features, dtype=np.float32)  # one vector, split into p slices
    return {
        # every device's input reached the one summed result: each gets c back whole
        "psum": (stacked, whole + 1, np.tile(whole + 1, p)),
        "psum_scatter": (stacked, whole + 1, np.tile(whole + 1, p)),
        # p varying copies came from each slice: the gradient sums them, slice by slice
        "all_gather": (whole, stacked + 1, (stacked + 1).reshape(p, -1).sum(axis=0)),
        # one invariant result: each slice takes its own part of c, nothing is summed
        "all_gather_invarying": (whole, whole + 1, whole + 1),
    }


def collective_transposes(mesh, features):
    """Each collective's gradient program and its arguments, its values checked in NumPy."""
    checked = {}
    for name, (v, c, expected) in transpose_cases(mesh.devices.size, features).items():
        _, in_spec, out_spec = COLLECTIVES_UNDER_GRAD[name]
        # The gradient has the input's layout, c the output's: placed like the batch.
        args = (jax.device_put(v, NamedSharding(mesh, in_spec)),
                jax.device_put(c, NamedSharding(mesh, out_spec)))
        program = gradient_program(mesh, name)
        assert_matches(program(*args), expected)
        checked[name] = (program, args)
    return checked
# --8<-- [end:autodiff_transposes]


# --8<-- [start:autodiff_training]
def local_loss(x_block, y_block, w, n_total):
    """This device's share of mean((Xw - y)^2); the shares sum to the global loss."""
    residual = x_block @ w - y_block
    return jnp.sum(residual * residual) / n_total


def data_parallel_grad(x_block, y_block, w, n_total):
    # w is invariant (the same on every device) and meets varying rows, so JAX inserts
    # a pvary; the transpose of pvary is a psum: autodiff writes the all-reduce.
    return jax.grad(local_loss, argnums=2)(x_block, y_block, w, n_total)


def sharded_weights_grad(x_block, y_block, w_slice, n_total, to="varying"):
    """ZeRO-3 / FSDP: weights stored as slices, gathered for the forward pass. A slice is
    of a vector, or rows of a matrix, as a real layer's weights are."""
    def loss(w_slice):
        w = jax.lax.all_gather(w_slice, "data", tiled=True, to=to)  # f32[F] or f32[F/c, c]
        return local_loss(x_block, y_block, w.reshape(-1), n_total)
    return jax.grad(loss)(w_slice)


def as_rows(w, ranks):
    """f32[F] as f32[F/c, c]: rows of at most 4 KiB (1,024 floats), at least `ranks` rows."""
    return w.reshape(-1, min(1024, w.size // ranks))


def training_programs(mesh, n_total):
    """Three ways to differentiate the lesson's loss, each a jitted program of (x, y, w)."""
    batch = (P("data"), P("data"))
    sharded = partial(sharded_weights_grad, n_total=n_total)
    return {name: jax.jit(jax.shard_map(grad, mesh=mesh, in_specs=(*batch, w_spec),
                                        out_specs=w_spec)) for name, grad, w_spec in [
        ("replicated_weights", partial(data_parallel_grad, n_total=n_total), P()),
        ("sharded_weights", sharded, P("data")),
        ("sharded_weights_invarying", partial(sharded, to="invarying"), P("data"))]}


def weight_layouts(name, vector, matrix):
    """ZeRO-3's programs take the weights as a vector and as a matrix; data parallel's, whole."""
    if name == "replicated_weights":
        return {name: vector}
    return {name: vector, name.replace("weights", "matrix"): matrix}


def training_gradients(mesh, problem):
    """Each training gradient program and its arguments, checked against NumPy."""
    x, y, w = place(mesh, problem)
    rows = jax.device_put(as_rows(problem.w, mesh.devices.size), NamedSharding(mesh, P()))
    expected = reference_gradient(problem)
    checked = {}
    for name, program in training_programs(mesh, problem.n_total).items():
        for labelled, weights in weight_layouts(name, w, rows).items():
            result = program(x, y, weights)
            assert_matches(result, expected.reshape(result.shape))
            checked[labelled] = (program, (x, y, weights))
    return checked
# --8<-- [end:autodiff_training]


# --8<-- [start:autodiff_check]
# What the installed JAX's transpose rules say (_src/lax/parallel.py in JAX's source): a psum's
# cotangent is already invariant (pvary: nothing to send), psum_scatter transposes to
# all_gather, all_gather to psum_scatter, and all_gather(to="invarying") to a
# dynamic_slice of the cotangent, which sends nothing.
EXPECTED_TRANSPOSES = {"psum": [], "psum_scatter": ["all_gather"],
                       "all_gather": ["reduce_scatter"],
                       "all_gather_invarying": ["dynamic_slice"]}
# The training gradients hold their forward gather too; the rest is the backward pass.
# A matrix's rows are gathered and differentiated as a vector's slices are.
EXPECTED_TRAINING = {"replicated_weights": ["all_reduce"],
                     **{f"sharded_{layout}": ["all_gather", "reduce_scatter"]
                        for layout in ("weights", "matrix")},
                     **{f"sharded_{layout}_invarying": ["all_gather", "all_reduce",
                                                        "dynamic_slice"]
                        for layout in ("weights", "matrix")}}


def autodiff_collectives(transposes, training):
    """What the gradient programs ask for (lowered), asserted; and what this backend's
    compiler made of them (compiled), said: as the recording keeps them."""
    asked = [{name: lowered_ops(program, *args) for name, (program, args) in programs.items()}
             for programs in (transposes, training)]
    assert asked == [EXPECTED_TRANSPOSES, EXPECTED_TRAINING], asked
    compiled = [{name: hlo_names(compiled_collectives(program, *args))
                 for name, (program, args) in programs.items()}
                for programs in (transposes, training)]
    return {"transposes": asked[0], "trainingGradients": asked[1],
            # the page shows one value per directive: the same lists, as words
            "transposeWords": {name: hlo_names(ops) for name, ops in asked[0].items()},
            "trainingWords": {name: hlo_names(ops) for name, ops in asked[1].items()},
            "compiledTransposeWords": compiled[0], "compiledTrainingWords": compiled[1]}
# --8<-- [end:autodiff_check]


def programs_to_compile(devices, nbytes=None):
    """{gradient program: (program, its arguments' shapes)} of the autodiff page on
    `devices`, which may be compile-only (a TPU slice described on a CPU host), for the
    lesson's gradient or one of `nbytes`: what `tpu_job.py --write-compiled` reads."""
    mesh, problem = data_mesh(devices), make_problem(len(devices))
    features = problem.w.size if nbytes is None else nbytes // problem.w.itemsize

    def shaped(shape, spec=P()):
        return jax.ShapeDtypeStruct(shape, np.float32, sharding=NamedSharding(mesh, spec))
    programs = {name: (gradient_program(mesh, name), (shaped(v.shape, in_spec),
                                                      shaped(c.shape, out_spec)))
                for name, (v, c, _) in transpose_cases(len(devices), features).items()
                for _, in_spec, out_spec in [COLLECTIVES_UNDER_GRAD[name]]}
    batch = (shaped((problem.n_total, features), P("data")), shaped((problem.n_total,), P("data")))
    rows = as_rows(np.zeros(features, np.float32), len(devices)).shape
    for name, program in training_programs(mesh, problem.n_total).items():
        programs.update({labelled: (program, (*batch, weights)) for labelled, weights
                         in weight_layouts(name, shaped((features,)), shaped(rows)).items()})
    return programs


# --8<-- [start:zero_accounting]
def zero_accounting(traffic, gradient_bytes=2**20, ranks=4, state_per_weight=1):
    """Per-rank bytes of each ZeRO stage: sent per step (ring model, and measured in the
    four-process run's traffic rows) and kept between steps (weights, gradient, state)."""
    # One step of each stage, as the collectives it runs on the whole gradient (G bytes).
    # ZeRO-1 shards the optimizer state, ZeRO-2 the gradient too, ZeRO-3 (FSDP) the
    # weights too: gathered for the forward pass and, freed after it, again for backward.
    stages = {"data_parallel": ("all_reduce",),
              "zero_1": ("reduce_scatter", "all_gather"),
              "zero_2": ("reduce_scatter", "all_gather"),
              "zero_3": ("all_gather", "all_gather", "reduce_scatter")}
    G, shard = gradient_bytes, gradient_bytes // ranks
    kept = {"data_parallel": G + G + state_per_weight * G,  # weights, gradient, state
            "zero_1": G + G + state_per_weight * shard,
            "zero_2": G + shard + state_per_weight * shard,
            "zero_3": shard + shard + state_per_weight * shard}
    measured = {row["collective"]: row["observedBytesPerRank"] for row in traffic
                if row["gradientBytes"] == gradient_bytes}
    model = ring_payload_bytes(gradient_bytes, ranks)
    return [{"stage": stage, "model_sent_bytes": sum(model[c] for c in collectives),
             "measured_sent_bytes": [sum(measured[c][r] for c in collectives)
                                     for r in range(ranks)],
             "kept_bytes": kept[stage]}
            for stage, collectives in stages.items()]
# --8<-- [end:zero_accounting]


# --8<-- [start:clipping]
def clip_by_global_norm(g_slice, max_norm):
    """Per device: scale this slice so that the WHOLE gradient's norm is at most max_norm.

    The norm is of the whole vector, but each device holds one slice: sum the squares
    locally, then one scalar psum (4 bytes, not the gradient) gives every device the total.
    """
    squares = jax.lax.psum(jnp.sum(g_slice * g_slice), "data")
    scale = jnp.minimum(1.0, max_norm / jnp.sqrt(squares))
    return g_slice * scale
# --8<-- [end:clipping]


def run_going_further(mesh, problem):
    """The going-further steps that run, on the lesson's mesh and problem, each printing
    what its page shows; what they found, for the recording (the autodiff page reads it)."""
    transposes = collective_transposes(mesh, problem.w.size)
    training = training_gradients(mesh, problem)
    found = autodiff_collectives(transposes, training)
    compiler = f"XLA:{jax.default_backend().upper()}"
    print("Each collective's gradient asks for:", found["transposeWords"])
    print(f"{compiler} compiles each to:", found["compiledTransposeWords"])
    print("The training gradients ask for:", found["trainingWords"])
    print(f"{compiler} compiles them to:", found["compiledTrainingWords"])
    return {"autodiff": found}

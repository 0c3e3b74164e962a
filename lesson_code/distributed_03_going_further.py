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

from lesson_code.distributed_03 import (assert_matches, hlo_names, place, reference_gradient,
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


def collective_transposes(mesh, features):
    """What the gradient of each collective runs, with its values checked in NumPy."""
    p = mesh.devices.size
    stacked = np.arange(p * features, dtype=np.float32)  # p partial vectors, end to end
    whole = np.arange(features, dtype=np.float32)  # one vector, split into p slices
    # (input, cotangent c, the gradient worked out by hand)
    cases = {
        # every device's input reached the one summed result: each gets c back whole
        "psum": (stacked, whole + 1, np.tile(whole + 1, p)),
        "psum_scatter": (stacked, whole + 1, np.tile(whole + 1, p)),
        # p varying copies came from each slice: the gradient sums them, slice by slice
        "all_gather": (whole, stacked + 1, (stacked + 1).reshape(p, -1).sum(axis=0)),
        # one invariant result: each slice takes its own part of c, nothing is summed
        "all_gather_invarying": (whole, whole + 1, whole + 1),
    }
    transposes = {}
    for name, (v, c, expected) in cases.items():
        _, in_spec, out_spec = COLLECTIVES_UNDER_GRAD[name]
        # The gradient has the input's layout, c the output's: placed like the batch.
        v = jax.device_put(v, NamedSharding(mesh, in_spec))
        c = jax.device_put(c, NamedSharding(mesh, out_spec))
        program = gradient_program(mesh, name)
        assert_matches(program(v, c), expected)
        transposes[name] = lowered_ops(program, v, c)
    return transposes
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
    """ZeRO-3 / FSDP: weights stored as slices, gathered for the forward pass."""
    def loss(w_slice):
        w = jax.lax.all_gather(w_slice, "data", tiled=True, to=to)
        return local_loss(x_block, y_block, w, n_total)
    return jax.grad(loss)(w_slice)


def training_gradients(mesh, problem):
    """Three ways to differentiate the lesson's loss; each checked against NumPy."""
    batch = (P("data"), P("data"))
    programs = {
        "replicated_weights": jax.shard_map(
            partial(data_parallel_grad, n_total=problem.n_total), mesh=mesh,
            in_specs=(*batch, P()), out_specs=P()),
        "sharded_weights": jax.shard_map(
            partial(sharded_weights_grad, n_total=problem.n_total), mesh=mesh,
            in_specs=(*batch, P("data")), out_specs=P("data")),
        "sharded_weights_invarying": jax.shard_map(
            partial(sharded_weights_grad, n_total=problem.n_total, to="invarying"),
            mesh=mesh, in_specs=(*batch, P("data")), out_specs=P("data")),
    }
    expected = reference_gradient(problem)
    ops = {}
    for name, program in programs.items():
        program = jax.jit(program)
        args = place(mesh, problem)
        assert_matches(program(*args), expected)
        ops[name] = lowered_ops(program, *args)
    return ops
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
EXPECTED_TRAINING = {"replicated_weights": ["all_reduce"],
                     "sharded_weights": ["all_gather", "reduce_scatter"],
                     "sharded_weights_invarying": ["all_gather", "all_reduce",
                                                   "dynamic_slice"]}


def autodiff_collectives(transposes, training):
    """The lowered gradient programs' collectives, asserted, as the recording keeps them."""
    assert transposes == EXPECTED_TRANSPOSES, transposes
    assert training == EXPECTED_TRAINING, training
    return {"transposes": transposes, "trainingGradients": training,
            # the page shows one value per directive: the same lists, as words
            "transposeWords": {name: hlo_names(ops) for name, ops in transposes.items()},
            "trainingWords": {name: hlo_names(ops) for name, ops in training.items()}}
# --8<-- [end:autodiff_check]


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
    print("Each collective's gradient runs:",
          {name: hlo_names(ops) for name, ops in transposes.items()})
    training = training_gradients(mesh, problem)
    print("Gradient programs run:", {name: hlo_names(ops) for name, ops in training.items()})
    return {"autodiff": autodiff_collectives(transposes, training)}

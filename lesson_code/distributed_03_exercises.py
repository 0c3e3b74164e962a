"""Your exercises for distributed-03: fill in every `todo("...")`, then check them.

Each scaffold is a reference solution (in distributed_03.py, or for the going-further
pages' exercises in distributed_03_going_further.py) with its key expressions
replaced by `todo("...")`, which raises NotImplementedError until you fill it in. This is
the only file you edit; the checks live in distributed_03_checks.py.

    python scripts/exercises.py --lesson distributed-03              # your scaffolds
    python scripts/exercises.py --lesson distributed-03 --reference  # the lesson's own

(`python -m lesson_code.distributed_03_exercises [--reference]` runs the same command.)
The checker runs each exercise in a process of its own, on the lesson's devices, with a
time limit, and prints one line per exercise: `ok`, `unfinished` (a TODO still raises,
with its file:line) or `wrong` (what differs). It exits 1 while any is unfinished or wrong.
"""
if __name__ == "__main__":  # before JAX loads: the checker is the course's, not this file's
    from lesson_code.exercise import run_checker
    run_checker("--lesson", "distributed-03")

import jax
import jax.numpy as jnp
import numpy as np

from lesson_code.distributed_03 import (Problem, assert_matches, place, reference_gradient,
                                        ring_payload_bytes)


def todo(what):
    """A hole in a scaffold: replace the whole `todo(...)` call with your expression."""
    raise NotImplementedError(f"TODO: {what}")


# --8<-- [start:make_it_yours_scaffold]
def make_it_yours(mesh, programs, problem):
    """Reverse rows and labels TOGETHER and move the weights: same gradient?"""
    reversed_problem = Problem(
        # a copy: a reversed view shares the rows' memory, and device_put may keep it
        todo("the observation rows in reverse order (a copy, not a view)"),
        todo("the labels, reversed the same way"),
        todo("new initial weights, e.g. the old ones shifted by np.float32(0.17)"),
    )
    x2, y2, w2 = place(mesh, reversed_problem)
    expected = todo("reference_gradient of the ORIGINAL problem at the new weights")
    assert_matches(programs.all_gradient(x2, y2, w2), expected)
    assert_matches(programs.gather(programs.shard_gradient(x2, y2, w2)), expected)
    wrong_labels = todo("the same gradient with only the labels reversed")
    assert todo("wrong_labels and expected differ by more than 0.01 somewhere"), \
        "reversing only the labels must change the gradient by more than 0.01"
    return expected, wrong_labels
# --8<-- [end:make_it_yours_scaffold]


# --8<-- [start:transfer_scaffold]
def communication_budget(gradient_bytes=2**20, ranks=(2, 4, 8)):
    """Ring all-reduce vs. reduce-scatter + all-gather, and per-rank shard storage."""
    budget = []
    for p in ranks:
        scatter = todo("bytes one rank sends in one ring phase, B_RS")
        all_reduce = todo("B_AR, in terms of scatter")
        scatter_then_gather = todo("B_RS + B_AG")
        assert all_reduce == scatter_then_gather, "B_AR != B_RS + B_AG: count the gather"
        assert gradient_bytes // p * p == gradient_bytes  # slices tile the vector
        budget.append({"ranks": p, "all_reduce_bytes": all_reduce,
                       "scatter_gather_bytes": scatter_then_gather,
                       "shard_storage_bytes": todo("one rank's slice, in bytes")})
    return budget
# --8<-- [end:transfer_scaffold]


# --8<-- [start:zero_scaffold]
def zero_accounting(traffic, gradient_bytes=2**20, ranks=4, state_per_weight=1):
    """Per-rank bytes of each ZeRO stage: sent per step (ring model, and measured in the
    four-process run's traffic rows) and kept between steps (weights, gradient, state)."""
    # One step of each stage, as the collectives it runs on the whole gradient (G bytes).
    stages = {"data_parallel": todo("the collectives of plain data parallel, a tuple"),
              "zero_1": todo("optimizer state sharded: which collectives?"),
              "zero_2": todo("gradient sharded too: which collectives?"),
              "zero_3": todo("weights sharded too: gathered for forward AND backward")}
    G, shard = gradient_bytes, gradient_bytes // ranks
    kept = {"data_parallel": G + G + state_per_weight * G,  # weights, gradient, state
            "zero_1": todo("bytes kept per rank by ZeRO-1"),
            "zero_2": todo("bytes kept per rank by ZeRO-2"),
            "zero_3": todo("bytes kept per rank by ZeRO-3")}
    measured = {row["collective"]: row["observedBytesPerRank"] for row in traffic
                if row["gradientBytes"] == gradient_bytes}
    model = ring_payload_bytes(gradient_bytes, ranks)
    return [{"stage": stage, "model_sent_bytes": sum(model[c] for c in collectives),
             "measured_sent_bytes": [sum(measured[c][r] for c in collectives)
                                     for r in range(ranks)],
             "kept_bytes": kept[stage]}
            for stage, collectives in stages.items()]
# --8<-- [end:zero_scaffold]


# --8<-- [start:clipping_scaffold]
def clip_by_global_norm(g_slice, max_norm):
    """Per device: scale this slice so that the WHOLE gradient's norm is at most max_norm.

    The norm is of the whole vector, but each device holds one slice: sum the squares
    locally, then one scalar psum (4 bytes, not the gradient) gives every device the total.
    """
    squares = todo("the sum of squares of the WHOLE gradient, the same on every device")
    scale = jnp.minimum(1.0, max_norm / jnp.sqrt(squares))
    return g_slice * scale
# --8<-- [end:clipping_scaffold]


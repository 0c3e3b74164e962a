"""Starter scaffolds for the two exercises of distributed-03.

Each scaffold is the reference solution (in distributed_03.py) with its key lines
replaced by `...` and a TODO: it parses and imports, and every line you keep is one the
reference solution also runs, so the checks you must satisfy are already written.
"""
import numpy as np

from lesson_code.distributed_03 import Problem, assert_matches, place, reference_gradient


# --8<-- [start:make_it_yours_scaffold]
def make_it_yours(mesh, programs, problem):
    """Reverse rows and labels TOGETHER and move the weights: same gradient?"""
    reversed_problem = Problem(
        ...,  # TODO: the observation rows in reverse order (a copy, not a view)
        ...,  # TODO: the labels, reversed the same way
        ...,  # TODO: new initial weights, e.g. the old ones shifted by np.float32(0.17)
    )
    x2, y2, w2 = place(mesh, reversed_problem)
    expected = ...  # TODO: reference_gradient of the ORIGINAL problem at the new weights
    assert_matches(programs.all_gradient(x2, y2, w2), expected)
    assert_matches(programs.gather(programs.shard_gradient(x2, y2, w2)), expected)
    wrong_labels = ...  # TODO: the same gradient with only the labels reversed
    assert ...  # TODO: wrong_labels and expected differ by more than 0.01 somewhere
    return expected, wrong_labels
# --8<-- [end:make_it_yours_scaffold]


# --8<-- [start:transfer_scaffold]
def communication_budget(gradient_bytes=2**20, ranks=(2, 4, 8)):
    """Ring all-reduce vs. reduce-scatter + all-gather, and per-rank shard storage."""
    budget = []
    for p in ranks:
        scatter = ...  # TODO: bytes one rank sends in one ring phase, B_RS
        all_reduce = ...  # TODO: B_AR, in terms of scatter
        scatter_then_gather = ...  # TODO: B_RS + B_AG
        assert all_reduce == scatter_then_gather
        assert gradient_bytes // p * p == gradient_bytes  # slices tile the vector
        budget.append({"ranks": p, "all_reduce_bytes": all_reduce,
                       "scatter_gather_bytes": scatter_then_gather,
                       "shard_storage_bytes": ...})  # TODO: one rank's slice, in bytes
    return budget
# --8<-- [end:transfer_scaffold]

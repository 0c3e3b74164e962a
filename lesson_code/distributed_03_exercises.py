"""Starter scaffolds for the two exercises of distributed-03, and a checker for them.

Each scaffold is the reference solution (in distributed_03.py) with its key expressions
replaced by `todo("...")`, which raises NotImplementedError until you fill it in.

    python -m lesson_code.distributed_03_exercises              # check your scaffolds
    python -m lesson_code.distributed_03_exercises --reference  # check the lesson's own

The checker builds the lesson's 4-device mesh itself, runs every exercise and prints one
line per exercise: `ok`, `unfinished` (a TODO still raises) or `wrong` (what differs).
It exits 1 while any exercise is unfinished or wrong.
"""
import argparse
import os
import sys
import traceback
from dataclasses import dataclass
from functools import cache
from typing import Callable

import numpy as np
from jax.sharding import Mesh

from lesson_code import distributed_03 as lesson
from lesson_code import ring_collectives, ring_exercises
from lesson_code.distributed_03 import Problem, assert_matches, place, reference_gradient


def todo(what):
    """A hole in a scaffold: replace the whole `todo(...)` call with your expression."""
    raise NotImplementedError(f"TODO: {what}")


# --8<-- [start:make_it_yours_scaffold]
def make_it_yours(mesh, programs, problem):
    """Reverse rows and labels TOGETHER and move the weights: same gradient?"""
    reversed_problem = Problem(
        todo("the observation rows in reverse order (a copy, not a view)"),
        todo("the labels, reversed the same way"),
        todo("new initial weights, e.g. the old ones shifted by np.float32(0.17)"),
    )
    x2, y2, w2 = place(mesh, reversed_problem)
    expected = todo("reference_gradient of the ORIGINAL problem at the new weights")
    assert_matches(programs.all_gradient(x2, y2, w2), expected)
    assert_matches(programs.gather(programs.shard_gradient(x2, y2, w2)), expected)
    wrong_labels = todo("the same gradient with only the labels reversed")
    assert todo("wrong_labels and expected differ by more than 0.01 somewhere")
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
        assert all_reduce == scatter_then_gather
        assert gradient_bytes // p * p == gradient_bytes  # slices tile the vector
        budget.append({"ranks": p, "all_reduce_bytes": all_reduce,
                       "scatter_gather_bytes": scatter_then_gather,
                       "shard_storage_bytes": todo("one rank's slice, in bytes")})
    return budget
# --8<-- [end:transfer_scaffold]


RANKS = 4  # the lesson's mesh; the checks below assume it


@cache
def lesson_mesh():
    """The lesson's mesh, programs and problem on 4 logical CPU devices, built once."""
    devices = lesson.select_devices("cpu", RANKS)
    mesh = Mesh(np.asarray(devices), ("data",))
    problem = lesson.make_problem(RANKS)
    return mesh, lesson.build_programs(mesh, problem.n_total), problem


def check_make_it_yours(implementation):
    mesh, programs, problem = lesson_mesh()
    # The implementation's own asserts compare every device's shard with `expected`.
    expected, wrong_labels = implementation(mesh, programs, problem)
    expected, wrong_labels = np.asarray(expected), np.asarray(wrong_labels)
    assert expected.shape == wrong_labels.shape == problem.w.shape, \
        f"expected two gradients of shape {problem.w.shape}, got {expected.shape} " \
        f"and {wrong_labels.shape}"
    assert not np.allclose(expected, reference_gradient(problem)), \
        "the weights did not change: the exercise asks for new initial weights"
    gap = float(np.max(np.abs(wrong_labels - expected)))
    assert gap > 0.01, f"reversing only the labels changed the gradient by {gap:.3g}, " \
        "not by more than 0.01: wrong_labels must use the reversed labels alone"


BUDGET_ALL_REDUCE = [1048576, 1572864, 1835008]  # 2 (p-1)/p 2**20 for p = 2, 4, 8
BUDGET_STORAGE = [524288, 262144, 131072]  # 2**20 / p


def check_communication_budget(implementation):
    budget = implementation()
    ranks = [row["ranks"] for row in budget]
    assert ranks == [2, 4, 8], f"rows for ranks {ranks}, expected [2, 4, 8]"
    for column, expected in (("all_reduce_bytes", BUDGET_ALL_REDUCE),
                             ("scatter_gather_bytes", BUDGET_ALL_REDUCE),
                             ("shard_storage_bytes", BUDGET_STORAGE)):
        got = [row[column] for row in budget]
        assert got == expected, f"{column} is {got}, expected {expected}"


@dataclass(frozen=True)
class Exercise:
    name: str
    scaffold: Callable  # what the student fills in
    reference: Callable  # the lesson's solution
    check: Callable[[Callable], None]  # raises AssertionError saying what is wrong


# Another lesson module can add its exercises here; each runs and reports on its own.
EXERCISES = [
    Exercise("make_it_yours", make_it_yours, lesson.make_it_yours, check_make_it_yours),
    Exercise("communication_budget", communication_budget, lesson.communication_budget,
             check_communication_budget),
    # Going further: build the ring yourself (its scaffold lives beside the ring's page).
    Exercise("ring_all_gather", ring_exercises.ring_all_gather,
             ring_collectives.ring_all_gather, ring_exercises.check_ring_all_gather),
]


def one_line(error):
    return " ".join(str(error).split()) or type(error).__name__


def where_raised(error):
    """file:line of the innermost frame outside todo(), so the learner sees which hole."""
    frames = traceback.extract_tb(error.__traceback__)
    frame = next((f for f in reversed(frames) if f.name != "todo"), frames[-1])
    return f"{os.path.relpath(frame.filename)}:{frame.lineno}"


def verdict(exercise, use_reference):
    """One line: ok, unfinished (a TODO raised) or wrong (what the check found)."""
    implementation = exercise.reference if use_reference else exercise.scaffold
    try:
        exercise.check(implementation)
    except NotImplementedError as error:
        return False, f"unfinished {exercise.name}: {one_line(error)} ({where_raised(error)})"
    except AssertionError as error:
        return False, f"wrong {exercise.name}: {one_line(error)}"
    except Exception as error:  # a student's bug is a result to report, not a crash
        return False, f"wrong {exercise.name}: {type(error).__name__}: {one_line(error)}"
    return True, f"ok {exercise.name}"


def main(argv=None, exercises=EXERCISES):
    parser = argparse.ArgumentParser(description="Check the distributed-03 exercises.")
    parser.add_argument("--reference", action="store_true",
                        help="check the lesson's own solutions instead of your scaffolds")
    args = parser.parse_args(argv)
    try:
        lesson_mesh()  # before any exercise: JAX fixes its devices on first use
    except lesson.SetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    passed = True
    for exercise in exercises:
        ok, line = verdict(exercise, args.reference)
        passed &= ok
        print(line)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())

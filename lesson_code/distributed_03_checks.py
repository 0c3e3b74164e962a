"""The checks of distributed-03's exercises (the registry's `exercises` for this lesson).

A learner edits distributed_03_exercises.py (and ring_exercises.py), never this file.
Each exercise is judged in two processes (lesson_code/exercise.py): in the learner's,
`attempt` returns what the learner's function computed as plain data (the values, the
lowered program's text); in the checker's, where no learner code runs, `answer(devices)`
computes the right result from NumPy and the lesson's formulas, and `compare` says what
differs, naming the central mistake when it is the one made.
"""
import json
import re
from functools import cache, partial
from pathlib import Path

import jax
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

from lesson_code import distributed_03 as lesson
from lesson_code import distributed_03_going_further as going_further
from lesson_code import ring_checks, ring_collectives
from lesson_code.exercise import Exercise

SCAFFOLDS = "lesson_code.distributed_03_exercises"
TRAFFIC = Path(__file__).resolve().parents[1] / "recordings" / \
    f"{lesson.LESSON_ID}.cpu-processes.json"


@cache
def lesson_mesh():
    """The lesson's mesh, programs and problem on every device the checker set up."""
    devices = jax.devices()
    mesh = Mesh(np.asarray(devices), ("data",))
    problem = lesson.make_problem(len(devices))
    return mesh, lesson.build_programs(mesh, problem.n_total), problem


def close(got, expected):
    got = np.asarray(got, dtype=np.float64)
    return got.shape == np.shape(expected) and np.allclose(got, expected, rtol=1e-5,
                                                           atol=1e-6)


# ------------------------------------------------------------------ make it yours --

class Watched:
    """The lesson's programs, keeping every result a device computed through them."""

    def __init__(self, programs):
        self.programs, self.results = programs, []

    def __getattr__(self, name):
        program = getattr(self.programs, name)

        def run(*args):
            result = program(*args)
            self.results.append((name, np.asarray(args[0]), np.asarray(result)))
            return result
        return run


def make_it_yours_answer(devices):
    problem = lesson.make_problem(devices)
    moved = problem.w + np.float32(0.17)
    x, y = problem.x.astype(np.float64), problem.y.astype(np.float64)
    expected = 2 * x.T @ (x @ moved - y) / problem.n_total
    wrong = 2 * x.T @ (x @ moved - y[::-1]) / problem.n_total
    return {"expected": expected, "wrong_labels": wrong, "reversed_x": problem.x[::-1]}


def make_it_yours_attempt(implementation):
    mesh, programs, problem = lesson_mesh()
    watched = Watched(programs)
    expected, wrong_labels = implementation(mesh, watched, problem)
    return {"expected": np.asarray(expected), "wrong_labels": np.asarray(wrong_labels),
            "device_results": watched.results}


def make_it_yours_compare(got, answer):
    assert close(got["expected"], answer["expected"]), (
        "expected is not the original problem's gradient at the new weights "
        "(the old weights + 0.17): reversing rows and labels together leaves it unchanged")
    assert close(got["wrong_labels"], answer["wrong_labels"]), (
        "wrong_labels is not the gradient with only the labels reversed")
    on_devices = [result for name, x, result in got["device_results"]
                  if name in ("all_gradient", "gather") and close(result, answer["expected"])]
    reversed_rows = any(np.array_equal(x, answer["reversed_x"])
                        for name, x, _ in got["device_results"])
    assert reversed_rows, "the devices never saw the reversed rows: place the reversed " \
        "problem and run programs.all_gradient on it"
    assert len(on_devices) >= 2, "the devices' all-reduce and rebuilt gradients were not " \
        "both checked: run programs.all_gradient and programs.gather(shard_gradient(...))"


# ------------------------------------------------------------- the transfer budget --

GRADIENT_BYTES, BUDGET_RANKS = 2**20, (2, 4, 8)  # the scaffold's defaults


def budget_answer(devices):
    return [{"ranks": p, "all_reduce_bytes": 2 * (p - 1) * GRADIENT_BYTES // p,
             "scatter_gather_bytes": 2 * (p - 1) * GRADIENT_BYTES // p,
             "shard_storage_bytes": GRADIENT_BYTES // p} for p in BUDGET_RANKS]


def budget_attempt(implementation):
    return implementation()


def budget_compare(got, answer):
    assert [row.get("ranks") for row in got] == [row["ranks"] for row in answer], \
        f"rows for ranks {[row.get('ranks') for row in got]}, expected " \
        f"{[row['ranks'] for row in answer]}"
    for mine, right in zip(got, answer):
        p, phase = right["ranks"], right["all_reduce_bytes"] // 2
        if mine["scatter_gather_bytes"] == phase:
            raise AssertionError(f"at p = {p}, scatter_gather_bytes is {phase}, one phase "
                                 f"(B_RS alone): you forgot the all-gather; B_RS + B_AG = "
                                 f"{2 * phase}")
        if mine["all_reduce_bytes"] == phase:
            raise AssertionError(f"at p = {p}, all_reduce_bytes is one ring phase ({phase}):"
                                 f" a ring all-reduce is two phases, {2 * phase}")
        if mine["shard_storage_bytes"] == GRADIENT_BYTES:
            raise AssertionError(f"at p = {p}, shard_storage_bytes is the whole gradient: "
                                 f"a rank keeps only its slice, G/p")
        for column in ("all_reduce_bytes", "scatter_gather_bytes", "shard_storage_bytes"):
            assert mine[column] == right[column], \
                f"at p = {p}, {column} is {mine[column]}, expected {right[column]}"


# ----------------------------------------------------------------- ZeRO accounting --

def measured_traffic():
    """The four-process run's traffic rows: what each rank's sockets really sent."""
    return json.loads(TRAFFIC.read_text())["data"]["traffic"]


ZERO_RANKS = 4  # the scaffold's default: the four-process run's


def zero_answer(devices):
    traffic = {row["collective"]: row["observedBytesPerRank"] for row in measured_traffic()
               if row["gradientBytes"] == GRADIENT_BYTES}
    G, p, s = GRADIENT_BYTES, ZERO_RANKS, GRADIENT_BYTES // ZERO_RANKS
    phase = (p - 1) * G / p  # one ring phase per rank
    phases = {"all_reduce": 2, "reduce_scatter": 1, "all_gather": 1}
    collectives = {"data_parallel": ["all_reduce"],
                   "zero_1": ["reduce_scatter", "all_gather"],
                   "zero_2": ["reduce_scatter", "all_gather"],
                   "zero_3": ["all_gather", "all_gather", "reduce_scatter"]}
    kept = {"data_parallel": 3 * G, "zero_1": 2 * G + s, "zero_2": G + 2 * s, "zero_3": 3 * s}
    return [{"stage": stage, "model_sent_bytes": phase * sum(phases[c] for c in ops),
             "measured_sent_bytes": [sum(traffic[c][r] for c in ops) for r in range(p)],
             "kept_bytes": kept[stage]} for stage, ops in collectives.items()]


def zero_attempt(implementation):
    return implementation(measured_traffic())


def zero_compare(got, answer):
    stages = [row.get("stage") for row in got]
    assert stages == [row["stage"] for row in answer], \
        f"rows for stages {stages}, expected {[row['stage'] for row in answer]}"
    rows = dict(zip(stages, got))
    phase = answer[0]["model_sent_bytes"] / 2
    if rows["zero_3"]["model_sent_bytes"] == 2 * phase:
        raise AssertionError("zero_3 sends as much as data parallel: ZeRO-3 gathers the "
                             "weights for the forward pass AND again for the backward "
                             f"pass, three phases ({3 * phase:.0f} bytes)")
    if rows["zero_1"]["model_sent_bytes"] == phase:
        raise AssertionError("zero_1 sends one phase: after the sharded update the "
                             "weights must still be gathered (reduce-scatter + all-gather)")
    for right in answer:
        mine, stage = rows[right["stage"]], right["stage"]
        for column in ("model_sent_bytes", "measured_sent_bytes", "kept_bytes"):
            assert close(mine[column], right[column]), \
                f"{stage}: {column} is {mine[column]}, expected {right[column]}"


# ------------------------------------------------------------------------ clipping --

MAX_NORM = 0.002  # below the lesson gradient's norm (about 0.0049), so clipping acts
# A collective, matched by its op name alone: StableHLO prints each in its generic form,
# `"stablehlo.all_gather"(%1) <{attributes}> : (tensor<2xf32>) -> tensor<8xf32>`, and
# an all-reduce or reduce-scatter holds a region (`({ ... })`) before its types.
COLLECTIVE = re.compile(r'"stablehlo\.(all_reduce|all_gather|reduce_scatter)"')
SIGNATURE_WINDOW = 20_000  # characters: an op's types follow within a few hundred


def collectives_sent(lowered_text):
    """["all_reduce of tensor<f32>", ...]: each collective with what it sends.

    The types are the `(...)` after the first ` : ` outside the op's own operands,
    attributes and region (each of which holds colons of its own)."""
    found = []
    for match in COLLECTIVE.finditer(lowered_text):
        depth, at = 0, match.end()
        end = min(len(lowered_text), at + SIGNATURE_WINDOW)
        while at < end and not (depth == 0 and lowered_text.startswith(" : (", at)):
            depth += {"(": 1, "{": 1, ")": -1, "}": -1}.get(lowered_text[at], 0)
            at += 1
        close_at = lowered_text.find(")", at + 4, end)
        operands = lowered_text[at + 4:close_at] if at < end and close_at > 0 else "?"
        found.append(f"{match[1]} of {operands}")
    return found


def clipping_answer(devices):
    g = lesson.reference_gradient(lesson.make_problem(devices)).astype(np.float64)
    return {"clipped": g * min(1.0, MAX_NORM / np.linalg.norm(g)), "gradient": g}


def clipping_attempt(implementation):
    mesh, programs, problem = lesson_mesh()
    g_slices = programs.shard_gradient(*lesson.place(mesh, problem))
    program = jax.jit(jax.shard_map(partial(implementation, max_norm=MAX_NORM), mesh=mesh,
                                    in_specs=P("data"), out_specs=P("data")))
    return {"clipped": np.asarray(program(g_slices)),
            "lowered": str(program.lower(g_slices).compiler_ir(dialect="stablehlo"))}


def clipping_compare(got, answer):
    collectives = collectives_sent(got["lowered"])
    gathers = [line for line in collectives if not line.startswith("all_reduce")]
    assert not gathers, "the program gathers the gradient to take its norm, which sends " \
        "(p-1)/p of it per rank; sum the squares of your slice, then psum that scalar"
    assert collectives, "no collective: each device scaled its slice by its own slice's " \
        "norm; psum the sum of squares over 'data' so every device has the whole norm"
    assert collectives == ["all_reduce of tensor<f32>"], \
        f"expected exactly one psum, of one scalar (4 bytes); this program asks for " \
        f"{', '.join(collectives)}"
    assert close(got["clipped"], answer["clipped"]), (
        "one scalar psum, but the clipped gradient is wrong: the norm is the square root "
        "of the psum of the squares (not the psum of the slices' norms)")


EXERCISES = [
    Exercise("make_it_yours", f"{SCAFFOLDS}:make_it_yours", lesson.make_it_yours,
             make_it_yours_answer, make_it_yours_attempt, make_it_yours_compare),
    Exercise("communication_budget", f"{SCAFFOLDS}:communication_budget",
             lesson.communication_budget, budget_answer, budget_attempt, budget_compare),
    Exercise("zero_accounting", f"{SCAFFOLDS}:zero_accounting", going_further.zero_accounting,
             zero_answer, zero_attempt, zero_compare),
    Exercise("clip_by_global_norm", f"{SCAFFOLDS}:clip_by_global_norm",
             going_further.clip_by_global_norm, clipping_answer, clipping_attempt,
             clipping_compare),
    # Going further: build the ring yourself (its scaffold lives beside the ring's page).
    Exercise("ring_all_gather", "lesson_code.ring_exercises:ring_all_gather",
             ring_collectives.ring_all_gather, ring_checks.whole_vector,
             ring_checks.run_ring_all_gather, ring_checks.compare_ring_all_gather),
]

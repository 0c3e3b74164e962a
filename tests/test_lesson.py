"""The seed lesson's program against NumPy specs written here: each collective on its global
value and on every device's shard, for 2, 4 and 8 CPU devices (conftest makes 8). As a
command line it runs in fresh interpreters: its device set-up must be the first JAX call."""
import ast
import importlib
import json
import re
from fractions import Fraction
from functools import cache

import jax
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from conftest import PUBLISHED_SEED, ROOT, SEED
from harness import passed, run, snippet_sections
from scripts.store.hashes import import_closure, without_docstrings

lesson = importlib.import_module(SEED.module)
exercises = importlib.import_module(f"{SEED.module}_exercises")

LESSON_FILE = SEED.path()
GOING_FURTHER_FILE = SEED.path(SEED.going_further)
EXERCISES_FILE = SEED.path(exercises.__name__)
RANKS = (2, 4, 8)
TIGHT = dict(rtol=1e-5, atol=1e-8)  # float32 device results against a float64 spec


def spec_gradient(problem, ranks=1):
    """The sum of per-block gradients, each divided by the GLOBAL N, in float64."""
    x, y, w = (a.astype(np.float64) for a in (problem.x, problem.y, problem.w))
    return np.sum([2 * xb.T @ (xb @ w - yb) / x.shape[0]
                   for xb, yb in zip(np.split(x, ranks), np.split(y, ranks))], axis=0)


def ring_bytes(gradient_bytes, ranks):
    """Idealized ring: one phase sends (p-1)/p of the vector; an all-reduce is two."""
    phase = Fraction(gradient_bytes * (ranks - 1), ranks)
    return {"reduce_scatter": phase, "all_gather": phase, "all_reduce": 2 * phase}


@cache
def lesson_setup(ranks):
    mesh, problem = Mesh(np.asarray(jax.devices()[:ranks]), ("data",)), lesson.make_problem(ranks)
    return mesh, problem, lesson.place(mesh, problem), lesson.build_programs(mesh, problem.n_total)


def check_placed(result, expected, mesh, split=False):
    """Every device holds the whole vector, or (`split`) device r slice r of it, and only that."""
    devices = list(mesh.devices.flat)
    np.testing.assert_allclose(np.asarray(result), expected, **TIGHT)
    assert {shard.device for shard in result.addressable_shards} == set(devices)
    for shard in result.addressable_shards:
        held = np.split(expected, len(devices))[devices.index(shard.device)] if split else expected
        assert shard.data.shape == held.shape == expected[shard.index].shape
        np.testing.assert_allclose(np.asarray(shard.data), held, **TIGHT)
        np.testing.assert_array_equal(expected[shard.index], held)


@pytest.mark.parametrize("ranks", RANKS)
def test_each_program_leaves_the_spec_s_values_where_it_says_by_its_one_collective(ranks):
    mesh, problem, (x, y, w), programs = lesson_setup(ranks)
    expected = spec_gradient(problem, ranks)
    np.testing.assert_allclose(expected, spec_gradient(problem), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(lesson.reference_gradient(problem), expected, **TIGHT)
    sliced = programs.shard_gradient(x, y, w)
    check_placed(programs.all_gradient(x, y, w), expected, mesh)
    check_placed(sliced, expected, mesh, split=True)
    check_placed(programs.gather(sliced), expected, mesh)
    # The gather concatenates distinct per-device slices in rank order.
    width = problem.w.size // ranks
    chunks = [np.arange(width, dtype=np.float32) + 10 * r for r in range(ranks)]
    split = jax.make_array_from_single_device_arrays(
        (problem.w.size,), NamedSharding(mesh, P("data")),
        [jax.device_put(chunk, device) for chunk, device in zip(chunks, mesh.devices.flat)])
    check_placed(programs.gather(split), np.concatenate(chunks), mesh)
    # One collective each, as lowered and, on XLA:CPU, as compiled; none without one.
    for found in (lesson.lowered_collectives, lesson.compiled_collectives):
        assert found(programs.all_gradient, x, y, w) == {"all_reduce"}
        assert found(programs.shard_gradient, x, y, w) == {"reduce_scatter"}
        assert found(programs.gather, sliced) == {"all_gather"}
        assert found(jax.jit(lambda v: 2 * v), w) == set()


def all_reduce_then_slice(mesh, n_total):
    """What a compiler may make of a reduce-scatter: the whole sum, then this rank's part."""
    def body(x_block, y_block, w):
        total = jax.lax.psum(lesson.local_contribution(x_block, y_block, w, n_total), "data")
        width = total.shape[0] // jax.lax.axis_size("data")
        return jax.lax.dynamic_slice_in_dim(total, jax.lax.axis_index("data") * width, width)
    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P("data"), P("data"), P()),
                                 out_specs=P("data")))


def test_report_compiled_says_what_a_rewritten_reduce_scatter_became(capsys):
    mesh, problem, (x, y, w), programs = lesson_setup(4)
    sliced = programs.shard_gradient(x, y, w)
    assert lesson.report_compiled(programs, (x, y, w), sliced) == {
        "all_reduce": ["all_reduce"], "reduce_scatter": ["reduce_scatter"],
        "all_gather": ["all_gather"]}
    assert capsys.readouterr().out == \
        "Compiled HLO runs what was requested: all-reduce, reduce-scatter, all-gather\n"
    rewritten = all_reduce_then_slice(mesh, problem.n_total)
    check_placed(rewritten(x, y, w), spec_gradient(problem, 4), mesh, split=True)  # same values...
    swapped = lesson.Programs(programs.all_gradient, rewritten, programs.gather)
    assert lesson.report_compiled(swapped, (x, y, w), sliced)["reduce_scatter"] == \
        ["all_reduce"]  # ...and a lowered program that would have read "reduce_scatter"
    assert capsys.readouterr().out == ("Compiled HLO differs from the request: "
                                       "reduce-scatter program runs all-reduce\n")


def test_assert_matches_rejects_a_wrong_slice_and_a_wrong_slice_length():
    _, problem, (x, y, w), programs = lesson_setup(4)
    sliced, reference = programs.shard_gradient(x, y, w), lesson.reference_gradient(problem)
    lesson.assert_matches(sliced, reference, slice_len=2)
    off_in_slice_1 = reference * np.where(np.arange(8) // 2 == 1, 1.01, 1)
    for wrong in (dict(expected=off_in_slice_1), dict(expected=reference, slice_len=8)):
        with pytest.raises(AssertionError):
            lesson.assert_matches(sliced, **wrong)


def local_mean_gradient(x_block, y_block, w):
    """The trap: each device divides by ITS OWN row count, then the shares are summed."""
    residual = x_block @ w - y_block
    return jax.lax.psum(2 * x_block.T @ residual / x_block.shape[0], "data")


@pytest.mark.parametrize("ranks", RANKS)
def test_summing_local_means_gives_p_times_the_gradient(ranks):
    mesh, problem, (x, y, w), programs = lesson_setup(ranks)
    wrong = jax.jit(jax.shard_map(local_mean_gradient, mesh=mesh,
                                  in_specs=(P("data"), P("data"), P()), out_specs=P()))
    right = np.asarray(programs.all_gradient(x, y, w))
    # N/p and N are powers of two here, so the factor is exact, not approximately p.
    np.testing.assert_array_equal(np.asarray(wrong(x, y, w)), ranks * right)
    assert np.max(np.abs((ranks - 1) * right)) > 1e-3  # visibly wrong


@settings(max_examples=30, deadline=None)
@given(ranks=st.integers(1, 64), per_rank=st.integers(1, 2**16))
def test_the_payload_and_the_budget_follow_the_ring_formula(ranks, per_rank):
    gradient_bytes = 4 * ranks * per_rank  # float32 slices that tile the vector
    model = ring_bytes(gradient_bytes, ranks)
    assert lesson.ring_payload_bytes(gradient_bytes, ranks) == \
        pytest.approx({k: float(v) for k, v in model.items()})
    (row,) = lesson.communication_budget(gradient_bytes, (ranks,))
    assert row["ranks"] == ranks and row["shard_storage_bytes"] * ranks == gradient_bytes
    assert row["all_reduce_bytes"] == row["scatter_gather_bytes"] == model["all_reduce"]
    with pytest.raises(AssertionError):  # slices that do not tile the vector
        lesson.communication_budget(gradient_bytes + 1, (max(ranks, 2),))


def gradients_through_the_lesson(ranks, x, y, w):
    mesh, _, _, programs = lesson_setup(ranks)
    xs, ys, ws = lesson.place(mesh, lesson.Problem(x, y, w))
    return (np.asarray(programs.all_gradient(xs, ys, ws)),
            np.asarray(programs.gather(programs.shard_gradient(xs, ys, ws))))


@settings(max_examples=25, deadline=None)
@given(st.permutations(range(16)))
def test_a_joint_row_permutation_keeps_the_gradient_and_moving_labels_changes_it(order):
    _, problem, _, _ = lesson_setup(4)
    order, original = np.asarray(order), spec_gradient(problem)
    for gradient in gradients_through_the_lesson(4, problem.x[order], problem.y[order], problem.w):
        np.testing.assert_allclose(gradient, original, rtol=1e-5, atol=2e-8)
    if all(np.array_equal(problem.x[i], problem.x[j]) for i, j in enumerate(order)):
        return  # no label moved to another row's x
    # Two neighbouring labels swapped move a weight about 2e-4; float32 rounds below 1e-8.
    shuffled_labels = lesson.Problem(problem.x, problem.y[order], problem.w)
    for gradient in gradients_through_the_lesson(4, problem.x, problem.y[order], problem.w):
        np.testing.assert_allclose(gradient, spec_gradient(shuffled_labels), **TIGHT)
        assert np.max(np.abs(gradient - original)) > 1e-5


@pytest.mark.parametrize("ranks", [1, *RANKS])
def test_the_shard_listing_names_each_device_s_slice_even_on_one_device(ranks):
    """One device's index is slice(None): listed as 0:n, as the data schema requires."""
    mesh, problem, (x, y, w), programs = lesson_setup(ranks)
    per, listing = problem.w.size // ranks, lesson.shard_listing(programs.shard_gradient(x, y, w))
    assert [where for _, where, _ in listing] == [f"{r * per}:{(r + 1) * per}"
                                                 for r in range(ranks)]


@pytest.mark.parametrize("ranks", RANKS)
def test_sharded_momentum_is_the_elementwise_update(ranks):
    mesh, problem, (x, y, w), programs = lesson_setup(ranks)
    sliced = programs.shard_gradient(x, y, w)
    v0 = np.linspace(-0.02, 0.03, problem.w.size)  # the lesson's initial momentum
    v = 0.9 * v0 + spec_gradient(problem)
    expected_w = problem.w.astype(np.float64) - 0.1 * v
    check_placed(lesson.sharded_momentum(mesh, programs, problem, sliced), expected_w, mesh)
    split = NamedSharding(mesh, P("data"))
    new_w, new_v = lesson.momentum_step(jax.device_put(problem.w, split),
                                        jax.device_put(v0.astype(np.float32), split), sliced)
    check_placed(new_w, expected_w, mesh, split=True)
    check_placed(new_v, v, mesh, split=True)  # F/p values of momentum per device, never gathered
    with pytest.raises(AssertionError):
        lesson.sharded_momentum(mesh, programs, problem, 2 * sliced)


def is_hole(node):
    return isinstance(node, ast.Call) and getattr(node.func, "id", None) == "todo"


def match_with_holes(scaffold, solution, where="section"):
    """Assert `scaffold` is `solution` with some expressions (or assert tests) as holes."""
    if is_hole(scaffold) and isinstance(solution, ast.expr):
        return
    shown = [ast.unparse(n) if isinstance(n, ast.AST) else repr(n) for n in (scaffold, solution)]
    assert type(scaffold) is type(solution), f"{where}: {shown[0]} where the solution has " \
                                             f"{shown[1]}"
    if not isinstance(scaffold, ast.AST):
        assert scaffold == solution, f"{where}: {shown[0]} != {shown[1]}"
        return
    for field in scaffold._fields:
        mine, theirs = getattr(scaffold, field), getattr(solution, field)
        if isinstance(mine, list):
            assert len(mine) == len(theirs), f"{where}.{field}: {len(mine)} != {len(theirs)}"
            for a, b in zip(mine, theirs):
                match_with_holes(a, b, f"{where}.{field}")
        else:
            match_with_holes(mine, theirs, f"{where}.{field}")


SCAFFOLDS = {"make_it_yours_scaffold": (LESSON_FILE, "make_it_yours"),
             "transfer_scaffold": (LESSON_FILE, "transfer_budget"),
             "zero_scaffold": (GOING_FURTHER_FILE, "zero_accounting"),
             "clipping_scaffold": (GOING_FURTHER_FILE, "clipping")}


@pytest.mark.parametrize("scaffold_name", SCAFFOLDS)
def test_each_scaffold_is_its_solution_with_holes(scaffold_name):
    scaffold_source = snippet_sections(EXERCISES_FILE)[scaffold_name]
    path, section = SCAFFOLDS[scaffold_name]
    solution_source = snippet_sections(path)[section]
    scaffold = without_docstrings(ast.parse(scaffold_source))
    assert any(is_hole(node) for node in ast.walk(scaffold)), "a scaffold leaves holes"
    match_with_holes(scaffold, without_docstrings(ast.parse(solution_source)), scaffold_name)
    # Every one-line statement kept whole is a line of the solution; every TODO is a hole.
    solution_lines = {line.split("#")[0].strip() for line in solution_source.splitlines()}
    for node in ast.walk(scaffold):
        if isinstance(node, ast.stmt) and node.lineno == node.end_lineno \
                and not any(is_hole(n) for n in ast.walk(node)):
            line = scaffold_source.splitlines()[node.lineno - 1]
            assert line.split("#")[0].strip() in solution_lines, line
    for line in scaffold_source.splitlines():
        if "todo" in line.lower():
            assert "todo(" in line.split("#")[0], line


def test_make_it_yours_filled_into_its_scaffold_gives_the_spec_s_gradients():
    """Run with only the names the scaffold imports: filling it needs no other import."""
    section = without_docstrings(ast.parse(snippet_sections(LESSON_FILE)["make_it_yours"]))
    namespace = dict(vars(exercises))
    exec(compile(section, "filled make_it_yours scaffold", "exec"), namespace)
    mesh, problem, _, programs = lesson_setup(4)
    expected, wrong_labels = namespace["make_it_yours"](mesh, programs, problem)
    moved_weights = lesson.Problem(problem.x, problem.y, problem.w + np.float32(0.17))
    np.testing.assert_allclose(expected, spec_gradient(moved_weights), **TIGHT)
    reversed_labels = lesson.Problem(problem.x, problem.y[::-1], moved_weights.w)
    np.testing.assert_allclose(wrong_labels, spec_gradient(reversed_labels), **TIGHT)
    assert np.max(np.abs(wrong_labels - expected)) > 0.01


@cache
def run_program(*args):
    return run("-m", SEED.module, *args, timeout=180)


def printed(line, prefix):
    assert line.startswith(prefix), (line, prefix)
    return ast.literal_eval(line[len(prefix):])


NUMBER = re.compile(r"-?\d+(\.\d+)?(e-?\d+)?")


@pytest.mark.slow
@pytest.mark.parametrize("devices", [4, 3], ids=["default", "no power of two"])
def test_the_program_prints_each_result_once_in_order(devices):
    done = passed(run_program(*(() if devices == 4 else ("--devices", str(devices)))))
    lines = done.stdout.splitlines()
    assert len(set(lines)) == len(lines) and lines[-1] == f"PASS: {SEED.id}"
    assert lines[3] == f"Local result shapes: replicated ({2 * devices},), reduce-scatter (2,), " \
                      f"gathered ({2 * devices},)"
    gradient = np.asarray(printed(lines[2], "Gradient reference: "))
    expected = spec_gradient(lesson.make_problem(devices))
    np.testing.assert_allclose(gradient, expected, rtol=0, atol=1e-8)
    payload = ring_bytes(8 * devices, devices)
    assert lines[6] == (f"Idealized ring bytes per rank: {float(payload['all_reduce'])} "
                        f"{float(payload['reduce_scatter'])}")
    if devices != 4:
        return
    assert len(lines) == 16
    # The recording's stdout came from the notebook's steps: the same lines, numbers apart
    # (the lines without one, the compiled and the autodiff collectives, are its words).
    recorded = json.loads((ROOT / "recordings" / f"{SEED.id}.cpu.json").read_text())["stdout"]
    assert [NUMBER.sub("#", line) for line in lines] == \
        [NUMBER.sub("#", line) for line in recorded.splitlines()]
    assert lines[0] == "Devices: 4 × cpu"
    assert lines[1] == "Per-device blocks: {'x': (4, 8), 'y': (4,), 'w': (8,)}"
    published = next(line for line in json.loads(PUBLISHED_SEED.read_text())["stdout"]
                     .splitlines() if line.startswith("Gradient reference: "))
    np.testing.assert_allclose(gradient, printed(published, "Gradient reference: "),
                               rtol=0, atol=1e-8)
    shards = printed(lines[4], "Reduce-scatter shards (device, index, values): ")
    assert [(device, index) for device, index, _ in shards] == \
        [(0, "0:2"), (1, "2:4"), (2, "4:6"), (3, "6:8")]
    for device, _, values in shards:  # device r holds slice r, to the 5 digits printed
        np.testing.assert_allclose(values, expected[2 * device:2 * device + 2],
                                   rtol=1e-4, atol=1e-8)
    medians = printed(lines[7], "Completed CPU median microseconds: ")
    assert list(medians) == ["all_reduce", "reduce_scatter", "all_gather_only"]
    assert all(isinstance(v, float) and v > 0 and round(v, 1) == v for v in medians.values())
    budget = printed(lines[10], "Idealized payload/storage budget, not observed network traffic: ")
    assert [(row["ranks"], row["all_reduce_bytes"], row["scatter_gather_bytes"],
             row["shard_storage_bytes"]) for row in budget] == \
        [(p, 2 * 2**20 * (p - 1) // p, 2 * 2**20 * (p - 1) // p, 2**20 // p) for p in RANKS]


@pytest.mark.slow
def test_the_file_alone_runs_the_lesson_without_its_command_line(tmp_path):
    """The page's download, run outside the repository: no command line, no going further."""
    (tmp_path / LESSON_FILE.name).write_bytes(LESSON_FILE.read_bytes())
    lines = passed(run(LESSON_FILE.name, cwd=tmp_path, timeout=180)).stdout.splitlines()
    assert lines[-1] == f"PASS: {SEED.id}" and len(lines) == 12
    assert not any(line.startswith("Gradient programs run") for line in lines)


def test_every_section_of_the_lesson_file_is_on_a_page():
    file = LESSON_FILE.relative_to(ROOT).as_posix()
    included = {name for page in (ROOT / "docs").rglob("*.md") for name in
                re.findall(rf'--8<-- "{re.escape(file)}:([\w-]+)"', page.read_text())}
    assert set(snippet_sections(LESSON_FILE)) <= included


def test_the_lesson_imports_neither_its_command_line_nor_its_going_further_steps():
    assert import_closure(LESSON_FILE, ROOT) == [LESSON_FILE]
    assert LESSON_FILE in import_closure(GOING_FURTHER_FILE, ROOT)


DEPRECATED_CALL = """
import sys, warnings
warnings.simplefilter("always")  # every warning shown, as a notebook kernel shows them
import importlib
lesson = importlib.import_module(sys.argv[1])  # its first step adds its filter
import jax

lesson.configure_devices("cpu", 2)
# Another library's deprecation, charged to its own module: a warning still.
with warnings.catch_warnings(record=True) as seen:
    exec("import warnings; warnings.warn('old', DeprecationWarning)",
         {"__name__": "ipykernel.kernelbase"})
print("others:", [str(w.message) for w in seen])
# A deprecated JAX call from a lesson line (`with mesh:`, in JAX 0.10): an error.
with lesson.data_mesh(jax.devices()):
    pass
"""


@pytest.mark.slow
def test_a_deprecated_jax_call_in_the_lesson_is_an_error_and_others_stay_warnings():
    done = run("-c", DEPRECATED_CALL, SEED.module, timeout=180)
    assert (done.returncode, done.stdout) == (1, "others: ['old']\n")
    assert done.stderr.strip().splitlines()[-1] == (
        "DeprecationWarning: `with mesh:` context manager has been deprecated. Please use "
        "`with jax.set_mesh(mesh):` instead.")

"""distributed-03 · Communication-efficient algorithms.

Each of p devices holds 1/p of the rows of a linear-regression batch and computes a
partial gradient. An all-reduce (`psum`) leaves the whole gradient on every device; a
reduce-scatter (`psum_scatter`) leaves each device one slice; an all-gather rebuilds the
full vector. Every result is checked against NumPy on the global value and on every
device's own shard.

    python -m lesson_code.distributed_03                    # 4 logical CPU devices
    python -m lesson_code.distributed_03 --devices 8        # any p from 1 to 256
    python -m lesson_code.distributed_03 --platform tpu     # the physical chips
"""
LESSON_ID = "distributed-03"

# --8<-- [start:configure_devices]
import warnings

# Before JAX is imported: a deprecated call in this code (or JAX's) then fails, naming
# itself, instead of working until the release that removes it.
warnings.filterwarnings("error", category=DeprecationWarning,
                        module=r"(jax|lesson_code)\b|__main__")

import jax
import numpy as np
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P


def configure_devices(platform="cpu", count=4):
    """Pick the backend and return `count` of its devices.

    This must run before anything asks JAX for a device: the backend, and how many
    logical devices the host CPU pretends to be, are fixed when the first one is made.
    """
    jax.config.update("jax_platforms", platform)
    if platform == "cpu":
        # One CPU split into `count` logical devices: real collectives, no accelerator.
        jax.config.update("jax_num_cpu_devices", count)
    return jax.devices()[:count]
# --8<-- [end:configure_devices]


# --8<-- [start:place_data]
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """A regression batch sized for p devices: 4p observations, 2p weights."""
    x: np.ndarray  # f32[N, F]
    y: np.ndarray  # f32[N]
    w: np.ndarray  # f32[F]

    @property
    def n_total(self):
        return self.x.shape[0]


def make_problem(ranks):
    n, f = 4 * ranks, 2 * ranks  # p = 4: N = 16 observations, F = 8 weights
    x = np.arange(n * f, dtype=np.float32).reshape(n, f) / (n * f) - 0.5
    y = x @ np.linspace(-0.4, 0.3, f, dtype=np.float32)
    w = np.linspace(0.1, -0.2, f, dtype=np.float32)
    return Problem(x, y, w)


def data_mesh(devices):
    """One mesh axis, 'data', over the devices in the order of the chips' ring.

    jax.make_mesh orders TPU chips so that neighbours on the axis are neighbours on the
    interconnect: on a 2x2 slice 0, 1, 3, 2. In jax.devices() order two of the four hops
    of a ppermute ring, whose pairs follow the axis, would be diagonal; XLA's own
    collectives route themselves, and the order fixes which chip holds which shard. On
    CPU it keeps the order given. The axis is Auto, as
    in a plain Mesh: the collectives are written by hand inside shard_map, and outside it
    the compiler places the arrays.
    """
    return jax.make_mesh((len(devices),), ("data",), axis_types=(AxisType.Auto,),
                         devices=devices)


def place(mesh, problem):
    """Split observations across the 'data' axis; give every device all the weights."""
    by_rows = NamedSharding(mesh, P("data"))  # x: rows split, columns whole
    everywhere = NamedSharding(mesh, P())
    x = jax.device_put(problem.x, by_rows)  # per device: f32[N/p, F]
    y = jax.device_put(problem.y, by_rows)  # per device: f32[N/p]
    w = jax.device_put(problem.w, everywhere)  # per device: f32[F]
    return x, y, w
# --8<-- [end:place_data]


# --8<-- [start:local_contribution]
def local_contribution(x_block, y_block, w, n_total):
    """This device's share of d/dw mean((Xw - y)^2).

    Divide by the GLOBAL count: the shares then sum to the global gradient. Dividing
    by the local count (a local mean) would make the sum p times too large.
    """
    residual = x_block @ w - y_block  # f32[N/p, F] @ f32[F] -> f32[N/p]
    return 2 * x_block.T @ residual / n_total  # -> g_local f32[F]
# --8<-- [end:local_contribution]


# --8<-- [start:reduce_all]
def reduce_all(x_block, y_block, w, n_total):
    g_local = local_contribution(x_block, y_block, w, n_total)
    return jax.lax.psum(g_local, "data")  # f32[F] -> f32[F], the same on every device
# --8<-- [end:reduce_all]


# --8<-- [start:reduce_scatter]
def reduce_shard(x_block, y_block, w, n_total):
    g_local = local_contribution(x_block, y_block, w, n_total)
    # tiled=True: device r keeps consecutive slice r of the summed vector, f32[F/p].
    return jax.lax.psum_scatter(g_local, "data", tiled=True)
# --8<-- [end:reduce_scatter]


# --8<-- [start:build_programs]
from functools import partial


@dataclass(frozen=True)
class Programs:
    all_gradient: object  # (x, y, w) -> gradient replicated, P()
    shard_gradient: object  # (x, y, w) -> gradient split, P('data')
    gather: object  # split vector -> replicated vector


def build_programs(mesh, n_total):
    batch_specs = (P("data"), P("data"), P())
    all_gradient = jax.shard_map(partial(reduce_all, n_total=n_total), mesh=mesh,
                                 in_specs=batch_specs, out_specs=P())
    shard_gradient = jax.shard_map(partial(reduce_shard, n_total=n_total), mesh=mesh,
                                   in_specs=batch_specs, out_specs=P("data"))
    # to='invarying' tells JAX the gathered vector is identical on every device, which
    # is what out_specs=P() promises, so the replication check stays on.
    gather = jax.shard_map(
        lambda g_slice: jax.lax.all_gather(g_slice, "data", tiled=True, to="invarying"),
        mesh=mesh, in_specs=P("data"), out_specs=P())
    return Programs(jax.jit(all_gradient), jax.jit(shard_gradient), jax.jit(gather))
# --8<-- [end:build_programs]


# --8<-- [start:verify]
def reference_gradient(problem, w=None, y=None):
    """The whole-batch gradient in NumPy: no devices, no collectives."""
    w = problem.w if w is None else w
    y = problem.y if y is None else y
    return 2 * problem.x.T @ (problem.x @ w - y) / problem.n_total


def assert_matches(result, expected, slice_len=None):
    """Check the global value AND what each device actually stores."""
    # Across processes, the other slices of a split result are not ours to read.
    if result.is_fully_addressable or result.is_fully_replicated:
        np.testing.assert_allclose(np.asarray(result), expected, rtol=2e-6, atol=2e-6)
    for shard in result.addressable_shards:
        # shard.index says which part of the global vector this device holds.
        np.testing.assert_allclose(np.asarray(shard.data), expected[shard.index],
                                   rtol=2e-6, atol=2e-6)
        if slice_len is not None:
            assert shard.data.shape == (slice_len,), shard.data.shape


def lowered_collectives(program, *args):
    """Which collectives the compiler was asked for, read from the StableHLO text."""
    text = str(program.lower(*args).compiler_ir(dialect="stablehlo"))
    ops = ("all_reduce", "reduce_scatter", "all_gather")
    return {op for op in ops if f"stablehlo.{op}" in text}


def shard_listing(result):
    """(device id, slice of the global vector, values to 5 digits) per shard held here."""
    listing = []
    for shard in sorted(result.addressable_shards, key=lambda s: s.device.id):
        # A shard holding the whole axis (one device) has the index slice(None, None).
        start, stop, _ = shard.index[0].indices(result.shape[0])
        listing.append((shard.device.id, f"{start}:{stop}",
                        [float(f"{value:.5g}") for value in shard.data]))
    return listing
# --8<-- [end:verify]


# --8<-- [start:compiled]
import re

# An instruction of the compiled HLO reads `%name = shape opcode(operands)`; an
# asynchronous collective is split into `<opcode>-start` and `<opcode>-done`. XLA:TPU
# may fuse a reduce-scatter, `fusion(...), kind=kCustom, calls=%all-reduce-scatter`, into
# one ring: its computation spells the all-reduce it replaces, and is not read.
HLO_COLLECTIVE = re.compile(r"\s(all-reduce|reduce-scatter|all-gather|all-to-all|"
                            r"collective-permute)(?:-start|-done)?\(|"
                            r"calls=%all-(reduce-scatter)")
FUSED_REDUCE_SCATTER = re.compile(r"^%all-reduce-scatter\S* \(.*?^}$",
                                  re.DOTALL | re.MULTILINE)


def compiled_collectives(program, *args):
    """Which collectives the compiled program will run, read from the optimized HLO.

    The StableHLO shows what was requested; the compiler may still rewrite it. A
    reduce-scatter can become an all-reduce plus a slice, which moves the whole vector.
    """
    text = FUSED_REDUCE_SCATTER.sub("", program.lower(*args).compile().as_text())
    return {(op or fused).replace("-", "_") for op, fused in HLO_COLLECTIVE.findall(text)}


def hlo_names(ops):
    return " + ".join(sorted(op.replace("_", "-") for op in ops)) or "no collective"


def report_compiled(programs, batch, sliced):
    """Say in one line whether each program runs the collective it asked for; return
    what each one runs, as data for the recording."""
    compiled = {"all_reduce": compiled_collectives(programs.all_gradient, *batch),
                "reduce_scatter": compiled_collectives(programs.shard_gradient, *batch),
                "all_gather": compiled_collectives(programs.gather, sliced)}
    changed = [f"{hlo_names({asked})} program runs {hlo_names(ops)}"
               for asked, ops in compiled.items() if ops != {asked}]
    # Said, not asserted: on a new backend this line is the evidence worth recording.
    if changed:
        print(f"Compiled HLO differs from the request: {'; '.join(changed)}")
    else:
        print("Compiled HLO runs what was requested:",
              ", ".join(hlo_names({asked}) for asked in compiled))
    return {asked: sorted(ops) for asked, ops in compiled.items()}
# --8<-- [end:compiled]


def programs_to_compile(devices, nbytes=None):
    """{collective: (program, its arguments' shapes)} of the lesson on `devices`, which may be
    compile-only (a TPU slice described on a CPU host), for its own gradient or one of
    `nbytes`: what `tpu_job.py --dry-run` and `--write-compiled` read."""
    mesh, problem = data_mesh(devices), make_problem(len(devices))
    programs = build_programs(mesh, problem.n_total)
    features = problem.w.size if nbytes is None else nbytes // problem.w.itemsize

    def shaped(shape, spec):
        return jax.ShapeDtypeStruct(shape, problem.w.dtype, sharding=NamedSharding(mesh, spec))
    batch = (shaped((problem.n_total, features), P("data")),
             shaped((problem.n_total,), P("data")), shaped((features,), P()))
    return {"all_reduce": (programs.all_gradient, batch),
            "reduce_scatter": (programs.shard_gradient, batch),
            "all_gather": (programs.gather, (shaped((features,), P("data")),))}


import os
import platform as host_platform


def host_load():
    """Cores and the one-minute load average: a timing taken while other work kept the
    cores busy says so in its recording."""
    return {"cores": os.cpu_count(), "loadAverage1m": round(os.getloadavg()[0], 2)}


def timing_record(timed, order, before, samples):
    """What was measured, and only that: every sample of every block, the order, the
    host's load before and after. Medians, intervals and words are derived later."""
    return {"samplesUs": timed, "order": order, "blocks": len(order),
            "samplesPerBlock": samples, "warmupCallsPerBlock": 1,
            "hostBefore": before, "hostAfter": host_load()}


def environment(devices):
    return {"backend": jax.default_backend(), "deviceCount": len(devices),
            "deviceKind": devices[0].device_kind, "processCount": jax.process_count(),
            "jax": jax.__version__, "numpy": np.__version__,
            "python": host_platform.python_version(), "platform": host_platform.platform()}


# --8<-- [start:measure]
from time import perf_counter


def completed_samples(program, *args, samples=25):
    """Microseconds per finished call; compilation and the first run excluded."""
    program(*args).block_until_ready()  # compile and warm up outside the clock
    times = []
    for _ in range(samples):
        start = perf_counter()
        # JAX dispatches asynchronously: stop the clock only once the result exists.
        program(*args).block_until_ready()
        times.append((perf_counter() - start) * 1e6)
    return times


def interleaved_samples(programs, blocks=7, samples=5):
    """Time the programs in turns, block after block, each block in a rotated order.

    A busy spell on the machine then lands on every program instead of on whichever ran
    at that moment, and the spread between blocks shows how far one run can be trusted.
    Returns {name: [[microseconds] per block]} and the order each block ran in.
    """
    names = list(programs)
    timed, order = {name: [] for name in names}, []
    for block in range(blocks):
        turn = names[block % len(names):] + names[:block % len(names)]
        order.append(turn)
        for name in turn:
            program, args = programs[name]
            timed[name].append(completed_samples(program, *args, samples=samples))
    return timed, order


# 21 blocks of 5 calls: the 6th and the 16th of the 21 block medians bracket the median
# with 97 % confidence if the blocks are independent draws (order statistics), and the
# run on 4 processes, which times the same gloo collectives again, needs that many
# blocks of each kind to tell its own noise from an effect. 105 calls per program take
# about a second.
TIMING_BLOCKS, TIMING_SAMPLES = 21, 5


def ring_payload_bytes(gradient_bytes, ranks):
    """Idealized ring model: bytes each rank sends. A model, not a measurement."""
    scatter = (ranks - 1) / ranks * gradient_bytes  # B_RS, and B_AG is the same
    return {"reduce_scatter": scatter, "all_gather": scatter, "all_reduce": 2 * scatter}
# --8<-- [end:measure]


# --8<-- [start:momentum]
def momentum_step(w, v, g, lr=0.1, beta=0.9):
    """Elementwise, so it works slice by slice: no device needs the whole gradient."""
    v = beta * v + g
    return w - lr * v, v


def sharded_momentum(mesh, programs, problem, g_slices):
    v0 = np.linspace(-0.02, 0.03, problem.w.size, dtype=np.float32)
    split = NamedSharding(mesh, P("data"))
    w_slices = jax.device_put(problem.w, split)  # per device: f32[F/p]
    v_slices = jax.device_put(v0, split)
    new_w, new_v = momentum_step(w_slices, v_slices, g_slices)
    # The next forward pass wants whole weights: this gather is real communication.
    updated = programs.gather(new_w)
    expected_w, expected_v = momentum_step(problem.w, v0, reference_gradient(problem))
    assert_matches(updated, expected_w, slice_len=problem.w.size)
    # The momentum state never left its slices: F/p values per device.
    assert_matches(new_v, expected_v, slice_len=problem.w.size // len(mesh.devices))
    return updated
# --8<-- [end:momentum]


# --8<-- [start:make_it_yours]
def make_it_yours(mesh, programs, problem):
    """Reverse rows and labels TOGETHER and move the weights: same gradient.

    Each observation is a pair (x_i, y_i); the loss is a sum over pairs, so their
    order cannot matter. Reversing the labels alone pairs x_i with another y.
    """
    reversed_problem = Problem(problem.x[::-1].copy(), problem.y[::-1].copy(),
                               problem.w + np.float32(0.17))
    x2, y2, w2 = place(mesh, reversed_problem)
    expected = reference_gradient(problem, w=reversed_problem.w)
    assert_matches(programs.all_gradient(x2, y2, w2), expected)
    assert_matches(programs.gather(programs.shard_gradient(x2, y2, w2)), expected)
    wrong_labels = reference_gradient(problem, w=reversed_problem.w, y=problem.y[::-1])
    assert np.max(np.abs(wrong_labels - expected)) > 0.01, \
        "reversing only the labels must change the gradient by more than 0.01"
    return expected, wrong_labels
# --8<-- [end:make_it_yours]


# --8<-- [start:transfer_budget]
def communication_budget(gradient_bytes=2**20, ranks=(2, 4, 8)):
    """Ring all-reduce vs. reduce-scatter + all-gather, and per-rank shard storage."""
    budget = []
    for p in ranks:
        scatter = gradient_bytes * (p - 1) // p
        all_reduce = 2 * scatter  # two ring phases
        scatter_then_gather = scatter + scatter  # the same two phases, as two calls
        assert all_reduce == scatter_then_gather, "B_AR != B_RS + B_AG: count the gather"
        assert gradient_bytes // p * p == gradient_bytes  # slices tile the vector
        budget.append({"ranks": p, "all_reduce_bytes": all_reduce,
                       "scatter_gather_bytes": scatter_then_gather,
                       "shard_storage_bytes": gradient_bytes // p})
    return budget
# --8<-- [end:transfer_budget]


# --8<-- [start:figure_data]
def figure_panels(local_sizes, payload):
    """Bar data: values stored per device (observed) and bytes per rank (modelled)."""
    return [
        {"kind": "bar", "labels": ["all-reduce", "reduce-scatter", "after gather"],
         "ylabel": "values stored per device",
         "series": [{"label": "observed local shape", "y": local_sizes}]},
        {"kind": "bar", "labels": ["all-reduce", "reduce-scatter", "scatter + gather"],
         "ylabel": "modelled bytes per rank",
         "series": [{"label": "idealized ring payload",
                     "y": [payload["all_reduce"], payload["reduce_scatter"],
                           payload["reduce_scatter"] + payload["all_gather"]]}]},
    ]
# --8<-- [end:figure_data]


# --8<-- [start:run_lesson]
def run_lesson(devices, going_further=None):
    """The whole lesson on `devices`, step after step, each printing what it shows (in
    the notebook, under its own cell); returns the recording's data. `going_further(mesh,
    problem)`, when given, runs the going-further pages' steps on the same mesh before
    PASS (lesson_code/distributed_03_going_further.py)."""
    ranks = len(devices)
    print(f"Devices: {ranks} × {devices[0].device_kind}")
    mesh = data_mesh(devices)
    problem = make_problem(ranks)
    x, y, w = place(mesh, problem)
    print("Per-device blocks:", {name: array.addressable_shards[0].data.shape
                                 for name, array in (("x", x), ("y", y), ("w", w))})
    programs = build_programs(mesh, problem.n_total)

    reference = reference_gradient(problem)
    features = problem.w.size
    replicated = programs.all_gradient(x, y, w)
    sliced = programs.shard_gradient(x, y, w)
    gathered = programs.gather(sliced)
    assert_matches(replicated, reference, slice_len=features)
    assert_matches(sliced, reference, slice_len=features // ranks)
    assert_matches(gathered, reference, slice_len=features)
    assert lowered_collectives(programs.all_gradient, x, y, w) == {"all_reduce"}
    assert lowered_collectives(programs.shard_gradient, x, y, w) == {"reduce_scatter"}
    assert lowered_collectives(programs.gather, sliced) == {"all_gather"}
    shapes = [r.addressable_shards[0].data.shape for r in (replicated, sliced, gathered)]
    print("Gradient reference:", reference.tolist())
    print(f"Local result shapes: replicated {shapes[0]}, reduce-scatter {shapes[1]}, "
          f"gathered {shapes[2]}")
    print("Reduce-scatter shards (device, index, values):", shard_listing(sliced))
    compiled = report_compiled(programs, (x, y, w), sliced)

    before = host_load()
    timings, order = interleaved_samples({"all_reduce": (programs.all_gradient, (x, y, w)),
                                          "reduce_scatter": (programs.shard_gradient, (x, y, w)),
                                          "all_gather_only": (programs.gather, (sliced,))},
                                         blocks=TIMING_BLOCKS, samples=TIMING_SAMPLES)
    payload = ring_payload_bytes(problem.w.nbytes, ranks)
    print("Idealized ring bytes per rank:", payload["all_reduce"], payload["reduce_scatter"])
    # One decimal: the run-to-run spread is far wider than a tenth of a microsecond.
    print(f"Completed {jax.default_backend().upper()} median microseconds:",
          {name: round(float(np.median(t)), 1) for name, t in timings.items()})

    sharded_momentum(mesh, programs, problem, sliced)
    print("Sharded momentum matches the independent elementwise update.")
    make_it_yours(mesh, programs, problem)
    print("Joint permutation preserves the gradient; label-only reversal does not.")
    budget = communication_budget()
    assert [row["all_reduce_bytes"] for row in budget] == [1048576, 1572864, 1835008]
    print("Idealized payload/storage budget, not observed network traffic:", budget)
    further = going_further(mesh, problem) if going_further else {}
    print(f"PASS: {LESSON_ID}")
    return {
        "panels": figure_panels([int(np.prod(s)) for s in shapes], payload),
        "panelsTitle": "One mathematical gradient, different local storage",
        "gradient": reference.tolist(), "compiledCollectives": compiled,
        "budget": budget, "shards": shard_listing(sliced),
        "timing": timing_record(timings, order, before, TIMING_SAMPLES),
        "environment": environment(devices), **further}
# --8<-- [end:run_lesson]


if __name__ == "__main__":
    if __package__:  # python -m: the course's command line (lesson_code/program.py), by name
        import importlib
        raise SystemExit(importlib.import_module(f"{__package__}.program").main(__spec__.name))
    run_lesson(configure_devices())  # the file alone, as a reader downloads it

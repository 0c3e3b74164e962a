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
import argparse
import errno
import json
import os
import platform as host_platform
import signal
import stat
import sys

LESSON_ID = "distributed-03"
# The most logical CPU devices the program will make. The problem grows with p (4p x 2p):
# 512 devices still pass in ~7 s, but at 1024 the float32 sums of 1024 shares drift past
# the checks' tolerance and start-up alone takes half a minute.
MAX_CPU_DEVICES = 256


def environment_problem(environ):
    """Why `import jax` would fail in this environment, or None.

    JAX parses JAX_NUM_CPU_DEVICES when it is imported, so a value that is not a whole
    number ends in a traceback from inside that import, before main() can say anything.
    """
    value = environ.get("JAX_NUM_CPU_DEVICES")
    try:
        int("0" if value is None else value)
    except ValueError:
        return (f"JAX_NUM_CPU_DEVICES={value!r} is not a whole number, and JAX reads it "
                f"on import; run `unset JAX_NUM_CPU_DEVICES` (--devices sets the count)")
    return None


# On import, before `import jax` below, which would otherwise end this process in a traceback.
if environment_problem(os.environ):
    print(f"error: {environment_problem(os.environ)}", file=sys.stderr)
    sys.exit(2)

# --8<-- [start:configure_devices]
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P


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
    return [(shard.device.id, f"{shard.index[0].start}:{shard.index[0].stop}",
             [float(f"{value:.5g}") for value in shard.data])
            for shard in sorted(result.addressable_shards, key=lambda s: s.device.id)]
# --8<-- [end:verify]


# --8<-- [start:compiled]
import re

# An instruction of the compiled HLO reads `%name = shape opcode(operands)`; an
# asynchronous collective is split into `<opcode>-start` and `<opcode>-done`.
HLO_COLLECTIVE = re.compile(r"\s(all-reduce|reduce-scatter|all-gather|all-to-all|"
                            r"collective-permute)(?:-start|-done)?\(")


def compiled_collectives(program, *args):
    """Which collectives the compiled program will run, read from the optimized HLO.

    The StableHLO shows what was requested; the compiler may still rewrite it. A
    reduce-scatter can become an all-reduce plus a slice, which moves the whole vector.
    """
    text = program.lower(*args).compile().as_text()
    return {op.replace("-", "_") for op in HLO_COLLECTIVE.findall(text)}


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


# 21 blocks of 5 calls: the middle of 21 per-block medians brackets the median with 96 %
# confidence (order statistics), and the run on 4 processes, which times the same gloo
# collectives again, can tell its own noise from an effect only with enough blocks of
# each kind (content review H1). 105 calls per program take about a second.
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
# What the installed JAX's transpose rules say (jax/_src/lax/parallel.py): a psum's
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


def autodiff_collectives(mesh, problem):
    """The lowered gradient programs' collectives, asserted and printed once."""
    transposes = collective_transposes(mesh, problem.w.size)
    training = training_gradients(mesh, problem)
    assert transposes == EXPECTED_TRANSPOSES, transposes
    assert training == EXPECTED_TRAINING, training
    words = {name: hlo_names(ops) for name, ops in training.items()}
    print("Gradient programs run:", words)
    return {"transposes": transposes, "trainingGradients": training,
            # the page shows one value per directive: the same lists, as words
            "transposeWords": {name: hlo_names(ops) for name, ops in transposes.items()},
            "trainingWords": words}
# --8<-- [end:autodiff_check]


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


# --8<-- [start:run_lesson]
def run_lesson(devices):
    """The whole lesson on `devices`; prints its results and returns the figure data."""
    ranks = len(devices)
    mesh = Mesh(np.asarray(devices), ("data",))
    problem = make_problem(ranks)
    x, y, w = place(mesh, problem)
    programs = build_programs(mesh, problem.n_total)
    features = problem.w.size

    reference = reference_gradient(problem)
    replicated = programs.all_gradient(x, y, w)
    sliced = programs.shard_gradient(x, y, w)
    gathered = programs.gather(sliced)
    assert_matches(replicated, reference, slice_len=features)
    assert_matches(sliced, reference, slice_len=features // ranks)
    assert_matches(gathered, reference, slice_len=features)
    assert lowered_collectives(programs.all_gradient, x, y, w) == {"all_reduce"}
    assert lowered_collectives(programs.shard_gradient, x, y, w) == {"reduce_scatter"}
    assert lowered_collectives(programs.gather, sliced) == {"all_gather"}

    before = host_load()
    timings, order = interleaved_samples({"all_reduce": (programs.all_gradient, (x, y, w)),
                                          "reduce_scatter": (programs.shard_gradient, (x, y, w)),
                                          "all_gather_only": (programs.gather, (sliced,))},
                                         blocks=TIMING_BLOCKS, samples=TIMING_SAMPLES)
    payload = ring_payload_bytes(problem.w.nbytes, ranks)
    shapes = [r.addressable_shards[0].data.shape for r in (replicated, sliced, gathered)]

    print("Gradient reference:", reference.tolist())
    print(f"Local result shapes: replicated {shapes[0]}, reduce-scatter {shapes[1]}, "
          f"gathered {shapes[2]}")
    print("Reduce-scatter shards (device, index, values):", shard_listing(sliced))
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
    compiled = report_compiled(programs, (x, y, w), sliced)
    autodiff = autodiff_collectives(mesh, problem)
    print(f"PASS: {LESSON_ID}")
    return {"panels": figure_panels([int(np.prod(s)) for s in shapes], payload),
            "panelsTitle": "One mathematical gradient, different local storage",
            "gradient": reference.tolist(), "compiledCollectives": compiled,
            "autodiff": autodiff, "budget": budget, "shards": shard_listing(sliced),
            "timing": timing_record(timings, order, before, TIMING_SAMPLES),
            "environment": environment(devices)}
# --8<-- [end:run_lesson]


class SetupError(Exception):
    """A platform or device count this machine cannot provide; the message says why."""


def select_devices(platform, count):
    if count < 1:
        raise SetupError(f"--devices must be at least 1 (got {count}); try --devices 4")
    if platform == "cpu" and count > MAX_CPU_DEVICES:
        raise SetupError(f"--devices {count} is more than the {MAX_CPU_DEVICES} logical CPU "
                         f"devices this program makes (see MAX_CPU_DEVICES); try --devices 8")
    try:
        devices = configure_devices(platform, count)
    except RuntimeError as error:
        # JAX's own reason, minus its generic advice about JAX_PLATFORMS.
        reason = str(error).strip().splitlines()[0].split(" (set JAX_PLATFORMS")[0]
        extra = {"tpu": "jax[tpu]", "gpu": "jax[cuda12]"}.get(platform, "jax")
        raise SetupError(f"no {platform.upper()} backend on this machine ({reason}); "
                         f"run with --platform cpu, or on a {platform.upper()} machine "
                         f"with {extra}=={jax.__version__} installed") from None
    if len(devices) < count:
        raise SetupError(f"--devices {count} asks for {count} {platform.upper()} devices "
                         f"but this machine has {len(devices)}; pass --devices "
                         f"{len(devices)} or use a machine with {count}")
    return devices


class OneLineParser(argparse.ArgumentParser):
    """argparse, ending a usage error in the program's one `error:` line."""

    def error(self, message):
        self.exit(2, f"error: {message}\n")


def device_count(text):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; "
                                         f"try --devices 4") from None


def data_out_path(path):
    """--data-out, refused before the lesson runs when its folder cannot take the file."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{path} is a folder; give a file path, such as "
                                         f"{os.path.join(path, 'data.json')}")
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot write {path}: {folder} is not a writable "
                                         f"folder; create it, or pick another path")
    if not replaceable(path):
        raise argparse.ArgumentTypeError(f"{path} is not a regular file, and only a regular "
                                         f"file is replaced; give a new file path, such as "
                                         f"{os.path.join(folder, 'data.json')}")
    return path


def replaceable(path):
    """A new path or a regular file: the rename below would put a file in place of a
    device node (/dev/full), a symlink or a socket just as readily."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return True


def write_json(path, data):
    """Beside `path`, then renamed onto it: a failed write leaves no half-written file."""
    temp = f"{path}.{os.getpid()}.tmp"
    # O_EXCL: never written through a file or link already at the temporary name.
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(data, out, indent=2)
        if not replaceable(path):  # checked again: it may have changed while the lesson ran
            raise OSError(errno.EEXIST, "not a regular file, so it was left alone")
        os.replace(temp, path)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


def parse_args(argv):
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platform", choices=("cpu", "tpu", "gpu"), default="cpu",
                        help="cpu: logical devices on this host; tpu/gpu: physical chips")
    parser.add_argument("--devices", type=device_count, default=4,
                        help=f"mesh size p (default 4; at most {MAX_CPU_DEVICES} on cpu)")
    parser.add_argument("--data-out", metavar="PATH", type=data_out_path,
                        help="also write figure data, timings and environment as JSON")
    return parser.parse_args(argv)


def main(argv=None):
    """The program: exit 0 after PASS; 2 for a setup error; 130 or 143 (128 + the signal,
    as a shell reports it) for Ctrl-C or SIGTERM, in one line, never a traceback."""
    args = parse_args(argv)
    signals = []

    def stop(number, frame):
        signals.append(number)
        raise KeyboardInterrupt  # unwinds through write_json's clean-up

    previous = {number: signal.signal(number, stop) for number in (signal.SIGINT,
                                                                   signal.SIGTERM)}
    try:
        status = run_program(args)
    except KeyboardInterrupt:
        if not signals:  # raised by Python's own handler, before ours was installed
            signals.append(signal.SIGINT)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    # A signal counts even where some library caught its KeyboardInterrupt and carried on.
    if signals:
        print(f"error: interrupted by {signal.Signals(signals[0]).name}; the lesson did not "
              f"finish", file=sys.stderr)
        return 128 + signals[0]
    return status


def run_program(args):
    try:
        devices = select_devices(args.platform, args.devices)
    except SetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    data = run_lesson(devices)
    if args.data_out:
        try:
            write_json(args.data_out, data)
        except OSError as error:
            print(f"error: cannot write {args.data_out} ({error.strerror}); the lesson "
                  f"passed, but its data was not written", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Time XLA's four collectives and the ppermute ring on one mesh of logical devices, and
check every result.

The caller fixes the device count first (`configure_devices`, or tests/conftest.py);
nothing here touches a device at import time.
"""
import ctypes
import platform
import resource
import time

import jax
import numpy as np
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

from lesson_code.ring_collectives import ring_all_reduce, ring_reduce_scatter

XLA_COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "reduce_scatter_all_gather")
# lesson_code/ring_collectives.py: the same results from p - 1 ppermute steps per phase.
RING_COLLECTIVES = ("ring_reduce_scatter", "ring_all_reduce")
COLLECTIVES = XLA_COLLECTIVES + RING_COLLECTIVES

# 8 B .. 32 MiB, a factor 4 apart: the small end is where the lesson's 8-value gradient
# lives. 12, 16 and 24 MiB locate the step that a warm collective's cost takes between
# 8 and 32 MiB (the allocator page reads it).
SIZES = tuple(sorted({8 * 4**k for k in range(12)} | {s * 2**20 for s in (12, 16, 24)}))


def element_count(nbytes, ranks, itemsize=4):
    """Elements of a float32 array of at least `nbytes`, a multiple of `ranks`, which the
    reduce-scatter and the all-gather split evenly: 8 B (two floats) is 4 floats at p=4,
    and rows report the bytes actually moved."""
    n = -(-nbytes // itemsize)
    return -(-n // ranks) * ranks


def sizes_for(requested_sizes, ranks):
    """[(requested, bytes moved)] with each moved size once: at p = 8 both 8 B and 32 B
    round up to eight floats, and one size measured twice would only repeat a point."""
    seen, sizes = set(), []
    for requested in requested_sizes:
        nbytes = 4 * element_count(requested, ranks)
        if nbytes not in seen:
            seen.add(nbytes)
            sizes.append((requested, nbytes))
    return sizes


def program_facts(ranks):
    """What each measured program is, for the analysis: the share of S it moves in units
    of (p - 1)/p (nccl-tests' bus factor), its dependent steps, and the bytes of memory it
    touches per device (reads plus writes, as multiples of S) in XLA:CPU's in-process
    implementation: every device reads all p inputs and writes its result."""
    ring = ranks - 1
    return {
        "all_reduce": {"phases": 2, "steps": 1, "ring": False,
                       "touchedOverS": 2 + (ranks - 1) / ranks},
        "reduce_scatter": {"phases": 1, "steps": 1, "ring": False,
                           "touchedOverS": 1 + 1 / ranks},
        "all_gather": {"phases": 1, "steps": 1, "ring": False, "touchedOverS": 2},
        "reduce_scatter_all_gather": {"phases": 2, "steps": 2, "ring": False,
                                      "touchedOverS": 3 + 1 / ranks},
        "ring_reduce_scatter": {"phases": 1, "steps": ring, "ring": True,
                                "touchedOverS": None},
        "ring_all_reduce": {"phases": 2, "steps": 2 * ring, "ring": True,
                            "touchedOverS": None},
    }


def configure_devices(ranks):
    # JAX fixes the platform and the device count at the first device asked for: this runs
    # before any other JAX call, and another p needs a fresh process.
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_num_cpu_devices", ranks)


# Reduce-style inputs are f32[p, n] split by rows: each rank holds its own full-length
# gradient contribution, as after a local backward pass.
def all_reduce(x):  # per device: x f32[1, n] -> f32[n], identical on every rank
    return jax.lax.psum(x[0], "data")


def reduce_scatter(x):  # per device: x f32[1, n] -> f32[n/p], block r of the sum on rank r
    return jax.lax.psum_scatter(x[0], "data", tiled=True)


def all_gather(g):  # per device: g f32[n/p] -> f32[n]
    # to='invarying' declares the gathered value identical on every rank, so out_specs=P()
    # passes shard_map's replication check without switching it off (check_vma=False).
    return jax.lax.all_gather(g, "data", tiled=True, to="invarying")


def reduce_scatter_all_gather(x):  # per device: f32[1, n] -> f32[n/p] -> f32[n]
    return all_gather(reduce_scatter(x))


# The ring from lesson_code/ring_collectives.py: the same inputs and results as XLA's
# collectives, but p - 1 dependent ppermute steps per phase instead of one collective.
def ring_reduce_scatter_rows(x):  # per device: x f32[1, n] -> f32[n/p], block r of the sum
    return ring_reduce_scatter(x[0])


def ring_all_reduce_rows(x):  # per device: x f32[1, n] -> f32[1, n], this device's copy
    # After ppermutes JAX cannot know the copies agree, so each device returns its own row
    # and count_wrong checks every row against the sum.
    return ring_all_reduce(x[0])[None]


# --8<-- [start:looped]
def looped(body, collectives):
    """`collectives` calls of `body` in one jitted fori_loop, as nccl-tests reuses its
    buffers: XLA allocates the loop's buffers once per call, and the host's dispatch is
    paid once for all of them.

    Each iteration takes its input through an optimization barrier together with the last
    result, so no collective starts before the one before it is done (XLA may otherwise
    overlap independent iterations), and none is hoisted out or merged. The input's value
    never changes, so the result is `body`'s."""
    def program(x):
        def again(_, carry):
            x, _ = jax.lax.optimization_barrier(carry)  # x now waits for the last result
            return x, body(x)
        return jax.lax.fori_loop(1, collectives, again, (x, body(x)))[1]
    return program
# --8<-- [end:looped]


# Collectives per call in each program's looped variant, by backend. One more collective
# is the two variants' difference over the loop's extra ones, so whatever else differs (a
# page fault, a slow spell) is divided by that many. On CPU a 32 MiB collective takes tens
# of ms: 8 keep the sweep within half an hour. On TPU a call's dispatch (tens of us) is far
# longer than a small collective (about 1 us a hop): a long loop dwarfs its jitter.
LOOP_COLLECTIVES = {"cpu": 8, "tpu": 64}


def loop_collectives():
    return LOOP_COLLECTIVES.get(jax.default_backend(), LOOP_COLLECTIVES["tpu"])


ROWS, SPLIT = P("data", None), P("data")
PROGRAMS = {  # collective: (per-device body, input spec, output spec)
    "all_reduce": (all_reduce, ROWS, P()),
    "reduce_scatter": (reduce_scatter, ROWS, SPLIT),
    "all_gather": (all_gather, SPLIT, P()),
    "reduce_scatter_all_gather": (reduce_scatter_all_gather, ROWS, P()),
    "ring_reduce_scatter": (ring_reduce_scatter_rows, ROWS, SPLIT),
    "ring_all_reduce": (ring_all_reduce_rows, ROWS, ROWS),
}
assert tuple(PROGRAMS) == COLLECTIVES


def reference(collective, contributions):
    """The NumPy answer each collective must produce, from the f32[p, n] contributions."""
    if collective == "all_gather":
        return contributions[0]  # the gather's input is row 0, split over the ranks
    total = contributions.sum(axis=0)
    if collective == "ring_all_reduce":  # one row per device, each the full sum
        return np.broadcast_to(total, contributions.shape)
    return total


def count_wrong(result, expected):
    """Values that differ from `expected` on any device's copy (nccl-tests' #wrong): every
    addressable shard, so a stale replica counts even where the global view looks right."""
    return sum(int(np.count_nonzero(np.asarray(shard.data) != expected[shard.index]))
               for shard in result.addressable_shards)


def minor_faults():
    """Minor page faults of this process so far, every device thread's: each is the kernel
    mapping a fresh page on its first touch, which a buffer the allocator has just taken
    from the system pays on every page it writes."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def timed_sample(call, arg, calls):
    """Seconds per call over `calls` back-to-back calls, waiting for each one to finish, and
    the minor page faults the calls took between them."""
    faults, start = minor_faults(), time.perf_counter()
    for _ in range(calls):
        result = call(arg)
        result.block_until_ready()
    seconds = (time.perf_counter() - start) / calls
    return seconds, minor_faults() - faults, result


def first_guess_calls(call, arg, min_sample_s):
    """Double the calls until one trial sample lasts min_sample_s, as timeit's autorange does,
    so the timer's resolution and the loop are small next to what is measured."""
    calls = 1
    while timed_sample(call, arg, calls)[0] * calls < min_sample_s:
        calls *= 2
    return calls


# Untimed calls before the samples keep compilation and first-run set-up out of them, not
# allocation: where each call's output gets fresh pages from the system (at 32 MiB here),
# every timed call faults them in again, as the faults counted with each sample say. Each
# row records the count, for the page to read.
WARMUP_CALLS = 1


def time_collective(call, arg, expected, plan):
    """One block of one row: warm up, find the calls per sample (autorange), then take
    `plan["samples"]` samples. Every sample is kept, in microseconds per call, with the
    minor page faults of its calls."""
    for _ in range(WARMUP_CALLS):
        result = call(arg)
        result.block_until_ready()
    wrong = count_wrong(result, expected)
    calls = first_guess_calls(call, arg, plan["minSampleMs"] / 1e3)
    per_call, faults = [], []
    for _ in range(plan["samples"]):
        seconds, faulted, result = timed_sample(call, arg, calls)
        per_call.append(seconds * 1e6)
        faults.append(faulted)
    wrong += count_wrong(result, expected)
    return {"callsPerSample": calls, "warmupCalls": WARMUP_CALLS, "samplesUs": per_call,
            "minorFaults": faults, "wrong": wrong}


def ring_mesh(devices):
    """The lesson's data_mesh (distributed_03.py): one Auto axis over `devices` in the order
    of the chips' ring, 0, 1, 3, 2 on a 2x2 TPU, where devices() order would make two of
    the four hops diagonal; on CPU devices the order given."""
    return jax.make_mesh((len(devices),), ("data",), (AxisType.Auto,), devices=devices)


def small_integers(rng, ranks, n):
    """f32[ranks, n] of small integers: every float32 sum of them is exact in any order,
    so a result is either right or wrong, with no tolerance to tune."""
    return rng.integers(-8, 9, size=(ranks, n), dtype=np.int8).astype(np.float32)


def placed_inputs(mesh, contributions):
    """Both input layouts on the devices, placed once before timing, so no host-to-device
    transfer is inside a sample."""
    return {ROWS: jax.device_put(contributions, NamedSharding(mesh, ROWS)),
            SPLIT: jax.device_put(contributions[0], NamedSharding(mesh, SPLIT))}


def time_program(mesh, collective, looping, placed, contributions, plan):
    """One row's timing of one program, `looping` collectives per call; compiled here, so
    compilation stays out of every timed call."""
    body, in_spec, out_spec = PROGRAMS[collective]
    arg = placed[in_spec]
    call = jax.jit(jax.shard_map(looped(body, looping) if looping > 1 else body, mesh=mesh,
                                 in_specs=in_spec, out_specs=out_spec))
    return time_collective(call.lower(arg).compile(), arg,
                           reference(collective, contributions), plan)


def measure_ranks(devices, sizes, plan, block=0, on_step=lambda text: None):
    """Two rows per (size, collective) on a 1-D mesh over `devices`, one block of samples
    each (`plan`: samples, minSampleMs): one collective per call (a fresh output every
    call) and `loop_collectives()` of them in one call (the loop's buffers reused). The
    rows of each size take turns in an order that rotates with the size and the block, so
    no program is always first after a new allocation."""
    ranks = len(devices)
    mesh = ring_mesh(devices)
    looping = loop_collectives()
    rng = np.random.default_rng(ranks)
    rows = []
    for requested, nbytes in sizes_for(sizes, ranks):
        contributions = small_integers(rng, ranks, nbytes // 4)
        placed = placed_inputs(mesh, contributions)
        turns = [(name, k) for name in PROGRAMS for k in (1, looping)]
        shift = (block + len(rows) // len(turns)) % len(turns)
        for position, (collective, k) in enumerate(turns[shift:] + turns[:shift]):
            timing = time_program(mesh, collective, k, placed, contributions, plan)
            rows.append({"collective": collective, "ranks": ranks, "block": block,
                         "position": position, "requestedBytes": requested,
                         "bytes": nbytes, "collectivesPerCall": k, **timing})
            on_step(f"{collective} x{k} {nbytes} B")
        del placed, contributions  # the 32 MiB step holds p copies; free before the next
    return rows


# --8<-- [start:keep_freed]
# glibc's malloc gives freed memory back to the kernel: a buffer above its mmap threshold
# by munmap, and a heap's top once more than the trim threshold lies free there. The next
# buffer is mapped afresh, one page fault per page written. These mallopt parameters
# (numbered as in glibc's malloc.h) keep it instead: no buffer gets a mapping of its own,
# and a heap's top is trimmed only past 1 GiB and grown 256 MiB at a time. A program sets
# the same ones without code as it starts: MALLOC_MMAP_MAX_=0
# MALLOC_TRIM_THRESHOLD_=1073741824 MALLOC_TOP_PAD_=268435456 in its environment.
KEEP_FREED_MEMORY = {"M_MMAP_MAX": (-4, 0), "M_TRIM_THRESHOLD": (-1, 2**30),
                     "M_TOP_PAD": (-2, 2**28)}


def keep_freed_memory():
    """Set KEEP_FREED_MEMORY for the rest of this process; False where the C library is
    not glibc, whose parameters these are."""
    if platform.libc_ver()[0] != "glibc":
        return False
    mallopt = ctypes.CDLL(None).mallopt
    return all(mallopt(number, value) == 1 for number, value in KEEP_FREED_MEMORY.values())
# --8<-- [end:keep_freed]


ALLOCATOR_PROGRAMS = ("all_reduce", "reduce_scatter", "all_gather")


def allocator_probe(devices, nbytes, plan, block=0):
    """The one-collective rows of ALLOCATOR_PROGRAMS at `nbytes` again, with glibc's malloc
    keeping freed memory: what the setting does to a call's page faults and time. It holds
    for the rest of the process, so the worker runs this last. None on chips (the host's
    malloc holds none of their buffers) and without glibc."""
    if jax.default_backend() != "cpu" or not keep_freed_memory():
        return None
    ranks, mesh = len(devices), ring_mesh(devices)
    contributions = small_integers(np.random.default_rng(ranks), ranks, nbytes // 4)
    placed = placed_inputs(mesh, contributions)
    rows = [{"collective": collective, "ranks": ranks, "block": block, "position": position,
             "requestedBytes": nbytes, "bytes": nbytes, "collectivesPerCall": 1,
             **time_program(mesh, collective, 1, placed, contributions, plan)}
            for position, collective in enumerate(ALLOCATOR_PROGRAMS)]
    return {"ranks": ranks, "block": block, "glibc": platform.libc_ver()[1],
            "mallopt": {name: value for name, (_, value) in KEEP_FREED_MEMORY.items()},
            "rows": rows}


def donation_probe(devices, nbytes, calls=3):
    """What donating the input does to the faults: the all-reduce of f32[p, n] rows into
    rows, compiled as is and with the input donated, `calls` calls each after a warm-up,
    with each call's minor faults and the bytes the program aliases to its input and keeps
    as scratch, per device. A donated call consumes its input, so each is given the last
    one's output (small integers times a power of p: exact); the first is checked."""
    mesh, ranks = ring_mesh(devices), len(devices)
    n = nbytes // 4
    contributions = small_integers(np.random.default_rng(ranks), ranks, n)
    expected = reference("ring_all_reduce", contributions)
    probe = {"ranks": ranks, "bytes": nbytes}
    for name, donated in (("kept", ()), ("donated", (0,))):
        arg = jax.device_put(contributions, NamedSharding(mesh, ROWS))
        call = jax.jit(jax.shard_map(lambda x: jax.lax.psum(x, "data"), mesh=mesh,
                                     in_specs=ROWS, out_specs=ROWS), donate_argnums=donated)
        call = call.lower(arg).compile()
        memory = call.memory_analysis()
        result = call(arg)
        wrong = count_wrong(result, expected)
        faults = []
        for _ in range(calls):
            arg = result if donated else arg
            before = minor_faults()
            result = call(arg)
            result.block_until_ready()
            faults.append(minor_faults() - before)
        probe[name] = {"faultsPerCall": faults, "wrong": wrong,
                       "aliasBytes": memory.alias_size_in_bytes,
                       "tempBytes": memory.temp_size_in_bytes}
    return probe


def describe_backend():
    device = jax.devices()[0]
    return {"backend": jax.default_backend(), "deviceKind": device.device_kind,
            "jax": jax.__version__}

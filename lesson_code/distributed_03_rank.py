"""distributed-03 as one of p real processes: the same lesson, and the bytes it sends.

Each process owns ONE CPU device; `jax.distributed` joins them into a p-device mesh, and
every collective crosses process boundaries over TCP (gloo). Whatever starts the
processes, each is the same command. Under a cluster launcher JAX reads the rank, the
process count and the coordinator from the launcher's environment:

    mpirun -np 4 python -m lesson_code.distributed_03_rank --data-out run.json
    srun --ntasks 4 python -m lesson_code.distributed_03_rank --data-out run.json

`scripts/runners/processes.py`, which starts every rank on this machine itself, passes
them instead, one shell per rank:

    python -m lesson_code.distributed_03_rank --process-id 0 --processes 4 --port 8476 \
        --data-out run.json
    python -m lesson_code.distributed_03_rank --process-id 1 --processes 4 --port 8476
    ...

Process 0 prints what `python -m lesson_code.distributed_03` prints and writes the data
JSON; the others check their own shards silently.
"""
import os
import sys
import time
from functools import partial

# The lesson first: it makes JAX's deprecations errors before JAX is imported (its Step 1).
from lesson_code import distributed_03 as lesson
from lesson_code import distributed_03_going_further as going_further
from lesson_code import ring_collectives
from lesson_code.program import launch_of, parse_rank_args, rank_parser, save
from lesson_code.tcp_bytes import bytes_sent_over, coordinator_connection

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding, PartitionSpec as P

STARTED = time.monotonic()

# The lesson's own gradient (p = 4: 8 floats, 32 bytes), then one large enough that the
# payload dwarfs per-message headers.
LARGE_GRADIENT_BYTES = 2**20

TRAFFIC_METHOD = (
    "Sum of Linux TCP_INFO tcpi_bytes_sent minus tcpi_bytes_retrans (TCP payload bytes "
    "the kernel sent, each once), read with getsockopt after the socket's send queue has "
    "emptied, over every TCP connection the process holds, except connections to or "
    "from the jax.distributed coordinator port (gRPC start-up and heartbeats): only gloo's "
    "collective traffic counts. Per row: one warm-up call, then {calls} calls each ending "
    "in block_until_ready; the change in the sum divided by {calls}. Includes gloo's "
    "message headers and notifications; excludes IP and TCP headers. trafficBaseline: the "
    "same count for the all-reduce program with its psum removed.")


# --8<-- [start:join]
def join(process_id=None, processes=None, coordinator=None, bind=None):
    """Become one rank of the run; return the coordinator's (host, port).

    Given None, JAX takes each from the launcher's environment (mpirun, srun, a Cloud TPU
    slice); the single-machine launcher passes them, and `bind` keeps its coordinator on
    loopback. This must happen before the first device exists: the CPU client is built
    once, and only a client built after `initialize` can reach the other processes.
    """
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=processes,
                               process_id=process_id, coordinator_bind_address=bind,
                               initialization_timeout=60)
    # Read now, while the coordinator's are the only connections (lesson_code/tcp_bytes.py).
    return coordinator_connection()


def mesh_devices(platform="cpu"):
    """Every rank's devices, in rank order: on CPU one per process; on a TPU slice each
    worker's chips (4 per host), numbered as JAX numbers them within each worker."""
    if platform == "cpu":
        lesson.configure_devices("cpu", 1)
    else:
        jax.config.update("jax_platforms", platform)
    return sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
# --8<-- [end:join]


def problem_of_size(ranks, gradient_bytes):
    """A batch shaped like the lesson's (4p rows) whose gradient is `gradient_bytes`.

    Small integers and w = 1/2: every partial sum is exact in float32, so the shards
    match NumPy to the last bit whatever order the ranks add them in.
    """
    features = gradient_bytes // 4 // ranks * ranks  # float32, split evenly by psum_scatter
    rng = np.random.default_rng(3)  # one seed, so every process builds the same batch
    x = rng.integers(-1, 2, (4 * ranks, features)).astype(np.float32)  # f32[4p, F]
    y = rng.integers(-3, 4, 4 * ranks).astype(np.float32)  # f32[4p]
    return lesson.Problem(x, y, np.full(features, 0.5, np.float32))


def place_unchecked(mesh, problem):
    """`lesson.place`, minus the cross-process check that every host passed the same data.

    That check all-gathers the whole batch: for the 16 MiB one it takes longer than the
    rest of the run. Here every process builds the batch from one seed, so each copies
    just the rows its own device holds.
    """
    def put(array, spec):
        sharding = NamedSharding(mesh, spec)
        return jax.make_array_from_callback(array.shape, sharding, lambda index: array[index])
    return put(problem.x, P("data")), put(problem.y, P("data")), put(problem.w, P())


def no_collective(mesh, n_total):
    """The all-reduce program without its psum: same dispatch, nothing to exchange."""
    return jax.jit(jax.shard_map(partial(lesson.local_contribution, n_total=n_total),
                                 mesh=mesh, in_specs=(P("data"), P("data"), P()),
                                 out_specs=P("data")))


def add_bytes_by_rank(rows, sent, calls):
    """Fill each row with every rank's bytes per call; `sent` is this process's totals."""
    # Gathered only now, so this gather's own bytes are in no row: int32 keeps counts exact.
    assert max(max(pair) for pair in sent) < 2**31, "too many calls for int32 byte totals"
    # i32[p, rows, 2]: each rank's (bytes counted, bytes sent again) per row
    by_rank = multihost_utils.process_allgather(np.asarray(sent, np.int32))
    for row, counted, resent in zip(rows, by_rank[:, :, 0].T, by_rank[:, :, 1].T):
        observed = [int(total) / calls for total in counted]
        row["observedBytesPerRank"] = observed
        # Left out of observed: the tails TCP resent while a receiver waited for a core.
        row["retransmittedBytesPerRank"] = [int(total) / calls for total in resent]
        # Kept beside the raw counts so the page can quote them without arithmetic.
        row["excessBytesPerRank"] = [b - row["modelBytesPerRank"] for b in observed]
        if row["modelBytesPerRank"]:
            row["observedOverModel"] = [b / row["modelBytesPerRank"] for b in observed]


def measure_traffic(devices, calls, coordinator_port):
    """Bytes each rank sends per call, one row per collective and gradient size: gloo's
    (`traffic`), the ring built from ppermute (`ringTraffic`, lesson_code/ring_collectives.py)
    and the all-reduce program with its psum removed (`trafficBaseline`).

    gloo's reduce-scatter is halving-doubling; the ring is the one the byte model
    describes, so there (p - 1)/p * G per rank per phase is a prediction to test. The
    baseline should be zero, which shows that dispatching a call sends nothing the rows
    would include.
    """
    ranks = len(devices)
    mesh = lesson.data_mesh(devices)
    ring = ring_collectives.ring_programs(mesh)
    found, sent = [], []  # found: (its key in the data, row)
    for problem in (lesson.make_problem(ranks), problem_of_size(ranks, LARGE_GRADIENT_BYTES)):
        x, y, w = place_unchecked(mesh, problem)
        programs = lesson.build_programs(mesh, problem.n_total)
        local = no_collective(mesh, problem.n_total)
        g_locals = local(x, y, w)  # per device: g_local f32[F]
        sliced = programs.shard_gradient(x, y, w)
        chunks = ring["reduce_scatter"](g_locals)  # per device: chunk f32[F/p]
        # The calls we count compute the right thing: checked on this process's shards.
        expected = lesson.reference_gradient(problem)
        copies = np.tile(expected, (ranks, 1))  # f32[p, F]: one row per device
        for got, right in ((programs.all_gradient(x, y, w), expected), (sliced, expected),
                           (chunks, expected), (ring["all_gather"](chunks), copies),
                           (ring["all_reduce"](g_locals), copies)):
            lesson.assert_matches(got, right)
        model = dict(lesson.ring_payload_bytes(problem.w.nbytes, ranks), none=0.0)
        for kind, collective, program, args in (
                ("traffic", "all_reduce", programs.all_gradient, (x, y, w)),
                ("traffic", "reduce_scatter", programs.shard_gradient, (x, y, w)),
                ("traffic", "all_gather", programs.gather, (sliced,)),
                ("trafficBaseline", "none", local, (x, y, w)),
                ("ringTraffic", "reduce_scatter", ring["reduce_scatter"], (g_locals,)),
                ("ringTraffic", "all_gather", ring["all_gather"], (chunks,)),
                ("ringTraffic", "all_reduce", ring["all_reduce"], (g_locals,))):
            sent.append(bytes_sent_over(calls, coordinator_port, program, *args))
            row = {"collective": collective, "gradientBytes": problem.w.nbytes,
                   "modelBytesPerRank": model[collective], "calls": calls}
            found.append((kind, {**row, "algorithm": "ppermute ring"}
                          if kind == "ringTraffic" else row))
    add_bytes_by_rank([row for _, row in found], sent, calls)
    return {kind: [row for its, row in found if its == kind]
            for kind in ("traffic", "trafficBaseline", "ringTraffic")}


# The rounds experiment keeps the gradient fixed (the lesson's 32 B at p = 4) and changes
# only how many processes take part, so the number of dependent rounds changes with p.
ROUNDS_GRADIENT_FLOATS = 8
# 45 blocks a side for a recording: with processes outnumbering the cores a block either
# shares the cores well or waits out a time slice, and it is the number of blocks, not
# calls within one, that holds enough of both kinds for the mean's bootstrap interval to
# keep each verdict between reruns (benchmarks/verdict_stability.py); 5 calls a block are
# enough for its median to pass over one call held up by the scheduler (45 x 5 takes the
# time 25 x 9 did, with an interval about a quarter narrower). A run asked for fewer
# calls (a test of the launch and the bookkeeping, not of the times) takes as many blocks
# in proportion, never fewer than 5.
ROUNDS_BLOCKS, ROUNDS_SAMPLES, FEWEST_ROUNDS_BLOCKS = 45, 5, 5


def rounds_blocks(calls):
    """The rounds experiment's blocks for a run of `calls` repeats (100 for a recording)."""
    return max(FEWEST_ROUNDS_BLOCKS, min(ROUNDS_BLOCKS, calls * ROUNDS_BLOCKS // 100))


def rounds_programs(devices):
    """gloo's three collectives and the ppermute ring's, compiled for the mesh of
    `devices`, each with its argument: {(algorithm, collective): (program, args)}."""
    ranks = len(devices)
    mesh = lesson.data_mesh(devices)
    values = np.arange(ranks * ROUNDS_GRADIENT_FLOATS, dtype=np.float32) % 7 - 3  # f32[p*F]
    g_locals = jax.make_array_from_callback(values.shape, NamedSharding(mesh, P("data")),
                                            lambda index: values[index])
    found = {}
    for algorithm, programs in (("gloo", ring_collectives.xla_programs(mesh)),
                                ("ring", ring_collectives.ring_programs(mesh))):
        chunks = programs["reduce_scatter"](g_locals)
        for collective, argument in (("reduce_scatter", g_locals), ("all_gather", chunks),
                                     ("all_reduce", g_locals)):
            found[algorithm, collective] = (programs[collective], (argument,))
    return found


def measure_rounds(devices, blocks=ROUNDS_BLOCKS, samples=ROUNDS_SAMPLES):
    """The same 32-byte collectives on all p processes and on the first two alone, in
    alternating blocks (p, 2, p, 2, ... or 2, p, ... every other block), so drift and a
    busy spell on the machine fall on both sides and show as spread between blocks.

    While the first two run, the others wait at a barrier, which sleeps rather than
    spins. Every sample of every block is kept; what they mean is derived later.
    """
    rank = jax.process_index()
    sides = (len(devices), 2)
    # Compiled once, before any clock starts: a block times calls, never compilation.
    programs = {ranks: rounds_programs(devices[:ranks]) for ranks in sides if rank < ranks}
    multihost_utils.sync_global_devices("rounds programs compiled")
    samples_us, order = {}, []
    for block in range(blocks):
        turn = sides if block % 2 == 0 else sides[::-1]
        order.append([f"p{ranks}" for ranks in turn])
        for ranks in turn:
            if rank < ranks:
                items = list(programs[ranks].items())
                shift = block % len(items)  # each block starts with another collective
                timed, _ = lesson.interleaved_samples(dict(items[shift:] + items[:shift]),
                                                      blocks=1, samples=samples)
                for (algorithm, collective), times in timed.items():
                    (samples_us.setdefault(f"p{ranks}", {}).setdefault(algorithm, {})
                     .setdefault(collective, []).extend(times))
            multihost_utils.sync_global_devices(f"rounds block {block} p{ranks}")
    return {"samplesUs": samples_us, "order": order, "blocks": blocks,
            "samplesPerBlock": samples, "warmupCallsPerBlock": 1,
            "gradientBytes": 4 * ROUNDS_GRADIENT_FLOATS}


def gradient_by_rank(devices):
    """Each process's own copy of the all-reduced lesson gradient, stacked by rank."""
    mesh = lesson.data_mesh(devices)
    problem = lesson.make_problem(len(devices))
    programs = lesson.build_programs(mesh, problem.n_total)
    replicated = programs.all_gradient(*lesson.place(mesh, problem))
    local = np.asarray(replicated.addressable_shards[0].data)  # f32[F], this process's copy
    return multihost_utils.process_allgather(local).tolist()  # -> f32[p, F]


def progress(rank, message):
    """A line on stderr: the launcher shows the last ones if this rank fails or hangs."""
    print(f"rank {rank} at {time.monotonic() - STARTED:.1f} s: {message}", file=sys.stderr,
          flush=True)


def main(argv=None):
    parser = rank_parser(__doc__.splitlines()[0])
    parser.add_argument("--platform", choices=("cpu", "tpu"), default="cpu",
                        help="cpu: one CPU device per process, traffic counted (default); "
                             "tpu: every chip of a multi-host slice, whose interconnect no "
                             "socket sees, so the lesson alone")
    args = parse_rank_args(parser, argv)
    # The real stdout on a descriptor of its own, fd 1 a copy of stderr, before gloo prints
    # its connection banner there from C++: only process 0 prints the lesson, which it can
    # know only once JAX has made its devices.
    real_stdout = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    loopback = f"127.0.0.1:{args.port}" if args.port is not None else None
    host, coordinator_port = join(args.process_id, args.processes,
                                  loopback or args.coordinator, bind=loopback)
    devices = mesh_devices(args.platform)
    rank = jax.process_index()
    # Process 0 prints the lesson; the others check their own shards silently.
    sys.stdout = real_stdout if rank == 0 else open(os.devnull, "w")
    launch = launch_of(host, args.platform)
    progress(rank, f"joined: {len(devices)} devices in {launch['processes']} processes on "
                   f"{launch['hosts']} host(s), started by {launch['launcher']}")
    # Every process runs and checks it, the going-further steps too, as the lesson does.
    data = lesson.run_lesson(devices, going_further.run_going_further)
    sys.stdout.flush()  # the lesson's output is complete even if a later step fails
    progress(rank, "lesson passed on its own shards")
    data["launch"] = launch
    if args.platform == "cpu":  # on a TPU, ICI carries the collectives: no TCP count, no rounds
        data.update(measure_traffic(devices, args.calls, coordinator_port),
                    trafficMethod=TRAFFIC_METHOD.format(calls=args.calls),
                    gradientByRank=gradient_by_rank(devices))
        progress(rank, "traffic measured")
        before = lesson.host_load()
        data["roundsTiming"] = measure_rounds(devices, rounds_blocks(args.calls))
        data["roundsTiming"].update(hostBefore=before, hostAfter=lesson.host_load())
        progress(rank, "rounds timed")
    # Process 0 writes the run's data, whole; the others have checked their shards.
    return save(args.data_out, data, "the run") if rank == 0 else 0


if __name__ == "__main__":
    sys.exit(main())

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
import argparse
import fcntl
import ipaddress
import json
import os
import socket
import struct
import sys
import time
import zlib
from functools import partial

import jax
import numpy as np
from jax._src import distributed  # the coordinator JAX chose, read once it joined
from jax._src.clusters import ClusterEnv  # the launchers JAX recognises
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from lesson_code import distributed_03 as lesson
from lesson_code import distributed_03_going_further as going_further
from lesson_code import ring_collectives

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


def lesson_stdout(rank):
    """Where `print` goes: the real stdout on process 0, nowhere on the others.

    gloo prints a connection banner from C++ straight to file descriptor 1, so fd 1
    becomes a copy of stderr and `print` gets a private handle on the real stdout.
    """
    if rank:
        return open(os.devnull, "w")
    real_stdout = os.dup(1)
    os.dup2(2, 1)
    return os.fdopen(real_stdout, "w")


# --8<-- [start:join]
def join(process_id=None, processes=None, coordinator=None, bind=None):
    """Become one rank of the run; return this process's rank and the coordinator's
    address, as JAX settled them.

    Given None, JAX takes each from the launcher's environment (mpirun, srun, a Cloud TPU
    slice: jax/_src/clusters/); the single-machine launcher passes them, and `bind` keeps
    its coordinator on loopback. This must happen before the first device exists: the
    CPU client is built once, and only a client built after `initialize` can reach the
    other processes.
    """
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=processes,
                               process_id=process_id, coordinator_bind_address=bind,
                               initialization_timeout=60)
    return distributed.global_state.process_id, distributed.global_state.coordinator_address


def mesh_devices(platform="cpu"):
    """Every rank's devices, in rank order: on CPU one per process; on a TPU slice each
    worker's chips (4 per host), numbered as JAX numbers them within each worker."""
    if platform == "cpu":
        lesson.configure_devices("cpu", 1)
    else:
        jax.config.update("jax_platforms", platform)
    return sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
# --8<-- [end:join]


# JAX's names for the launchers it detects (jax/_src/clusters/), in a reader's words.
LAUNCHERS = {"OmpiCluster": "mpirun", "SlurmCluster": "srun", "K8sCluster": "kubernetes",
             "GceTpuCluster": "cloud-tpu", "GkeTpuCluster": "gke-tpu"}


def launcher_name():
    """What started this process: the first launcher JAX recognises in its environment,
    in the order `initialize` tries them; else a Kubernetes Indexed Job (JAX detects one
    only with the `kubernetes` package and the right to read pods, so the manifest passes
    the rank as flags); else this repository's single-machine launcher."""
    for cluster in ClusterEnv._cluster_types:
        if not cluster.opt_in_only_method and cluster.is_env_present():
            return LAUNCHERS.get(cluster.__name__, cluster.__name__)
    return "kubernetes" if "JOB_COMPLETION_INDEX" in os.environ else "processes.py"


def coordinator_host(address):
    """The coordinator's host as a reader could name it: loopback or a host name as given;
    an IP address of another interface is private to that network, so not recorded."""
    host = address.rsplit(":", 1)[0].strip("[]")
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host  # a name: node001, a pod's DNS name
    return host if loopback else "rank 0's host (its IP address is not recorded)"


def launch_of(coordinator):
    """How this run was put together: launcher, processes, hosts, coordinator's host."""
    # Hosts are counted by a checksum of each process's host name: no name leaves its host.
    name = zlib.crc32(socket.gethostname().encode()) & 0x7FFFFFFF
    names = multihost_utils.process_allgather(np.asarray(name, np.int32))  # i32[p]
    return {"launcher": launcher_name(), "processes": jax.process_count(),
            "hosts": len(set(names.tolist())), "coordinatorHost": coordinator_host(coordinator)}


# --8<-- [start:count_bytes]
BYTES_SENT_AT = 200  # offset of u64 tcpi_bytes_sent in Linux's struct tcp_info (4.19+)
# The u64 right after it, tcpi_bytes_retrans: bytes sent again after a loss. On a busy
# host loopback drops whole 64 KiB segments now and then; they are not gloo's messages.
BYTES_RETRANS_AT = 208
SIOCOUTQ = 0x5411  # ioctl: bytes a socket still holds, not yet sent or not yet acknowledged


def wait_until_sent(sock, timeout_s=2.0):
    """A call can finish here while its last bytes to a slower rank still sit in this
    socket's queue; counted now, they would land in the next window. Wait them out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        queued = fcntl.ioctl(sock.fileno(), SIOCOUTQ, b"\0" * 4)
        if struct.unpack("i", queued)[0] == 0:
            return
        time.sleep(0.001)


def tcp_bytes_sent(coordinator_port):
    """(payload bytes sent so far on this process's TCP connections, each byte once; bytes
    sent again after a loss), the kernel's counts. A retransmission is the network's
    doing, not the collective's: it is kept apart, so the page can show how big it was.

    Connections to or from the coordinator port carry jax.distributed's gRPC (start-up,
    heartbeats), not collectives, so they are left out.
    """
    total = resent_total = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                continue
            # A duplicate: closing our socket object must not close gloo's descriptor.
            sock = socket.socket(fileno=os.dup(int(fd)))
        except OSError:
            continue  # closed since listdir, or a socket Python cannot wrap
        with sock:
            if sock.type != socket.SOCK_STREAM or sock.family == socket.AF_UNIX:
                continue
            try:
                ports = {sock.getsockname()[1], sock.getpeername()[1]}
            except OSError:
                continue  # listening, not connected: it sends nothing
            if coordinator_port not in ports:
                wait_until_sent(sock)
                info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
                sent, resent = struct.unpack_from("QQ", info, BYTES_SENT_AT)
                total += sent - resent
                resent_total += resent
    return total, resent_total


def bytes_sent_over(calls, coordinator_port, program, *args):
    """(bytes this process sends during `calls` finished calls of `program`, bytes it
    sent again in that time)."""
    program(*args).block_until_ready()  # compile, and let gloo open its connections
    before, resent_before = tcp_bytes_sent(coordinator_port)
    for _ in range(calls):
        program(*args).block_until_ready()
    after, resent_after = tcp_bytes_sent(coordinator_port)
    return after - before, resent_after - resent_before
# --8<-- [end:count_bytes]


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
        # Left out of observed: loopback's occasional lost segment, resent by TCP.
        row["retransmittedBytesPerRank"] = [int(total) / calls for total in resent]
        # Kept beside the raw counts so the page can quote them without arithmetic.
        row["excessBytesPerRank"] = [b - row["modelBytesPerRank"] for b in observed]
        if row["modelBytesPerRank"]:
            row["observedOverModel"] = [b / row["modelBytesPerRank"] for b in observed]


def measure_traffic(devices, calls, coordinator_port):
    """Bytes each rank sends per call: one row per collective and gradient size.

    Also returns the same count for a program with no collective, per size: it should
    be zero, which shows that dispatching a call sends nothing the rows would include.
    """
    ranks = len(devices)
    mesh = Mesh(np.asarray(devices), ("data",))
    rows, sent = [], []
    for problem in (lesson.make_problem(ranks), problem_of_size(ranks, LARGE_GRADIENT_BYTES)):
        x, y, w = place_unchecked(mesh, problem)
        programs = lesson.build_programs(mesh, problem.n_total)
        sliced = programs.shard_gradient(x, y, w)
        # The calls we count compute the right thing: checked on this process's shards.
        lesson.assert_matches(programs.all_gradient(x, y, w), lesson.reference_gradient(problem))
        lesson.assert_matches(sliced, lesson.reference_gradient(problem))
        model = dict(lesson.ring_payload_bytes(problem.w.nbytes, ranks), none=0.0)
        for collective, program, args in (
                ("all_reduce", programs.all_gradient, (x, y, w)),
                ("reduce_scatter", programs.shard_gradient, (x, y, w)),
                ("all_gather", programs.gather, (sliced,)),
                ("none", no_collective(mesh, problem.n_total), (x, y, w))):
            sent.append(bytes_sent_over(calls, coordinator_port, program, *args))
            rows.append({"collective": collective, "gradientBytes": problem.w.nbytes,
                         "modelBytesPerRank": model[collective], "calls": calls})
    add_bytes_by_rank(rows, sent, calls)
    traffic = [row for row in rows if row["collective"] != "none"]
    baseline = [row for row in rows if row["collective"] == "none"]
    return traffic, baseline


def measure_ring_traffic(devices, calls, coordinator_port):
    """The same count for the ring built from ppermute (lesson_code/ring_collectives.py).

    gloo's reduce-scatter is halving-doubling; this one is the ring the byte model
    describes, so here (p - 1)/p * G per rank per phase is a prediction to test.
    """
    ranks = len(devices)
    mesh = Mesh(np.asarray(devices), ("data",))
    ring = ring_collectives.ring_programs(mesh)
    rows, sent = [], []
    for problem in (lesson.make_problem(ranks), problem_of_size(ranks, LARGE_GRADIENT_BYTES)):
        x, y, w = place_unchecked(mesh, problem)
        g_locals = no_collective(mesh, problem.n_total)(x, y, w)  # per device: g_local f32[F]
        chunks = ring["reduce_scatter"](g_locals)  # per device: chunk f32[F/p]
        expected = lesson.reference_gradient(problem)
        lesson.assert_matches(chunks, expected)  # on this process's shards
        copies = np.tile(expected, (ranks, 1))  # f32[p, F]: one row per device
        lesson.assert_matches(ring["all_gather"](chunks), copies)
        lesson.assert_matches(ring["all_reduce"](g_locals), copies)
        model = lesson.ring_payload_bytes(problem.w.nbytes, ranks)
        for collective, argument in (("reduce_scatter", g_locals), ("all_gather", chunks),
                                     ("all_reduce", g_locals)):
            sent.append(bytes_sent_over(calls, coordinator_port, ring[collective], argument))
            rows.append({"collective": collective, "algorithm": "ppermute ring",
                         "gradientBytes": problem.w.nbytes,
                         "modelBytesPerRank": model[collective], "calls": calls})
    add_bytes_by_rank(rows, sent, calls)
    return rows


# The rounds experiment keeps the gradient fixed (the lesson's 32 B at p = 4) and changes
# only how many processes take part, so the number of dependent rounds changes with p.
ROUNDS_GRADIENT_FLOATS = 8
# 45 blocks a side for a recording: with processes outnumbering the cores a block either
# shares the cores well or waits out a time slice, and it is the number of blocks, not
# calls within one, that holds enough of both kinds for the mean's bootstrap interval to
# keep each verdict between reruns (scripts/verdict_stability.py); 5 calls a block are
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
    mesh = Mesh(np.asarray(devices), ("data",))
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
    mesh = Mesh(np.asarray(devices), ("data",))
    problem = lesson.make_problem(len(devices))
    programs = lesson.build_programs(mesh, problem.n_total)
    replicated = programs.all_gradient(*lesson.place(mesh, problem))
    local = np.asarray(replicated.addressable_shards[0].data)  # f32[F], this process's copy
    return multihost_utils.process_allgather(local).tolist()  # -> f32[p, F]


def progress(rank, message):
    """A line on stderr: the launcher shows the last ones if this rank fails or hangs."""
    print(f"rank {rank} at {time.monotonic() - STARTED:.1f} s: {message}", file=sys.stderr,
          flush=True)


def write_data(rank, path, data):
    """Process 0 writes the run's data; the others have checked their shards."""
    if rank == 0 and path:
        with open(path, "w") as out:
            json.dump(data, out, indent=2)
    return 0


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Under mpirun or srun, give none of --process-id, --processes, --port or "
               "--coordinator: JAX reads them from the launcher's environment.")
    parser.add_argument("--process-id", type=int, help="this process's rank")
    parser.add_argument("--processes", type=int, help="how many ranks the run has")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--port", type=int,
                       help="coordinator port on 127.0.0.1 (the single-machine launcher)")
    where.add_argument("--coordinator", metavar="HOST:PORT",
                       help="rank 0's address, for a launcher JAX does not detect")
    parser.add_argument("--platform", choices=("cpu", "tpu"), default="cpu",
                        help="cpu: one CPU device per process, traffic counted (default); "
                             "tpu: every chip of a multi-host slice, whose interconnect no "
                             "socket sees, so the lesson alone")
    parser.add_argument("--calls", type=int, default=100,
                        help="how much each measurement repeats: calls averaged per traffic "
                             "row, and the rounds timing's blocks in proportion (45 at "
                             "100, never fewer than 5; default 100)")
    parser.add_argument("--data-out", metavar="PATH", help="process 0 writes its JSON here")
    args = parser.parse_args(argv)
    given = [args.process_id is not None, args.processes is not None,
             args.port is not None or args.coordinator is not None]
    if any(given) and not all(given):
        parser.error("give --process-id, --processes and --port (or --coordinator) "
                     "together, or none of them under mpirun or srun")
    return args


def main(argv=None):
    args = parse_args(argv)
    loopback = f"127.0.0.1:{args.port}" if args.port is not None else None
    rank, coordinator = join(args.process_id, args.processes, loopback or args.coordinator,
                             bind=loopback)
    coordinator_port = int(coordinator.rsplit(":", 1)[1])  # left out of the byte counts
    sys.stdout = lesson_stdout(rank)
    devices = mesh_devices(args.platform)
    launch = launch_of(coordinator)
    progress(rank, f"joined: {len(devices)} devices in {launch['processes']} processes on "
                   f"{launch['hosts']} host(s), started by {launch['launcher']}")
    # Every process runs and checks it, the going-further steps too, as the lesson does.
    data = lesson.run_lesson(devices, going_further.run_going_further)
    sys.stdout.flush()  # the lesson's output is complete even if a later step fails
    progress(rank, "lesson passed on its own shards")
    data["launch"] = launch
    if args.platform == "tpu":  # ICI carries the collectives: no TCP count, no rounds
        return write_data(rank, args.data_out, data)
    data["traffic"], data["trafficBaseline"] = measure_traffic(devices, args.calls,
                                                               coordinator_port)
    data["trafficMethod"] = TRAFFIC_METHOD.format(calls=args.calls)
    data["ringTraffic"] = measure_ring_traffic(devices, args.calls, coordinator_port)
    data["gradientByRank"] = gradient_by_rank(devices)
    progress(rank, "traffic measured")
    before = lesson.host_load()
    data["roundsTiming"] = measure_rounds(devices, rounds_blocks(args.calls))
    data["roundsTiming"].update(hostBefore=before, hostAfter=lesson.host_load())
    progress(rank, "rounds timed")
    return write_data(rank, args.data_out, data)


if __name__ == "__main__":
    sys.exit(main())

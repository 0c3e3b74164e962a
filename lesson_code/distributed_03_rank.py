"""distributed-03 as one of p real processes: the same lesson, and the bytes it sends.

`scripts/runners/processes.py` starts one of these per rank on this machine. Each process owns
ONE CPU device; `jax.distributed` joins them into a p-device mesh, and every collective
crosses process boundaries over TCP on 127.0.0.1 (gloo). By hand, one shell per rank:

    python -m lesson_code.distributed_03_rank --process-id 0 --processes 4 --port 8476 \
        --data-out run.json
    python -m lesson_code.distributed_03_rank --process-id 1 --processes 4 --port 8476
    ...

Process 0 prints what `python -m lesson_code.distributed_03` prints and writes the data
JSON; the others check their own shards silently.
"""
import argparse
import fcntl
import json
import os
import socket
import struct
import sys
import time
from functools import partial

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from lesson_code import distributed_03 as lesson
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
def join(process_id, processes, port):
    """Become rank `process_id` of `processes`; return the global devices, rank order.

    Everything here must happen before the first device exists: the CPU client is built
    once, and only a client built after `initialize` can reach the other processes.
    """
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    address = f"127.0.0.1:{port}"
    jax.distributed.initialize(coordinator_address=address, num_processes=processes,
                               process_id=process_id, coordinator_bind_address=address,
                               initialization_timeout=60)
    lesson.configure_devices("cpu", 1)  # this process's one device
    return sorted(jax.devices(), key=lambda d: d.process_index)
# --8<-- [end:join]


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


def dependent_rounds(algorithm, collective, ranks):
    """Messages a rank must wait for, one after another, in one call.

    ring (ours): p - 1 ppermutes per phase. gloo (as its source reads): reduce-scatter by
    halving-doubling, log2 p exchanges plus one hand-off of the bit-reversed slices when
    p > 2; all-gather as a ring of 2(p - 1) half-chunk messages; all-reduce twice that.
    """
    if algorithm == "ring":
        return {"reduce_scatter": ranks - 1, "all_gather": ranks - 1,
                "all_reduce": 2 * (ranks - 1)}[collective]
    halving_doubling = (ranks - 1).bit_length() + (ranks > 2)
    return {"reduce_scatter": halving_doubling, "all_gather": 2 * (ranks - 1),
            "all_reduce": 4 * (ranks - 1)}[collective]


def time_collectives(devices, samples):
    """Per algorithm and collective: times of finished calls on the mesh of `devices`."""
    ranks = len(devices)
    mesh = Mesh(np.asarray(devices), ("data",))
    features = ROUNDS_GRADIENT_FLOATS
    values = np.arange(ranks * features, dtype=np.float32) % 7 - 3  # f32[p*F]
    g_locals = jax.make_array_from_callback(values.shape, NamedSharding(mesh, P("data")),
                                            lambda index: values[index])
    timed = {}
    for algorithm, programs in (("gloo", ring_collectives.xla_programs(mesh)),
                                ("ring", ring_collectives.ring_programs(mesh))):
        chunks = programs["reduce_scatter"](g_locals)
        for collective, argument in (("reduce_scatter", g_locals), ("all_gather", chunks),
                                     ("all_reduce", g_locals)):
            timed[algorithm, collective] = lesson.completed_samples(
                programs[collective], argument, samples=samples)
    return timed


def measure_rounds(devices, samples=13, passes=2):
    """The same 32-byte collectives on all p processes and on the first two alone.

    With more processes than cores, every dependent round may wait for a peer to be
    scheduled; with 2 processes on a machine of 2 or more cores, each can have one. The
    runs alternate (4, 2, 4, 2) so a busy spell on the machine falls on both. While the
    first two run, the others wait at a barrier, which sleeps rather than spins.
    """
    rank = jax.process_index()
    found = {}
    for _ in range(passes):
        for ranks in (len(devices), 2):
            if rank < ranks:
                for key, times in time_collectives(devices[:ranks], samples).items():
                    found.setdefault((ranks,) + key, []).extend(times)
            multihost_utils.sync_global_devices(f"rounds with {ranks} processes")
    timing = {}
    for (ranks, algorithm, collective), times in found.items():
        rounds = dependent_rounds(algorithm, collective, ranks)
        row = dict(lesson.summarize(times), ranks=ranks, dependentRounds=rounds,
                   gradientBytes=4 * ROUNDS_GRADIENT_FLOATS)
        row["medianUsPerRound"] = row["medianUs"] / rounds  # for the page, no arithmetic
        timing.setdefault(f"p{ranks}", {}).setdefault(algorithm, {})[collective] = row
    return timing


NAMES = {"gloo": "gloo's", "ring": "the ring's", "reduce_scatter": "reduce-scatter",
         "all_gather": "all-gather", "all_reduce": "all-reduce"}
COUNT_WORDS = ["none", "one", "two", "three", "four", "five", "six"]


def listed(items):
    """'a', 'a and b', 'a, b and c': a list as a sentence says it."""
    return " and ".join([", ".join(items[:-1])] * (len(items) > 1) + items[-1:])


def rounds_verdict(timing, cores, many="p4", few="p2"):
    """Did fewer processes lower the time per round? Per collective, and in words.

    The hypothesis predicts it only when the larger run has more processes than cores
    and the smaller one a core per process; `premiseHolds` says whether this machine
    was such a case. Medians this short are noisy, so the page prints these words,
    made from the numbers, rather than a verdict typed once.
    """
    rows, slower = {}, []
    for algorithm, collectives in timing[few].items():
        for collective, row in collectives.items():
            other = timing[many][algorithm][collective]
            lower = row["medianUsPerRound"] < other["medianUsPerRound"]
            rows.setdefault(algorithm, {})[collective] = {
                "lowerWithFewer": lower, "perRoundUs": {few: row["medianUsPerRound"],
                                                        many: other["medianUsPerRound"]}}
            if not lower:
                slower.append(f"{NAMES[algorithm]} {NAMES[collective]} "
                              f"({row['medianUsPerRound']:,.0f} µs per round on "
                              f"{row['ranks']}, {other['medianUsPerRound']:,.0f} on "
                              f"{other['ranks']})")
    total = sum(len(collectives) for collectives in rows.values())
    lower = total - len(slower)
    few_ranks, many_ranks = int(few[1:]), int(many[1:])
    premise = few_ranks <= cores < many_ranks
    than = f"with {few_ranks} processes than with {many_ranks}"
    if not slower:
        words = f"all {COUNT_WORDS[total]} collectives took less time per round {than}"
    else:
        words = (f"{COUNT_WORDS[lower]} of the {COUNT_WORDS[total]} collectives took less "
                 f"time per round {than}; {listed(slower)} did not")
    if not premise:
        verdict = ("The hypothesis does not apply on this machine: it needs more processes "
                   f"than cores at p = {many_ranks} and a core each at p = {few_ranks}.")
    elif not slower:
        verdict = "That is what the hypothesis predicts."
    else:
        verdict = "The hypothesis predicts it for all of them, so this run does not bear it out."
    few_words = ("one process per core" if few_ranks <= cores
                 else f"{few_ranks} processes sharing {cores} core{'s' * (cores > 1)}")
    # The widest spread of any row: how far a call can stray from the fastest one.
    spread = max(row["maxUs"] / row["minUs"] for by_algorithm in timing.values()
                 for collectives in by_algorithm.values() for row in collectives.values())
    gloo_ranges = lesson.ranges_verdict(timing[many]["gloo"], names=NAMES)
    return {"collectives": rows, "lowerWithFewer": lower, "total": total,
            "slowestOverFastest": spread, "glooRangesWords": gloo_ranges["overlapWords"],
            "cores": cores, "premiseHolds": premise, "fewerCoresWords": few_words,
            "lowerWords": words, "verdictWords": verdict}


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


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--process-id", type=int, required=True)
    parser.add_argument("--processes", type=int, required=True)
    parser.add_argument("--port", type=int, required=True, help="coordinator port on 127.0.0.1")
    parser.add_argument("--calls", type=int, default=100,
                        help="calls averaged per traffic row (default 100)")
    parser.add_argument("--data-out", metavar="PATH", help="process 0 writes its JSON here")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    rank = args.process_id
    sys.stdout = lesson_stdout(rank)
    devices = join(rank, args.processes, args.port)
    progress(rank, f"joined: {len(devices)} devices in {jax.process_count()} processes")
    data = lesson.run_lesson(devices)  # every process runs and checks it
    sys.stdout.flush()  # the lesson's output is complete even if a later step fails
    progress(rank, "lesson passed on its own shards")
    data["traffic"], data["trafficBaseline"] = measure_traffic(devices, args.calls, args.port)
    data["trafficMethod"] = TRAFFIC_METHOD.format(calls=args.calls)
    data["ringTraffic"] = measure_ring_traffic(devices, args.calls, args.port)
    data["gradientByRank"] = gradient_by_rank(devices)
    progress(rank, "traffic measured")
    data["roundsTiming"] = measure_rounds(devices)
    progress(rank, "rounds timed")
    if rank == 0 and args.data_out:
        # Only ranks 0 and 1 timed the two-process runs, so only they could say this.
        data["roundsVerdict"] = rounds_verdict(data["roundsTiming"], os.cpu_count())
        with open(args.data_out, "w") as out:
            json.dump(data, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

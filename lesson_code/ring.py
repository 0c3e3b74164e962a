"""A step-by-step NumPy simulation of the ring reduce-scatter and ring all-gather.

This is the schedule the idealized payload model assumes, not a trace of any real runtime:
p ranks sit on a ring, every array is cut into p equal chunks, and at each of the p-1 steps
every rank sends one chunk to its right-hand neighbour (rank r -> rank r+1 mod p) at once.

Besides the numbers, the simulation records which ranks' inputs each copy of each chunk
already carries, so a reader can watch a chunk go from one contribution to a full sum.
"""
import sys
from dataclasses import dataclass

import numpy as np

# state[rank][chunk]: sorted ranks whose input that rank's copy of that chunk already holds.
# In the reduce-scatter the inputs are contributions, so the tuple lists what has been summed;
# in the all-gather they are shards, so a copy holds (chunk,) or, not received yet, ().
ChunkState = tuple[tuple[tuple[int, ...], ...], ...]


# --8<-- [start:ring_records]
@dataclass(frozen=True)
class Send:
    src: int
    dst: int
    chunk: int


@dataclass(frozen=True)
class Step:
    sends: tuple[Send, ...]
    state: ChunkState  # after this step's sends have arrived


@dataclass(frozen=True, eq=False)  # eq on ndarray fields would be ambiguous
class RingRun:
    result: np.ndarray
    bytes_sent: tuple[int, ...]  # per rank, over the whole phase
    initial: ChunkState
    steps: tuple[Step, ...]
# --8<-- [end:ring_records]


def _split_into_chunks(array: np.ndarray) -> tuple[int, int]:
    p, n = array.shape
    if n % p:
        raise ValueError(f"ring simulation needs the length {n} to be divisible by {p} ranks")
    return p, n // p


def _freeze(state: list[list[tuple[int, ...]]]) -> ChunkState:
    return tuple(tuple(row) for row in state)


# --8<-- [start:ring_reduce_scatter]
def ring_reduce_scatter(contributions: np.ndarray) -> RingRun:
    """Sum a (p, n) array of per-rank contributions; rank r ends with chunk r of the sum."""
    p, m = _split_into_chunks(contributions)
    buf = contributions.reshape(p, p, m).copy()  # (p, n) -> (rank, chunk, n/p)
    state = [[(r,)] * p for r in range(p)]
    initial = _freeze(state)
    bytes_sent = [0] * p
    steps = []
    for s in range(p - 1):
        # Rank r passes on chunk r-s-1: its own at s=0, afterwards the one it just added to.
        # So chunk c sets off from rank c+1 and completes its lap on rank c.
        sends = tuple(Send(r, (r + 1) % p, (r - s - 1) % p) for r in range(p))
        # Every rank sends at the same moment, so read all payloads before anyone adds.
        payloads = [(buf[t.src, t.chunk].copy(), state[t.src][t.chunk]) for t in sends]
        for t, (values, summed) in zip(sends, payloads):
            buf[t.dst, t.chunk] += values  # receive and reduce into the receiver's own part
            state[t.dst][t.chunk] = tuple(sorted(state[t.dst][t.chunk] + summed))
            bytes_sent[t.src] += values.nbytes
        steps.append(Step(sends, _freeze(state)))
    result = buf[np.arange(p), np.arange(p)]  # (rank, chunk, n/p) -> (p, n/p), chunk r of rank r
    return RingRun(result, tuple(bytes_sent), initial, tuple(steps))
# --8<-- [end:ring_reduce_scatter]


# --8<-- [start:ring_all_gather]
def ring_all_gather(shards: np.ndarray) -> RingRun:
    """Give every rank all p shards of a (p, n/p) array, in rank order."""
    p, m = shards.shape
    buf = np.zeros((p, p, m), dtype=shards.dtype)  # (rank, chunk, n/p); only held chunks matter
    buf[np.arange(p), np.arange(p)] = shards  # rank r starts with chunk r only
    state = [[(c,) if c == r else () for c in range(p)] for r in range(p)]
    initial = _freeze(state)
    bytes_sent = [0] * p
    steps = []
    for s in range(p - 1):
        # Rank r passes on chunk r-s: its own at s=0, afterwards the one it just received.
        sends = tuple(Send(r, (r + 1) % p, (r - s) % p) for r in range(p))
        payloads = [(buf[t.src, t.chunk].copy(), state[t.src][t.chunk]) for t in sends]
        for t, (values, origin) in zip(sends, payloads):
            buf[t.dst, t.chunk] = values  # receive and copy: nothing left to add
            state[t.dst][t.chunk] = origin
            bytes_sent[t.src] += values.nbytes
        steps.append(Step(sends, _freeze(state)))
    result = buf.reshape(p, p * m)  # (rank, chunk, n/p) -> (p, n): the whole vector on every rank
    return RingRun(result, tuple(bytes_sent), initial, tuple(steps))
# --8<-- [end:ring_all_gather]


def example_contributions(p: int) -> np.ndarray:
    """Rank r contributes (r+1)·[1, ..., 2p], so every partial sum can be checked by hand."""
    return np.outer(np.arange(1, p + 1), np.arange(1, 2 * p + 1)).astype(np.float32)


def _phase_record(run: RingRun) -> dict:
    """A phase as plain JSON: who sent which chunk at each step, and who held what after."""
    return {"initial": run.initial, "bytesSent": list(run.bytes_sent),
            "steps": [{"sends": [[t.src, t.dst, t.chunk] for t in step.sends],
                       "state": step.state} for step in run.steps]}


def trace(p: int = 4) -> dict:
    """Both phases on the example contributions, checked against NumPy, as JSON data."""
    contributions = example_contributions(p)  # (p, n) with n = 2p
    scatter = ring_reduce_scatter(contributions)
    gather = ring_all_gather(scatter.result)
    total = contributions.sum(axis=0)  # (n,): what every rank must end with
    assert all(np.array_equal(row, total) for row in gather.result)
    return {"ranks": p, "contributions": contributions.tolist(),
            "vectorBytes": contributions[0].nbytes,
            "reduceScatter": _phase_record(scatter), "allGather": _phase_record(gather)}


# The ring sizes a reader can step through on the site, besides the one the figures draw.
STEPPABLE_RANKS = (2, 4, 8)


def recorded_traces(p: int = 4) -> dict:
    """The trace for p ranks, which the figures draw, and under "byRanks" the traces for
    the other steppable ring sizes, so the page's step-through can offer each of them."""
    return {**trace(p), "byRanks": {str(q): trace(q) for q in STEPPABLE_RANKS if q != p}}


def main():
    """`--data-out PATH` as every lesson program writes it, on the course's program shell
    (lesson_code/program.py)."""
    from lesson_code.program import OneLineParser, data_out_path, save, shell, whole

    parser = OneLineParser(description="Simulate the ring on the example vector.")
    # Its trace holds p chunks for p ranks at each of p steps: p^3 entries a phase.
    parser.add_argument("--ranks", type=whole(1, 64), default=4,
                        help="ranks on the ring (default 4, at most 64)")
    parser.add_argument("--data-out", metavar="PATH", type=data_out_path,
                        help="write the trace as JSON here")
    args = parser.parse_args()

    def simulate():
        data = recorded_traces(args.ranks)
        sent = [data[phase]["bytesSent"][0] for phase in ("reduceScatter", "allGather")]
        print(f"Ring of {args.ranks} ranks on a {data['vectorBytes']}-byte vector: each "
              f"rank sent {sent[0]} bytes in the reduce-scatter and {sent[1]} in the "
              f"all-gather, {sum(sent)} in all.")
        print("Every rank ends with the full sum.")
        return save(args.data_out, data, "the simulation")
    return shell(simulate, "the simulation")


if __name__ == "__main__":
    sys.exit(main())

"""A message-size sweep's arithmetic, for any lesson's analysis (NumPy only): its blocks,
each collective's own cost (a looped call less a single one), nccl-tests' bandwidths and
the alpha-beta fit. What they say is reading.py's.
"""
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Timings:
    """A sweep's blocks by (collective, p, S), [[block 0's values per call], ...]: the single
    and the looped calls' times (us) and faults."""
    calls: dict
    loops: dict
    call_faults: dict
    loop_faults: dict
    looping: int  # collectives per looped call
    page_bytes: int
    output_over_s: Callable | None  # the lesson's: (collective, p) -> a device's output / S

    def faulted_share(self, key, faults_per_call):
        """The share of its p outputs' bytes a call faulted in afresh (1.0: all of them)."""
        collective, ranks, nbytes = key
        return faults_per_call * self.page_bytes / (
            ranks * self.output_over_s(collective, ranks) * nbytes)

    def extra(self, key, faults=False):
        """One more collective in the loop, block by block, in us (or faults): the looped
        call less the single one, medians of one block so that the dispatch and one-time
        allocations cancel, over the loop's extra collectives."""
        loops, calls = (self.loop_faults, self.call_faults) if faults else (self.loops, self.calls)
        return [(float(np.median(loop)) - float(np.median(one))) / (self.looping - 1)
                for loop, one in zip(loops[key], calls[key])]


def timings(recording, output_over_s=None):
    """A sweep recording's Timings (`output_over_s` None: no fault's share is asked for)."""
    found = defaultdict(dict)  # (looped, of faults): Timings' dict
    for row in sorted(recording["rows"], key=lambda row: row["block"]):
        key, looped = (row["collective"], row["ranks"], row["bytes"]), row["collectivesPerCall"] > 1
        found[looped, False].setdefault(key, []).append(row["samplesUs"])
        found[looped, True].setdefault(key, []).append(
            [count / row["callsPerSample"] for count in row["minorFaults"]])
    return Timings(found[False, False], found[True, False], found[False, True], found[True, True],
                   next(row["collectivesPerCall"] for row in recording["rows"]
                        if row["collectivesPerCall"] > 1), recording["pageBytes"], output_over_s)


def own_costs(recording):
    """({(collective, p, S): one more collective in the loop, block by block (us)}, collectives
    per looped call): every block's, however the calls faulted."""
    t = timings(recording)
    return {key: t.extra(key) for key in t.calls if key in t.loops}, t.looping


def bus_factor(phases, ranks):
    """nccl-tests' busbw / algbw (doc/PERFORMANCE.md): the share of S each rank must move,
    (p - 1)/p per phase; an all-reduce is two phases (reduce-scatter, then all-gather)."""
    return phases * (ranks - 1) / ranks


def algbw_gbps(nbytes, seconds):
    """Algorithm bandwidth S / t, with S the full array's bytes (GB = 1e9 bytes)."""
    return nbytes / seconds / 1e9


def fit_line_relative(x, y):
    """(a, b) of y = a + b x, least squares in the relative residual (a + b x)/y - 1, which
    weighs 10 us like 10 ms, as log axes do (rows scaled by 1/y: still linear)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    (a, b), *_ = np.linalg.lstsq(np.column_stack([1 / y, x / y]), np.ones_like(y), rcond=None)
    return float(a), float(b)


def worst_miss(x, y, a, b):
    """The largest |(a + b x) / y - 1|: how far the straight line misses its worst point."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    return float(np.max(np.abs((a + b * x) / y - 1)))


def fit_alpha_beta(nbytes, seconds):
    """(alpha seconds, beta bytes/s) of t = alpha + S / beta in the relative residual;
    beta None when the times do not grow with size; a negative alpha is kept at 0."""
    s, t = np.asarray(nbytes, dtype=float), np.asarray(seconds, dtype=float)
    alpha, inverse_beta = fit_line_relative(s, t)
    if alpha < 0:
        alpha = 0.0
        inverse_beta = np.sum(s / t) / np.sum((s / t) ** 2)
    return float(alpha), (float(1 / inverse_beta) if inverse_beta > 0 else None)


def one_significant_figure(value):
    """`value` rounded to one significant figure: 502 -> 500, 257 -> 300."""
    return float(f"{value:.1g}")


def predicted_machine(predictions, device_kind):
    """The machine of a predictions file (its `machines`, each with the `deviceKinds` JAX
    names it by) that a hardware recording of `device_kind` ran on; ValueError if none."""
    for name, machine in predictions["machines"].items():
        if device_kind in machine["deviceKinds"]:
            return name
    known = [k for machine in predictions["machines"].values() for k in machine["deviceKinds"]]
    raise ValueError(f"device kind {device_kind!r} is none of the predicted VMs' "
                     f"({', '.join(known)})")

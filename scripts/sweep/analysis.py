"""A message-size sweep's arithmetic, for any lesson's analysis: nccl-tests' bandwidths,
the alpha-beta fit, and each collective's own cost (a looped call less a single one).
NumPy only; the words and the programs' names are the lesson's.
"""
import numpy as np


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


def relative_residuals(x, y, a, b):
    """(a + b x) / y - 1 at every point: how far the straight line misses each one."""
    return (a + b * np.asarray(x, dtype=float)) / np.asarray(y, dtype=float) - 1


def fit_alpha_beta(nbytes, seconds):
    """(alpha seconds, beta bytes/s) of t = alpha + S / beta in the relative residual;
    beta None when the times do not grow with size; a negative alpha is kept at 0."""
    s, t = np.asarray(nbytes, dtype=float), np.asarray(seconds, dtype=float)
    alpha, inverse_beta = fit_line_relative(s, t)
    if alpha < 0:
        alpha = 0.0
        inverse_beta = np.sum(s / t) / np.sum((s / t) ** 2)
    return float(alpha), (float(1 / inverse_beta) if inverse_beta > 0 else None)


def max_relative_residual(nbytes, seconds, alpha, beta):
    inverse_beta = 1 / beta if beta else 0.0
    return float(np.max(np.abs(relative_residuals(nbytes, seconds, alpha, inverse_beta))))


def one_significant_figure(value):
    """`value` rounded to one significant figure: 502 -> 500, 257 -> 300."""
    return float(f"{value:.1g}")


def grouped(rows, looped, field):
    """{(collective, ranks, bytes): [[block 0's samples per call], ...]} of the single or the
    looped rows; `field` "samplesUs" or "minorFaults" (divided here by the calls)."""
    found = {}
    for row in sorted(rows, key=lambda r: r["block"]):
        if (row["collectivesPerCall"] > 1) != looped:
            continue
        values = row[field] if field == "samplesUs" else \
            [faults / row["callsPerSample"] for faults in row[field]]
        found.setdefault((row["collective"], row["ranks"], row["bytes"]), []).append(values)
    return found


def block_differences(loop_blocks, call_blocks, looping):
    """One more collective inside the loop, block by block: (looped call - single call) /
    (looping - 1), medians of the same block, so the dispatch and one-time allocations
    cancel."""
    return [(float(np.median(loop)) - float(np.median(one))) / (looping - 1)
            for loop, one in zip(loop_blocks, call_blocks)]


def own_costs(rows, field="samplesUs"):
    """({(collective, ranks, bytes): [one more collective, block by block]}, collectives
    per looped call) of a sweep recording's rows."""
    calls, loops = grouped(rows, False, field), grouped(rows, True, field)
    looping = next(row["collectivesPerCall"] for row in rows if row["collectivesPerCall"] > 1)
    return {key: block_differences(loops[key], calls[key], looping)
            for key in calls if key in loops}, looping


def predicted_machine(predictions, device_kind):
    """The machine of a predictions file (its `machines`, each with the `deviceKinds` JAX
    names it by) that a hardware recording of `device_kind` ran on; ValueError if none."""
    for name, machine in predictions["machines"].items():
        if device_kind in machine["deviceKinds"]:
            return name
    known = [k for machine in predictions["machines"].values() for k in machine["deviceKinds"]]
    raise ValueError(f"device kind {device_kind!r} is none of the predicted VMs' "
                     f"({', '.join(known)})")

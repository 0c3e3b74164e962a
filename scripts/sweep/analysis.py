"""A message-size sweep's arithmetic, for any lesson's analysis: nccl-tests' bandwidths
and the alpha-beta fit. NumPy only; reading a recording is reading.py's.
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

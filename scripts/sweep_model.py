"""What the sweep's numbers mean: nccl-tests' bandwidths, the alpha-beta fit, a memcpy ceiling.

NumPy only, so the recording, the figure and the tests use it without starting JAX.
"""
import time

import numpy as np

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "reduce_scatter_all_gather")

# 8 B .. 32 MiB, a factor 4 apart: the small end is where the lesson's 8-value gradient
# lives, the large end is well past the last-level cache of any machine we run on.
SIZES = tuple(8 * 4**k for k in range(12))


def element_count(nbytes, ranks, itemsize=4):
    """Elements of a float32 array of at least `nbytes`, rounded up to a multiple of `ranks`.

    Reduce-scatter and the sharded all-gather input split the array evenly over the ranks,
    so 8 B (two floats) becomes 4 floats at p=4; rows report the bytes actually moved.
    """
    n = -(-nbytes // itemsize)
    return -(-n // ranks) * ranks


def format_bytes(nbytes, _tick_position=None):
    """8 B, 2 KiB, 32 MiB: binary units, as the sizes are powers of two."""
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.3g} B"


def bus_factor(collective, ranks):
    """nccl-tests' busbw / algbw (doc/PERFORMANCE.md): the share of S each rank must move.

    An all-reduce is a reduce-scatter followed by an all-gather, so it moves twice the
    (p-1)/p of either half; the combined rs+ag program here is that same pair of phases.
    """
    one_phase = (ranks - 1) / ranks
    two_phase = {"all_reduce", "reduce_scatter_all_gather"}
    return 2 * one_phase if collective in two_phase else one_phase


def algbw_gbps(nbytes, seconds):
    """Algorithm bandwidth S / t, with S the full array's bytes (GB = 1e9 bytes)."""
    return nbytes / seconds / 1e9


def busbw_gbps(collective, ranks, nbytes, seconds):
    return algbw_gbps(nbytes, seconds) * bus_factor(collective, ranks)


def fit_alpha_beta(nbytes, seconds):
    """Least-squares fit of t = alpha + S / beta; returns (alpha seconds, beta bytes/s).

    The medians span four decades, so an ordinary fit would be decided by the few largest
    sizes and leave alpha as noise. Minimising the *relative* residual (alpha + c S)/t - 1,
    c = 1/beta, weighs every size alike, as the log-log figure does, and unlike a fit in
    log space it stays a linear problem with one exact answer.
    """
    s = np.asarray(nbytes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    design = np.column_stack([1 / t, s / t])  # (sizes, 2): rows scaled by 1/t
    (alpha, inverse_beta), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if alpha < 0:
        # Pure bandwidth explains the data better than any latency: keep alpha at zero
        # rather than report a negative time.
        alpha = 0.0
        inverse_beta = np.sum(s / t) / np.sum((s / t) ** 2)
    if inverse_beta <= 0:
        raise ValueError("times do not grow with size: the sweep never reached the "
                         "bandwidth regime, add larger sizes")
    return float(alpha), float(1 / inverse_beta)


def max_relative_residual(nbytes, seconds, alpha, beta):
    s = np.asarray(nbytes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    return float(np.max(np.abs((alpha + s / beta) / t - 1)))


def measure_memcpy_gbps(nbytes=256 * 2**20, repeats=5):
    """Best-of-`repeats` bytes copied per second for one large host copy: the ceiling.

    Counted as memcpy benchmarks do (buffer size / time, not read + write), and both
    buffers are written once first so page faults are not part of the copy.
    """
    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.zeros_like(src)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return nbytes / best / 1e9

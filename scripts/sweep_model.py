"""What the sweep's numbers mean: nccl-tests' bandwidths, alpha-beta fits, dependent steps.

NumPy only, so the recording, the figure and the tests use it without starting JAX.
"""
import time

import numpy as np

XLA_COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "reduce_scatter_all_gather")
# lesson_code/ring_collectives.py: the same results from p - 1 ppermute steps per phase.
RING_COLLECTIVES = ("ring_reduce_scatter", "ring_all_reduce")
COLLECTIVES = XLA_COLLECTIVES + RING_COLLECTIVES

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
    two_phase = {"all_reduce", "reduce_scatter_all_gather", "ring_all_reduce"}
    return 2 * one_phase if collective in two_phase else one_phase


def algbw_gbps(nbytes, seconds):
    """Algorithm bandwidth S / t, with S the full array's bytes (GB = 1e9 bytes)."""
    return nbytes / seconds / 1e9


def busbw_gbps(collective, ranks, nbytes, seconds):
    return algbw_gbps(nbytes, seconds) * bus_factor(collective, ranks)


def dependent_steps(collective, ranks, ring_steps=None):
    """Communication steps that must follow one another in one call, as each algorithm runs
    on one process: XLA:CPU's in-process collective is one rendezvous (every device reads
    the others' buffers, then all wait for all), the rs+ag program two; the ppermute ring
    waits p - 1 times per phase. `ring_steps(p)` swaps in another count for the ring phase
    (halving-doubling's log2 p, say) to test which count the measured latencies follow."""
    per_phase = (ring_steps or (lambda p: p - 1))(ranks)
    return {"ring_reduce_scatter": per_phase, "ring_all_reduce": 2 * per_phase,
            "reduce_scatter_all_gather": 2}.get(collective, 1)


def fit_line_relative(x, y):
    """(a, b) of y = a + b x, least squares in the relative residual (a + b x)/y - 1.

    Rows scaled by 1/y keep it a linear problem with one exact answer, and weigh a point at
    10 us like one at 10 ms, as log axes do."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    design = np.column_stack([1 / y, x / y])
    (a, b), *_ = np.linalg.lstsq(design, np.ones_like(y), rcond=None)
    return float(a), float(b)


def relative_residuals(x, y, a, b):
    """(a + b x) / y - 1 at every point: how far the straight line misses each one."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    return (a + b * x) / y - 1


def fit_alpha_beta(nbytes, seconds):
    """Least-squares fit of t = alpha + S / beta; returns (alpha seconds, beta bytes/s).

    The medians span four decades, so an ordinary fit would be decided by the few largest
    sizes and leave alpha as noise. Minimising the *relative* residual (alpha + c S)/t - 1,
    c = 1/beta, weighs every size alike, as the log-log figure does, and unlike a fit in
    log space it stays a linear problem with one exact answer.
    """
    s = np.asarray(nbytes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    alpha, inverse_beta = fit_line_relative(s, t)
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
    return float(np.max(np.abs(relative_residuals(nbytes, seconds, alpha, 1 / beta))))


def order_of_magnitude(value):
    """The power of ten nearest `value` on a log scale: 300 -> 100, 400 -> 1000."""
    return float(10 ** round(np.log10(value))) if value > 0 else 0.0


def fit_below_cache(nbytes, seconds, cache_bytes):
    """The alpha-beta fit over the sizes smaller than the last-level cache, where one
    straight line can fit; past it every copy goes to DRAM and the line bends (a cliff).

    Returns the fit, its worst residual, and how far the largest size lies above the
    fitted line, so the cliff is recorded rather than averaged into alpha and beta.
    """
    s = np.asarray(nbytes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    inside = s < cache_bytes if cache_bytes else np.ones_like(s, dtype=bool)
    if inside.sum() < 3:
        inside[:] = True  # too few sizes below the cache to fit a line: fit them all
    alpha, beta = fit_alpha_beta(s[inside], t[inside])
    largest = np.argmax(s)
    return {"alphaUs": alpha * 1e6, "betaGBps": beta / 1e9,
            "nHalfBytes": alpha * beta,  # Hockney's n1/2: where S / beta == alpha
            "nHalfKiB": alpha * beta / 1024,
            # With residuals of tens of per cent, n1/2 earns its order of magnitude only.
            "nHalfOrderKiB": order_of_magnitude(alpha * beta / 1024),
            "fittedSizes": int(inside.sum()), "fitMaxBytes": int(s[inside].max()),
            "maxRelResidual": max_relative_residual(s[inside], t[inside], alpha, beta),
            "largestOverFit": float(t[largest] / (alpha + s[largest] / beta))}


def fit_steps(alphas_s, collectives, ranks, ring_steps=None):
    """alpha = dispatch + steps * per-step: one line through every algorithm's alpha at one
    p, under one way of counting steps. Returns (dispatch s, per-step s, worst relative
    residual); the count whose line misses the alphas least is the one they support."""
    steps = [dependent_steps(c, ranks, ring_steps) for c in collectives]
    dispatch, per_step = fit_line_relative(steps, alphas_s)
    worst = np.max(np.abs(relative_residuals(steps, alphas_s, dispatch, per_step)))
    return dispatch, per_step, float(worst)


# The memcpy for scale: one buffer this large, copied this many times, the best kept.
MEMCPY_BYTES = 256 * 2**20
MEMCPY_REPEATS = 5


def measure_memcpy_gbps(nbytes=MEMCPY_BYTES, repeats=MEMCPY_REPEATS):
    """Best-of-`repeats` bytes copied per second by one thread, for scale: p device
    threads copy concurrently and share the memory bus, so this bounds nothing.

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

"""Medians with confidence intervals, ratios with intervals, and the verdict they earn.

NumPy only: a lesson's analysis (lesson_code/lessons.toml `analysis`) uses these to turn
the raw samples of a recording into statistics and words, as a derived file that
`record.py --render-only` remakes without measuring anything again.

Every interval here is distribution-free: the median of n values lies between the k-th
smallest and the k-th largest of them with a probability that depends only on n and k
(the binomial(n, 1/2) order-statistics interval), whatever the distribution of the
times, which are skewed and heavy-tailed on a busy host. No random numbers, so the same
samples always give the same interval. The values are per-block medians: blocks are the
units that interleaving makes comparable, and samples inside one block are not
independent (a busy spell covers several in a row).
"""
import math

import numpy as np

CONFIDENCE = 0.95


def coverage(n, k):
    """P(x_(k) <= median <= x_(n+1-k)) for n independent values: 1 - 2 P(Bin(n, 1/2) < k)."""
    below = sum(math.comb(n, i) for i in range(k)) / 2**n
    return 1 - 2 * below


def order_statistic_rank(n, confidence=CONFIDENCE):
    """The largest k whose interval [x_(k), x_(n+1-k)] covers the median with at least
    `confidence`; 1 (the full range) when even that falls short, as with n <= 5 at 95 %."""
    k = 1
    while k + 1 <= (n + 1) // 2 and coverage(n, k + 1) >= confidence:
        k += 1
    return k


def median_interval(values, confidence=CONFIDENCE):
    """{"median", "low", "high", "coverage", "n"} for the median of `values`."""
    ordered = np.sort(np.asarray(values, dtype=float))
    n = len(ordered)
    if n == 0:
        raise ValueError("no values to take a median of")
    k = order_statistic_rank(n, confidence)
    return {"median": float(np.median(ordered)), "low": float(ordered[k - 1]),
            "high": float(ordered[n - k]), "coverage": coverage(n, k), "n": n}


def block_medians(blocks):
    """The median of each block's samples: [[t, ...], ...] -> [m, ...]."""
    return [float(np.median(block)) for block in blocks]


def summary(blocks, confidence=CONFIDENCE):
    """One measured configuration: the median of its block medians with that interval,
    and the fastest and slowest single sample, for the spread a reader sees."""
    every = [t for block in blocks for t in block]
    return {**median_interval(block_medians(blocks), confidence),
            "min": float(min(every)), "max": float(max(every)), "samples": len(every),
            # How far one block's median strays from another's: the run's own noise.
            "blockSpread": float(max(block_medians(blocks)) / min(block_medians(blocks)))}


def paired_ratio(top_blocks, bottom_blocks, confidence=CONFIDENCE, scale=1.0):
    """The ratio top / bottom, block by block (the two ran side by side in each block),
    times `scale`: its median over blocks with the order-statistics interval."""
    if len(top_blocks) != len(bottom_blocks):
        raise ValueError(f"paired blocks differ in number ({len(top_blocks)} against "
                         f"{len(bottom_blocks)})")
    ratios = [scale * t / b for t, b in zip(block_medians(top_blocks),
                                            block_medians(bottom_blocks))]
    return median_interval(ratios, confidence)


SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"


# A ratio within 25 % of 1 is called neither way: timings on a shared host drift by that
# much between blocks, so an interval that only just clears 1 would flip between reruns.
MARGIN = 1.25


def verdict(ratio, predicted_above_one, replicate_disagreement=None, margin=MARGIN):
    """What an interval for a ratio says about a prediction that it exceeds 1 (or, with
    `predicted_above_one` False, that it stays below 1).

    "supported" or "contradicted" only when the whole interval lies beyond `margin` on
    one side of 1; "inconclusive" otherwise, and always when the same configuration,
    measured twice in one run, disagreed (`replicate_disagreement`, a ratio >= 1) by more
    than the effect itself: then the run's noise is larger than what it is asked to
    tell apart.
    """
    effect = max(ratio["median"], 1 / ratio["median"])
    if replicate_disagreement is not None and replicate_disagreement > effect:
        return INCONCLUSIVE
    if ratio["low"] > margin:
        return SUPPORTED if predicted_above_one else CONTRADICTED
    if ratio["high"] < 1 / margin:
        return CONTRADICTED if predicted_above_one else SUPPORTED
    return INCONCLUSIVE


def disagreement(first, second):
    """How far two medians of one configuration differ, as a ratio >= 1."""
    return max(first, second) / min(first, second)


def host_at_start(environment, cores):
    """Whether other work kept the cores busy when a measurement started, from the
    recording's environment, and the sentence a page prints about it.

    busyCoresAtStart (what other work did in the half second before the start) decides
    where it was recorded: more than half the cores busy means the times also measure that
    work. An older recording has only the load average, which then decides (above the
    cores). The load average alone decays over a minute, so a run just ended still counts.
    """
    busy_cores = environment.get("busyCoresAtStart")
    load = environment.get("loadAverage1m")
    if busy_cores is not None:
        busy = busy_cores > cores / 2
        said = f"other work kept {busy_cores:.1f} of the {cores} cores busy"
    elif load is not None:
        busy = load > cores
        said = f"the load average was {load:.1f} on {cores} cores"
    else:
        return {"busy": None, "busyCores": None,
                "words": "The host's load before it started was not recorded."}
    verdict = ("the host was busy, so these times also measure other work" if busy
               else "the host was otherwise idle")
    return {"busy": busy, "busyCores": busy_cores,
            "words": f"Just before it started, {said}: {verdict}."}

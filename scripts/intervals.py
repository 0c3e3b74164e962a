"""Medians and ratios with confidence intervals, and the verdict they earn, for a lesson's
analysis (lessons.toml `analysis`).

The unit is the block: samples inside one are not independent (a busy spell covers several
in a row), so each block counts once, by its median, and every interval assumes the blocks
are independent draws (the pages say so where an interval rests on it). A median's interval
is distribution-free (SciPy's `quantile_test`: order statistics), whatever the skewed times;
a mean has none, so `pooled_mean_ratio` uses SciPy's seeded paired percentile bootstrap over
the blocks, of nominal (about 95 %), not exact, coverage.
"""
import math

import numpy as np
from scipy import stats

CONFIDENCE = 0.95


def coverage(n, k):
    """P(x_(k) <= median <= x_(n+1-k)) for n independent values: 1 - 2 P(Bin(n, 1/2) < k)."""
    return 1 - 2 * stats.binom.cdf(k - 1, n, 0.5)


def median_interval(values):
    """{"median", "low", "high", "coverage", "n"} for the median of `values`: SciPy's
    order-statistics interval, or the whole range where no order statistic reaches
    CONFIDENCE (n <= 5 at 95 %), with the coverage its ends give."""
    ordered = np.sort(np.asarray(values, dtype=float))
    n = len(ordered)
    if n == 0:
        raise ValueError("no values to take a median of")
    median = float(np.median(ordered))
    ends = stats.quantile_test(ordered, q=median).confidence_interval(CONFIDENCE)
    low, high = (ordered[0], ordered[-1]) if np.isnan([ends.low, ends.high]).any() \
        else (ends.low, ends.high)
    ranks = np.arange(1, (n + 1) // 2 + 1)  # the k SciPy's ends are: the rule's own
    k = int(max(ranks[coverage(n, ranks) >= CONFIDENCE], default=1))
    return {"median": median, "estimate": median, "low": float(low), "high": float(high),
            "coverage": float(coverage(n, k)), "n": n, "method": "order statistics"}


def block_medians(blocks):
    return [float(np.median(block)) for block in blocks]


def summary(blocks):
    """The median of block medians with its interval; the fastest and slowest sample."""
    medians, every = block_medians(blocks), [t for block in blocks for t in block]
    return {**median_interval(medians), "mean": float(np.mean(medians)),
            "min": float(min(every)), "max": float(max(every)), "samples": len(every),
            # How far one block's median strays from another's: the run's own noise.
            "blockSpread": float(max(medians) / min(medians))}


BOOTSTRAP_RESAMPLES = 4000


def paired_mean_ratio(top_blocks, bottom_blocks, scale=1.0, resamples=BOOTSTRAP_RESAMPLES):
    """scale × (mean of top's block medians) / (mean of bottom's), with a paired bootstrap
    interval. For times of two kinds (processes that share the cores well, or wait out a
    time slice) the median jumps between kinds across reruns; the mean weighs each kind
    by how often it came, which is what a loop of many calls pays."""
    return pooled_mean_ratio([(top_blocks, bottom_blocks)], [scale], resamples)


def log_ratio(top, bottom):
    """log(top / bottom) for means that can be 0: 0 over 0 is log 1, x over 0 infinite."""
    top, bottom = np.asarray(top, dtype=float), np.asarray(bottom, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(top) - np.log(bottom)
    return np.where((top == 0) & (bottom == 0), 0.0, logs)


def pooled_mean_ratio(pairs, scales, resamples=BOOTSTRAP_RESAMPLES):
    """The geometric mean of scale × mean(top) / mean(bottom) over pairs that ran in the
    same blocks, one bootstrap drawing the same blocks for all. Percentile: BCa is NaN when
    every resample agrees. One block: the interval 0 to infinity, which clears no verdict."""
    sides = [np.asarray(block_medians(side)) for top_bottom in pairs for side in top_bottom]
    counts = {len(values) for values in sides}
    if len(counts) != 1:
        raise ValueError(f"paired blocks differ in number ({sorted(counts)})")
    n = counts.pop()
    if n == 0:
        raise ValueError("no blocks to take a mean ratio of")

    def pooled(*sides, axis=-1):  # sides: top, bottom, top, bottom, ...; axis: blocks
        logs = [log_ratio(scale * top.mean(axis=axis), bottom.mean(axis=axis))
                for top, bottom, scale in zip(sides[0::2], sides[1::2], scales)]
        return np.exp(np.mean(logs, axis=0))

    found = {"estimate": float(pooled(*sides)), "n": n, "pooled": len(pairs)}
    if n < 2:
        return {**found, "low": 0.0, "high": math.inf, "coverage": 1.0,
                "method": "one block: nothing to resample"}
    # SciPy's standard error, which nothing here reads, is inf - inf where a resample's
    # ratio is infinite: that NaN is not ours to warn about.
    with np.errstate(invalid="ignore"):
        result = stats.bootstrap(sides, pooled, paired=True, vectorized=True,
                                 method="percentile", n_resamples=resamples,
                                 confidence_level=CONFIDENCE, rng=np.random.default_rng(0))
    return {**found, "low": float(result.confidence_interval.low),
            "high": float(result.confidence_interval.high), "coverage": CONFIDENCE,
            "method": "SciPy's paired percentile bootstrap over blocks, "
                      f"{resamples:,} resamples"}


SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
EQUIVALENT = "equivalent"
VERDICTS = (SUPPORTED, CONTRADICTED, EQUIVALENT, INCONCLUSIVE)


# Practical significance, not noise: a factor within 25 % of 1 is never called an effect.
MARGIN = 1.25
# Fewer blocks than this leave an interval too wide to decide anything.
MIN_BLOCKS = 3


def around(value, margin=MARGIN):
    """The band a predicted value earns: within `margin` of it, as a factor."""
    return value / margin, value * margin


def verdict(interval, above=None, band=None, replicate_disagreement=None):
    """The course's one verdict (pyperf's is_significant): what an interval of `n` blocks
    says of a prediction, one of VERDICTS. With `above` (True, or False for "below"), of a
    ratio against 1: "supported" or "contradicted" when wholly beyond the margin on one side,
    "equivalent" when wholly inside it. With `band` (low, high), of a predicted value
    (`around(value)`) or a prediction's own band: "supported" when wholly inside it,
    "contradicted" when wholly outside. Otherwise "inconclusive", as it is with no interval,
    on fewer than MIN_BLOCKS blocks, or when the same configuration measured twice disagreed
    (`replicate_disagreement`, >= 1) by more than both the margin and the effect (the
    estimate's distance from 1, as a factor >= 1: 2 for 2.0 and for 0.5)."""
    if (above is None) == (band is None):
        raise TypeError("verdict() takes a direction (above=True or False) or a band")
    if interval is None or interval["n"] < MIN_BLOCKS or (
            replicate_disagreement is not None
            and replicate_disagreement > max(interval["estimate"], 1 / interval["estimate"],
                                             MARGIN)):
        return INCONCLUSIVE
    low, high = band or around(1.0)
    if low <= interval["low"] and interval["high"] <= high:
        return EQUIVALENT if band is None else SUPPORTED
    if interval["high"] < low or interval["low"] > high:
        return CONTRADICTED if band is not None or (interval["low"] > high) != above else SUPPORTED
    return INCONCLUSIVE


def words(interval, digits=2, unit="", note=""):
    """How the course prints an interval: '2.25× (94% interval 2.02–2.46; `note`)'. A
    bootstrap's, with no median, says 'about': its coverage is nominal."""
    middle, about = ((interval["median"], "") if "median" in interval
                     else (interval["estimate"], "about "))
    return (f"{middle:,.{digits}f}{unit} ({about}{interval['coverage']:.0%} interval "
            f"{interval['low']:,.{digits}f}–{interval['high']:,.{digits}f}{note})")


def host_at_start(environment, cores):
    """Whether other work kept over half the cores busy as a measurement started
    (busyCoresAtStart; in an older recording, a load above the cores), and the sentence."""
    if (busy_cores := environment.get("busyCoresAtStart")) is not None:
        busy = busy_cores > cores / 2
        said = f"other work kept {busy_cores:.1f} of the {cores} cores busy"
    elif (load := environment.get("loadAverage1m")) is not None:
        busy = load > cores
        said = f"the load average was {load:.1f} on {cores} cores"
    else:
        return {"busy": None, "busyCores": None,
                "words": "The host's load before it started was not recorded."}
    verdict = ("the host was busy, so these times also measure other work" if busy
               else "the host was otherwise idle")
    return {"busy": busy, "busyCores": busy_cores, "words": f"As it started, {said}: {verdict}."}


def host(readings, environment, own):
    """The load around a measurement (`readings`: the host before and after it, or around
    each of its blocks), and whether other work kept the cores busy as it started: the
    readings during it count its `own` processes too, so they cannot say."""
    loads, cores = [reading["loadAverage1m"] for reading in readings], readings[0]["cores"]
    start = host_at_start(environment, cores)
    low, high = f"{min(loads):.1f}", f"{max(loads):.1f}"
    load = f"was {low} to {high}" if low != high else f"was {low} at every reading"
    return {"cores": cores, "loadMin": min(loads), "loadMax": max(loads),
            "busyAtStart": start["busy"], "busyCoresAtStart": start["busyCores"],
            "words": f"While it ran, the one-minute load average {load} on {cores} cores, "
                     f"its own {own} included. {start['words']}"}

"""What the sweep's numbers mean: nccl-tests' bandwidths, alpha-beta fits, dependent steps,
and the words a page prints about them (`versus_model`, `trend`, `verdict`).

NumPy only, so the recording, the figure and the tests use it without starting JAX. Its
results are baked into recordings/<lesson>.sweep.json, so this file is an input of that
recording (scripts/outputs.py): a change here asks for `make bench`.
"""
import math

import numpy as np

from scripts.sizes import COLLECTIVES, RING_COLLECTIVES, XLA_COLLECTIVES
from scripts.units import format_bytes

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


def with_bandwidths(row):
    seconds = row["medianUs"] * 1e-6
    return {**row,
            "algbwGBps": algbw_gbps(row["bytes"], seconds),
            "busbwGBps": busbw_gbps(row["collective"], row["ranks"], row["bytes"], seconds)}


def by_series(rows, key="medianUs"):
    """{(collective, ranks): {bytes: row[key]}}."""
    series = {}
    for row in rows:
        series.setdefault((row["collective"], row["ranks"]), {})[row["bytes"]] = row[key]
    return series


def fit_rows(rows, cache_bytes):
    """fits[collective][str(ranks)], string keys so a page can address fits.all_reduce.4."""
    fits = {}
    for (collective, ranks), points in sorted(by_series(rows).items()):
        nbytes = sorted(points)
        seconds = [points[b] * 1e-6 for b in nbytes]
        fits.setdefault(collective, {})[str(ranks)] = fit_below_cache(nbytes, seconds,
                                                                      cache_bytes)
    return {c: fits[c] for c in COLLECTIVES if c in fits}


RATIOS = {  # name: (numerator, denominator, what the ring model predicts)
    "arOverRs": ("all_reduce", "reduce_scatter", 2.0),
    "agOverRs": ("all_gather", "reduce_scatter", 1.0),
    "ringArOverRingRs": ("ring_all_reduce", "ring_reduce_scatter", 2.0),
}


def time_ratios(rows, fits):
    """Per p and size, time of one collective over another's, against the ring model's
    2 (all-reduce moves twice a reduce-scatter's bytes) and 1 (all-gather the same); and
    the median ratio over the sizes where both fits put latency ahead (S < n1/2)."""
    series = by_series(rows)
    ranks = sorted({row["ranks"] for row in rows})
    by_ranks = {}
    for p in ranks:
        sizes = sorted(series.get(("reduce_scatter", p), {}))
        entry = {"bytes": sizes}
        for name, (top, bottom, _) in RATIOS.items():
            if (top, p) in series and (bottom, p) in series:
                entry[name] = [series[top, p][b] / series[bottom, p][b] for b in sizes]
                n_half = min(fits[c][str(p)]["nHalfBytes"] for c in (top, bottom))
                small = [r for b, r in zip(sizes, entry[name]) if b < n_half]
                entry[name + "BelowNHalf"] = float(np.median(small)) if small else None
        by_ranks[str(p)] = entry
    at_largest = {}
    for name, (_, _, model) in RATIOS.items():
        values = [entry[name][-1] for entry in by_ranks.values() if name in entry]
        if values:
            at_largest[name] = {"min": min(values), "max": max(values),
                                "versusModel": versus_model(values, model)}
    largest = max(row["bytes"] for row in rows)
    fastest = all(min(XLA_COLLECTIVES, key=lambda c: series[c, p][largest]) == "reduce_scatter"
                  for p in ranks if all((c, p) in series for c in XLA_COLLECTIVES))
    # XLA's collectives are one rendezvous each, so while latency dominates their time
    # ratios should be close to 1 whatever the bytes.
    latency_ratios = [entry[name] for entry in by_ranks.values()
                      for name in ("arOverRsBelowNHalf", "agOverRsBelowNHalf")
                      if entry.get(name) is not None]
    return {"model": {name: model for name, (_, _, model) in RATIOS.items()},
            "largestBytes": largest, "byRanks": by_ranks, "atLargest": at_largest,
            "reduceScatterAtLargest": ("the fastest of XLA's collectives at every p" if fastest
                                       else "not the fastest of XLA's collectives at every p"),
            "xlaBelowNHalfVersusOne": (versus_model(latency_ratios, 1.0) if latency_ratios
                                       else "not measured against")}


def versus_model(values, model, tolerance=1.25):
    """In words, for the page: are the measured ratios within 25 % of the model's?"""
    close = [model / tolerance <= v <= model * tolerance for v in values]
    return "close to" if all(close) else "far from" if not any(close) else "around"


ONE_P = "is measured at one p only"


def trend(values):
    """'falls', 'rises' or 'neither rises nor falls steadily' over values in order of p."""
    steps = [b - a for a, b in zip(values, values[1:])]
    if not steps:
        return ONE_P
    if all(d < 0 for d in steps):
        return "falls"
    if all(d > 0 for d in steps):
        return "rises"
    return "neither rises nor falls steadily"


def largest_against_cache(largest, cache_bytes):
    """Where the largest size stands against the cache, in words: only a size past the
    cache can show what main memory does, and the sizes and the host's cache both vary."""
    if not cache_bytes:
        return "of unknown size against the last-level cache"
    if largest == cache_bytes:
        return "the size of the last-level cache, not past it"
    if largest < cache_bytes:
        return "smaller than the last-level cache"
    return f"{largest / cache_bytes:.3g} times the last-level cache"


def size_labels(rows, cache_bytes, memcpy_bytes):
    """Sizes in words, so the page need not type them: the smallest moved at each p (the
    requested 8 B rounds up to p floats), the largest, the cache the fits stop at, and the
    buffer the memcpy for scale copies."""
    ranks = sorted({row["ranks"] for row in rows})
    largest = max(row["bytes"] for row in rows)
    return {"smallest": {str(p): format_bytes(min(r["bytes"] for r in rows if r["ranks"] == p))
                         for p in ranks},
            "largest": format_bytes(largest),
            "lastLevelCache": format_bytes(cache_bytes) if cache_bytes else "unknown",
            "largestAgainstCache": largest_against_cache(largest, cache_bytes),
            "memcpy": format_bytes(memcpy_bytes)}


def busbw_peaks(rows):
    """peaks[collective][str(ranks)]: the highest busbw over all sizes."""
    peaks = {}
    for (collective, ranks), values in sorted(by_series(rows, "busbwGBps").items()):
        peaks.setdefault(collective, {})[str(ranks)] = max(values.values())
    return {c: {**peaks[c], "withRanks": trend([peaks[c][p] for p in sorted(peaks[c], key=int)])}
            for c in COLLECTIVES if c in peaks}


def verdict(ring_residual, log_residual, ranks, noisy=0.5):
    """Which step count the alphas support, in words a page can print."""
    if ranks - 1 == math.log2(ranks):
        return "either (the counts are equal at this p)"
    if min(ring_residual, log_residual) > noisy:
        return "neither: too noisy to say"
    if ring_residual <= log_residual / 2:
        return "p - 1 steps per phase"
    if log_residual <= ring_residual / 2:
        return "log2 p steps per phase"
    return "no clear winner: too noisy to say"


def step_fits(fits):
    """Per p, alpha against dependent steps, counting the ring's phase as p - 1 steps (what
    it does) and as log2 p (halving-doubling's count), so the page can say which fits."""
    result = {}
    ranks = sorted({int(p) for by_p in fits.values() for p in by_p})
    for p in ranks:
        collectives = [c for c in fits if str(p) in fits[c]]
        if not any(c in RING_COLLECTIVES for c in collectives):
            continue
        alphas = [fits[c][str(p)]["alphaUs"] * 1e-6 for c in collectives]
        entry = {"ringStepsPerPhase": p - 1, "halvingDoublingSteps": math.log2(p)}
        for name, count in (("ringCount", None), ("logCount", math.log2)):
            dispatch, per_step, worst = fit_steps(alphas, collectives, p, count)
            entry[name] = {"dispatchUs": dispatch * 1e6, "perStepUs": per_step * 1e6,
                           "maxRelResidual": worst}
        # What the ring-count line says the ring all-reduce / reduce-scatter time ratio
        # must be while latency dominates: (dispatch + 2(p-1) steps) / (dispatch + p-1).
        line = entry["ringCount"]
        entry["ringArOverRsPredicted"] = ((line["dispatchUs"] + 2 * (p - 1) * line["perStepUs"])
                                          / (line["dispatchUs"] + (p - 1) * line["perStepUs"]))
        entry["ringAlphaOverXla"] = (fits["ring_reduce_scatter"][str(p)]["alphaUs"]
                                     / fits["reduce_scatter"][str(p)]["alphaUs"])
        entry["supports"] = verdict(entry["ringCount"]["maxRelResidual"],
                                    entry["logCount"]["maxRelResidual"], p)
        result[str(p)] = entry
    return result


def step_summary(steps):
    """How the cost of one step moves as p grows, in words for the page."""
    return {"perStepWithRanks": trend([steps[p]["ringCount"]["perStepUs"]
                                       for p in sorted(steps, key=int)])}


def fit_summary(fits, lesson_bytes=32):
    """Ranges over every fit, for sentences that speak of all of them at once."""
    every = [fit for by_p in fits.values() for fit in by_p.values()]
    alpha_trends = {trend([by_p[p]["alphaUs"] for p in sorted(by_p, key=int)])
                    for by_p in fits.values()}

    def span(values):
        return {"min": min(values), "max": max(values)}
    return {"maxRelResidual": span([f["maxRelResidual"] for f in every]),
            "nHalfOrderKiB": span([f["nHalfOrderKiB"] for f in every]),
            "largestOverFit": span([f["largestOverFit"] for f in every]),
            "alphaWithRanks": ("grows with p for every program" if alpha_trends == {"rises"}
                               else "does not grow with p for every program"),
            # The transfer term S / beta of the lesson's 32-byte gradient, as a share of alpha.
            "lessonBytes": lesson_bytes,
            "lessonTransferShare": max(lesson_bytes / (f["betaGBps"] * 1e3) / f["alphaUs"]
                                       for f in every if f["alphaUs"] > 0)}


def method_summary(plan, warmups):
    return {
        "warmupCalls": warmups,
        **plan,  # the timing keys of the plan, as bench.py ran it
        "timing": "jit(shard_map(...)) lowered and compiled, inputs placed, before timing; "
                  "calls per sample doubled until a trial, then the median sample, lasts "
                  "minSampleMs; samples per row: as many as fit in rowBudgetS, between "
                  "minSamples and samples; "
                  "block_until_ready on every call; per-call us = sample time / calls",
        "check": "inputs are small integers, so float32 sums are exact: wrong counts values "
                 "!= NumPy on every device's copy, for the warm-up and the last timed call",
        "bandwidth": "nccl-tests: algbw = S / median time; busbw = algbw * 2(p-1)/p for "
                     "all_reduce, reduce_scatter_all_gather and ring_all_reduce, "
                     "* (p-1)/p otherwise",
        "fit": "t = alpha + S / beta on the medians of the sizes below lastLevelCacheBytes, "
               "least squares in relative error",
        "steps": "per p: alpha = dispatch + steps * per-step through every algorithm's "
                 "alpha; steps 1 for XLA's collectives, 2 for rs+ag, and for the ring "
                 "p - 1 (or log2 p, the alternative) per phase",
    }


def analyse(rows, cache_bytes, memcpy_bytes):
    """Every field the recording derives from the measured rows: the bandwidths, the fits
    below the cache, the step counts, the ratios and the words the page prints."""
    fits = fit_rows(rows, cache_bytes)
    steps = step_fits(fits)
    rows = [with_bandwidths(row) for row in rows]
    return {"rows": rows, "fits": fits, "fitSummary": fit_summary(fits), "steps": steps,
            "stepSummary": step_summary(steps), "ratios": time_ratios(rows, fits),
            "busbwPeakGBps": busbw_peaks(rows),
            "sizeLabels": size_labels(rows, cache_bytes, memcpy_bytes)}

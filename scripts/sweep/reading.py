"""What any sweep recording says, for a lesson's analysis: its blocks (`timings`), the fault
onset, one more collective in the loop, warm and allocation-free, paired ratios, fits, and
an interval's words. The lesson hands in its own: the bytes a device's output holds
(`output_over_s`), its labels.
"""
import numpy as np

from scripts import intervals
from scripts.sweep.analysis import (algbw_gbps, bus_factor, fit_alpha_beta,
                                    one_significant_figure, worst_miss)
from scripts.sweep.analysis import timings as timings  # where a lesson's reading starts
from scripts.units import format_bytes

# A call "faults in its outputs" when its faults cover this share of its p outputs' bytes:
# most, on every call. Below it the allocator returns some outputs' memory some of the time.
FAULTED_SHARE = 0.75
# One more in the loop is allocation-free where the looped and the single call faulted
# apart by at most this share of the outputs per extra collective: a fault costs up to ~3x
# what a collective spends on a page of output (an earlier 32 MiB sweep), so what such a
# difference adds stays within ~15 %, inside the 25 % margin.
ALLOCATION_FREE = 0.05


def warm_costs(t, key):
    """t.extra(key), None in a block where the two calls faulted apart: its difference holds
    that allocation too."""
    return [cost if abs(t.faulted_share(key, faults)) <= ALLOCATION_FREE else None
            for cost, faults in zip(t.extra(key), t.extra(key, faults=True))]


def median_of_blocks(blocks):
    return float(np.median(intervals.block_medians(blocks)))


def faulted_in_part(t, key):
    """Per block, whether single calls at `key` faulted in over ALLOCATION_FREE (median)."""
    return [t.faulted_share(key, float(np.median(block))) > ALLOCATION_FREE
            for block in t.call_faults[key]]


def onsets(t):
    """{(collective, p): the smallest size from which its calls fault in FAULTED_SHARE of
    their outputs at every larger size too (median block), or None}. The smallest of them is
    the onset, where the allocator starts to set the time."""
    series = {}
    for (collective, ranks, nbytes), blocks in sorted(t.call_faults.items()):
        share = t.faulted_share((collective, ranks, nbytes), median_of_blocks(blocks))
        series.setdefault((collective, ranks), []).append((nbytes, share >= FAULTED_SHARE))
    return {name: next((nbytes for index, (nbytes, _) in enumerate(sizes)
                        if all(faulted for _, faulted in sizes[index:])), None)
            for name, sizes in series.items()}


def onset_words(found, sizes, labels):
    """The onset in words: from which size, whose calls fault there, and from where others'."""
    starts = sorted({start for start in found.values() if start is not None})
    if not starts:
        return "no program's calls fault in their outputs from any size up: there is no onset"
    ranks, programs = sorted({p for _, p in found}), {}  # at which p: whose calls fault
    for collective in labels:
        if ps := [p for p in ranks if found.get((collective, p)) == starts[0]]:
            at = "every p" if ps == ranks else f"p = {listed([str(p) for p in ps])}"
            programs.setdefault(at, []).append(f"the {labels[collective]}")
    who = "every program at every p" if set(found.values()) == {starts[0]} else \
        "; ".join(f"{listed(named)} at {at}" for at, named in programs.items())
    count = sum(nbytes >= starts[0] for nbytes in sizes)
    first = format_bytes(starts[0])
    return ((f"only at {first}, the largest size," if count == 1 else
             f"from {first} up ({count} sizes),") + f" the calls of {who} fault in their outputs"
            + (f", some others' from {format_bytes(starts[1])}" if starts[1:] else "")
            + f": {first} is the onset")


def kept_interval(values):
    """median_interval of the values of the blocks kept (not None), or None if none is."""
    kept = [value for value in values if value is not None]
    return intervals.median_interval(kept) if kept else None


def paired_ratio(tops, bottoms):
    """(median_interval or None, blocks used) of top / bottom, block by block, where both
    are kept and positive (a cost at or below zero is noise between two timings)."""
    ratios = [top / bottom for top, bottom in zip(tops, bottoms)
              if top is not None and bottom is not None and top > 0 and bottom > 0]
    return (intervals.median_interval(ratios) if ratios else None), len(ratios)


def points(t, programs):
    """Per (collective, p, S) of single calls: the median of block medians with its interval,
    the extremes, nccl-tests' bandwidths (`programs`' `phases`), and the faults per call."""
    out = []
    for (collective, ranks, nbytes), found in sorted(t.calls.items()):
        stat = intervals.summary(found)
        algbw = algbw_gbps(nbytes, stat["median"] * 1e-6)
        phases = programs[str(ranks)][collective]["phases"]
        out.append({"collective": collective, "ranks": ranks, "bytes": nbytes,
                    "faultsPerCall": median_of_blocks(t.call_faults[collective, ranks, nbytes]),
                    "medianUs": stat["median"], "lowUs": stat["low"], "highUs": stat["high"],
                    "coverage": stat["coverage"], "minUs": stat["min"], "maxUs": stat["max"],
                    "blockSpread": stat["blockSpread"], "algbwGBps": algbw,
                    "busbwGBps": algbw * bus_factor(phases, ranks)})
    return out


def fit_one(sizes, medians, boundary):
    """(alpha, beta, sizes fitted) over the sizes below `boundary` (None: every size), at
    least three."""
    s, t = np.asarray(sizes, dtype=float), np.asarray(medians, dtype=float) * 1e-6
    inside = s < boundary if boundary else np.ones_like(s, dtype=bool)
    if inside.sum() < 3:
        inside[:3] = True  # fewer than three sizes fit: fit the three smallest
    alpha, beta = fit_alpha_beta(s[inside], t[inside])
    return alpha, beta, [size for size, keep in zip(sizes, inside) if keep]


def fits(blocks, points_by_series, boundary=None):
    """fits[collective][str(p)]: the fit of the medians, alpha's interval from the same fit
    block by block, below the fault onset `boundary` (past it, the allocator counts too)."""
    result = {}
    for (collective, ranks), series in sorted(points_by_series.items()):
        sizes = sorted(series)
        medians = [series[s]["medianUs"] for s in sizes]
        alpha, beta, fitted = fit_one(sizes, medians, boundary)
        per_block = [fit_one(sizes, intervals.block_medians(by_size), boundary)[0] * 1e6
                     for by_size in zip(*(blocks[collective, ranks, s] for s in sizes),
                                        strict=True)]
        result.setdefault(collective, {})[str(ranks)] = {
            "alphaUs": alpha * 1e6, "alpha": intervals.median_interval(per_block),
            "alphaByBlockUs": per_block, "betaGBps": beta / 1e9 if beta else None,
            # alpha x beta to one significant figure: misses of tens of per cent leave
            # no more digits worth printing, and a power of ten would show 2x as 10x.
            "nHalfKiB": one_significant_figure(alpha * beta / 1024) if beta else None,
            "fittedSizes": len(fitted), "fitMaxBytes": int(max(fitted)),
            "maxRelResidual": worst_miss(fitted, [series[s]["medianUs"] * 1e-6 for s in fitted],
                                         alpha, 1 / beta if beta else 0.0),
            "largestOverFit": medians[-1] * 1e-6 / (alpha + sizes[-1] / beta if beta else alpha)}
    return result


def host(recording):
    """The load around every block; a sweep that started on a busy host says what that does."""
    readings = [reading for block in recording["hosts"] for reading in
                (block["before"], block["after"])]
    found = intervals.host(readings, recording["environment"], "workers")
    if found["busyAtStart"]:
        found["words"] += " A trend with p may then be the scheduler's rather than the runtime's."
    return found


def verdict_counts(*groups):
    words = [item["verdict"] for group in groups for item in group if item.get("verdict")]
    return {word: words.count(word) for word in intervals.VERDICTS}


# --- the words an interval is printed in -------------------------------------------------

def figures(value):
    """`value` to two significant figures, never fewer digits than its integer part."""
    return f"{value:,.{max(0, 1 - int(np.floor(np.log10(abs(value)))))}f}" if value else "0"


def span_words(low, high, unit=""):
    """'7.5–8.5 µs', or one number where both ends print the same."""
    low, high = figures(low), figures(high)
    return f"{low}{unit}" if low == high else f"{low}–{high}{unit}"


def span(values):
    return {"min": min(values), "max": max(values)} if values else {"min": None, "max": None}


def times_words(factor):
    """'4.6×', or a dash where the loop's difference left no positive cost to divide by."""
    return "—" if factor is None or factor <= 0 else f"{factor:.1f}×"


def listed(items):
    """'a', 'a and b', 'a, b and c'."""
    return " and ".join(items) if len(items) < 3 else f"{', '.join(items[:-1])} and {items[-1]}"


def blocks_words(used, total):
    """'' when every block counts, else '; 4 of 5 blocks': appended inside an interval."""
    return "" if used == total else f"; {used} of {total} blocks"


def bracket(low, high, stat, used, total):
    """'(4.6–5.9)' when every block counts, else '(75% interval 4.6–5.9; 3 of 5 blocks)':
    an interval of fewer blocks covers its median less often, and says so."""
    if used == total:
        return f"({low}–{high})"
    return f"({stat['coverage']:.0%} interval {low}–{high}{blocks_words(used, total)})"


def ratio_words(ratio, total=None):
    """'2.25 (94% interval 2.02–2.46)', saying how many blocks it rests on when not all."""
    if not ratio["n"]:
        return f"no block of {total} allocation-free for both"
    return intervals.words(ratio, note=blocks_words(ratio["n"], total) if total else "")

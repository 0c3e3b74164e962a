"""What the sweep's page faults say: where the allocator starts to set the time, and what
one collective costs once its buffers are reused.

Part of distributed-03's sweep analysis (lesson_code/distributed_03_sweep_analysis.py),
from the recording alone. Every sample row keeps the minor page faults its calls took;
every program was timed twice in each block, one collective per call (a fresh output
each call) and `collectivesPerCall` of them in one loop (the loop's buffers allocated
once per call and reused). Each block measured both in the same turn of their size, so
the difference of the two, taken block by block, is what one more collective costs with
nothing allocated and nothing dispatched: its own cost.
"""
import numpy as np

from scripts import intervals
from scripts.sweep.analysis import block_differences, grouped
from scripts.units import format_bytes

# A fault maps one page; a call "faults in its outputs" when its faults cover at least
# this share of the bytes its p devices' outputs hold: most of them, on every call. Below
# that the allocator hands back some outputs' memory some of the time, and the counts
# move from block to block.
FAULTED_SHARE = 0.75
# Donation "took the faults away" when the donated calls faulted under half as much.
REMOVED_BELOW = 0.5


def output_over_s(collective, ranks):
    """Bytes each device's output holds, as a multiple of S: a reduce-scatter's is its
    block of the sum, every other program's the whole array (the ring all-reduce's too,
    one row per device)."""
    return 1 / ranks if collective in ("reduce_scatter", "ring_reduce_scatter") else 1.0


def median_of_blocks(blocks):
    return float(np.median(intervals.block_medians(blocks)))


def faulted_share(collective, ranks, nbytes, faults_per_call, page_bytes):
    """The share of its p outputs' bytes a call faulted in afresh (1.0: all of them)."""
    return faults_per_call * page_bytes / (ranks * output_over_s(collective, ranks) * nbytes)


def onset(fault_blocks, page_bytes):
    """The smallest size from which some program, one collective per call, faults in at
    least FAULTED_SHARE of its outputs at that size and every larger one (median block):
    where the allocator starts to set the time. Stray faults of the runtime at a tiny
    size, where one page outweighs the output, do not count: larger sizes must agree.
    None when no program does."""
    found, series = [], {}
    for (collective, ranks, nbytes), blocks in fault_blocks.items():
        share = faulted_share(collective, ranks, nbytes, median_of_blocks(blocks), page_bytes)
        series.setdefault((collective, ranks), []).append((nbytes, share))
    for points in series.values():
        points.sort()
        for index, (nbytes, _) in enumerate(points):
            if all(share >= FAULTED_SHARE for _, share in points[index:]):
                found.append(nbytes)
                break
    return min(found, default=None)


def block_ratios(top_values, bottom_values):
    """median_interval of the block-by-block ratios (None when no bottom is positive)."""
    ratios = [top / bottom for top, bottom in zip(top_values, bottom_values) if bottom > 0]
    return intervals.median_interval(ratios) if ratios else None


def program_at(collective, ranks, nbytes, data, looping, page_bytes):
    """One program at one size: per call and one more inside the loop, times and faults."""
    calls, loops, call_faults, loop_faults = data
    key = (collective, ranks, nbytes)
    faults = median_of_blocks(call_faults[key])
    extra_faults = float(np.median(block_differences(loop_faults[key], call_faults[key],
                                                     looping)))
    call = median_of_blocks(calls[key])
    extra = intervals.median_interval(block_differences(loops[key], calls[key], looping))
    # A cost is never below zero: a negative difference is the noise between the timings.
    shown = [max(extra[key], 0.0) for key in ("median", "low", "high")]
    return {"callUs": call, "callFaults": faults,
            "faultedShare": faulted_share(collective, ranks, nbytes, faults, page_bytes),
            "extra": extra, "extraFaults": max(extra_faults, 0.0),
            "extraWords": f"{shown[0]:,.0f} ({shown[1]:,.0f}–{shown[2]:,.0f})",
            "callOverExtra": call / extra["median"] if extra["median"] > 0 else None,
            "callOverExtraWords": times_words(call / extra["median"]
                                              if extra["median"] > 0 else None)}


def steps(collective, ranks, small, large, data, looping):
    """How much longer the program takes at `large` than at `small`, per call and for one
    more collective in the loop, block by block (the bytes grow large / small)."""
    calls, loops, _, _ = data
    low, high = (collective, ranks, small), (collective, ranks, large)
    per_call = block_ratios([float(np.median(b)) for b in calls[high]],
                            [float(np.median(b)) for b in calls[low]])
    extra = block_ratios(block_differences(loops[high], calls[high], looping),
                         block_differences(loops[low], calls[low], looping))
    return {"perCall": per_call["median"], "perCallInterval": per_call,
            "extra": extra["median"] if extra else None, "extraInterval": extra,
            "perCallWords": times_words(per_call["median"]),
            "extraWords": times_words(extra["median"] if extra else None)}


def times_words(factor):
    """'4.6×', or a dash where the loop's difference left no positive cost to divide by."""
    return "—" if factor is None or factor <= 0 else f"{factor:.1f}×"


def donation(probes, page_bytes):
    """Per p, what donating the input did: the faults per call kept and donated (median
    of the probe's calls), the compiled program's aliased and scratch bytes as multiples
    of S, and whether donation took the faults away (below REMOVED_BELOW of the kept)."""
    result = {}
    for probe in probes:
        kept = float(np.median(probe["kept"]["faultsPerCall"]))
        donated = float(np.median(probe["donated"]["faultsPerCall"]))
        nbytes = probe["bytes"]
        removed = donated < REMOVED_BELOW * kept
        result[str(probe["ranks"])] = {
            "bytes": nbytes, "keptFaults": kept, "donatedFaults": donated,
            "keptFaultedOverS": kept * page_bytes / nbytes,
            "donatedFaultedOverS": donated * page_bytes / nbytes,
            "aliasOverS": probe["donated"]["aliasBytes"] / nbytes,
            "tempOverS": probe["donated"]["tempBytes"] / nbytes,
            "keptTempOverS": probe["kept"]["tempBytes"] / nbytes,
            "words": "took the faults away" if removed else "left the faults as they were"}
    return result


def dispatch_share(data, ranks_list, collectives, looping):
    """At each p's smallest size: one more collective in the loop over a whole call, per
    program; the rest of a call is paid once per call (dispatch, the call's set-up)."""
    calls, loops, _, _ = data
    shares = []
    for ranks in ranks_list:
        smallest = min(nbytes for (_, p, nbytes) in calls if p == ranks)
        for collective in collectives:
            key = (collective, ranks, smallest)
            if key in loops:
                extra = np.median(block_differences(loops[key], calls[key], looping))
                # Below zero is noise: one more collective costs at least nothing.
                shares.append(max(float(extra), 0.0) / median_of_blocks(calls[key]))
    low, high = min(shares), max(shares)
    return {"min": low, "max": high,
            "words": (f"one more collective inside the loop costs {low:.0%} to {high:.0%} "
                      f"of a whole call")}


def analyse_faults(recording, ranks_list, collectives, largest):
    """Everything the page says about faults: the onset, the size the ratios stand at,
    each program at the largest size per call and in the loop, the step into the largest
    size, what donation did, and how much of a small call is the collective."""
    rows, page_bytes = recording["rows"], recording["pageBytes"]
    data = (grouped(rows, False, "samplesUs"), grouped(rows, True, "samplesUs"),
            grouped(rows, False, "minorFaults"), grouped(rows, True, "minorFaults"))
    looping = next(row["collectivesPerCall"] for row in rows if row["collectivesPerCall"] > 1)
    start = onset(data[2], page_bytes)
    common = set.intersection(*({nbytes for (_, p, nbytes) in data[0] if p == ranks}
                                for ranks in ranks_list))
    below = sorted(nbytes for nbytes in common if start is None or nbytes < start)
    ratio_bytes = below[-1] if below else min(common)
    at_largest = {str(p): {c: program_at(c, p, largest, data, looping, page_bytes)
                           for c in collectives} for p in ranks_list}
    step = {str(p): {c: steps(c, p, ratio_bytes, largest, data, looping)
                     for c in collectives} for p in ranks_list} \
        if ratio_bytes != largest else {}
    every = [entry for by_c in at_largest.values() for entry in by_c.values()]
    return {
        "collectivesPerCall": looping, "pageBytes": page_bytes, "faultedShare": FAULTED_SHARE,
        "onsetBytes": start, "ratioBytes": ratio_bytes, "bytesStep": largest / ratio_bytes,
        "labels": {"onset": format_bytes(start) if start else "none",
                   "ratio": format_bytes(ratio_bytes)},
        "onsetWords": (f"from {format_bytes(start)} up, at every size, some program's calls "
                       f"do that; that size is the onset" if start else
                       "no program's calls do that from any size up: there is no onset"),
        "atLargest": at_largest, "step": step,
        "largestFaultedShare": {"min": min(e["faultedShare"] for e in every),
                                "max": max(e["faultedShare"] for e in every)},
        "donation": donation(recording["donation"], page_bytes),
        "smallestCall": dispatch_share(data, ranks_list, collectives, looping)}

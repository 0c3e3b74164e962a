"""What the sweep's page faults say: where the allocator starts to set a call's time, what
a warm, allocation-free collective costs, and what keeping freed memory changes.

Part of distributed-03's sweep analysis (lesson_code/distributed_03_sweep_analysis.py),
from the recording alone. Every sample keeps the minor page faults its calls took. Every
program was timed twice in each block, in the same turn: one collective per call (a fresh
output each call) and `collectivesPerCall` of them in one loop (its buffers allocated once
per call, then reused). Their difference over the loop's extra collectives is one more
collective with its buffers warm and nothing dispatched; where the two calls faulted alike
it holds no allocation either.
"""
from dataclasses import dataclass

import numpy as np

from scripts import intervals
from scripts.sweep.analysis import block_differences, grouped
from scripts.units import format_bytes

# A fault maps one page; a call "faults in its outputs" when its faults cover at least
# this share of the bytes its p devices' outputs hold: most of them, on every call. Below
# that the allocator hands back some outputs' memory some of the time, and the counts
# move from block to block.
FAULTED_SHARE = 0.75
# One more in the loop is allocation-free in a block when the loop's call and the single
# call faulted alike: apart by at most this share of the outputs per extra collective. A
# fault costs up to about three times what a collective spends on a page of its output
# (in an earlier sweep at 32 MiB: a call, less one more in the loop, over its faults), so
# what such a difference adds stays within about 15 %, inside the 25 % margin.
ALLOCATION_FREE = 0.05
# Fewer blocks than this leave an interval too wide to decide anything: inconclusive.
MIN_BLOCKS = 3
# Donation "took the faults away" when the donated calls faulted under half as much.
REMOVED_BELOW = 0.5
# XLA's own one-step collectives: what a training step's jitted program calls.
XLA_COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather")


@dataclass(frozen=True)
class Timings:
    """A sweep's rows as scripts/sweep/analysis.grouped keys them, (collective, p, S):
    per call and looped, times and faults per call, every block in order."""
    calls: dict
    loops: dict
    call_faults: dict
    loop_faults: dict
    looping: int
    page_bytes: int


def timings(recording):
    rows = recording["rows"]
    return Timings(grouped(rows, False, "samplesUs"), grouped(rows, True, "samplesUs"),
                   grouped(rows, False, "minorFaults"), grouped(rows, True, "minorFaults"),
                   next(row["collectivesPerCall"] for row in rows
                        if row["collectivesPerCall"] > 1), recording["pageBytes"])


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


def faulted_in_part(t, key):
    """Per block, whether one-collective calls at `key` still faulted in more than
    ALLOCATION_FREE of their outputs (median of the block's samples)."""
    return [faulted_share(*key, float(np.median(block)), t.page_bytes) > ALLOCATION_FREE
            for block in t.call_faults[key]]


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


def onset_words(start, sizes):
    """The onset in words, as many sizes as lie at or above it."""
    if start is None:
        return "no program's calls fault in their outputs from any size up: there is no onset"
    if start == max(sizes):
        return (f"only at {format_bytes(start)}, the largest size, do some program's calls "
                f"fault in their outputs: it is the onset")
    count = sum(nbytes >= start for nbytes in sizes)
    return (f"from {format_bytes(start)} up, at each of the {count} sizes measured there, "
            f"some program's calls fault in their outputs: {format_bytes(start)} is the onset")


def warm_costs(t, key):
    """One more collective in the loop, block by block (us), None in a block where it was
    not allocation-free: there the two calls faulted apart, and the difference holds that
    allocation too."""
    collective, ranks, nbytes = key
    faults = block_differences(t.loop_faults[key], t.call_faults[key], t.looping)
    return [cost if abs(faulted_share(collective, ranks, nbytes, extra, t.page_bytes))
            <= ALLOCATION_FREE else None
            for cost, extra in zip(block_differences(t.loops[key], t.calls[key], t.looping),
                                   faults)]


def kept_interval(values):
    """median_interval of the values of the blocks kept (not None), or None if none is."""
    kept = [value for value in values if value is not None]
    return intervals.median_interval(kept) if kept else None


def paired_ratio(tops, bottoms):
    """Block by block top / bottom over the blocks where both are kept and positive (a
    cost at or below zero is the noise between two timings, not a cost):
    (median_interval or None, blocks used)."""
    ratios = [top / bottom for top, bottom in zip(tops, bottoms)
              if top is not None and bottom is not None and top > 0 and bottom > 0]
    return (intervals.median_interval(ratios) if ratios else None), len(ratios)


def judged(ratio, predicted_above_one=True):
    """intervals.verdict under the pages' rule: inconclusive with no interval, or with one
    resting on fewer than MIN_BLOCKS blocks."""
    if ratio is None or ratio["n"] < MIN_BLOCKS:
        return intervals.INCONCLUSIVE
    return intervals.verdict(ratio, predicted_above_one)


def blocks_words(used, total):
    """'' when every block counts, else '; 4 of 5 blocks': appended inside an interval."""
    return "" if used == total else f"; {used} of {total} blocks"


def bracket(low, high, stat, used, total):
    """'(4.6–5.9)' when every block counts, else '(75% interval 4.6–5.9; 3 of 5 blocks)':
    an interval of fewer blocks covers its median less often, and says so."""
    if used == total:
        return f"({low}–{high})"
    return f"({stat['coverage']:.0%} interval {low}–{high}{blocks_words(used, total)})"


def figures(value):
    """`value` to two significant figures, never fewer digits than its integer part."""
    return f"{value:,.{max(0, 1 - int(np.floor(np.log10(abs(value)))))}f}" if value else "0"


def span_words(low, high, unit=""):
    """'7.5–8.5 µs', or one number where both ends print the same."""
    low, high = figures(low), figures(high)
    return f"{low}{unit}" if low == high else f"{low}–{high}{unit}"


def program_at(key, t):
    """One program at one size: a whole call, and one more warm, allocation-free
    collective in the loop, times and faults."""
    collective, ranks, nbytes = key
    faults = median_of_blocks(t.call_faults[key])
    extra_faults = float(np.median(block_differences(t.loop_faults[key], t.call_faults[key],
                                                     t.looping)))
    call = median_of_blocks(t.calls[key])
    costs = warm_costs(t, key)
    extra = kept_interval(costs)
    used = sum(cost is not None for cost in costs)
    # A cost is never below zero: a negative difference is the noise between the timings.
    shown = [max(extra[name], 0.0) for name in ("median", "low", "high")] if extra else None
    over = call / extra["median"] if extra and extra["median"] > 0 else None
    return {"callUs": call, "callFaults": faults,
            "faultedShare": faulted_share(collective, ranks, nbytes, faults, t.page_bytes),
            "extra": extra, "extraFaults": max(extra_faults, 0.0), "extraBlocks": used,
            "extraWords": (f"{shown[0]:,.0f} " + bracket(f"{shown[1]:,.0f}", f"{shown[2]:,.0f}",
                                                          extra, used, len(costs)) if shown
                           else "no block allocation-free"),
            "callOverExtra": over, "callOverExtraWords": times_words(over)}


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


def listed(items):
    """'a', 'a and b', 'a, b and c'."""
    return " and ".join(items) if len(items) < 3 else f"{', '.join(items[:-1])} and {items[-1]}"


def donation_words(table):
    """Every p's probe in two sentences: the donated calls' faults against those of the
    program not donated, and the scratch the donated program reserves in place of an
    output, which a call maps afresh as it would an output."""
    if not table:
        return "This recording holds no donation probe"
    ranks = sorted(table, key=int)

    def each(field, digits):
        values = [f"{table[p][field]:.{digits}f}" for p in ranks]
        return values[0] if len(set(values)) == 1 else listed(values)
    scratch = each("tempOverS", 0)
    every = f"p = {listed(ranks)}" if " and " in scratch else "every p"
    return (f"At p = {listed(ranks)} the donated calls faulted in "
            f"{each('donatedFaultedOverS', 1)} × S, against {each('keptFaultedOverS', 1)} × S "
            f"not donated. At {every} the donated program reserves "
            f"{scratch} × S of scratch, the one not donated "
            f"{each('keptTempOverS', 0)} × S: memory a donated call can fault in afresh, as "
            f"the other faults in its output")


def by_block(rows, field):
    """{(collective, p, S): {block: median per call}} of one-collective rows."""
    found = {}
    for row in rows:
        values = row[field] if field == "samplesUs" else \
            [faults / row["callsPerSample"] for faults in row[field]]
        key = (row["collective"], row["ranks"], row["bytes"])
        found.setdefault(key, {})[row["block"]] = float(np.median(values))
    return found


def keep_freed(recording, ranks_list):
    """What telling glibc's malloc to keep freed memory did (the recording's `allocator`
    probes): per p and program at the largest size, a call's faults and time as the sweep
    ran it and with the setting, in the same blocks, and whether the calls got faster."""
    probes = recording.get("allocator") or []
    if not probes:  # an empty table on the page until `make bench` records the probe
        return {"byRanks": {str(p): {} for p in ranks_list}, "programs": [], "verdicts": [],
                "words": "this recording holds no such run (`make bench` records one)"}
    rows = [row for row in recording["rows"] if row["collectivesPerCall"] == 1]
    kept_rows = [row for probe in probes for row in probe["rows"]]
    times = by_block(rows, "samplesUs"), by_block(kept_rows, "samplesUs")
    faults = by_block(rows, "minorFaults"), by_block(kept_rows, "minorFaults")
    found = {}
    for key in times[1]:
        collective, ranks, nbytes = key
        blocks = sorted(set(times[0][key]) & set(times[1][key]))
        ratio = intervals.median_interval([times[0][key][b] / times[1][key][b] for b in blocks])
        shares = [faulted_share(collective, ranks, nbytes,
                                float(np.median([side[key][b] for b in blocks])),
                                recording["pageBytes"]) for side in faults]
        found.setdefault(str(ranks), {})[collective] = {
            "faultedShare": shares[0], "keptFaultedShare": shares[1],
            "callUs": float(np.median([times[0][key][b] for b in blocks])),
            "keptCallUs": float(np.median([times[1][key][b] for b in blocks])),
            "fasterWords": (f"{ratio['median']:.1f}× ({ratio['coverage']:.0%} interval "
                            f"{ratio['low']:.1f}–{ratio['high']:.1f}"
                            f"{blocks_words(len(blocks), len(times[0][key]))})"),
            "n": len(blocks), "verdict": judged({**ratio, "n": len(blocks)})}
    every = [entry for by_program in found.values() for entry in by_program.values()]
    # The median block hides a sample that still faulted: count those too.
    samples = [faulted_share(row["collective"], row["ranks"], row["bytes"],
                             count / row["callsPerSample"], recording["pageBytes"])
               for row in kept_rows for count in row["minorFaults"]]
    faulted = [share for share in samples if share > ALLOCATION_FREE]
    return {"byRanks": found,
            "programs": list(dict.fromkeys(row["collective"] for row in kept_rows)),
            "glibc": probes[0]["glibc"], "mallopt": probes[0]["mallopt"],
            "verdicts": [entry["verdict"] for entry in every], "faultedSamples": len(faulted),
            "words": (f"in the median block no program faulted in more than "
                      f"{max(entry['keptFaultedShare'] for entry in every):.0%} of its outputs, "
                      f"against up to {max(entry['faultedShare'] for entry in every):.0%} as "
                      f"the sweep ran them; "
                      + (f"still, {len(faulted)} of the {len(samples)} timed samples faulted in "
                         f"{span_words(100 * min(faulted), 100 * max(faulted), '%')} of theirs"
                         if faulted else f"none of the {len(samples)} timed samples faulted "
                                         f"in more than {ALLOCATION_FREE:.0%} of its outputs"))}


def smallest_call(t, ranks_list):
    """At each p's smallest size, XLA's own collectives: one more in the loop (us, median
    of the blocks) and its share of a whole call. The rest of a call is paid once per call
    (dispatch, the call's set-up), however many collectives its program runs."""
    by_ranks = {}
    for ranks in ranks_list:
        smallest = min(nbytes for (_, p, nbytes) in t.calls if p == ranks)
        extras, shares = [], []
        for collective in XLA_COLLECTIVES:
            key = (collective, ranks, smallest)
            if key in t.loops:
                extra = np.median(block_differences(t.loops[key], t.calls[key], t.looping))
                # Below zero is noise: one more collective costs at least nothing.
                extras.append(max(float(extra), 0.0))
                shares.append(extras[-1] / median_of_blocks(t.calls[key]))
        if extras:
            by_ranks[str(ranks)] = {"bytes": smallest, "extraUs": span(extras),
                                    "share": span(shares)}
    said = [f"{span_words(100 * e['share']['min'], 100 * e['share']['max'], '%')} at p = {p}"
            for p, e in by_ranks.items()]
    return {"byRanks": by_ranks, "words": f"one more all-reduce, reduce-scatter or all-gather "
                                          f"inside the loop costs, of a whole call, "
                                          f"{listed(said)}"}


def span(values):
    return {"min": min(values), "max": max(values)} if values else {"min": None, "max": None}


def analyse_faults(recording, t, ranks_list, collectives, largest):
    """What the pages say about faults: the onset and the largest size below it, each
    program at the largest size per call and warm in the loop, what donation and keeping
    freed memory did, and how much of a small call is the collective."""
    start = onset(t.call_faults, t.page_bytes)
    common = set.intersection(*({nbytes for (_, p, nbytes) in t.calls if p == ranks}
                                for ranks in ranks_list))
    below = sorted(nbytes for nbytes in common if start is None or nbytes < start)
    below_onset = below[-1] if below else min(common)
    at_largest = {str(p): {c: program_at((c, p, largest), t) for c in collectives}
                  for p in ranks_list}
    every = [entry for by_c in at_largest.values() for entry in by_c.values()]
    return {
        "collectivesPerCall": t.looping, "pageBytes": t.page_bytes,
        "faultedShare": FAULTED_SHARE, "allocationFree": ALLOCATION_FREE,
        "onsetBytes": start, "belowOnsetBytes": below_onset,
        "labels": {"onset": format_bytes(start) if start else "none",
                   "belowOnset": format_bytes(below_onset)},
        "onsetWords": onset_words(start, sorted(common)),
        "atLargest": at_largest,
        "largestFaultedShare": {"min": min(e["faultedShare"] for e in every),
                                "max": max(e["faultedShare"] for e in every)},
        "donation": (table := donation(recording["donation"], t.page_bytes)),
        "donationWords": donation_words(table),
        "keepFreed": keep_freed(recording, ranks_list),
        "smallestCall": smallest_call(t, ranks_list)}

"""What the sweep's page faults say on the allocator page (analyse_faults), for
distributed-03's sweep analysis (distributed_03_sweep_analysis.py); what any sweep's faults
say (the onset, a warm, allocation-free collective) is the course's, scripts/sweep/reading.py.
"""
import numpy as np

from scripts import intervals
from scripts.sweep.reading import (ALLOCATION_FREE, FAULTED_SHARE, blocks_words, bracket,
                                   kept_interval, listed, median_of_blocks, onset_words, onsets,
                                   span, span_words, times_words, warm_costs)
from scripts.units import format_bytes

# Donation "took the faults away" when the donated calls faulted under half as much.
REMOVED_BELOW = 0.5
# XLA's own one-step collectives: what a training step's jitted program calls.
XLA_COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather")


def output_over_s(collective, ranks):
    """Bytes each device's output holds, as a multiple of S: a reduce-scatter's is its
    block of the sum, every other program's the whole array (the ring all-reduce's too,
    one row per device)."""
    return 1 / ranks if collective in ("reduce_scatter", "ring_reduce_scatter") else 1.0


def program_at(key, t):
    """One program at one size: a whole call, and one more warm, allocation-free
    collective in the loop, times and faults."""
    faults = median_of_blocks(t.call_faults[key])
    extra_faults = float(np.median(t.extra(key, faults=True)))
    call = median_of_blocks(t.calls[key])
    costs = warm_costs(t, key)
    extra = kept_interval(costs)
    used = sum(cost is not None for cost in costs)
    # A cost is never below zero: a negative difference is the noise between the timings.
    shown = [max(extra[name], 0.0) for name in ("median", "low", "high")] if extra else None
    over = call / extra["median"] if extra and extra["median"] > 0 else None
    return {"callUs": call, "callFaults": faults, "faultedShare": t.faulted_share(key, faults),
            "extra": extra, "extraFaults": max(extra_faults, 0.0), "extraBlocks": used,
            "extraWords": (f"{shown[0]:,.0f} " + bracket(f"{shown[1]:,.0f}", f"{shown[2]:,.0f}",
                                                          extra, used, len(costs)) if shown
                           else "no block allocation-free"),
            "callOverExtra": over, "callOverExtraWords": times_words(over)}


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


def keep_freed(recording, t, ranks_list):
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
        collective, ranks, _ = key
        blocks = sorted(set(times[0][key]) & set(times[1][key]))
        ratio = intervals.median_interval([times[0][key][b] / times[1][key][b] for b in blocks])
        shares = [t.faulted_share(key, float(np.median([side[key][b] for b in blocks])))
                  for side in faults]
        found.setdefault(str(ranks), {})[collective] = {
            "faultedShare": shares[0], "keptFaultedShare": shares[1],
            "callUs": float(np.median([times[0][key][b] for b in blocks])),
            "keptCallUs": float(np.median([times[1][key][b] for b in blocks])),
            "fasterWords": intervals.words(ratio, 1, "×",
                                           blocks_words(len(blocks), len(times[0][key]))),
            "n": len(blocks), "verdict": intervals.verdict(ratio, above=True)}
    every = [entry for by_program in found.values() for entry in by_program.values()]
    # The median block hides a sample that still faulted: count those too.
    samples = [t.faulted_share((row["collective"], row["ranks"], row["bytes"]),
                               count / row["callsPerSample"])
               for row in kept_rows for count in row["minorFaults"]]
    faulted = [share for share in samples if share > ALLOCATION_FREE]
    kept = max(entry["keptFaultedShare"] for entry in every)
    most = "under 1%" if kept < 0.005 else f"at most {kept:.0%}"  # never "more than 0%"
    return {"byRanks": found,
            "programs": list(dict.fromkeys(row["collective"] for row in kept_rows)),
            "glibc": probes[0]["glibc"], "mallopt": probes[0]["mallopt"],
            "verdicts": [entry["verdict"] for entry in every], "faultedSamples": len(faulted),
            "words": (f"in the median block each program faulted in {most} of its outputs, "
                      f"against up to {max(entry['faultedShare'] for entry in every):.0%} as "
                      f"the sweep ran them. "
                      + (f"Still, {len(faulted)} of the {len(samples)} timed samples faulted in "
                         f"{span_words(100 * min(faulted), 100 * max(faulted), '%')} of theirs"
                         if faulted else f"None of the {len(samples)} timed samples faulted "
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
                extra = np.median(t.extra(key))
                # Below zero is noise: one more collective costs at least nothing.
                extras.append(max(float(extra), 0.0))
                shares.append(extras[-1] / median_of_blocks(t.calls[key]))
        if extras:
            by_ranks[str(ranks)] = {"bytes": smallest, "extraUs": span(extras),
                                    "share": span(shares), "label": format_bytes(smallest),
                                    "extraWords": span_words(min(extras), max(extras)),
                                    "shareWords": span_words(100 * min(shares),
                                                             100 * max(shares), "%")}
    said = [f"{e['shareWords']} at p = {p}" for p, e in by_ranks.items()]
    return {"byRanks": by_ranks, "words": f"one more all-reduce, reduce-scatter or all-gather "
                                          f"inside the loop costs, of a whole call, "
                                          f"{listed(said)}"}


def analyse_faults(recording, t, ranks_list, collectives, common, labels):
    """What the pages say about faults: the onset and the largest size below it, each
    program at the largest size measured at every p (`common`, sorted) per call and warm in
    the loop, what donation and keeping freed memory did, and how much of a small call is
    the collective."""
    found = onsets(t)
    start = min((at for at in found.values() if at is not None), default=None)
    below_onset = max((nbytes for nbytes in common if start is None or nbytes < start),
                      default=common[0])
    at_largest = {str(p): {c: program_at((c, p, common[-1]), t) for c in collectives}
                  for p in ranks_list}
    every = [entry for by_c in at_largest.values() for entry in by_c.values()]
    return {
        "collectivesPerCall": t.looping, "pageBytes": t.page_bytes,
        "faultedShare": FAULTED_SHARE, "allocationFree": ALLOCATION_FREE,
        "onsetBytes": start, "belowOnsetBytes": below_onset,
        "labels": {"onset": format_bytes(start) if start else "none",
                   "belowOnset": format_bytes(below_onset)},
        "onsetWords": onset_words(found, common, labels),
        # Per program and p, the size from which its calls fault in their outputs.
        "onsetBy": {c: {str(p): format_bytes(found[c, p]) if found.get((c, p)) else "none"
                        for p in ranks_list} for c in collectives},
        "atLargest": at_largest,
        "largestFaultedShare": {"min": min(e["faultedShare"] for e in every),
                                "max": max(e["faultedShare"] for e in every)},
        "donation": (table := donation(recording["donation"], t.page_bytes)),
        "donationWords": donation_words(table),
        "keepFreed": keep_freed(recording, t, ranks_list),
        "smallestCall": smallest_call(t, ranks_list)}

"""The step into the sweep's largest size: how much more a call and a warm collective
cost for the bytes' growth, whether the warm cost grows faster than the bytes, and at
what share of the array per device, S/p, it steps, for distributed-03's sweep analysis.
A call's growth includes the page faults that start at the onset; one more warm,
allocation-free collective in the loop (reading.warm_costs) has none, so what it adds
beyond the bytes is the collective's own doing.
"""
from lesson_code.distributed_03_sweep_faults import XLA_COLLECTIVES
from scripts import intervals
from scripts.sweep.reading import bracket, kept_interval, listed, paired_ratio, warm_costs
from scripts.units import format_bytes

# The program whose cost per byte locates the step: each device sums its S/p block of
# the p inputs, so a cache that holds S/p and not more would show there.
LOCATED = "reduce_scatter"
# What each verdict on "grows faster than the bytes" says.
AGAINST_BYTES = {intervals.SUPPORTED: "faster", intervals.EQUIVALENT: "as the bytes",
                 intervals.CONTRADICTED: "slower", intervals.INCONCLUSIVE: "inconclusive"}


def growth_words(ratio, used=None, total=None):
    """'5.1× (4.6–5.9)', or '5.1× (75% interval 4.6–5.9; 3 of 5 blocks)' when some blocks
    were left out."""
    if ratio is None:
        return "no block allocation-free"
    return (f"{ratio['median']:.1f}× " + bracket(f"{ratio['low']:.1f}", f"{ratio['high']:.1f}",
                                                 ratio, used or ratio["n"], total or ratio["n"]))


def program_step(t, key_small, key_large, bytes_step):
    """One program, one p: the growth of a whole call and of one more warm collective,
    block by block, and whether the second outgrows the bytes (beyond the 25 % margin)."""
    per_call = intervals.median_interval(
        [large / small for large, small in zip(intervals.block_medians(t.calls[key_large]),
                                                intervals.block_medians(t.calls[key_small]))])
    extra, used = paired_ratio(warm_costs(t, key_large), warm_costs(t, key_small))
    total = len(t.calls[key_large])
    verdict = intervals.verdict(extra and {**extra, "low": extra["low"] / bytes_step,
                                           "high": extra["high"] / bytes_step}, above=True)
    return {"perCall": per_call, "perCallWords": growth_words(per_call),
            "extra": extra, "n": used, "extraWords": growth_words(extra, used, total),
            "verdict": verdict, "againstBytes": AGAINST_BYTES[verdict]}


def located_rows(t, ranks_list, sizes):
    """Per size: one more warm reduce-scatter per MiB of S at each p (median of the
    allocation-free blocks), beside S/p."""
    rows = []
    for nbytes in sizes:
        row = {"bytes": nbytes, "label": format_bytes(nbytes)}
        for p in ranks_list:
            cost = kept_interval(warm_costs(t, (LOCATED, p, nbytes)))
            per_mib = cost["median"] / (nbytes / 2**20) if cost else None
            row[str(p)] = {"usPerMiB": per_mib,
                           "words": (f"{per_mib:,.0f} ({format_bytes(nbytes / p)})"
                                     if per_mib is not None else "—")}
        rows.append(row)
    return rows


def neighbours(rows, p):
    """(cost per MiB after / before, S before, S after) for each two neighbouring sizes
    at p, and the largest rise among them (None where none passes the 25 % margin: a
    smaller one is within what the course calls no effect)."""
    points = [(row["bytes"], row[str(p)]["usPerMiB"]) for row in rows
              if row[str(p)]["usPerMiB"] and row[str(p)]["usPerMiB"] > 0]
    pairs = [(after / before, small, large)
             for (small, before), (large, after) in zip(points, points[1:])]
    return pairs, max((pair for pair in pairs if pair[0] > intervals.MARGIN), default=None)


def location_words(rows, ranks_list, l2_bytes):
    """Where the cost per MiB rises most at each p, and whether those rises fall where
    S/p passes a core's L2 cache, as the hypothesis of a cache step predicts."""
    found = {p: neighbours(rows, p) for p in ranks_list}
    # One sentence a p: a page averages at most 20 words a sentence (tests/lint_budgets.py).
    margin = f"{intervals.MARGIN - 1:.0%}"
    said = [f"At p = {p} no rise passes the {margin} margin" if top is None else
            f"At p = {p} it rises {top[0]:.1f}× as S/p goes from {format_bytes(top[1] / p)} "
            f"to {format_bytes(top[2] / p)}" for p, (_, top) in found.items()]
    if not l2_bytes:
        return (f"Where does the cost per MiB rise most between neighbouring sizes? "
                f"{'. '.join(said)}. This recording does not say how large a core's L2 cache "
                f"is, so it cannot place these rises against it.")
    passing = {p: pair for p, (pairs, _) in found.items() for pair in pairs
               if pair[1] / p <= l2_bytes < pair[2] / p}
    there = [p for p, pair in passing.items() if pair == found[p][1]]
    cache = format_bytes(l2_bytes)
    if not passing:
        reading = (f"No two neighbouring sizes put S/p on either side of {cache}, so these "
                   f"sizes cannot place the rises against it")
    elif len(there) == len(passing):
        reading = f"Each of these rises comes where S/p passes {cache}, as the hypothesis predicts"
    else:
        reading = (f"Where S/p passes {cache}, the cost per MiB changes "
                   f"{listed([f'{pair[0]:.1f}×' for pair in passing.values()])} at "
                   f"p = {listed([str(p) for p in passing])}: "
                   + (f"only the largest rise at p = {listed([str(p) for p in there])} "
                      if there else "none of the largest rises ")
                   + "comes there. As stated, the hypothesis does not fit this recording, and "
                     "what sets the step is open")
    return (f"Where does the cost per MiB rise most between neighbouring sizes? "
            f"{'. '.join(said)}. This host's Linux reports an L2 cache of {cache} per core. "
            f"{reading}.")


def step_words(table, labels, bytes_step):
    """The step table read: how much a whole call and one more warm collective grew, and
    for which programs the second outgrew the bytes, kept up with them, or is undecided."""
    every = [entry for by_program in table.values() for entry in by_program.values()]
    calls = [entry["perCall"]["median"] for entry in every]
    warm = [entry["extra"]["median"] for entry in every if entry["extra"]]
    said = []
    for verdict, word in AGAINST_BYTES.items():
        found = {}
        for p, by_program in table.items():
            for collective, entry in by_program.items():
                if entry["verdict"] == verdict:
                    found.setdefault(collective, []).append(p)
        if found:
            who = listed([f"the {labels[c]} at p = {listed(ps)}" for c, ps in found.items()])
            said.append(f"is undecided for {who}" if verdict == intervals.INCONCLUSIVE
                        else f"grew {word} for {who}")
    warm_said = f"{min(warm):.1f}× to {max(warm):.1f}×" if warm else "nothing measurable"
    return (f"For {bytes_step:.0f}× the bytes, a whole call grew {min(calls):.1f}× to "
            f"{max(calls):.1f}× (medians over these programs and every p), faults from the "
            f"onset on included. One more in the loop, which leaves them out, grew "
            f"{warm_said}. Against the bytes, the warm cost {'. It '.join(said)}")


def analyse_step(t, recording, ranks_list, small, large, labels):
    """The step from `small` to `large` (S): per p and program, with the verdicts the
    allocator page counts, and the sizes between S/16 and S that locate it."""
    bytes_step = large / small
    table = {str(p): {c: program_step(t, (c, p, small), (c, p, large), bytes_step)
                      for c in XLA_COLLECTIVES} for p in ranks_list}
    measured = sorted(set.intersection(*({nbytes for (c, p, nbytes) in t.calls
                                          if c == LOCATED and p == ranks}
                                         for ranks in ranks_list)))
    rows = located_rows(t, ranks_list, [n for n in measured if large / 16 <= n <= large])
    l2_bytes = recording.get("l2CacheBytes")
    return {"bytes": {"from": small, "to": large}, "bytesStep": bytes_step,
            "labels": {"from": format_bytes(small), "to": format_bytes(large)},
            "byRanks": table, "words": step_words(table, labels, bytes_step), "located": rows,
            "locationWords": location_words(rows, ranks_list, l2_bytes),
            "verdicts": [e["verdict"] for by in table.values() for e in by.values()]}

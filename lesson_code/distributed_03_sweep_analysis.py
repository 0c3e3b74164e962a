"""What distributed-03's message-size sweep means: medians with intervals, fits below
the fault onset, ratios of warm collectives against two predictions, verdicts in words.

Derived from recordings/distributed-03.sweep.json alone (lesson_code/distributed_03_analysis.py
routes the "sweep" variant here). NumPy only; rewording re-renders, never re-measures.
Every verdict compares paired blocks: block b measured p = 2, 4, 8 one after another and,
inside each, every program at one size in turn, so a ratio taken within a block shares
that block's conditions.
"""
import numpy as np

from lesson_code import distributed_03_sweep_faults as faults
from lesson_code.distributed_03_sweep_step import analyse_step
from scripts import intervals
from scripts.sweep import analysis as sweep_math
from scripts.units import format_bytes  # the size labels, written as the figures write sizes

LABELS = {"all_reduce": "all-reduce", "reduce_scatter": "reduce-scatter",
          "all_gather": "all-gather", "reduce_scatter_all_gather": "reduce-scatter + all-gather",
          "ring_reduce_scatter": "ring reduce-scatter", "ring_all_reduce": "ring all-reduce"}
RATIOS = {  # name: (numerator, denominator, what the ring model predicts)
    "arOverRs": ("all_reduce", "reduce_scatter", 2.0),
    "agOverRs": ("all_gather", "reduce_scatter", 1.0),
    "ringArOverRingRs": ("ring_all_reduce", "ring_reduce_scatter", 2.0),
}
# A ratio "agrees" with a prediction when its whole interval lies within 25 % of it.
TOLERANCE = 1.25


def grouped_blocks(rows):
    """{(collective, ranks, bytes): [[samples of block 0], [block 1], ...]} of the rows
    that time one collective per call: what the fits, ratios and bandwidths read."""
    return sweep_math.grouped(rows, looped=False, field="samplesUs")


def points(blocks, fault_blocks, programs):
    """One row per (collective, p, S): the median of the block medians with its interval,
    the fastest and slowest sample, the bandwidths of the median, and beside the time the
    minor page faults per call (median of the block medians)."""
    out = []
    for (collective, ranks, nbytes), found in sorted(blocks.items()):
        stat = intervals.summary(found)
        seconds = stat["median"] * 1e-6
        algbw = sweep_math.algbw_gbps(nbytes, seconds)
        phases = programs[str(ranks)][collective]["phases"]
        out.append({"collective": collective, "ranks": ranks, "bytes": nbytes,
                    "faultsPerCall": faults.median_of_blocks(
                        fault_blocks[collective, ranks, nbytes]),
                    "medianUs": stat["median"], "lowUs": stat["low"], "highUs": stat["high"],
                    "coverage": stat["coverage"], "minUs": stat["min"], "maxUs": stat["max"],
                    "blockSpread": stat["blockSpread"], "algbwGBps": algbw,
                    "busbwGBps": algbw * sweep_math.bus_factor(phases, ranks)})
    return out


def fit_one(sizes, medians, boundary):
    """alpha-beta over the sizes below `boundary` (None: every size), at least three."""
    s = np.asarray(sizes, dtype=float)
    t = np.asarray(medians, dtype=float) * 1e-6
    inside = s < boundary if boundary else np.ones_like(s, dtype=bool)
    if inside.sum() < 3:
        inside[:3] = True  # fewer than three sizes fit: fit the three smallest
    alpha, beta = sweep_math.fit_alpha_beta(s[inside], t[inside])
    return alpha, beta, inside


def fits(blocks, points_by_series, boundary=None):
    """fits[collective][str(p)]: the fit of the medians, with alpha's interval from the
    same fit made block by block, over the sizes below the fault onset `boundary` (from
    there on, the allocator is a second mechanism)."""
    result = {}
    for (collective, ranks), series in sorted(points_by_series.items()):
        sizes = sorted(series)
        alpha, beta, inside = fit_one(sizes, [series[s]["medianUs"] for s in sizes], boundary)
        per_block = []
        for b in range(len(blocks[collective, ranks, sizes[0]])):
            medians = [float(np.median(blocks[collective, ranks, s][b])) for s in sizes]
            per_block.append(fit_one(sizes, medians, boundary)[0] * 1e6)
        fitted = [s for s, keep in zip(sizes, inside) if keep]
        fitted_t = [series[s]["medianUs"] * 1e-6 for s in fitted]
        largest = sizes[-1]
        predicted = alpha + largest / beta if beta else alpha
        result.setdefault(collective, {})[str(ranks)] = {
            "alphaUs": alpha * 1e6, "alpha": intervals.median_interval(per_block),
            "alphaByBlockUs": per_block,
            "betaGBps": beta / 1e9 if beta else None,
            # alpha x beta to one significant figure: misses of tens of per cent leave
            # no more digits worth printing, and a power of ten would show 2x as 10x.
            "nHalfKiB": (sweep_math.one_significant_figure(alpha * beta / 1024)
                         if beta else None),
            "fittedSizes": len(fitted), "fitMaxBytes": int(max(fitted)),
            "maxRelResidual": sweep_math.max_relative_residual(fitted, fitted_t, alpha, beta),
            "largestOverFit": series[largest]["medianUs"] * 1e-6 / predicted}
    return result


def agreement(ratio, predicted):
    """Does the interval of a measured ratio agree with a predicted value? "supported"
    when the whole interval lies within 25 % of it, "contradicted" when the whole
    interval lies outside that band, "inconclusive" when it straddles an edge or rests on
    fewer than faults.MIN_BLOCKS blocks."""
    if ratio["n"] < faults.MIN_BLOCKS:
        return intervals.INCONCLUSIVE
    low_edge, high_edge = predicted / TOLERANCE, predicted * TOLERANCE
    if low_edge <= ratio["low"] and ratio["high"] <= high_edge:
        return intervals.SUPPORTED
    if ratio["high"] < low_edge or ratio["low"] > high_edge:
        return intervals.CONTRADICTED
    return intervals.INCONCLUSIVE


def touched_prediction(top, bottom, programs, ranks):
    """The time ratio if time followed the bytes of memory each device reads and writes."""
    facts = programs[str(ranks)]
    if facts[top]["touchedOverS"] is None or facts[bottom]["touchedOverS"] is None:
        return None
    return facts[top]["touchedOverS"] / facts[bottom]["touchedOverS"]


def ratios(t, ranks_list, nbytes, programs):
    """At size `nbytes` (the largest), per p: each ratio of two programs' warm,
    allocation-free costs (one more in the loop), block by block over the blocks where
    both were, against the ring model and against the bytes each device touches; the
    rest is what neither explains."""
    by_ranks = {}
    for p in ranks_list:
        entry = {}
        for name, (top, bottom, model) in RATIOS.items():
            if (top, p, nbytes) not in t.loops or (bottom, p, nbytes) not in t.loops:
                continue
            ratio, _ = faults.paired_ratio(faults.warm_costs(t, (top, p, nbytes)),
                                           faults.warm_costs(t, (bottom, p, nbytes)))
            total = len(t.calls[top, p, nbytes])
            touched = touched_prediction(top, bottom, programs, p)
            if ratio is None:  # no block where both were allocation-free: nothing to say
                ratio = {"median": None, "low": None, "high": None, "n": 0}
            unexplained = ratio["median"] / touched if touched and ratio["n"] else None
            entry[name] = {**ratio, "ringModel": model,
                           "words": ratio_words(ratio, total),
                           "label": f"{LABELS[top]} / {LABELS[bottom]}",
                           "ringModelVerdict": agreement(ratio, model),
                           "touchedPrediction": touched,
                           "touchedVerdict": agreement(ratio, touched) if touched else None,
                           "unexplained": unexplained,
                           "unexplainedWords": faults.times_words(unexplained)}
        by_ranks[str(p)] = entry
    return by_ranks


def unexplained_words(ratio_table):
    """The "unexplained" column read: its range, and how many lie below 1, where the
    reduce-scatter costs more per byte it touches than the program over it."""
    values = [entry["unexplained"] for by_name in ratio_table.values()
              for entry in by_name.values() if entry.get("unexplained") is not None]
    if not values:
        return "no ratio has both a measurement and a bytes-touched prediction"
    below = sum(value < 1 for value in values)
    return (f"it runs from {faults.times_words(min(values))} to "
            f"{faults.times_words(max(values))}, and {below} of its {len(values)} values lie "
            f"below 1")


def ratio_series(points_by_series, ranks_list):
    """For the figure: per p, every size's median ratio of each pair."""
    out = {}
    for p in ranks_list:
        sizes = sorted(points_by_series.get(("reduce_scatter", p), {}))
        entry = {"bytes": sizes}
        for name, (top, bottom, _) in RATIOS.items():
            if (top, p) in points_by_series and (bottom, p) in points_by_series:
                entry[name] = [points_by_series[top, p][s]["medianUs"]
                               / points_by_series[bottom, p][s]["medianUs"] for s in sizes]
        out[str(p)] = entry
    return out


def ratio_words(ratio, total=None):
    """'2.25 (94% interval 2.02–2.46)', saying how many blocks it rests on when not all."""
    if not ratio["n"]:
        return f"no block of {total} allocation-free for both"
    kept = faults.blocks_words(ratio["n"], total) if total else ""
    return (f"{ratio['median']:.2f} ({ratio['coverage']:.0%} interval {ratio['low']:.2f}–"
            f"{ratio['high']:.2f}{kept})")


def paired_across_ranks(per_block_top, per_block_bottom):
    """The ratio of one quantity at the largest p over the smallest, block by block."""
    values = [t / b for t, b in zip(per_block_top, per_block_bottom) if b > 0]
    return intervals.median_interval(values) if values else None


def step_growth(per_block_low, per_block_high):
    """Does one step cost more at the largest p? a(high) - a(low), block by block, in us:
    a(low) can be zero within noise, and a ratio over it would be anything. The verdict
    reads a(low) / a(high), over the larger cost: growth past the 25 % margin is a(low)
    below 1/1.25 of a(high) across the whole interval, in at least MIN_BLOCKS blocks."""
    pairs = [(low, high) for low, high in zip(per_block_low, per_block_high) if high > 0]
    if not pairs:
        return {"n": 0, "verdict": intervals.INCONCLUSIVE, "words": "not measured"}
    growth = intervals.median_interval([high - low for low, high in pairs])
    share = intervals.median_interval([low / high for low, high in pairs])
    return {**growth, "lowOverHigh": share,
            "verdict": faults.judged(share, predicted_above_one=False),
            "words": (f"{faults.figures(growth['median'])} µs ({growth['coverage']:.0%} "
                      f"interval {faults.span_words(growth['low'], growth['high'])} µs"
                      f"{faults.blocks_words(len(pairs), len(per_block_high))})")}


def alpha_with_ranks(fit_table, ranks_list):
    """Does alpha grow with p? Per program, alpha at the largest p over the smallest."""
    low, high = str(ranks_list[0]), str(ranks_list[-1])
    result = {}
    for collective, by_p in fit_table.items():
        ratio = paired_across_ranks(by_p[high]["alphaByBlockUs"], by_p[low]["alphaByBlockUs"])
        result[collective] = {**(ratio or {}), "verdict": faults.judged(ratio),
                              "words": ratio_words(ratio) if ratio else "not measured"}
    return result


def in_program_words(smallest, fit_table, ranks_list):
    """Per p, one more of XLA's collectives inside one jitted program (the loop, at that
    p's smallest size) against the alpha a separate call pays: combining is about calls."""
    said = []
    for p in ranks_list:
        extra = smallest["byRanks"].get(str(p), {}).get("extraUs")
        alphas = [fit_table[c][str(p)]["alpha"]["median"] for c in faults.XLA_COLLECTIVES
                  if str(p) in fit_table.get(c, {})]
        if extra and alphas:
            said.append(f"{faults.span_words(extra['min'], extra['max'])} µs against an α of "
                        f"{faults.span_words(min(alphas), max(alphas))} µs at p = {p}")
    return "; ".join(said) or "not measured"


def step_line(alphas, steps):
    """alpha = dispatch + steps x per-step through every program's alpha at one p:
    (dispatch us, per-step us, worst relative residual)."""
    dispatch, per_step = sweep_math.fit_line_relative(steps, alphas)
    worst = np.max(np.abs(sweep_math.relative_residuals(steps, alphas, dispatch, per_step)))
    return dispatch, per_step, float(worst)


def steps(fit_table, programs, ranks_list):
    """Does each dependent rendezvous cost about the same? Per p, one line of alpha
    against the dependent steps of every program (1 for XLA's collectives, 2 for rs+ag,
    p - 1 and 2(p - 1) for the ring, which is those ppermutes by construction), its
    residuals, and the per-step cost's interval from the same line fitted block by block."""
    result = {}
    for p in ranks_list:
        names = [c for c in fit_table if str(p) in fit_table[c]]
        counts = [programs[str(p)][c]["steps"] for c in names]
        dispatch, per_step, worst = step_line([fit_table[c][str(p)]["alphaUs"] for c in names],
                                              counts)
        blocks = len(fit_table[names[0]][str(p)]["alphaByBlockUs"])
        by_block = [step_line([fit_table[c][str(p)]["alphaByBlockUs"][b] for c in names],
                              counts) for b in range(blocks)]
        per_block = [fit[1] for fit in by_block]
        result[str(p)] = {"dispatchUs": dispatch, "perStepUs": per_step,
                          "perStep": intervals.median_interval(per_block),
                          "perStepByBlockUs": per_block, "maxRelResidual": worst,
                          "maxRelResidualByBlock": [fit[2] for fit in by_block],
                          "ringStepsPerPhase": p - 1}
    low, high = str(ranks_list[0]), str(ranks_list[-1])
    worst = max(entry["maxRelResidual"] for entry in result.values())
    summary = {**step_growth(result[low]["perStepByBlockUs"], result[high]["perStepByBlockUs"]),
               "worstMiss": worst, **fit_words(result, worst)}
    return result, summary


def fit_words(step_table, worst):
    """Does one line fit every program within the page's margin (25 %)? The medians'
    worst miss is a point; the same line fitted block by block gives one worst miss per
    block, and their median's interval decides, inside the margin, past it or across it.
    The sentence quotes both: a block's fit is noisier, so the reading leans towards "do
    not all cost the same", the cautious side for a claim of equal costs."""
    margin = intervals.MARGIN - 1
    blocks = min(len(entry["maxRelResidualByBlock"]) for entry in step_table.values())
    miss = intervals.median_interval([max(entry["maxRelResidualByBlock"][b]
                                          for entry in step_table.values())
                                      for b in range(blocks)])
    # "Every rendezvous costs about the same" is the claim its verdict is counted for.
    if miss["high"] <= margin:
        verdict = intervals.SUPPORTED
        reading = "which is what equal costs per rendezvous would give"
    elif miss["low"] > margin:
        verdict = intervals.CONTRADICTED
        reading = "so the rendezvous do not all cost the same"
    else:
        verdict = intervals.INCONCLUSIVE
        reading = f"across the {margin:.0%} margin: inconclusive"
    return {"worstMissByBlock": miss, "fitVerdict": verdict,
            "fitWords": f"one line fits every program within {worst:.0%} at each p "
                        f"(block by block, {miss['low']:.0%}–{miss['high']:.0%}), {reading}"}


def busbw(points_list, t, programs, ranks_list, nbytes):
    """Peak busbw per program and p, and busbw at size `nbytes` (the largest below the
    fault onset) at the largest p over the smallest, block by block, saying in how many
    blocks either side's calls still faulted in part of their outputs: below the onset is
    not allocation-free."""
    blocks = t.calls
    peaks = {}
    for row in points_list:
        best = peaks.setdefault(row["collective"], {})
        best[str(row["ranks"])] = max(best.get(str(row["ranks"]), 0.0), row["busbwGBps"])
    low, high = ranks_list[0], ranks_list[-1]
    falls = {}
    for collective in peaks:
        if (collective, high, nbytes) not in blocks or (collective, low, nbytes) not in blocks:
            continue
        # busbw is S x bus factor / t, so at one S its ratio is the inverse time ratio.
        factor = (sweep_math.bus_factor(programs[str(high)][collective]["phases"], high)
                  / sweep_math.bus_factor(programs[str(low)][collective]["phases"], low))
        per_block = [factor * float(np.median(b_low)) / float(np.median(b_high))
                     for b_low, b_high in zip(blocks[collective, low, nbytes],
                                              blocks[collective, high, nbytes])]
        ratio = intervals.median_interval(per_block)
        # The blocks where the calls at either p faulted in part of their outputs.
        faulted = sum(map(max, faults.faulted_in_part(t, (collective, low, nbytes)),
                          faults.faulted_in_part(t, (collective, high, nbytes))))
        # Reported, not judged: the page tests no cause of a fall (a shared memory bus,
        # a working set past the cache), so its ratio earns no verdict word.
        falls[collective] = {**ratio, "faultedBlocks": faulted,
                             "words": ratio_words(ratio)[:-1] + (
                                 f"; faulted in part in {faulted} of {len(per_block)} blocks)"
                                 if faulted else ")")}
    return peaks, falls


def host(recording):
    """The load around every block, and whether other work kept the cores busy when the
    sweep started (the readings during it count its own workers too)."""
    readings = [reading for block in recording["hosts"] for reading in
                (block["before"], block["after"])]
    loads = [reading["loadAverage1m"] for reading in readings]
    cores = readings[0]["cores"]
    start = intervals.host_at_start(recording["environment"], cores)
    words = (f"While it ran, the one-minute load average was {min(loads):.1f} to "
             f"{max(loads):.1f} on {cores} cores, its own workers included. {start['words']}"
             + (" A trend with p may then be the scheduler's rather than the runtime's."
                if start["busy"] else ""))
    return {"cores": cores, "loadMin": min(loads), "loadMax": max(loads),
            "busyAtStart": start["busy"], "busyCoresAtStart": start["busyCores"],
            "words": words}


def verdict_counts(*groups):
    words = [item["verdict"] for group in groups for item in group if item.get("verdict")]
    return {word: words.count(word) for word in intervals.VERDICTS}


def analyse(recording):
    rows, programs = recording["rows"], recording["programs"]
    blocks = grouped_blocks(rows)
    t = faults.timings(recording)
    ranks_list = sorted({row["ranks"] for row in rows})
    common = sorted(set.intersection(*({row["bytes"] for row in rows if row["ranks"] == p}
                                       for p in ranks_list)))
    largest = common[-1]
    collectives = list(programs[str(ranks_list[0])])
    fault_table = faults.analyse_faults(recording, t, ranks_list, collectives, largest)
    below_onset = fault_table["belowOnsetBytes"]
    # The step into the largest size, from a quarter of it where that was measured.
    step_from = max((n for n in common if n <= largest / 4), default=common[0])
    fault_table["step"] = analyse_step(t, recording, ranks_list, step_from, largest, LABELS)
    fault_table["verdictCounts"] = verdict_counts(
        [{"verdict": v} for v in fault_table["step"]["verdicts"]],
        [{"verdict": v} for v in fault_table["keepFreed"]["verdicts"]])
    point_list = points(blocks, sweep_math.grouped(rows, looped=False, field="minorFaults"),
                        programs)
    by_series = {}
    for row in point_list:
        by_series.setdefault((row["collective"], row["ranks"]), {})[row["bytes"]] = row
    fit_table = fits(blocks, by_series, fault_table["onsetBytes"])
    fit_table = {c: fit_table[c] for c in collectives if c in fit_table}
    step_table, step_summary = steps(fit_table, programs, ranks_list)
    # Warm and allocation-free at the largest size: the ratios; the busbw comparison of
    # whole calls stands where no program's calls fault in their outputs.
    ratio_table = ratios(t, ranks_list, largest, programs)
    alpha_trend = alpha_with_ranks(fit_table, ranks_list)
    peaks, falls = busbw(point_list, t, programs, ranks_list, below_onset)
    every_fit = [fit for by_p in fit_table.values() for fit in by_p.values()]
    ring_verdicts = [{"verdict": entry[name]["ringModelVerdict"]}
                     for entry in ratio_table.values() for name in entry]
    touched_verdicts = [{"verdict": entry[name]["touchedVerdict"]}
                        for entry in ratio_table.values() for name in entry
                        if entry[name]["touchedVerdict"]]
    return {
        "collectives": collectives, "labels": LABELS,
        "ringCollectives": [c for c in collectives if programs[str(ranks_list[0])][c]["ring"]],
        "ranks": ranks_list, "rows": point_list, "fits": fit_table,
        "fitSummary": {
            "maxRelResidual": faults.span([f["maxRelResidual"] for f in every_fit]),
            "largestOverFit": faults.span([f["largestOverFit"] for f in every_fit]),
            "nHalfKiB": faults.span([f["nHalfKiB"] for f in every_fit if f["nHalfKiB"]]),
            "lessonBytes": 32,
            # The transfer term S / beta of the lesson's 32-byte gradient, as a share of alpha.
            "lessonTransferShare": max((32 / (f["betaGBps"] * 1e3) / f["alphaUs"]
                                        for f in every_fit if f["alphaUs"] > 0 and f["betaGBps"]),
                                       default=None)},
        "alphaWithRanks": alpha_trend, "steps": step_table, "stepSummary": step_summary,
        "inProgramWords": in_program_words(fault_table["smallestCall"], fit_table, ranks_list),
        "ratios": {"bytes": largest, "warm": ratio_table,
                   "unexplainedWords": unexplained_words(ratio_table),
                   "byRanks": ratio_series(by_series, ranks_list),
                   "model": {name: model for name, (_, _, model) in RATIOS.items()}},
        "busbwPeakGBps": peaks, "busbwFallsWithRanks": falls, "faults": fault_table,
        "verdictCounts": verdict_counts(alpha_trend.values(), [step_summary], ring_verdicts,
                                        touched_verdicts,
                                        [{"verdict": step_summary["fitVerdict"]}]),
        "host": host(recording),
        "memcpyGBps": recording["memcpyGBps"], "memcpyBytes": recording["memcpyBytes"],
        "blocks": recording["method"]["blocks"],
        "sizeLabels": {"largest": format_bytes(largest), "ratios": format_bytes(largest),
                       "belowOnset": format_bytes(below_onset),
                       "memcpy": format_bytes(recording["memcpyBytes"]),
                       "smallest": {str(p): format_bytes(min(r["bytes"] for r in rows
                                                             if r["ranks"] == p))
                                    for p in ranks_list}},
    }

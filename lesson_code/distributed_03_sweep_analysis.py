"""What distributed-03's message-size sweep means: medians with intervals, fits below
the fault onset, ratios of warm collectives against two predictions, verdicts in words.
From the sweep recording alone (distributed_03_analysis.py routes the "sweep" variant here).
Every verdict compares paired blocks: block b measured p = 2, 4, 8 one after another and,
inside each, every program at one size in turn, so a ratio taken within a block shares
that block's conditions.
"""
import numpy as np

from lesson_code.distributed_03_sweep_faults import (XLA_COLLECTIVES, analyse_faults,
                                                     output_over_s)
from lesson_code.distributed_03_sweep_step import analyse_step
from scripts import intervals
from scripts.sweep import analysis as sweep_math
from scripts.sweep import reading
from scripts.units import format_bytes  # the size labels, written as the figures write sizes

LABELS = {"all_reduce": "all-reduce", "reduce_scatter": "reduce-scatter",
          "all_gather": "all-gather", "reduce_scatter_all_gather": "reduce-scatter + all-gather",
          "ring_reduce_scatter": "ring reduce-scatter", "ring_all_reduce": "ring all-reduce"}
RATIOS = {  # name: (numerator, denominator, what the ring model predicts)
    "arOverRs": ("all_reduce", "reduce_scatter", 2.0),
    "agOverRs": ("all_gather", "reduce_scatter", 1.0),
    "ringArOverRingRs": ("ring_all_reduce", "ring_reduce_scatter", 2.0),
}
# In one process no byte is sent: a ratio the ring model's numbers predict can match that
# number, not test the model's mechanism, so its verdict is said as a match.
MATCH = {intervals.SUPPORTED: "a match", intervals.CONTRADICTED: "a miss",
         intervals.INCONCLUSIVE: "inconclusive"}


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
            ratio, _ = reading.paired_ratio(reading.warm_costs(t, (top, p, nbytes)),
                                            reading.warm_costs(t, (bottom, p, nbytes)))
            total = len(t.calls[top, p, nbytes])
            touched = touched_prediction(top, bottom, programs, p)
            if ratio is None:  # no block where both were allocation-free: nothing to say
                ratio = {"median": None, "low": None, "high": None, "n": 0}
            unexplained = ratio["median"] / touched if touched and ratio["n"] else None
            entry[name] = {**ratio, "ringModel": model,
                           "words": reading.ratio_words(ratio, total),
                           "label": f"{LABELS[top]} / {LABELS[bottom]}",
                           "ringModelVerdict": (verdict := intervals.verdict(
                               ratio, band=intervals.around(model))),
                           "ringModelMatch": MATCH[verdict],
                           "touchedPrediction": touched,
                           "touchedVerdict": intervals.verdict(
                               ratio, band=intervals.around(touched)) if touched else None,
                           "unexplained": unexplained,
                           "unexplainedWords": reading.times_words(unexplained)}
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
    return (f"it runs from {reading.times_words(min(values))} to "
            f"{reading.times_words(max(values))}, and {below} of its {len(values)} values lie "
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


def step_growth(per_block_low, per_block_high):
    """Does one step cost more at the largest p? a(high) - a(low), block by block, in us:
    a(low) can be zero within noise, and a ratio over it would be anything. The verdict
    reads a(low) / a(high), over the larger cost: growth past the 25 % margin is a(low)
    below 1/1.25 of a(high) across the whole interval, in at least intervals.MIN_BLOCKS blocks."""
    pairs = [(low, high) for low, high in zip(per_block_low, per_block_high) if high > 0]
    if not pairs:
        return {"n": 0, "verdict": intervals.INCONCLUSIVE, "words": "not measured"}
    growth = intervals.median_interval([high - low for low, high in pairs])
    share = intervals.median_interval([low / high for low, high in pairs])
    return {**growth, "lowOverHigh": share,
            "verdict": intervals.verdict(share, above=False),
            "words": (f"{reading.figures(growth['median'])} µs ({growth['coverage']:.0%} "
                      f"interval {reading.span_words(growth['low'], growth['high'])} µs"
                      f"{reading.blocks_words(len(pairs), len(per_block_high))})")}


def alpha_with_ranks(fit_table, ranks_list):
    """Does alpha grow with p? Per program, alpha at the largest p over the smallest, block
    by block."""
    low, high = str(ranks_list[0]), str(ranks_list[-1])
    result = {}
    for collective, by_p in fit_table.items():
        values = [top / bottom for top, bottom in zip(by_p[high]["alphaByBlockUs"],
                                                      by_p[low]["alphaByBlockUs"]) if bottom > 0]
        ratio = intervals.median_interval(values) if values else None
        result[collective] = {**(ratio or {}), "verdict": intervals.verdict(ratio, above=True),
                              "words": reading.ratio_words(ratio) if ratio else "not measured"}
    return result


def in_program(smallest, fit_table, ranks_list):
    """Per p, one more of XLA's collectives inside one jitted program (the loop, at that
    p's smallest size) beside the alpha a separate call pays: combining is about calls."""
    found = {}
    for p in ranks_list:
        extra = smallest["byRanks"].get(str(p))
        alphas = [fit_table[c][str(p)]["alpha"]["median"] for c in XLA_COLLECTIVES
                  if str(p) in fit_table.get(c, {})]
        if extra and alphas:
            found[str(p)] = {"extraWords": extra["extraWords"], "label": extra["label"],
                             "alphaWords": reading.span_words(min(alphas), max(alphas))}
    return found


def coverage_words(judged):
    """How often the intervals behind the verdicts cover their medians: most rest on every
    block, some on fewer (where a block was not allocation-free), which covers less often."""
    counts = {}
    for interval in judged:
        counts.setdefault((interval["coverage"], interval["n"]), []).append(interval)
    if not counts:
        return "as often as its blocks allow: no verdict here rests on one"
    (most, _), *fewer = sorted(counts, key=lambda key: -len(counts[key]))
    return f"about {most:.0%} of the time" + "".join(
        f", {coverage:.0%} for the {len(counts[coverage, n])} resting on {n} blocks"
        for coverage, n in sorted(fewer, reverse=True))


def step_line(alphas, steps):
    """alpha = dispatch + steps x per-step through every program's alpha at one p:
    (dispatch us, per-step us, worst relative residual)."""
    dispatch, per_step = sweep_math.fit_line_relative(steps, alphas)
    return dispatch, per_step, sweep_math.worst_miss(steps, alphas, dispatch, per_step)


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
        by_block = [step_line(alphas, counts) for alphas in zip(
            *(fit_table[c][str(p)]["alphaByBlockUs"] for c in names), strict=True)]
        dispatches, per_block, misses = (list(column) for column in zip(*by_block))
        # The table's d and a are both the blocks' lines, with their intervals.
        result[str(p)] = {"dispatchUs": dispatch, "perStepUs": per_step,
                          "dispatch": intervals.median_interval(dispatches),
                          "perStep": intervals.median_interval(per_block),
                          "blockMiss": intervals.median_interval(misses),
                          "perStepByBlockUs": per_block, "maxRelResidual": worst,
                          "maxRelResidualByBlock": misses, "ringStepsPerPhase": p - 1}
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
    verdict = intervals.verdict(miss, band=(0.0, margin))
    said = {intervals.SUPPORTED: "which is what equal costs per rendezvous would give",
            intervals.CONTRADICTED: "so the rendezvous do not all cost the same",
            intervals.INCONCLUSIVE: f"across the {margin:.0%} margin: inconclusive"}
    return {"worstMissByBlock": miss, "fitVerdict": verdict,
            "fitWords": f"one line fits every program within {worst:.0%} at each p "
                        f"(block by block, {miss['low']:.0%}–{miss['high']:.0%}), {said[verdict]}"}


def busbw(points_list, t, programs, ranks_list, nbytes):
    """Peak busbw per program and p, and busbw at size `nbytes` (the largest below the
    fault onset) at the largest p over the smallest, block by block, saying in how many
    blocks either side's calls still faulted in part of their outputs: below the onset is
    not allocation-free."""
    peaks = {}
    for row in points_list:
        best = peaks.setdefault(row["collective"], {})
        best[str(row["ranks"])] = max(best.get(str(row["ranks"]), 0.0), row["busbwGBps"])
    low, high = ranks_list[0], ranks_list[-1]
    falls = {}
    for collective in peaks:
        if (collective, high, nbytes) not in t.calls or (collective, low, nbytes) not in t.calls:
            continue
        # busbw is S x bus factor / t, so at one S its ratio is the inverse time ratio.
        factor = (sweep_math.bus_factor(programs[str(high)][collective]["phases"], high)
                  / sweep_math.bus_factor(programs[str(low)][collective]["phases"], low))
        per_block = [factor * float(np.median(b_low)) / float(np.median(b_high))
                     for b_low, b_high in zip(t.calls[collective, low, nbytes],
                                              t.calls[collective, high, nbytes])]
        ratio = intervals.median_interval(per_block)
        # The blocks where the calls at either p faulted in part of their outputs.
        faulted = sum(map(max, reading.faulted_in_part(t, (collective, low, nbytes)),
                          reading.faulted_in_part(t, (collective, high, nbytes))))
        # Reported, not judged: the page tests no cause of a fall (a shared memory bus,
        # a working set past the cache), so its ratio earns no verdict word.
        falls[collective] = {**ratio, "faultedBlocks": faulted,
                             "words": intervals.words(ratio, note=(
                                 f"; faulted in part in {faulted} of {len(per_block)} blocks"
                                 if faulted else ""))}
    return peaks, falls


def analyse(recording):
    rows, programs = recording["rows"], recording["programs"]
    t = reading.timings(recording, output_over_s)
    ranks_list = sorted({row["ranks"] for row in rows})
    common = sorted(set.intersection(*({row["bytes"] for row in rows if row["ranks"] == p}
                                       for p in ranks_list)))
    largest = common[-1]
    collectives = list(programs[str(ranks_list[0])])
    fault_table = analyse_faults(recording, t, ranks_list, collectives, common, LABELS)
    below_onset = fault_table["belowOnsetBytes"]
    # The step into the largest size, from a quarter of it where that was measured.
    step_from = max((n for n in common if n <= largest / 4), default=common[0])
    fault_table["step"] = analyse_step(t, recording, ranks_list, step_from, largest, LABELS)
    fault_table["verdictCounts"] = reading.verdict_counts(
        {"verdict": v} for part in ("step", "keepFreed") for v in fault_table[part]["verdicts"])
    point_list = reading.points(t, programs)
    by_series = {}
    for row in point_list:
        by_series.setdefault((row["collective"], row["ranks"]), {})[row["bytes"]] = row
    fit_table = reading.fits(t.calls, by_series, fault_table["onsetBytes"])
    fit_table = {c: fit_table[c] for c in collectives if c in fit_table}
    step_table, step_summary = steps(fit_table, programs, ranks_list)
    # Warm and allocation-free at the largest size: the ratios; the busbw comparison of
    # whole calls stands where no program's calls fault in their outputs.
    ratio_table = ratios(t, ranks_list, largest, programs)
    alpha_trend = alpha_with_ranks(fit_table, ranks_list)
    peaks, falls = busbw(point_list, t, programs, ranks_list, below_onset)
    every_fit = [fit for by_p in fit_table.values() for fit in by_p.values()]
    every_ratio = [by_name[name] for by_name in ratio_table.values() for name in by_name]
    return {
        "collectives": collectives, "labels": LABELS,
        "ringCollectives": [c for c in collectives if programs[str(ranks_list[0])][c]["ring"]],
        "ranks": ranks_list, "rows": point_list, "fits": fit_table,
        "fitSummary": {
            "maxRelResidual": reading.span([f["maxRelResidual"] for f in every_fit]),
            "largestOverFit": reading.span([f["largestOverFit"] for f in every_fit]),
            "nHalfKiB": reading.span([f["nHalfKiB"] for f in every_fit if f["nHalfKiB"]]),
            "lessonBytes": 32,
            # The transfer term S / beta of the lesson's 32-byte gradient, as a share of alpha.
            "lessonTransferShare": max((32 / (f["betaGBps"] * 1e3) / f["alphaUs"]
                                        for f in every_fit if f["alphaUs"] > 0 and f["betaGBps"]),
                                       default=None)},
        "alphaWithRanks": alpha_trend, "steps": step_table, "stepSummary": step_summary,
        "inProgram": in_program(fault_table["smallestCall"], fit_table, ranks_list),
        "ringModelMatches": sum(ratio["ringModelVerdict"] == intervals.SUPPORTED
                                for ratio in every_ratio),
        "coverageWords": coverage_words([
            interval for interval in [*alpha_trend.values(), step_summary.get("lowOverHigh"),
                                      step_summary["worstMissByBlock"], *every_ratio]
            if interval and interval.get("n")]),
        "ratios": {"bytes": largest, "warm": ratio_table,
                   "unexplainedWords": unexplained_words(ratio_table),
                   "byRanks": ratio_series(by_series, ranks_list),
                   "model": {name: model for name, (_, _, model) in RATIOS.items()}},
        "busbwPeakGBps": peaks, "busbwFallsWithRanks": falls, "faults": fault_table,
        "verdictCounts": reading.verdict_counts(
            alpha_trend.values(), [step_summary, {"verdict": step_summary["fitVerdict"]}],
            ({"verdict": ratio[kind]} for ratio in every_ratio
             for kind in ("ringModelVerdict", "touchedVerdict"))),
        "host": reading.host(recording),
        "memcpyGBps": recording["memcpyGBps"], "memcpyBytes": recording["memcpyBytes"],
        "blocks": recording["method"]["blocks"],
        "sizeLabels": {"largest": format_bytes(largest), "ratios": format_bytes(largest),
                       "belowOnset": format_bytes(below_onset),
                       "memcpy": format_bytes(recording["memcpyBytes"]),
                       "smallest": {str(p): format_bytes(min(r["bytes"] for r in rows
                                                             if r["ranks"] == p))
                                    for p in ranks_list}},
    }

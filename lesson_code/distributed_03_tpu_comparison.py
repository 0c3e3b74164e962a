"""A TPU size sweep against the predictions written down before it ran: supported,
contradicted or inconclusive, per prediction and for the p = 4 over p = 2 question; a row
whose program compiles to another collective than the one predicted is not judged, and
counts nowhere.

What is compared is each collective's own cost: a looped call less a single one, block by
block, divided by the extra collectives, which leaves out the host's dispatch (on a TPU far
longer than a small collective). The band is the prediction's own (scripts/intervals.py's
verdict): *supported* when the whole interval of measured over predicted lies inside it,
*contradicted* when wholly outside, else *inconclusive*.
"""
from lesson_code import tpu_predictions
from lesson_code.distributed_03_tpu_compiled import compiled_to
from scripts import intervals
from scripts.sweep.analysis import own_costs, predicted_machine
from scripts.units import format_bytes

LABELS = {"reduce_scatter": "reduce-scatter", "all_gather": "all-gather",
          "all_reduce": "all-reduce", "reduce_scatter_2d": "reduce-scatter of a matrix",
          "all_gather_2d": "all-gather of a matrix"}
# The TPU sweep's matrix programs (lesson_code/distributed_03_tpu_sweep.py), judged by
# their collective's prediction where measured: XLA:TPU keeps a matrix's reduce-scatter
# from some size on (the compiled record says which), and makes a vector's an all-reduce.
MATRICES = {"reduce_scatter": "reduce_scatter_2d", "all_gather": "all_gather_2d"}
NOT_MEASURED = "not measured"


def not_judged(target, program, nbytes, looping, *ranks):
    """"compiles to X: not judged" where, at some p of `ranks`, the compiled record says the
    timed loop compiles to X, not the collective its prediction is of; else None. A
    collective-permute beside it realigns the rows around XLA:TPU's fused ring (tpu.md)."""
    predicted = {program.removesuffix("_2d").replace("_", "-")}
    found = (compiled_to(target, "sweep", program, nbytes, p, looping) for p in ranks)
    return next((f"compiles to {ops}: not judged" for ops in found
                 if ops and set(ops.split(" + ")) - {"collective-permute"} != predicted), None)


def compare(recording, data=None, compiled=None):
    """`compiled`: recordings/<id>.tpu-compiled.json, what each program compiles to."""
    data = data or tpu_predictions.predictions()
    name = predicted_machine(data, recording["environment"]["deviceKind"])
    costs, looping = own_costs(recording)
    # A machine the compiled record lacks compiled nothing it can name.
    target = next((target for target in (compiled or {}).get("targets", [])
                   if target["accelerator"] == name), {"programs": []})
    rows = []
    judged_rows = [(row, program) for row in data["rows"] if row["machine"] == name
                   for program in (row["collective"], MATRICES.get(row["collective"]))
                   if program == row["collective"] or (program, row["ranks"], row["bytes"])
                   in costs]
    for row, program in judged_rows:
        key = (program, row["ranks"], row["bytes"])
        label = f"{LABELS[program]}, p = {row['ranks']}, {format_bytes(row['bytes'])}"
        entry = {"label": label, "predictedUs": row["predictedUs"], "band": row["band"],
                 "bound": row["bound"], "measuredWords": "—", "overWords": "—",
                 "verdict": NOT_MEASURED}
        if key in costs:
            measured = intervals.median_interval(costs[key])
            over = intervals.median_interval([t / row["predictedUs"] for t in costs[key]])
            entry.update(measured=measured, overPredicted=over,
                         measuredWords=f"{measured['median']:,.1f} ({measured['low']:,.1f}–"
                                       f"{measured['high']:,.1f})",
                         overWords=f"{over['median']:.2f}× ({over['low']:.2f}–"
                                   f"{over['high']:.2f})",
                         verdict=intervals.verdict(over, band=(row["band"]["low"],
                                                              row["band"]["high"])))
        if verdict := not_judged(target, program, row["bytes"], looping, row["ranks"]):
            entry["verdict"] = verdict
        rows.append(entry)
    question = data["ratio"]
    band, ratios = (question["band"]["low"], question["band"]["high"]), []
    for collective in LABELS:
        top = costs.get((collective, question["numerator"], question["bytes"]))
        bottom = costs.get((collective, question["denominator"], question["bytes"]))
        if collective in MATRICES.values() and not (top and bottom):
            continue
        entry = {"label": LABELS[collective], "predicted": question["predicted"],
                 "band": question["band"], "words": "—", "verdict": NOT_MEASURED}
        if top and bottom:
            ratio = intervals.median_interval([t / b for t, b in zip(top, bottom) if b > 0])
            entry.update(measured=ratio, verdict=intervals.verdict(ratio, band=band),
                         words=f"{ratio['median']:.2f} ({ratio['low']:.2f}–"
                               f"{ratio['high']:.2f})")
        if verdict := not_judged(target, collective, question["bytes"], looping,
                                 question["numerator"], question["denominator"]):
            entry["verdict"] = verdict
        ratios.append(entry)
    verdicts = [entry["verdict"] for entry in rows + ratios]
    return {"machine": name, "deviceKind": recording["environment"]["deviceKind"],
            "collectivesPerCall": looping, "rows": rows, "ratios": ratios,
            "counts": {word: verdicts.count(word)
                       for word in (intervals.SUPPORTED, intervals.CONTRADICTED,
                                    intervals.INCONCLUSIVE, NOT_MEASURED)},
            "notJudged": sum(verdict.endswith("not judged") for verdict in verdicts)}

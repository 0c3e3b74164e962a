"""What distributed-03's timings mean: intervals, verdicts and the words its pages print.

A derived file, like a figure: `record.py` (and `--render-only`, with no JAX) turns each
recording named in lessons.toml `analyses` into recordings/analysis/<recording>.json,
which the pages read. Rewording a sentence here re-renders; it never re-measures.
NumPy only, and no lesson program is imported: the recordings are the only input.
"""
import statistics

from scripts import intervals

NAMES = {"gloo": "gloo's", "ring": "the ring's", "reduce_scatter": "reduce-scatter",
         "all_gather": "all-gather", "all_reduce": "all-reduce",
         "all_gather_only": "all-gather alone"}


def host(timing, environment):
    return intervals.host([timing["hostBefore"], timing["hostAfter"]], environment, "processes")


def program_timing(timing, environment):
    """Per program: the median of its block medians with its interval, and the spread."""
    programs = {name: intervals.summary(blocks) for name, blocks in timing["samplesUs"].items()}
    for stat in programs.values():
        stat["words"] = intervals.words(stat, digits=0)
    design = {key: timing[key] for key in ("blocks", "samplesPerBlock", "warmupCallsPerBlock")}
    return {"programs": programs, "design": design, "host": host(timing, environment),
            "widestBlockSpread": max(stat["blockSpread"] for stat in programs.values())}


# gloo's messages and dependency depth per call, read from gloo's source
# (gloo/allgather.cc, gloo/allreduce.cc): its all-gather sends each chunk as two halves
# and keeps two operations in flight ("we always wait for the next-to-last operation"),
# so 2(p - 1) messages form two independent chains of p - 1; its ring all-reduce does
# that in both phases. Its reduce-scatter is halving-doubling: log2 p exchanges, plus one
# hand-off of the bit-reversed slices when p > 2. The ring is p - 1 ppermutes a phase.
def messages_per_rank(algorithm, collective, ranks):
    if algorithm == "ring":
        return {"reduce_scatter": ranks - 1, "all_gather": ranks - 1,
                "all_reduce": 2 * (ranks - 1)}[collective]
    halving_doubling = (ranks - 1).bit_length() + (ranks > 2)
    return {"reduce_scatter": halving_doubling, "all_gather": 2 * (ranks - 1),
            "all_reduce": 4 * (ranks - 1)}[collective]


def dependent_rounds(algorithm, collective, ranks):
    """Messages a rank must wait for one after another: with two in flight, half of
    gloo's all-gather and all-reduce messages; every message for the others."""
    messages = messages_per_rank(algorithm, collective, ranks)
    windowed = algorithm == "gloo" and collective in ("all_gather", "all_reduce")
    return messages // 2 if windowed else messages


# The lesson program's timed names for the collectives the rounds experiment times
# again: the same 32-byte collective on the same processes, measured twice in one run.
TWINS = {"all_reduce": "all_reduce", "reduce_scatter": "reduce_scatter",
         "all_gather": "all_gather_only"}


COLLECTIVES = ("reduce_scatter", "all_gather", "all_reduce")
ALGORITHMS = ("gloo", "ring")


def rounds_row(rounds, lesson_timing, algorithm, collective, many, few):
    """One collective at p = many and p = few: its times, and the per-round ratio."""
    blocks = {p: rounds["samplesUs"][f"p{p}"][algorithm][collective] for p in (many, few)}
    depth = {p: dependent_rounds(algorithm, collective, p) for p in (many, few)}
    stats = {p: intervals.summary(blocks[p]) for p in (many, few)}
    # Per round at p = many over per round at p = few: above 1 when a round costs more
    # with more processes than cores, as the hypothesis predicts. Means, not medians:
    # with more processes than cores a block either shares the cores well or waits out
    # another process's time slice (milliseconds), and the median of such blocks jumps
    # between the two kinds from one run to the next (intervals.paired_mean_ratio).
    scale = depth[few] / depth[many]
    ratio = intervals.paired_mean_ratio(blocks[many], blocks[few], scale=scale)
    twin = twin_mean = None
    if algorithm == "gloo" and collective in TWINS and lesson_timing is not None:
        # Means against means, as the ratio is: the first table prints medians, so the
        # page shows this mean beside the factor (content review L1).
        twin_mean = lesson_timing["programs"][TWINS[collective]]["mean"]
        twin = max(twin_mean, stats[many]["mean"]) / min(twin_mean, stats[many]["mean"])
    return {"algorithm": algorithm, "collective": collective,
            "name": f"{NAMES[algorithm]} {NAMES[collective]}",
            "messages": {f"p{p}": messages_per_rank(algorithm, collective, p)
                         for p in (many, few)},
            "dependentRounds": {f"p{p}": depth[p] for p in (many, few)},
            "timing": {f"p{p}": {**stats[p], "words": intervals.words(stats[p], digits=0),
                                 "meanWords": f"{stats[p]['mean']:,.0f}",
                                 "perRoundUs": stats[p]["mean"] / depth[p]}
                       for p in (many, few)},
            "perRoundRatio": {**ratio, "words": intervals.words(ratio, unit="×")},
            "pair": (blocks[many], blocks[few], scale),
            "twinDisagreement": twin, "twinMeanUs": twin_mean,
            "twinWords": (f"{twin_mean:,.0f}, {twin:.1f}× apart" if twin is not None
                          else "not timed twice")}


def algorithm_verdict(algorithm, rows, premise):
    """One verdict per algorithm: its three collectives measure one claim (a dependent
    round costs more when the processes outnumber the cores), so their per-round ratios
    are pooled; six separate verdicts would flip between reruns on noise alone.
    Inconclusive when the lesson's own timing and this one, of the same gloo collectives
    and pooled the same way, lie further apart than the pooled effect: one twin alone
    strays that far in one run of three, the three together do not (content review H1)."""
    mine = [row for row in rows if row["algorithm"] == algorithm]
    ratio = intervals.pooled_mean_ratio([row["pair"][:2] for row in mine],
                                        [row["pair"][2] for row in mine])
    twins = [row["twinDisagreement"] for row in mine if row["twinDisagreement"] is not None]
    twin = statistics.geometric_mean(twins) if twins else None
    word = (intervals.verdict(ratio, above=True, replicate_disagreement=twin)
            if premise else "not applicable")
    return {"algorithm": algorithm, "name": NAMES[algorithm].removesuffix("'s"),
            "ratio": {**ratio, "words": intervals.words(ratio, unit="×")}, "twinDisagreement": twin,
            "twinWords": f"{twin:.1f}×" if twin is not None else "not timed twice",
            "widestTwin": max(twins) if twins else None, "verdict": word}


def rounds_verdicts(rounds, lesson_timing, environment):
    """Did a round cost more with more processes than cores? One verdict per algorithm,
    from the per-round ratios of its three collectives."""
    sides = sorted(int(key[1:]) for key in rounds["samplesUs"])
    few, many = sides[0], sides[-1]
    cores = rounds["hostBefore"]["cores"]
    # The hypothesis needs the few processes to have a core each: a core that other
    # work kept busy when the run started is not theirs (whole cores, as they are used).
    busy = environment.get("busyCoresAtStart") or 0.0
    free = cores - round(busy)
    premise = few <= free and cores < many
    rows = [rounds_row(rounds, lesson_timing, algorithm, collective, many, few)
            for algorithm in ALGORITHMS for collective in COLLECTIVES]
    verdicts = {algorithm: algorithm_verdict(algorithm, rows, premise)
                for algorithm in ALGORITHMS}
    for row in rows:
        del row["pair"]  # the raw blocks stay in the recording
    counts = {word: sum(found["verdict"] == word for found in verdicts.values())
              for word in intervals.VERDICTS}
    twins = [row for row in rows if row["twinDisagreement"] is not None]
    widest = max(twins, key=lambda row: row["twinDisagreement"]) if twins else None
    if premise:
        premise_words = (f"With {cores} cores, {many} processes are more than the cores and "
                         f"{few} have a core each, so the hypothesis applies here.")
    elif few > free and cores < many:
        premise_words = (f"Other work kept {busy:.1f} of the {cores} cores busy when the run "
                         f"started, so {few} processes did not have a core each either: "
                         f"this run cannot test the hypothesis, and each verdict is "
                         f"“not applicable”.")
    else:
        premise_words = (f"With {cores} cores, {many} processes are not more than the "
                         f"cores, so the hypothesis does not apply here.")
    return {"many": many, "few": few, "cores": cores, "freeCores": free,
            "premiseHolds": premise, "method": verdicts["gloo"]["ratio"]["method"],
            "premiseWords": premise_words,
            "widestBlockSpread": max(row["timing"][side]["blockSpread"] for row in rows
                                     for side in row["timing"]),
            "rows": {f"{row['algorithm']}_{row['collective']}": row for row in rows},
            "verdicts": verdicts, "verdictCounts": counts, "host": host(rounds, environment),
            "design": {key: rounds[key] for key in ("blocks", "samplesPerBlock",
                                                    "warmupCallsPerBlock", "gradientBytes")},
            "widestTwin": ({"name": widest["name"], "disagreement": widest["twinDisagreement"]}
                           if widest else None)}


def message_check(traffic, ranks):
    """gloo's extra bytes per message at the lesson's 32 B: the bytes counted above the
    ring model, divided by the messages gloo's source says it sends. Equal quotients for
    the all-gather and the all-reduce say the message counts are right."""
    found = {}
    for row in traffic:
        if row["gradientBytes"] == 32 and row["collective"] in ("all_gather", "all_reduce"):
            messages = messages_per_rank("gloo", row["collective"], ranks)
            excess = row["excessBytesPerRank"][0]
            found[row["collective"]] = {"messages": messages, "excessBytes": excess,
                                        "bytesPerMessage": excess / messages}
    return found


def resent_bytes(traffic):
    """Per traffic row, the bytes per call the kernel sent again, fewest and most over
    the ranks: retransmissions differ from rank to rank, so a page quotes their range."""
    return [{"min": min(row["retransmittedBytesPerRank"]),
             "max": max(row["retransmittedBytesPerRank"])} for row in traffic]


FLOAT32_BYTES = 4  # make_problem's gradient is float32


def gradient_size(data, ranks):
    """G, the bytes of the whole gradient the lesson reduces, for its summary table. The
    recording holds the values; the run's own ring payload, B_AR = 2 (p - 1)/p G, must
    agree, so a gradient of another dtype stops here instead of printing a wrong G."""
    values = len(data["gradient"])
    size = FLOAT32_BYTES * values
    all_reduce_payload = data["panels"][1]["series"][0]["y"][0]
    if abs(all_reduce_payload - 2 * (ranks - 1) / ranks * size) > 1e-9:
        raise ValueError(f"the recorded all-reduce payload, {all_reduce_payload} B, is not "
                         f"the ring model's for {values} float32 values on {ranks} ranks; "
                         f"update gradient_size in {__name__}")
    return {"values": values, "bytes": size, "ranks": ranks}


def compiled_words(compiled, environment):
    """What the compiler made of the lesson's programs, said from the recording's
    `compiledCollectives` alone: a page must not pre-write what a new backend decides."""
    compiler = f"XLA:{environment['backend'].upper()}"
    changed = {asked: ops for asked, ops in compiled.items() if ops != [asked]}
    if not changed:
        return {"kept": True, "words": (
            f"{compiler} kept every collective as asked: each compiled program runs the one "
            f"it asks for, so the timed medians are of those collectives.")}
    runs = "; ".join(f"the {NAMES[asked]} program runs "
                     f"{' + '.join(NAMES[op] for op in ops) or 'no collective'}"
                     for asked, ops in changed.items())
    devices = environment["deviceCount"]
    timed = (f"on {devices} device{'s' * (devices != 1)} nothing crosses between chips, and "
             f"the timed medians are of programs that run no collective"
             if not any(compiled.values()) else
             "the timed medians are of what runs, not of what was asked")
    return {"kept": False, "words": f"{compiler} did not keep every collective as asked: "
                                    f"{runs}; {timed}."}


def analyse_executed(recording):
    """The lesson run on one process (cpu, tpu) or on p processes (cpu-processes)."""
    data = recording["data"]
    environment = recording["environment"]
    result = {"timing": program_timing(data["timing"], environment)}
    if "gradient" in data:
        result["gradient"] = gradient_size(data, environment["deviceCount"])
    if "compiledCollectives" in data:
        result["compiled"] = compiled_words(data["compiledCollectives"], environment)
    if "roundsTiming" in data:
        result["rounds"] = rounds_verdicts(data["roundsTiming"], result["timing"], environment)
    if "traffic" in data:
        result["messageCheck"] = message_check(data["traffic"], environment["processCount"])
        result["resent"] = resent_bytes(data["traffic"])
    return result


def analyse(variant, recording, compiled=None):
    """recordings/<lesson>.<variant>.json -> the analysis the pages read; a TPU sweep's is
    also given what its programs compile to there (<lesson>.tpu-compiled.json)."""
    if variant == "sweep":
        from lesson_code import distributed_03_sweep_analysis
        return distributed_03_sweep_analysis.analyse(recording)
    if variant == "tpu-sweep":  # against the predictions made before it ran
        from lesson_code import distributed_03_tpu_comparison
        return distributed_03_tpu_comparison.compare(recording, compiled=compiled)
    if variant == "tpu-compiled":  # before any VM exists
        from lesson_code import distributed_03_tpu_compiled
        return distributed_03_tpu_compiled.compiled_ahead(recording)
    return analyse_executed(recording)

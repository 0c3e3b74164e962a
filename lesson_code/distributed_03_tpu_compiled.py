"""What distributed-03's programs compile to before any TPU VM exists, in the pages' words.

Read from recordings/distributed-03.tpu-compiled.json alone (`tpu_job.py --write-compiled`,
scripts/hardware/compile.py): its rows are spans of sizes, merged over the calls and over p,
per target (the CPU as recorded, then TPU slices). A derived file, like the analyses: a new
record moves every word here. NumPy-free; no lesson program is imported.
"""
from itertools import takewhile

from scripts.units import format_bytes

MATRIX = "reduce_scatter_2d"  # the TPU sweep's reduce-scatter of rows of up to 4 KiB


def compiled_to(target, of, program, nbytes, ranks, calls=1):
    """What one target compiled the program to at `nbytes` (None: the lesson's own size), p =
    `ranks` and `calls` collectives a call, as "all-gather + all-reduce" words; None where the
    record did not compile it."""
    return next((row["compilesTo"] for row in target["programs"]
                 if (row["of"], row["program"]) == (of, program) and ranks in row["ranks"]
                 and calls in row["collectivesPerCall"]
                 and (row["bytes"] is None) == (nbytes is None)
                 and (nbytes is None or row["bytes"][0] <= nbytes <= row["bytes"][1])), None)


def grouped(pairs):
    """{key: [values]} of (key, value) pairs, keys in the order they first come."""
    found = {}
    for key, value in pairs:
        found.setdefault(key, []).append(value)
    return found


def with_article(ops):
    """"all-gather + all-reduce" -> "an all-gather and an all-reduce"."""
    return " and ".join(op if op == "no collective" else f"{'an' if op[0] in 'aeio' else 'a'} "
                        f"{op}" for op in ops.split(" + "))


def per_target(found):
    """{accelerator: words} as one phrase: "X" where all agree, else "X on the a; Y on the b"."""
    groups = grouped((words, name) for name, words in found.items())
    return next(iter(groups)) if len(groups) == 1 else "; ".join(
        f"{words} on the {' and '.join(names)}" for words, names in groups.items())


def matrix_keeps(target):
    """The smallest size from which a matrix's reduce-scatter stays one at every size above,
    over the whole slice in one call (None where it never does), the largest compiled below
    it (None: none; the onset lies between the two, and nothing says where), that p, the
    largest size compiled, and whether a collective-permute runs beside it at some size."""
    ranks = max(p for row in target["programs"] if row["program"] == MATRIX for p in row["ranks"])
    spans = sorted((row["bytes"], row["compilesTo"]) for row in target["programs"]
                   if row["program"] == MATRIX and ranks in row["ranks"]
                   and 1 in row["collectivesPerCall"])
    kept = len(list(takewhile(lambda span: "reduce-scatter" in span[1].split(" + "),
                              reversed(spans))))
    first = spans[-kept][0][0] if kept else None
    below = (spans[-kept - 1][0][1], spans[-kept - 1][1]) if first and kept < len(spans) else None
    permuted = any("collective-permute" in ops for _, ops in spans[len(spans) - kept:])
    return first, below, ranks, spans[-1][0][1], permuted


def table(slices):
    """The TPU page's table of the lesson's and the sweep's programs (the autodiff page shows
    the gradients): a row per program, p, calls and what it compiles to, with every size it
    does that at; rows alike on several slices once, naming them."""
    rows, order = {}, {}
    for target in slices:
        spans = grouped(((row["program"], row["compilesTo"], row["of"],
                          ", ".join(map(str, row["ranks"])),
                          ", ".join(map(str, row["collectivesPerCall"]))), row["bytes"])
                        for row in target["programs"] if row["of"] != "gradient")
        for (program, ops, of, ranks, calls), sizes in spans.items():
            words = ", ".join("the lesson's" if size is None else "–".join(dict.fromkeys(
                map(format_bytes, size))) for size in sizes)
            order.setdefault((of, program), len(order))
            rows.setdefault((program, ops, of, ranks, words, calls),
                            {"first": (sizes[0] or [0])[0], "on": []})["on"].append(
                target["accelerator"])
    return [{"program": program, "compilesTo": ops, "of": of, "ranks": ranks, "sizes": sizes,
             "calls": calls, "on": ", ".join(held["on"])}
            for (program, ops, of, ranks, sizes, calls), held in sorted(
                rows.items(), key=lambda item: (order[item[0][2], item[0][0]],
                                                item[0][3], item[1]["first"]))]


def twice_the_bytes(targets, ranks):
    """Where ZeRO-3's gradients compile as asked, the plain one to a reduce-scatter and
    to="invarying"'s to an all-reduce (twice the bytes), and where both to an all-reduce."""
    def does(target):  # (("twice" or "alike", layout), size), ...
        for layout, program in (("vector", "sharded_weights"), ("matrix", "sharded_matrix")):
            for nbytes, size in ((None, "the lesson's size"), (2**20, "1 MiB")):
                plain, invarying = (compiled_to(target, "gradient", program + end, nbytes, ranks)
                                    for end in ("", "_invarying"))
                ops = set((plain or "").split(" + "))
                if "reduce-scatter" in ops and invarying and "all-reduce" in invarying:
                    yield ("twice", layout), size
                elif "all-reduce" in ops and "reduce-scatter" not in ops:
                    yield ("alike", layout), size
    words = {"twice": [], "alike": []}
    for found, names in grouped((tuple(does(target)), target["accelerator"])
                                for target in targets).items():
        compiler = "XLA:CPU" if names == ["cpu"] else f"XLA:TPU ({', '.join(names)})"
        parts = grouped((key, f"with a {layout} at {'both sizes' if len(sizes) == 2 else sizes[0]}")
                        for (key, layout), sizes in grouped(found).items())
        for key, said in parts.items():
            words[key].append(f"{compiler} {' and '.join(said)}")
    return {key: "; ".join(places) or "no target" for key, places in words.items()}


def compiled_ahead(recording):
    """What the lesson's programs, its gradients and its TPU sweep's compile to, from the
    record alone: on every slice with the lesson's chips, and one slice up."""
    cpu, *slices = targets = recording["targets"]  # the CPU as the lesson is recorded first
    ranks = next(row["ranks"][0] for row in cpu["programs"] if row["of"] == "lesson")
    chips = [target for target in slices if any(  # a VM with the lesson's chips
        row["of"] == "lesson" and ranks in row["ranks"] for row in target["programs"])]
    names = " and ".join(target["accelerator"] for target in chips)

    def on_chips(of, program, nbytes):
        return per_target({target["accelerator"]: compiled_to(target, of, program, nbytes, ranks)
                           for target in chips})
    lesson = {size: [with_article(on_chips("lesson", program, nbytes))
                     for program in ("reduce_scatter", "all_gather")]
              for size, nbytes in (("own", None), ("real", 2**20))}
    keeps = grouped(((*matrix_keeps(target), target["topology"].split(":")[1].replace(
        "x", "×")), target["accelerator"]) for target in slices)
    keep_words = " and ".join(
        ("at no size" if not kept else f"at {format_bytes(kept)}" if kept == largest
         else f"from {format_bytes(kept)} to {format_bytes(largest)}")
        + f" on a {shape} (p = {p}: {', '.join(names)}"
        + (f"; {with_article(below[1])} at {format_bytes(below[0])}" if below else "")
        + ("; beside a collective-permute at the largest sizes" if permuted else "") + ")"
        for (kept, below, p, largest, permuted, shape), names in keeps.items())
    first_screen = (
        f"on a {ranks}-chip slice ({names}), XLA:TPU compiles the lesson's psum_scatter to "
        f"{lesson['own'][0]} and its all_gather to {lesson['own'][1]}; for a 1 MiB "
        f"gradient, to {lesson['real'][0]} and to {lesson['real'][1]}. A matrix's "
        f"reduce-scatter stays one {keep_words}.")
    gradients = {program: {"cpu": compiled_to(cpu, "gradient", program, None, ranks),
                           "own": on_chips("gradient", program, None),
                           "real": on_chips("gradient", program, 2**20)}
                 for program in dict.fromkeys(row["program"] for row in cpu["programs"]
                                              if row["of"] == "gradient")}
    return {"slices": names, "firstScreen": first_screen, "matrixKeeps": keep_words,
            "table": table(slices), "gradients": gradients, "gradientOrder": list(gradients),
            "invarying": twice_the_bytes(targets, ranks)}

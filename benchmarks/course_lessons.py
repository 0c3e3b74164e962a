"""Lessons of their own for benchmarks/course_scale.py, which grows a copy of the course.

Copies of the seed would measure the seed N times: its sweep, rank module and going-further
steps are no typical lesson. Copies of the fixture lesson would measure too little. So
lesson i is written here from lesson_code/CONTRACT.md alone, as a course author would:
8 logical devices, one collective of five (psum, psum_scatter, all_gather, ppermute,
all_to_all, in turn) over a shape of its own, its own renderer, one exercise, and a page
of about 280 lines that includes its module's sections and shows its recorded values.

    write_lessons(root, 3)   # course-01 .. course-03 added to the project at `root`
"""
import re
from pathlib import Path

# What differs between lessons: the collective, the shape it runs on, the words about it.
# `body` is the per-device step; `reference` the NumPy answer on the whole array `x`;
# `model` the bytes one device sends in the ideal ring; `hlo` the StableHLO op it lowers to.
COLLECTIVES = [
    dict(name="psum", hlo="all_reduce", out_spec="P()",
         sweep="jax.lax.psum(block, AXIS)", sweep_out="the same, summed over devices",
         sweep_spec="P()", sweep_over_s="1 / ranks",
         title="Column totals on every device with psum",
         does="sums one vector over all devices and leaves the whole sum on each",
         body="return jax.lax.psum(block.sum(axis=0), AXIS)  # f32[COLS] everywhere",
         reference="x.sum(axis=0)", signature="f32[ROWS/p, COLS] -> f32[COLS], the same on all",
         model="2 * (ranks - 1) / ranks * x[0].nbytes", formula=r"2\frac{p-1}{p}\,4C",
         mistake="summing the block's rows and forgetting the other devices' rows"),
    dict(name="psum_scatter", hlo="reduce_scatter", out_spec="P(AXIS)",
         sweep="jax.lax.psum_scatter(block, AXIS, scatter_dimension=0, tiled=True)",
         sweep_out="its slice of the sum, f32[rows/p², COLS]", sweep_spec="P(AXIS)",
         sweep_over_s="1 / ranks**2",
         title="A sum split over the devices with psum_scatter",
         does="sums one vector over all devices and leaves each device one slice of it",
         body="return jax.lax.psum_scatter(block.sum(axis=0), AXIS, scatter_dimension=0,\n"
              "                             tiled=True)  # f32[COLS/p]: this device's slice",
         reference="x.sum(axis=0)", signature="f32[ROWS/p, COLS] -> f32[COLS/p], slice r",
         model="(ranks - 1) / ranks * x[0].nbytes", formula=r"\frac{p-1}{p}\,4C",
         mistake="expecting the whole sum on device 0 when it holds only its slice"),
    dict(name="all_gather", hlo="all_gather", out_spec="P()",
         sweep='jax.lax.all_gather(block, AXIS, tiled=True, to="invarying")',
         sweep_out="every block, f32[rows, COLS]", sweep_spec="P()", sweep_over_s="1",
         title="Every block on every device with all_gather",
         does="copies each device's block to every other device, in device order",
         body='return jax.lax.all_gather(block, AXIS, tiled=True, to="invarying")',
         reference="x", signature="f32[ROWS/p, COLS] -> f32[ROWS, COLS], the same on all",
         model="(ranks - 1) / ranks * x.nbytes", formula=r"\frac{p-1}{p}\,4RC",
         mistake="stacking the blocks on a new axis, f32[p, ROWS/p, COLS], without tiled=True"),
    dict(name="ppermute", hlo="collective_permute", out_spec="P(AXIS)",
         sweep="jax.lax.ppermute(block, AXIS, [(r, (r + 1) % jax.lax.axis_size(AXIS))\n"
               "                                     for r in range(jax.lax.axis_size(AXIS))])",
         sweep_out="the block of device r - 1", sweep_spec="P(AXIS)", sweep_over_s="1 / ranks",
         title="Blocks passed around a ring with ppermute",
         does="sends each device's block to the device SHIFT places to its right",
         body="p = jax.lax.axis_size(AXIS)\n"
              "    return jax.lax.ppermute(block, AXIS, [(r, (r + SHIFT) % p) for r in range(p)])",
         reference="np.roll(x, SHIFT * ROWS // ranks, axis=0)",
         signature="f32[ROWS/p, COLS] -> f32[ROWS/p, COLS], the block of device r - SHIFT",
         model="x.nbytes / ranks", formula=r"\frac{4RC}{p}",
         constants="SHIFT = «shift»  # how many devices to the right each block moves",
         mistake="naming a pair twice, which JAX refuses: a permutation sends once per device"),
    dict(name="all_to_all", hlo="all_to_all", out_spec="P(None, AXIS)",
         sweep="jax.lax.all_to_all(block, AXIS, split_axis=1, concat_axis=0, tiled=True)",
         sweep_out="f32[rows, COLS/p], columns r", sweep_spec="P(None, AXIS)",
         sweep_over_s="1 / ranks",
         title="From rows to columns with all_to_all",
         does="re-splits the array: rows over devices become columns over devices",
         body="return jax.lax.all_to_all(block, AXIS, split_axis=1, concat_axis=0, tiled=True)",
         reference="x", signature="f32[ROWS/p, COLS] -> f32[ROWS, COLS/p], columns r",
         model="(ranks - 1) / ranks * x.nbytes / ranks", formula=r"\frac{p-1}{p}\,\frac{4RC}{p}",
         mistake="swapping split_axis and concat_axis, which gathers rows instead of columns"),
]

MODULE = '''"""«id» · «title».

One collective, jax.lax.«name», on 8 logical devices.
It «does».
Generated by benchmarks/course_lessons.py, from lesson_code/CONTRACT.md alone.
"""
LESSON_ID = "«id»"


# --8<-- [start:configure_devices]
# Eight logical CPU devices stand in for eight chips: the program is the same on both.
import jax


def configure_devices(platform="cpu", count=8):
    """Pick the backend and return `count` devices, before anything else asks for one."""
    jax.config.update("jax_platforms", platform)
    if platform == "cpu":
        jax.config.update("jax_num_cpu_devices", count)
    return jax.devices()[:count]
# --8<-- [end:configure_devices]


# --8<-- [start:make_data]
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

AXIS = "devices"
ROWS, COLS = «rows», «cols»  # the whole array, f32[ROWS, COLS]; its rows split over devices
«constants»


def make_data(ranks):
    """f32[ROWS, COLS] of small whole numbers, cycling through «modulus» values."""
    assert ROWS % ranks == 0 and COLS % ranks == 0, f"{ranks} must divide {ROWS} and {COLS}"
    return np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS) % «modulus» + 1


def place(devices, x):
    """A one-axis mesh, and x on it with device r holding rows r*ROWS/p onwards."""
    mesh = Mesh(np.asarray(devices), (AXIS,))
    return mesh, jax.device_put(x, NamedSharding(mesh, P(AXIS)))
# --8<-- [end:make_data]


# --8<-- [start:collective_step]
def collective_step(block):
    """Per device: «signature»."""
    «body»
# --8<-- [end:collective_step]


# --8<-- [start:build_program]
def build_program(mesh, step=collective_step):
    """The step on every device at once, compiled: rows in, the collective's layout out."""
    return jax.jit(jax.shard_map(step, mesh=mesh, in_specs=P(AXIS), out_specs=«out_spec»))
# --8<-- [end:build_program]


# --8<-- [start:check]
OPS = ("all_reduce", "reduce_scatter", "all_gather", "collective_permute", "all_to_all")


def expected(x, ranks):
    """What the program must return, computed by NumPy on the whole array."""
    return «reference»


def lowered_ops(program, x):
    """The collectives the program asks the compiler for, by StableHLO name."""
    text = program.lower(x).as_text()
    return [op for op in OPS if f"stablehlo.{op}" in text]
# --8<-- [end:check]


# --8<-- [start:per_device]
def per_device(result):
    """Each device's first value, in device order: where the collective put what."""
    shards = sorted(result.addressable_shards, key=lambda shard: shard.device.id)
    return [float(np.asarray(shard.data).reshape(-1)[0]) for shard in shards]
# --8<-- [end:per_device]


# --8<-- [start:traffic]
def ring_bytes(ranks, x):
    """Bytes one device sends for x on `ranks` devices, in the ideal ring model."""
    return «model»


def traffic_table(x, ranks=(2, 4, 8)):
    """The model's bytes per device for this array, one row per device count."""
    return [{"ranks": p, "blockBytes": x.nbytes // p, "sentBytes": int(ring_bytes(p, x))}
            for p in ranks]
# --8<-- [end:traffic]


# --8<-- [start:run_lesson]
def run_lesson(devices):
    """Each step, then what it shows; returns the recording's data."""
    ranks = len(devices)
    print(f"Devices: {ranks} × {devices[0].device_kind}")
    x = make_data(ranks)
    mesh, placed = place(devices, x)
    block = placed.addressable_shards[0].data.shape
    print(f"Whole array f32{list(x.shape)}; device 0 holds f32{list(block)}")
    program = build_program(mesh)
    result = program(placed)
    local = result.addressable_shards[0].data.shape
    print(f"«name»: result f32{list(result.shape)}; device 0 holds f32{list(local)}")
    np.testing.assert_allclose(np.asarray(result), expected(x, ranks), rtol=1e-6)
    ops = lowered_ops(program, placed)
    assert ops == ["«hlo»"], f"the program asks for {ops}, not «hlo»"
    print(f"Matches NumPy; the lowered program asks for {ops}")
    holdings = per_device(result)
    print("First value on each device:", holdings)
    traffic = traffic_table(x)
    print("Ring-model bytes sent per device:", {t["ranks"]: t["sentBytes"] for t in traffic})
    print(f"PASS: {LESSON_ID}")
    return {"shape": list(x.shape), "block": list(block), "result": f"f32{list(result.shape)}",
            "local": f"f32{list(local)}", "checksum": float(np.asarray(result).sum()), "ops": ops,
            "holdings": holdings, "traffic": traffic, "environment": {
                "backend": jax.default_backend(), "deviceCount": ranks,
                "deviceKind": devices[0].device_kind, "processCount": jax.process_count(),
                "jax": jax.__version__, "numpy": np.__version__}}
# --8<-- [end:run_lesson]


if __name__ == "__main__":
    if __package__:  # python -m: the course's command line (lesson_code/program.py), by name
        import importlib
        raise SystemExit(importlib.import_module(f"{__package__}.program").main(__spec__.name))
    run_lesson(configure_devices())  # the file alone, as a reader downloads it
'''

FIGURE = '''"""«id»'s own figure: the ring model's bytes per device, and where each device's first
value ended up after «name». Rows: one per device count (bytes) and one per device (value).

A renderer of the lesson's own (lesson_code/CONTRACT.md, "Figures"), drawn in the four
variants from the lesson's CPU recording, importing no lesson program.
"""
from scripts.figures.svg import figure_style, new_figure, svg_text


def render(recording, variant):
    data, palette = recording["data"], variant.palette
    traffic, holdings = data["traffic"], data["holdings"]
    with figure_style(palette=palette):
        size, grid = ((3.4, 4.4), dict(nrows=2)) if variant.narrow else ((7.2, 2.6), dict(ncols=2))
        fig, (left, right) = new_figure(figsize=size, **grid)
        ranks = [str(row["ranks"]) for row in traffic]
        bars = left.bar(ranks, [row["sentBytes"] for row in traffic], width=0.5,
                        color=palette.bars[«colour»])
        left.bar_label(bars, labels=[f"{row['sentBytes']:,}" for row in traffic], padding=2)
        left.set(xlabel="devices p", ylabel="bytes sent per device")
        right.plot(range(len(holdings)), holdings, marker="o", color=palette.series[«colour»])
        right.set(xlabel="device", ylabel="first value held", xticks=range(len(holdings)))
        for axes in (left, right):
            axes.spines[["top", "right"]].set_visible(False)
        left.margins(y=0.2)
        fig.tight_layout()
        desc = (", ".join(f"{row['sentBytes']:,} bytes at p = {row['ranks']}" for row in traffic)
                + "; first values by device: " + ", ".join(f"{v:g}" for v in holdings))
        title = "«name»: ring bytes per device, and what each device holds"
        return svg_text(fig, title, desc)


def rows(recording):
    """The figure's data: a row per device count (its bytes) and per device (its value)."""
    data = recording["data"]
    return [*({"ranks": row["ranks"], "sentBytes": row["sentBytes"]} for row in data["traffic"]),
            *({"device": device, "firstValue": value}
              for device, value in enumerate(data["holdings"]))]
'''

SCAFFOLD = '''"""Exercise: write «id»'s collective step yourself, with jax.lax.«name».

Fill in `«exercise»` below, then check it:

    python -m lesson_code.«module»_exercises               # your scaffold: one line
    python -m lesson_code.«module»_exercises --reference   # the lesson's own: passes
"""
if __name__ == "__main__":  # before JAX loads: the checker is the course's
    from lesson_code.exercise import run_checker
    run_checker("--lesson", "«id»", "--exercise", "«exercise»")

import jax

from lesson_code.«module» import AXIS


# --8<-- [start:scaffold]
def «exercise»(block):
    """Per device: «signature»."""
    raise NotImplementedError("TODO: one jax.lax.«name» over AXIS, as the page shows")
# --8<-- [end:scaffold]
'''

CHECKS = '''"""The check of «id»'s exercise, apart from the scaffold a learner edits: `attempt` runs
in the learner's process on the lesson's devices, `answer` and `compare` in the checker's."""
import jax
import numpy as np
from jax.sharding import Mesh

from lesson_code.exercise import Exercise
from lesson_code.«module» import AXIS, build_program, collective_step, expected, make_data

MISTAKE = "«mistake»"


def attempt(implementation):
    devices = jax.devices()
    x = make_data(len(devices))
    return np.asarray(build_program(Mesh(np.asarray(devices), (AXIS,)), implementation)(x))


def answer(devices):
    return expected(make_data(devices), devices)


def compare(got, want):
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == want.shape, f"the result is {got.shape}, not {want.shape}"
    wrong = np.argwhere(~np.isclose(got, want))
    assert not len(wrong), (f"{len(wrong)} values differ, first at {wrong[0].tolist()}; "
                            f"the usual mistake: {MISTAKE}")


EXERCISES = [Exercise("«exercise»", "lesson_code.«module»_exercises:«exercise»",
                      collective_step, answer, attempt, compare)]
'''

# A measured lesson (every fifth, from the first: CONTRACT.md, "A measured lesson") adds a
# sweep of its collective against a copy that crosses no device, the analysis that reads
# it through the course's scripts/sweep/reading.py, a figure drawn from that analysis and
# a page section of its verdicts.
SWEEP = '''"""«id»'s sweep (`make bench`): jax.lax.«name» against the same block doubled on its own
device, one collective per call and LOOP of them in one call, at a few sizes.

scripts/bench.py measures each p in a fresh interpreter (configure_devices first) and
stops on any row whose `wrong` is not 0.
"""
import resource
import time

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from lesson_code.«module» import AXIS

COLS = 8  # f32[rows, COLS]: every p of the sweep divides it, and p² the rows
SIZES = (4096, 65536, 1048576)  # bytes of the whole array
LOOP = 8  # collectives in the looped call


# --8<-- [start:programs]
def collective_block(block):  # per device: f32[rows/p, COLS] -> «sweep_out»
    return «sweep»


def local_block(block):  # per device: the same block doubled, and no collective
    return block * 2


PROGRAMS = {"«name»": (collective_block, «sweep_spec»), "local": (local_block, P(AXIS))}


def looped(step, count):
    """`count` calls of `step` in one fori_loop, each after the last (a barrier)."""
    def program(block):
        def again(_, carry):
            block, _ = jax.lax.optimization_barrier(carry)
            return block, step(block)
        return jax.lax.fori_loop(1, count, again, (block, step(block)))[1]
    return program
# --8<-- [end:programs]


def configure_devices(ranks):
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_num_cpu_devices", ranks)


def sizes_for(sizes, ranks):
    """[(requested, bytes)]: whole rows of COLS floats, a multiple of p² rows."""
    rows = [-(-(nbytes // (4 * COLS)) // ranks**2) * ranks**2 for nbytes in sizes]
    return [(nbytes, 4 * COLS * count) for nbytes, count in zip(sizes, rows)]


def program_facts(ranks):
    return {name: {"phases": 1, "steps": 1, "ring": False, "touchedOverS": None}
            for name in PROGRAMS}


def compiled(mesh, name, count, x):
    step, out_spec = PROGRAMS[name]
    step = step if count == 1 else looped(step, count)
    program = jax.shard_map(step, mesh=mesh, in_specs=P(AXIS), out_specs=out_spec)
    return jax.jit(program).lower(x).compile()


def sample(call, x, calls):
    """(us per call, minor page faults) over `calls` calls, each waited for."""
    faults, start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
    for _ in range(calls):
        call(x).block_until_ready()
    return ((time.perf_counter() - start) / calls * 1e6,
            resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults)


def timed(call, x, plan):
    """Warm up, double the calls until a sample lasts minSampleMs, then the samples."""
    call(x).block_until_ready()
    calls = 1
    while sample(call, x, calls)[0] * calls < plan["minSampleMs"] * 1e3:
        calls *= 2
    samples = [sample(call, x, calls) for _ in range(plan["samples"])]
    return {"callsPerSample": calls, "warmupCalls": 1,
            "samplesUs": [us for us, _ in samples], "minorFaults": [f for _, f in samples]}


def measure_ranks(devices, sizes, plan, block=0, on_step=lambda text: None):
    """Each size's programs in turns that rotate with the block; a looped call must give
    what one call gives (`wrong` counts the values that differ)."""
    ranks, mesh, rows = len(devices), Mesh(np.asarray(devices), (AXIS,)), []
    for requested, nbytes in sizes_for(sizes, ranks):
        x = np.arange(nbytes // 4, dtype=np.float32).reshape(-1, COLS) % 7
        x = jax.device_put(x, NamedSharding(mesh, P(AXIS)))
        turns = [(name, count) for name in PROGRAMS for count in (1, LOOP)]
        turns = turns[block % len(turns):] + turns[:block % len(turns)]
        once = {name: np.asarray(compiled(mesh, name, 1, x)(x)) for name in PROGRAMS}
        for position, (name, count) in enumerate(turns):
            call = compiled(mesh, name, count, x)
            timing = timed(call, x, plan)
            rows.append({"collective": name, "ranks": ranks, "block": block,
                         "position": position, "requestedBytes": requested, "bytes": nbytes,
                         "collectivesPerCall": count, **timing,
                         "wrong": int(np.count_nonzero(np.asarray(call(x)) != once[name]))})
            on_step(f"{name} x{count} {nbytes} B")
    return rows


def donation_probe(devices, nbytes):
    return None  # this sweep donates nothing


def allocator_probe(devices, nbytes, plan, block=0):
    return None  # nor does it change the allocator


def describe_backend():
    return {"backend": jax.default_backend(), "deviceKind": jax.devices()[0].device_kind,
            "jax": jax.__version__}
'''

ANALYSIS = '''"""What «id»'s sweep means (lessons.toml `analysis`): per p, one more «name»
in the loop over one more copy of the same block on its own device, warm and
allocation-free at the largest size, and the verdict that the collective costs more.
The reading is the course's (scripts/sweep/reading.py); the words are the lesson's.
"""
from scripts import intervals
from scripts.sweep import reading
from scripts.units import format_bytes

LABELS = {"«name»": "«name»", "local": "copy on its own device"}


def output_over_s(program, ranks):
    """Bytes each device's output holds, as a multiple of the array's S."""
    return «sweep_over_s» if program == "«name»" else 1 / ranks


def analyse(variant, recording):
    t = reading.timings(recording, output_over_s)
    ranks = sorted({p for _, p, _ in t.calls})
    sizes = sorted({nbytes for _, _, nbytes in t.calls})
    by_ranks = {}
    for p in ranks:
        ratio, _ = reading.paired_ratio(reading.warm_costs(t, ("«name»", p, sizes[-1])),
                                        reading.warm_costs(t, ("local", p, sizes[-1])))
        by_ranks[str(p)] = {"verdict": intervals.verdict(ratio, above=True),
                            "words": reading.ratio_words(ratio or {"n": 0},
                                                         len(t.calls["«name»", p, sizes[-1]]))}
    return {"ranks": ranks, "largest": format_bytes(sizes[-1]), "byRanks": by_ranks,
            "labels": LABELS, "points": reading.points(t, recording["programs"]),
            "onsetWords": reading.onset_words(reading.onsets(t), sizes, LABELS),
            "verdictCounts": reading.verdict_counts(by_ranks.values()),
            "host": reading.host(recording)["words"]}
'''

TIMING_FIGURE = '''"""«id»'s sweep, drawn from its analysis: the median time per call of
«name» and of the copy on its own device, against the array's size, one line per program
and p. Rows: one per program, p and size.
"""
from scripts.figures.svg import figure_style, new_figure, svg_text

DRAWN_FROM = "sweep.analysis"  # the lesson's analysis of its sweep, not its CPU recording


def render(analysis):
    with figure_style():
        fig, ax = new_figure(figsize=(4.8, 3.2))
        for line in lines(analysis):
            ax.plot(line["bytes"], line["medianUs"], marker="o", label=line["label"],
                    linestyle="-" if line["program"] == "«name»" else "--")
        ax.set(xscale="log", yscale="log", xlabel="array bytes S", ylabel="µs per call")
        ax.legend(frameon=False, fontsize=7, ncols=2)
        ax.spines[["top", "right"]].set_visible(False)
        fig.tight_layout()
        desc = "; ".join(f"{line['label']}: " + ", ".join(f"{us:.0f} µs" for us in line["medianUs"])
                         for line in lines(analysis))
        return svg_text(fig, "«name» against a copy, per call, by size", desc)


def lines(analysis):
    found = {}
    for point in analysis["points"]:
        key = (point["collective"], point["ranks"])
        line = found.setdefault(key, {"program": key[0], "bytes": [], "medianUs": [],
                                      "label": f"{analysis['labels'][key[0]]}, p = {key[1]}"})
        line["bytes"].append(point["bytes"])
        line["medianUs"].append(point["medianUs"])
    return list(found.values())


def rows(analysis):
    """The figure's data: a program's median per call at one p and size."""
    return [{"program": point["collective"], "ranks": point["ranks"], "bytes": point["bytes"],
             "medianUs": point["medianUs"]} for point in analysis["points"]]
'''

MEASURED_ENTRY = '''sweep = "lesson_code.«module»_sweep"
analysis = "lesson_code.«module»_analysis"
analyses = ["sweep"]
'''

# Of its sweep's analysis, as the page reads it: `A(largest)` is
# {{ rec:<id>.sweep.analysis:largest }}.
MEASURED_PAGE = '''## Step 8: what one more costs

The ring model counts bytes. A clock counts what a call costs on this host, and the
course measures it the same way for every lesson. `make bench` times the step against a
copy of the same block on its own device, at a few sizes, on 2, 4 and 8 devices, in
blocks that take turns.

```python
--8<-- "lesson_code/«module»_sweep.py:programs"
```

Each program runs once per call, and eight times in one looped call. The difference
over the seven extra calls is one more collective, warm and with nothing dispatched. At
A(largest), one more `«name»` over one more copy, block by block:

| devices p | ratio (interval) | that it costs more |
|---|---|---|
{{ rec-table:«id».sweep.analysis:byRanks@ranks | {*} | {words} | {verdict} }}

A verdict is *supported* only when the whole interval lies above 1.25. It is
*inconclusive* on fewer than three blocks. In this sweep, A(onsetWords).

![«name» against a copy: time per call by size and p](../figures/«id»-«module_dashes»-timing.svg)

A(host)

??? question "Why compare with a copy and not with nothing?"

    A copy of the same block pays for the memory it touches. What the collective costs
    beyond it is the part that crosses devices.

'''

ENTRY = '''
[[lesson]]
id = "«id»"
module = "lesson_code.«module»"
devices = 8
figures = [«figures»]
exercises = "lesson_code.«module»_checks"
«measured_entry»'''

# Of the recording, as the page reads it: `R(data.shape.0)` is {{ rec:<id>.cpu:data.shape.0 }}.
PAGE = '''---
lesson: «id»
---

# «title»

Lesson «index» of the grown course · about 30 minutes · 8 logical CPU devices (a laptop
is enough)

!!! abstract takeaway "The lesson in one table"

    | quantity | recorded value |
    |---|---|
    | whole array | f32[R(data.shape.0), R(data.shape.1)] |
    | each device's block before | f32[R(data.block.0), R(data.block.1)] |
    | the result's global shape | R(data.result) |
    | each device's part after | R(data.local) |
    | what the program lowers to | R(data.ops.0) |
    | ring bytes sent per device at p = 8 | R(data.traffic.2.sentBytes|,d) |

    The collective here, `jax.lax.«name»`, «does». Its cost in the ring model is
    \\(«formula»\\) bytes per device, for an array of \\(R\\) rows and \\(C\\) columns.

Get the [executed notebook](../notebooks/«id».md) to run it yourself. Every value on
this page comes from the recording made on R(generatedAt) with JAX R(environment.jax)
on R(environment.deviceCount) logical devices of the `R(environment.backend)` backend.

## What you will be able to do

- Call `jax.lax.«name»` inside `shard_map` and say what each device holds after it.
- Check a collective's result against NumPy on the whole array.
- Read the lowered program to see which collective the compiler was asked for.
- Count the bytes each device sends, in the ideal ring model.

## The problem

Eight devices each hold a block of rows of one array. The next step needs the data laid
out differently. Some steps need a sum, some need every block, some need a neighbour's
block. Moving data between devices is the part that costs. So we want to know exactly
what moves, and how much of it.

## The idea

A collective is one call that every device makes at the same time. Each device passes
in its own block and gets back its own part of the answer. The call «does». What each
device gets back is fixed by the call's arguments and by `out_specs`.

$$
B_{\\text{sent}} = «formula»
$$

That is the model. It counts bytes on the wire and ignores each message's fixed cost.
On small arrays the fixed cost dominates, so treat the model as a floor.

## Step 1: eight devices

JAX decides its devices once, when the first computation asks for them. So the lesson
picks the backend and the device count before anything else runs.

```python
--8<-- "lesson_code/«module».py:configure_devices"
```

The run saw R(environment.deviceCount) devices. On a machine with chips, the same
function with `platform="tpu"` returns the chips instead. Nothing else changes.

??? question "Why must the device count be set before the first computation?"

    JAX creates its backend once. After that the number of CPU devices is fixed for the
    process. Setting it later raises an error, or silently keeps the old count.

## Step 2: the data and its blocks

The array holds small whole numbers in a repeating pattern, so a misplaced block shows.
The mesh has one axis, `"devices"`. Rows are split over it: device r holds the r-th block.

```python
--8<-- "lesson_code/«module».py:make_data"
```

The whole array is f32[R(data.shape.0), R(data.shape.1)]. Each device holds
f32[R(data.block.0), R(data.block.1)]: one eighth of the rows, every column. The
assertion in `make_data` guards the shapes. A device count that does not divide them is
refused in one line.

??? question "What would device 3 hold with four devices instead of eight?"

    A quarter of the rows: rows 3R/4 onwards. The columns stay whole. The code is the
    same; only `ranks` changes.

## Step 3: the collective step

This is the lesson's one call. It runs on every device at once, each with its own
block. Inside `shard_map`, `block` is the local piece, never the whole array.

```python
--8<-- "lesson_code/«module».py:collective_step"
```

The signature in the docstring is the contract: «signature». Read it before the code.
The axis name ties the call to the mesh. A misspelt name fails when the program is
traced, not later.

??? question "What goes wrong if the step forgets the collective?"

    Each device returns a result from its own block only. The shapes may even match.
    The values do not: the check in Step 5 catches it.

## Step 4: one program for all devices

`shard_map` turns the per-device step into one program over the mesh. `jax.jit`
compiles it once. The `out_specs` say how the per-device results form a global array.

```python
--8<-- "lesson_code/«module».py:build_program"
```

The result's global shape is R(data.result). Device 0 holds R(data.local) of it.
Here `out_specs` is `«out_spec»`. With `P()` every device holds the same whole result.
With `P(AXIS)` the devices' parts stack along the first axis.

??? question "Why is `step` a parameter of `build_program`?"

    So that the exercise can pass its own step. The program around it stays the
    lesson's, and only the collective is the learner's.

## Step 5: check it against NumPy

A collective is easy to get almost right. So the lesson checks the whole result against
NumPy, and reads the lowered program to see which collective was asked for.

```python
--8<-- "lesson_code/«module».py:check"
```

The result matched NumPy, and the program asks for R(data.ops.0). The sum of the result
is R(data.checksum|,.0f). That one number changes if any value moves.

??? question "Why read the lowered program and not the compiled one?"

    The lowered program is what we asked for. The compiler may rewrite it, for example
    into a cheaper pattern on one device. The lesson checks our request.

## Step 6: where the values went

Each device's first value tells where its part came from. It is a quick map of the
collective's data movement.

```python
--8<-- "lesson_code/«module».py:per_device"
```

Device 0 starts with R(data.holdings.0|g) and device 7 with R(data.holdings.7|g). The figure
below draws all eight, beside the bytes the ring model sends.

![«name»: the bytes each device sends, and the value each holds](../figures/«id»-«figure».svg)

??? question "Which devices hold the same first value, and why?"

    After a replicating collective, all of them. After a splitting one, none. Read the
    figure's right panel against Step 4's `out_specs`.

## Step 7: what it costs

The ring model counts the bytes each device sends. It ignores the fixed cost of a
message, which dominates for small arrays.

```python
--8<-- "lesson_code/«module».py:traffic"
```

| devices p | block bytes | bytes sent per device |
|---|---|---|
{{ rec-table:«id».cpu:data.traffic | {ranks} | {blockBytes|,d} | {sentBytes|,d} }}

At p = 8 each device sends R(data.traffic.2.sentBytes|,d) bytes. The block itself is
R(data.traffic.2.blockBytes|,d) bytes. Compare the two before choosing a layout.

??? question "Does doubling the devices double the bytes each one sends?"

    No. Read the table: the factor \\((p-1)/p\\) tends to one. The per-device block
    shrinks instead, so the total work per device falls.

## The whole run

The steps in order, each followed by the line it prints. The notebook companion runs
the same statements, cell by cell.

```python
--8<-- "lesson_code/«module».py:run_lesson"
```

{{ recordings:«id» }}

«measured_page»## Where it appears in training

Data parallelism, sharded optimisers and tensor parallelism all come down to a handful
of collectives. Which one a step needs follows from two questions. Does every device need
the whole result? And is the result a combination of all blocks, or the blocks as they
were?

| needs the whole result | combines the blocks | the collective |
|---|---|---|
| yes | yes | `psum`, an all-reduce |
| no | yes | `psum_scatter`, a reduce-scatter |
| yes | no | `all_gather` |
| no | no, but moved | `ppermute` or `all_to_all` |

This lesson's call sits in one row of that table. The neighbouring rows are other
lessons of the course, on other shapes. Compare their recorded bytes with this page's.

!!! note "What the model leaves out"

    The ring model counts bytes and nothing else. Each message also pays a fixed cost,
    the latency of starting it. Below a few kilobytes that cost dominates. The arrays
    here are small, so on real hardware their time is mostly latency.

## Common mistakes

- The usual one here: «mistake».
- Using the global shape inside the step. Inside `shard_map` the block is local.
- Forgetting `out_specs`. It decides what the global result means.
- Trusting the shapes alone. Check the values against NumPy, as Step 5 does.
- Counting bytes without the fixed cost. Small messages pay mostly the fixed cost.

## Exercise: write the step yourself

The scaffold below has one hole: the collective. Fill it in with one call of
`jax.lax.«name»`. The checker runs it on the lesson's eight devices.

```python
--8<-- "lesson_code/«module»_exercises.py:scaffold"
```

Check it with `python -m lesson_code.«module»_exercises`. The checker prints one line.
It names the first value that differs, and the usual mistake if you made it.

??? tip "Hint"

    Start from Step 3. The axis name is `AXIS`. Keep the step's signature: «signature».

??? example "Reference solution"

    Step 3's `collective_step` is the reference. Run
    `python -m lesson_code.«module»_exercises --reference` to see it pass.

## Check your understanding

??? question "What does each device hold before the call?"

    One block of rows: f32[R(data.block.0), R(data.block.1)] here.

??? question "What does each device hold after the call?"

    R(data.local), as the table at the top shows. The global result is R(data.result).

??? question "Which StableHLO op does the program lower to?"

    R(data.ops.0). Step 5 asserts that it is the only collective.

??? question "How many bytes does each device send at p = 2?"

    R(data.traffic.0.sentBytes|,d) bytes, by the ring model.

??? question "How many at p = 4?"

    R(data.traffic.1.sentBytes|,d) bytes, by the same model.

??? question "What would change on a TPU?"

    The devices would be chips and the bytes would cross real links. The program, the
    check and the model stay the same.

??? question "Which row of the table above is this lesson's?"

    Ask the two questions of Step 4's `out_specs` and of the step's signature:
    «signature».

## Summary

`jax.lax.«name»` «does». Inside `shard_map` it sees one block per device. The
`out_specs` say how the parts form the global result. The check against NumPy and the
lowered program tell you it did what you meant. The ring model tells you what it costs.
'''


def fill(template, values):
    """The template with each «name» replaced by its value, and each R(path|format) by
    the page directive that shows that recorded value (the page's own shorthand), and each
    A(path) by its sweep analysis's."""
    text = template
    for _ in range(2):  # twice: a collective's own text may name «shift»
        text = re.sub(r"«(\w+)»", lambda match: str(values[match[1]]), text)
    for shorthand, stem in (("R", "cpu"), ("A", "sweep.analysis")):
        text = re.sub(rf"\b{shorthand}\((\w[\w.]*)(\|[^)]*)?\)", lambda m, stem=stem:
                      "{{ rec:%s.%s:%s%s }}" % (values["id"], stem, m[1], m[2] or ""), text)
    return text


def lesson_values(index):
    """Lesson `index`'s collective and shape: the five collectives in turn, over shapes
    that differ from lesson to lesson (multiples of 8, so 8 devices divide them); every
    fifth, from the first, measured."""
    lesson_id, module = f"course-{index:02d}", f"course_{index:02d}"
    collective = COLLECTIVES[(index - 1) % len(COLLECTIVES)]
    measured = index % 5 == 1
    figures = [f'"lesson_code.{module}_figure"', f'"lesson_code.{module}_timing"'][:1 + measured]
    return {"constants": "", **collective, "index": index, "id": lesson_id, "module": module,
            "measured": measured, "figures": ", ".join(figures), "module_dashes":
            module.replace("_", "-"), "measured_entry": MEASURED_ENTRY if measured else "",
            "measured_page": MEASURED_PAGE if measured else "",
            "rows": 8 * (2 + index * 3 % 7), "cols": 8 * (1 + index * 5 % 6),
            "shift": 1 + index % 3, "modulus": 7 + index % 13, "colour": index % 6,
            "exercise": f"my_{collective['name']}", "figure": f"{module}-figure".replace("_", "-")}


def write_lessons(root, count):
    """Lessons 1..count added to the project at `root`: four files under lesson_code/ (seven
    for a measured one), a page under docs/lessons/ and an entry at the end of the registry
    each. Their ids."""
    root = Path(root)
    ids = []
    with open(root / "lesson_code" / "lessons.toml", "a") as registry:
        for index in range(1, count + 1):
            values = lesson_values(index)
            code = root / "lesson_code" / values["module"]
            measured = (("_sweep", SWEEP), ("_analysis", ANALYSIS), ("_timing", TIMING_FIGURE))
            for suffix, template in (("", MODULE), ("_figure", FIGURE), ("_exercises", SCAFFOLD),
                                     ("_checks", CHECKS), *(measured * values["measured"])):
                Path(f"{code}{suffix}.py").write_text(fill(template, values))
            (root / "docs" / "lessons" / f"{values['id']}.md").write_text(fill(PAGE, values))
            registry.write(fill(ENTRY, values))
            ids.append(values["id"])
    return ids

"""The code that reads a TPU run, tested on CPU against real XLA:TPU output (tests/fixtures/
tpu_v5e_*, whose READMEs say how it was made)."""
import dataclasses
import importlib
import json
import re

import jax
import markdown
import numpy as np
import pytest

from conftest import FIXTURES, LESSONS, ROOT, SEED, module_file
from fixtures.tpu_recording_fixture import FIXTURE, ONE_CHIP, one_chip_run, write_tpu_recording
from harness import raised_in_one_line
from scripts.hardware.verify import RefusedRecording, check_tpu_recording
from scripts.store.outputs import for_lesson

SLICE = FIXTURES / "tpu_v5e_2x2_compiled"
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather")
lesson_program = importlib.import_module(SEED.module)
analysis = importlib.import_module(SEED.analysis)
sweep = importlib.import_module(SEED.sweep)
tpu_sweep = importlib.import_module(SEED.sweep_on("tpu"))
going_further = importlib.import_module(SEED.going_further)


class Captured:
    """A program as the readers see it (lower, compile, as_text), its text captured."""

    def __init__(self, path):
        self.text = path.read_text()

    def lower(self, *args):
        return self
    compile = lower

    def as_text(self, dialect=None):
        return self.text
    compiler_ir = as_text


def compiled(path):
    return lesson_program.compiled_collectives(Captured(path))


# What the reader finds in XLA:TPU's compiled text (each fixture README says what it is):
# nothing over one chip, the rewrites the TPU page warns about, a matrix's kept reduce-scatter.
COMPILED = json.loads((FIXTURES / "tpu_compiled_collectives.json").read_text())


@pytest.mark.parametrize("name", COMPILED)
def test_the_reader_names_what_xla_tpu_compiled(name):
    assert compiled(FIXTURES / f"{name}.compiled.hlo") == set(COMPILED[name])


def test_the_compiled_text_shows_each_rewrite_and_the_lowered_the_request():
    """A vector's reduce-scatter: an all-reduce, then a slice. At 32 MiB the gather is an
    async all-gather, and a matrix's reduce-scatter one ring fusion, whose computation
    holds the all-reduce it replaces. A looped call: one before its loop and one in it."""
    def text(name):
        return (SLICE / f"{name}.compiled.hlo").read_text()
    assert re.search(r" all-reduce\(.*\n.*ROOT %\S+ = f32\[2\]\S* dynamic-slice\(%all-reduce,",
                     text("lesson.reduce_scatter"))
    assert 'async_collective_name="all-gather-start"' in text("all_gather.32MiB")
    assert re.search(r"kind=kCustom, calls=%all-reduce-scatter.*StrategyRing",
                     text("reduce_scatter_2d.32MiB"))
    assert " all-reduce(" in text("reduce_scatter_2d.32MiB")
    # Its rows padded before the ring; a slice of the ring's output permuted to the next
    # chip and joined to the rows there (the TPU page, content review L1).
    fused = text("reduce_scatter_2d.32MiB")
    assert re.search(r"%pad = f32\[8320,1024\]\S* pad\(%input", fused)
    assert re.search(r"%(\S+) = \S+ slice\(%fusion\).*\n.*collective-permute-start\(%\1\), "
                     r"channel_id=\d+, source_target_pairs=\{\{0,1\},\{1,2\},\{2,3\}\}.*\n"
                     r"(.*\n)*.*concatenate\(%collective-permute-done, %fusion\)", fused)
    assert len(lesson_program.HLO_COLLECTIVE.findall(text("all_reduce.looped64"))) == 2
    # The lesson's all-reduce compiles to one phase: the ring's factor 2 is the model's (L7).
    assert '"emitter":"SinglePhaseRingSumEmitter"' in text("lesson.all_reduce")
    for collective in COLLECTIVES:  # over one chip, lowered still asks for it
        lowered = Captured(ONE_CHIP / "hlo" / f"{collective}.single.lowered.mlir")
        assert lesson_program.lowered_collectives(lowered) == {collective}


@pytest.mark.parametrize("looped", ["all_reduce.looped64", "reduce_scatter.looped64",
                                    "reduce_scatter_2d.32MiB.looped64"])
def test_the_compiled_tpu_loop_keeps_no_barrier_and_its_collective_reads_the_input(looped):
    """What XLA:TPU makes of the chained loop (its lowered barrier: the test below): no
    barrier, and the body's collective reads the loop's unchanging input (tuple index 1),
    never the last result (2). The while loop alone orders the 64 collectives."""
    text = (SLICE / f"{looped}.compiled.hlo").read_text()
    name = re.search(r" while\(.*?body=(%\S+?),", text)[1]
    body = text[text.index(f"\n{name} ("):]
    body = body[:body.index("\n}\n")]
    assert "opt-barrier" not in text and lesson_program.HLO_COLLECTIVE.search(body)
    read = set(re.findall(r"get-tuple-element\(%[\w.]+\), index=(\d+)", body))
    assert "1" in read and "2" not in read


def test_one_chip_ran_the_matrix_rows_right_and_says_it_is_one_chip():
    """The TPU sweep's matrix rows and their vector twins, run on one v5e chip: every value
    right, at 32 B, 2 MiB and 32 MiB, each plain and looped; labelled as p = 1 alone."""
    run = json.loads((ONE_CHIP / "sweep_2d" / "sweep-2d-one-chip.json").read_text())
    assert "not a 4-chip recording" in run["what"] and run["environment"]["deviceCount"] == 1
    assert {(row["collective"], row["bytes"], row["collectivesPerCall"]) for row in run["rows"]} \
        == {(c, s, k) for c in ("reduce_scatter", "all_gather", "reduce_scatter_2d",
                                "all_gather_2d") for s in (32, 2**21, 2**25) for k in (1, 64)}
    assert not [row for row in run["rows"] if row["wrong"] or row["ranks"] != 1]


def test_the_tpu_sweep_adds_a_matrix_reduce_scatter_and_gather_checked_on_every_copy():
    """Its measure_ranks on CPU devices: the CPU sweep's programs and the matrices, each
    both ways and right; a wrong matrix value counts on every device's copy."""
    assert tpu_sweep.COLLECTIVES == (*sweep.COLLECTIVES, "reduce_scatter_2d", "all_gather_2d")
    rows = tpu_sweep.measure_ranks(jax.devices()[:4], [2**16], {"samples": 1, "minSampleMs": 0.1})
    assert sorted((r["collective"], r["collectivesPerCall"]) for r in rows) == \
        sorted((c, k) for c in tpu_sweep.COLLECTIVES for k in (1, sweep.LOOP_COLLECTIVES["cpu"]))
    assert not [row for row in rows if row["wrong"]]
    mesh, contributions = sweep.ring_mesh(jax.devices()[:4]), np.ones((4, 2**14), np.float32)
    placed = tpu_sweep.placed_inputs(mesh, contributions)
    assert placed["reduce_scatter_2d"].shape == (4, 16, 1024)  # 64 KiB: 16 rows of 4 KiB
    for name in ("reduce_scatter_2d", "all_gather_2d"):
        result = tpu_sweep.program(name, mesh)(placed[name])
        assert sweep.count_wrong(result, tpu_sweep.reference(name, contributions) + 1) == \
            4 * result.addressable_shards[0].data.size  # every value of every copy compared


def test_the_compile_step_reads_each_program_with_the_lesson_s_reader(monkeypatch):
    """The step `tpu_job.py --dry-run` and `--write-compiled` take, run on CPU devices, whose
    XLA keeps every collective: the lesson's programs and gradients at its size and at
    1 MiB, the sweep's sizes, then p, then its calls (1 and the loop) with the same
    collectives in one row; a lesson module without `programs_to_compile` has none."""
    from scripts.hardware import compile as ahead
    monkeypatch.setattr(tpu_sweep, "SIZES", (8, 2**13))
    monkeypatch.setattr(ahead, "GRADIENTS", (None, 2**12))  # 1 MiB's take longer
    rows = ahead.compiled_programs(SEED, jax.devices(), SEED.devices, [2, 4], 3)
    assert rows[:2] == [{"of": "lesson", "program": "all_reduce", "ranks": [SEED.devices],
                         "bytes": size, "collectivesPerCall": [1], "compilesTo": "all-reduce"}
                        for size in (None, [2**12, 2**12])]
    asked = {**going_further.EXPECTED_TRANSPOSES, **going_further.EXPECTED_TRAINING}
    assert {row["program"]: row["compilesTo"] for row in rows if row["of"] == "gradient"} == {
        name: lesson_program.hlo_names(set(ops) - {"dynamic_slice"}) for name, ops in asked.items()}
    runs = {"reduce_scatter_all_gather": "all-gather + reduce-scatter",
            "ring_reduce_scatter": "collective-permute", "ring_all_reduce": "collective-permute"}
    assert [row for row in rows if row["of"] == "sweep"] == [
        {"of": "sweep", "program": name, "ranks": [2, 4], "bytes": [8, 2**13],
         "collectivesPerCall": [1, 3],
         "compilesTo": runs.get(name, name.removesuffix("_2d").replace("_", "-"))}
        for name in tpu_sweep.PROGRAMS]
    plain = dataclasses.replace(SEED, module=SEED.simulation)
    assert ahead.compiled_programs(plain, jax.devices(), 4, [2], 3) == []
    assert [ahead.topology(name) for name in ("v5litepod-4", "v6e-8", "v6e-1")] == \
        ["v5e:2x2", "v6e:2x4", "v6e:1x1"]
    assert ahead.targets(SEED, SEED.sweep) == [("cpu", 4, [2, 4, 8]), ("v6e-4", 4, [2, 4]),
                                               ("v5litepod-4", 4, [2, 4]), ("v5litepod-8", 8, [8])]


def test_the_compiled_record_says_what_real_compiled_text_says():
    """Each 2x2 fixture, real libtpu output (its README), the gradients and timed loops among
    them: the committed record's v5e 2x2 row for its program, size (a sweep's loops are at
    32 B), p and calls names what the lesson's reader finds in its text."""
    compiled_to = importlib.import_module(f"{SEED.module}_tpu_compiled").compiled_to
    record = json.loads((ROOT / for_lesson(SEED).recording("tpu-compiled")).read_text())
    [target] = [target for target in record["targets"] if target["accelerator"] == "v5litepod-4"]
    read = set()
    for name in (name for name in COMPILED if name.startswith(SLICE.name)):
        of, program, *tags = name.split("/")[1].split(".")
        of, program, tags = (of, program, tags) if of in ("lesson", "gradient") else \
            ("sweep", of, [program, *tags])
        size = next((int(tag[:-3]) * 2**20 for tag in tags if tag.endswith("MiB")),
                    32 if of == "sweep" else None)
        calls = 64 if "looped64" in tags else 1
        assert compiled_to(target, of, program, size, 4, calls) == \
            lesson_program.hlo_names(COMPILED[name]), name
        read.add((of, calls))
    assert {of for of, _ in read} == {"lesson", "gradient", "sweep"} and ("sweep", 64) in read


def chained(lowered, collective):
    """The loop body's barrier takes its input with the previous result, and the collective
    runs on the barrier's output alone, handed on as the next input."""
    called = re.search(r"func\.call @(\w+)\(%iterArg_0, %iterArg_1\)", lowered)
    body = lowered[lowered.index(f"func.func private @{called[1]}("):]
    body = body[:body.index("\n  }\n")]
    barrier = re.search(r"(%\w+):2 = stablehlo\.optimization_barrier %arg0, %arg1 ", body)
    if barrier is None:
        return False
    after = body[barrier.end():]
    return (f"stablehlo.{collective}" in after and "%arg0" not in after
            and "%arg1" not in after and f"return {barrier[1]}#0, " in after)


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_a_looped_program_chains_its_iterations(collective):
    program, args = tpu_sweep.programs_to_compile(jax.devices()[:4], 32, looping=4)[collective]
    assert chained(program.lower(*args).as_text(), collective)
    # As XLA:TPU got it for a 2x2 v5e; a barrier holding its input alone is told apart.
    on_tpu = (SLICE / f"{collective}.looped64.lowered.mlir").read_text()
    assert chained(on_tpu, collective) and not chained(on_tpu.replace(
        "stablehlo.optimization_barrier %arg0, %arg1 :",
        "stablehlo.optimization_barrier %arg0 :"), collective)


def test_the_real_one_chip_run_is_read_as_the_job_reads_a_fetched_recording(tmp_path):
    """Refused as the seed's 4-chip run, accepted for a lesson of one device, the whole run
    (stdout, data, its compiled readings) too."""
    one_device = dataclasses.replace(SEED, devices=1)
    fetched = write_tpu_recording(tmp_path / "one-chip.json", ROOT / module_file(SEED), ROOT,
                                  environment=one_chip_run(SEED.module)["environment"])
    assert str(raised_in_one_line(RefusedRecording, check_tpu_recording, fetched, SEED)) == (
        f"the fetched recording is not a {SEED.devices}-chip TPU run of {SEED.id}: it ran on 1 "
        f"devices, not {SEED.devices}")
    environment = check_tpu_recording(fetched, one_device)["environment"]
    report = (ONE_CHIP / "hlo" / "environment.txt").read_text()
    assert f'"device_kind": "{environment["deviceKind"]}"' in report
    assert f"jax:    {environment['jax']}" in report
    assert (environment["backend"], environment["deviceCount"]) == ("tpu", 1)
    fetched = write_tpu_recording(tmp_path / "run.json", ROOT / module_file(SEED), ROOT,
                                  run=one_chip_run(SEED.module))
    assert check_tpu_recording(fetched, one_device)["stdout"].endswith(f"PASS: {SEED.id}\n")


def canned(**data):
    recording = json.loads(FIXTURE.read_text())
    recording["data"].update(data)
    return recording


def tpu_page(recording):
    """docs/going-further/tpu.md as text, rendered with `recording` as the TPU recording."""
    from scripts.pages.page_language import PageLanguage
    from scripts.pages.sources import Sources
    from scripts.store.freshness import Loaded, load_all
    files, (recordings, _) = for_lesson(SEED), load_all({SEED.id: SEED}, ROOT)  # committed
    for stem, held in ((files.stem("tpu"), recording), (files.stem("tpu", analysis=True),
                       json.loads(json.dumps(analysis.analyse("tpu", recording))))):
        recordings[stem] = Loaded(held, stem, f"{stem}.json")
    html = markdown.markdown((ROOT / "docs" / "going-further" / "tpu.md").read_text(), extensions=[
        "tables", PageLanguage(sources=Sources(LESSONS, recordings, ROOT / "docs"))])
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))


@pytest.mark.parametrize("recording, said, not_said", [
    (canned(), "XLA:TPU kept every collective as asked", "XLA:TPU did not keep"),
    (canned(compiledCollectives={name: sorted(compiled(SLICE / f"lesson.{name}.compiled.hlo"))
                                 for name in COLLECTIVES}),
     "XLA:TPU did not keep every collective as asked: the reduce-scatter program runs all-reduce; "
     "the all-gather program runs all-reduce; the timed medians are of what runs, not of what was "
     "asked.", "XLA:TPU kept every"),
    ({**canned(), **one_chip_run(SEED.module)}, "XLA:TPU did not keep every collective as asked: "
     "the all-reduce program runs no collective; the reduce-scatter program runs no collective; "
     "the all-gather program runs no collective; on 1 device nothing crosses between chips",
     "XLA:TPU kept every")], ids=["kept", "rewritten on a 2x2", "dropped on one chip"])
def test_the_tpu_branch_says_what_the_recording_compiled(recording, said, not_said):
    page, environment = tpu_page(recording), recording["environment"]
    assert f"The lesson was recorded on {environment['deviceCount']} × " \
           f"{environment['deviceKind']} on" in page
    assert page.count(said) == 2  # beside the recording's date, and where compiling is read
    assert not_said not in page
    assert "says the same" not in page and "Not yet recorded on TPU" not in page
    assert "XLA:CPU kept every collective as asked" in page  # the CPU's, from its own

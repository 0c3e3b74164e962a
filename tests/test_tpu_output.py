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
from jax.sharding import NamedSharding

from conftest import FIXTURES, LESSONS, ROOT, SEED, module_file
from fixtures.tpu_recording_fixture import (FIXTURE, ONE_CHIP, one_chip_run,
                                            write_tpu_recording)
from scripts.hardware.verify import RefusedRecording, check_tpu_recording
from scripts.store.outputs import for_lesson

SLICE = FIXTURES / "tpu_v5e_2x2_compiled"
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather")
lesson_program = importlib.import_module(SEED.module)
analysis = importlib.import_module(SEED.analysis)
sweep = importlib.import_module(SEED.sweep)


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


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_on_one_chip_xla_tpu_compiles_every_collective_away(collective):
    """At p = 1 nothing moves: none compiled, alone or looped, though lowered asks for it."""
    hlo = ONE_CHIP / "hlo"
    assert compiled(hlo / f"{collective}.single.compiled.hlo") == set()
    assert compiled(hlo / f"{collective}.looped64.compiled.hlo") == set()
    lowered = Captured(hlo / f"{collective}.single.lowered.mlir")
    assert lesson_program.lowered_collectives(lowered) == {collective}


def test_on_a_2x2_xla_tpu_runs_the_lesson_s_reduce_scatter_and_gather_as_all_reduces():
    """The rewrite the TPU page warns about (an all-reduce, then a slice). At 32 MiB the
    gather is an async all-gather; a looped call holds one before its loop and one in it."""
    found = {collective: compiled(SLICE / f"lesson.{collective}.compiled.hlo")
             for collective in COLLECTIVES}
    assert found == {collective: {"all_reduce"} for collective in COLLECTIVES}
    text = (SLICE / "lesson.reduce_scatter.compiled.hlo").read_text()
    assert re.search(r" all-reduce\(.*\n.*ROOT %\S+ = f32\[2\]\S* dynamic-slice\(%all-reduce,",
                     text)
    all_gather = SLICE / "all_gather.32MiB.compiled.hlo"
    assert 'async_collective_name="all-gather-start"' in all_gather.read_text()
    assert compiled(all_gather) == {"all_gather"}
    assert compiled(SLICE / "reduce_scatter.32MiB.compiled.hlo") == {"all_reduce"}
    looped = SLICE / "all_reduce.looped64.compiled.hlo"
    assert compiled(looped) == {"all_reduce"}
    assert len(lesson_program.HLO_COLLECTIVE.findall(looped.read_text())) == 2
    # What the TPU page says the compiled loop shows (turn 6's L2): no barrier, a body that
    # never reads the last result (tuple index 2) and one synchronous all-reduce in it; and
    # the lesson's all-reduce is a single phase (L7).
    text = looped.read_text()
    body = text[text.index("\n" + re.search(r"while\(.*body=(%[\w.]+)", text)[1] + " "):]
    body = body[:body.index("\n}\n")]
    assert "opt-barrier" not in text and "index=2" not in body
    assert " all-reduce(" in body and "all-reduce-start" not in body
    assert '"emitter":"SinglePhaseRingSumEmitter"' in \
        (SLICE / "lesson.all_reduce.compiled.hlo").read_text()


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
    mesh = sweep.ring_mesh(jax.devices()[:4])
    body, in_spec, out_spec = sweep.PROGRAMS[collective]
    shape = (4, 8) if in_spec == sweep.ROWS else (8,)
    arg = jax.device_put(np.zeros(shape, np.float32), NamedSharding(mesh, in_spec))
    lowered = jax.jit(jax.shard_map(sweep.looped(body, 4), mesh=mesh, in_specs=in_spec,
                                    out_specs=out_spec)).lower(arg).as_text()
    assert chained(lowered, collective)
    # As XLA:TPU got it for a 2x2 v5e; a barrier holding its input alone is told apart.
    on_tpu = (SLICE / f"{collective}.looped64.lowered.mlir").read_text()
    assert chained(on_tpu, collective) and not chained(on_tpu.replace(
        "stablehlo.optimization_barrier %arg0, %arg1 :",
        "stablehlo.optimization_barrier %arg0 :"), collective)


def test_the_real_one_chip_run_is_read_as_the_job_reads_a_fetched_recording(tmp_path):
    """Refused as the seed's 4-chip run, accepted for a lesson of one device; the whole run
    only for the shard index its lesson wrote then, 'None:None' (now 0:n)."""
    one_device = dataclasses.replace(SEED, devices=1)
    fetched = write_tpu_recording(tmp_path / "one-chip.json", ROOT / module_file(SEED), ROOT,
                                  environment=one_chip_run(SEED.module)["environment"])
    with pytest.raises(RefusedRecording) as refused:
        check_tpu_recording(fetched, SEED)
    assert str(refused.value) == (f"the fetched recording is not a {SEED.devices}-chip TPU "
                                  f"run of {SEED.id}: it ran on 1 devices, not {SEED.devices}")
    environment = check_tpu_recording(fetched, one_device)["environment"]
    report = (ONE_CHIP / "hlo" / "environment.txt").read_text()
    assert f'"device_kind": "{environment["deviceKind"]}"' in report
    assert f"jax:    {environment['jax']}" in report
    assert (environment["backend"], environment["deviceCount"]) == ("tpu", 1)
    fetched = write_tpu_recording(tmp_path / "run.json", ROOT / module_file(SEED), ROOT,
                                  run=one_chip_run(SEED.module))
    with pytest.raises(RefusedRecording) as refused:
        check_tpu_recording(fetched, one_device)
    assert "invalid at data/shards/0/1: 'None:None'" in str(refused.value)


def canned(compiled_collectives=None):
    recording = json.loads(FIXTURE.read_text())
    if compiled_collectives is not None:
        recording["data"]["compiledCollectives"] = compiled_collectives
    return recording


def tpu_page(recording):
    """docs/going-further/tpu.md as text, rendered with `recording` as the TPU recording."""
    from scripts.pages.page_language import PageLanguage
    from scripts.pages.sources import Sources
    from scripts.store.freshness import Loaded
    from scripts.store.recordings import read_json
    files = for_lesson(SEED)
    stems = {files.stem("cpu"): files.recording("cpu"), **{files.stem(variant, analysis=True):
                                                          files.analysis(variant)
                                                          for variant in ("cpu", "sweep")}}
    recordings = {stem: Loaded(read_json(ROOT / path), stem, path)
                  for stem, path in stems.items()}
    for stem, held in ((files.stem("tpu"), recording), (files.stem("tpu", analysis=True),
                       json.loads(json.dumps(analysis.analyse("tpu", recording))))):
        recordings[stem] = Loaded(held, stem, f"{stem}.json")
    page = (ROOT / "docs" / "going-further" / "tpu.md").read_text()
    html = markdown.markdown(page, extensions=[
        "tables", PageLanguage(sources=Sources(LESSONS, recordings, ROOT / "docs"))])
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))


@pytest.mark.parametrize("recording, said, not_said", [
    (canned(), "XLA:TPU kept every collective as asked", "XLA:TPU did not keep"),
    (canned({collective: sorted(compiled(SLICE / f"lesson.{collective}.compiled.hlo"))
             for collective in COLLECTIVES}), "XLA:TPU did not keep every collective as asked: the "
     "reduce-scatter program runs all-reduce; the all-gather program runs all-reduce; the "
     "timed medians are of what runs, not of what was asked.", "XLA:TPU kept every"),
    ({**canned(), **one_chip_run(SEED.module)}, "XLA:TPU did not keep every collective as "
     "asked: the all-reduce program runs no collective; the reduce-scatter program runs no "
     "collective; the all-gather program runs no collective; on 1 device nothing crosses "
     "between chips",
     "XLA:TPU kept every"),
], ids=["kept", "rewritten on a 2x2", "dropped on one chip"])
def test_the_tpu_branch_says_what_the_recording_compiled(recording, said, not_said):
    page = tpu_page(recording)
    environment = recording["environment"]
    assert f"The lesson was recorded on {environment['deviceCount']} × " \
           f"{environment['deviceKind']} on" in page
    assert page.count(said) == 2  # beside the recording's date, and where compiling is read
    assert not_said not in page
    assert "says the same" not in page and "Not yet recorded on TPU" not in page
    assert "XLA:CPU kept every collective as asked" in page  # the CPU's, from its own

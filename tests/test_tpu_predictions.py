"""The TPU predictions: the committed data file is the model's output, every input has a
source, and the figure is drawn from that file alone."""
import importlib
import json
import math
import re
from types import SimpleNamespace

import pytest

from conftest import FIXTURES, ROOT, SEED, recording_name
from harness import refused
from lesson_code import tpu_predictions as model
from scripts.figures import KINDS

DATA = ROOT / "lesson_code" / "figures" / f"{SEED.id}-tpu-predictions.json"
compare = importlib.import_module(f"{SEED.module}_tpu_comparison").compare


def test_the_committed_predictions_are_the_models_output_and_every_input_has_a_source():
    assert json.loads(DATA.read_text()) == json.loads(json.dumps(model.predictions()))
    for machine in model.MACHINES.values():
        assert machine["sources"] and set(machine["sources"]) <= set(model.SOURCES)
        assert machine["topologySource"] in (None, *model.SOURCES)
        if machine["topologySource"] is None:
            assert "assumed" in machine["topology"]
    for source in model.SOURCES.values():
        assert re.fullmatch(r"https://[\w./-]+", source["url"]), source


def test_the_predictions_follow_the_ring_model_with_its_p_minus_one_over_p():
    data = model.predictions()
    rows = {(row["machine"], row["collective"], row["ranks"], row["bytes"]): row
            for row in data["rows"]}
    big = 32 * 2**20
    for machine in model.MACHINES:
        # 32 B: p/2 hops of 1 us whatever the VM; an all-reduce is two phases.
        for p in model.RANKS:
            assert rows[(machine, "reduce_scatter", p, 32)]["predictedUs"] == p / 2
            assert rows[(machine, "all_reduce", p, 32)]["predictedUs"] == p
            assert rows[(machine, "all_gather", p, 32)]["bound"] == "latency"
            assert rows[(machine, "all_gather", p, big)]["bound"] == "bandwidth"
    link = model.MACHINES["v5litepod-4"]["linkOneWayBytesPerS"]
    # p = 2: half of V over the one link; p = 4: three quarters of V over two links.
    assert rows[("v5litepod-4", "all_gather", 2, big)]["predictedUs"] == \
        pytest.approx(big / 2 / link * 1e6, abs=1e-3)
    assert rows[("v5litepod-4", "all_gather", 4, big)]["predictedUs"] == \
        pytest.approx(big * 3 / 4 / (2 * link) * 1e6, abs=1e-3)
    # The book's V / W_bidi is the same at every p, and 4/3 of the model at p = 4.
    assert rows[("v5litepod-4", "all_gather", 4, big)]["bookUs"] == \
        rows[("v5litepod-4", "all_gather", 2, big)]["bookUs"]
    # v6e's links are twice as fast: half the time wherever bandwidth bounds it.
    assert rows[("v6e-4", "all_reduce", 4, big)]["predictedUs"] * 2 == \
        pytest.approx(rows[("v5litepod-4", "all_reduce", 4, big)]["predictedUs"], abs=0.01)
    assert model.crossover_bytes(model.MACHINES["v5litepod-4"], 4) == pytest.approx(240_000)
    assert model.ring_links(2) == 1 and model.ring_links(4) == 2
    # Every prediction carries a band written down before the run.
    for row in data["rows"]:
        band = model.BANDS[row["bound"]]
        assert row["band"] == {"low": band["low"], "high": band["high"]}
        assert band["low"] < 1 < band["high"]
    assert {(row["ranks"], row["bytes"]) for row in data["rows"]} == \
        {(p, size) for p in (2, 4) for size in model.SIZES}


def test_the_ratio_question_separates_the_model_from_both_rivals_as_the_page_says():
    """t(p = 4) / t(p = 2) at 32 MiB: 0.75 here, 1.0 (the book), 1.5 (two links at p = 2).
    The page writes the bands and the loop length in words: they must be the modules'."""
    question = model.ratio_question()
    assert question["predicted"] == pytest.approx(0.75)
    assert sorted(question["rivals"].values()) == [1.0, 1.5]
    band = question["band"]
    assert band["low"] < 0.75 < band["high"] < min(question["rivals"].values())
    assert band["high"] == pytest.approx(math.sqrt(0.75), abs=1e-3)
    page = (ROOT / "docs" / "going-further" / "tpu.md").read_text()
    for bound, size in (("bandwidth", "32 MiB"), ("latency", "32 B")):
        low, high = model.BANDS[bound]["low"], model.BANDS[bound]["high"]
        assert f"{bound}-bound ({size}): {low:g}× to {high:g}×" in page
    assert f"The band is {band['low']:.2f} to {band['high']:.2f}" in page
    assert f"{importlib.import_module(SEED.sweep).LOOP_COLLECTIVES['tpu']} on a TPU" in page
    for answer in ("0.75", "says 1.0", "says 1.5"):
        assert answer in page


def test_the_figure_is_drawn_from_the_data_file_alone_and_a_malformed_one_is_one_line():
    kind = KINDS["tpu-predictions"]
    assert kind.input.format(id=SEED.id) == DATA.relative_to(ROOT).as_posix()
    svg = kind.render(json.loads(DATA.read_text()))
    assert "<title>Predicted on 4 TPU chips at p = 2 and 4, before any TPU run</title>" in svg
    # v5e's one phase at 32 MiB at p = 2 and 4, and where p = 4 turns bandwidth-bound.
    assert "372.8 µs" in svg and "279.6 µs" in svg and "bandwidth-bound from 234 KiB" in svg
    # Predictions whose machines are a list: one line.
    from scripts.store.derive import DeriveError, render
    from scripts.store.outputs import figure_outputs
    data = json.loads(DATA.read_text())
    data["machines"] = list(data["machines"].values())
    [output] = [output for output in figure_outputs(SEED)
                if output.kind is kind and output.variant.suffix == ""]
    with pytest.raises(DeriveError, match=r"tpu_predictions renderer failed on .*: `machines` "
                       r"must map each VM's name to its object"):
        render(output, data)


def tpu_sweep_fixture(over_predicted=lambda row: 1.0):
    """The committed sweep at p = 2 and 4 as a v6e-4 would record it, each collective's own
    cost over_predicted(row) times the prediction."""
    from fixtures.tpu_recording_fixture import canned_times
    recording = json.loads((ROOT / recording_name(SEED, "sweep")).read_text())
    recording["environment"].update(backend="tpu", deviceKind="TPU v6 lite")
    recording["provenance"] = "recorded_tpu_computation"
    looped = importlib.import_module(SEED.sweep).LOOP_COLLECTIVES["tpu"]  # as a TPU loops
    recording["rows"] = [{**row, "collectivesPerCall": looped if row["collectivesPerCall"] > 1
                          else 1} for row in recording["rows"] if row["ranks"] <= 4]
    recording["rows"] += [{**row, "collective": f"{row['collective']}_2d"} for row in
                          recording["rows"] if row["collective"] in ("reduce_scatter",
                                                                     "all_gather")]
    return canned_times(recording, over_predicted)


def test_each_prediction_is_supported_contradicted_or_inconclusive_by_its_band():
    """Own costs made 1.5 (inside both bands) and 4 (outside) times the prediction."""
    sweep = tpu_sweep_fixture(lambda row: 1.5)
    within = compare(sweep)
    assert {row["verdict"] for row in within["rows"]} == {"supported"}
    # The matrix rows too, by their collective's prediction: 12 predictions, 8 of them twice.
    assert len(within["rows"]) == 20 and len(within["ratios"]) == 5
    assert within["rows"][1]["label"] == "reduce-scatter of a matrix, p = 2, 32 B"
    looped = max(row["collectivesPerCall"] for row in sweep["rows"])  # the sweep's own loop
    assert within["machine"] == "v6e-4" and within["collectivesPerCall"] == looped
    # Every p shares the factor, so t(4)/t(2) is the model's 0.75: supported too.
    assert {ratio["verdict"] for ratio in within["ratios"]} == {"supported"}
    outside = compare(tpu_sweep_fixture(lambda row: 4.0))
    assert {row["verdict"] for row in outside["rows"]} == {"contradicted"}
    # The book's answer to the p question, 1.0: the p = 4 times made 4/3 of the model.
    book = compare(tpu_sweep_fixture(lambda row: 4 / 3 if row["ranks"] == 4 else 1.0))
    assert {ratio["verdict"] for ratio in book["ratios"]} == {"contradicted"}
    assert book["ratios"][0]["measured"]["median"] == pytest.approx(1.0, abs=0.01)
    assert book["counts"]["contradicted"] == 5


def test_a_row_whose_program_compiles_to_another_collective_is_labelled_and_not_counted():
    """Judged against the committed compiled record (real libtpu output: test_tpu_output):
    on a 2x2 a vector's reduce-scatter, and a matrix's at 32 B, compile to an all-reduce."""
    compiled = json.loads((ROOT / recording_name(SEED, "tpu-compiled")).read_text())
    found = compare(tpu_sweep_fixture(lambda row: 1.5), compiled=compiled)
    verdicts = {row["label"]: row["verdict"] for row in found["rows"] + found["ratios"]}
    assert {label for label, verdict in verdicts.items() if verdict != "supported"} >= {
        "reduce-scatter, p = 2, 32 B", "reduce-scatter, p = 4, 32 MiB", "reduce-scatter",
        "reduce-scatter of a matrix, p = 4, 32 B", "all-gather, p = 2, 32 B"}
    # At 32 MiB the matrix compiles to collective-permute + reduce-scatter: judged, as the
    # page says, the permute timed with the collective predicted.
    assert {verdicts[label] for label in ("reduce-scatter of a matrix, p = 4, 32 MiB",
                                          "reduce-scatter of a matrix")} == {"supported"}
    v6e = next(target for target in compiled["targets"] if target["accelerator"] == "v6e-4")
    assert importlib.import_module(f"{SEED.module}_tpu_compiled").compiled_to(
        v6e, "sweep", "reduce_scatter_2d", 2**25, 4) == "collective-permute + reduce-scatter"
    assert "is judged, with the permute in its time." in (ROOT / "docs" / "going-further" /
                                                          "tpu.md").read_text()
    assert set(verdicts.values()) == {"supported", "compiles to all-reduce: not judged"}
    judged = sum(verdict == "supported" for verdict in verdicts.values())
    assert found["counts"] == {"supported": judged, "contradicted": 0, "inconclusive": 0,
                               "not measured": 0}
    assert found["notJudged"] == len(verdicts) - judged
    # A VM the record did not compile for: what its loops compile to is unknown, none judged.
    found = compare(tpu_sweep_fixture(lambda row: 1.5), compiled={**compiled, "targets": []})
    assert {entry["verdict"] for entry in found["rows"] + found["ratios"]} == {
        "not in the compiled record: not judged"} and set(found["counts"].values()) == {0}


def test_the_first_screen_and_the_tpu_page_say_what_the_compiled_record_does():
    """The lesson's first screen is derived from the committed compiled record; the TPU
    page's sentences about it that are written by hand hold in that record."""
    record = json.loads((ROOT / recording_name(SEED, "tpu-compiled")).read_text())
    compiled = importlib.import_module(f"{SEED.module}_tpu_compiled")
    said = compiled.compiled_ahead(record)["firstScreen"]
    assert "psum_scatter to an all-reduce and its all_gather to an all-reduce" in said
    assert ("stays one from 128 KiB to 32 MiB on a 2×2 (p = 4: v6e-4, v5litepod-4; an "
            "all-reduce at 32 KiB; beside a collective-permute at the largest sizes)") in said
    page = (ROOT / "docs" / "going-further" / "tpu.md").read_text()
    assert "1-D vector into an all-reduce and a slice at every size the sweep measures" in page
    assert "at 32 B it is an all-reduce too" in page
    columns = importlib.import_module(f"{SEED.module}_tpu_sweep").COLUMNS  # float32s a row
    assert f"`f32[m, c]` with rows of up to {columns * 4 // 1024} KiB" in page
    for target in record["targets"][1:]:  # every TPU slice, in one call and in the loop
        for calls in (1, importlib.import_module(SEED.sweep).LOOP_COLLECTIVES["tpu"]):
            assert {compiled.compiled_to(target, "sweep", "reduce_scatter", 8 * 4**k, p, calls)
                    for k in range(12) for p in (2, 4, 8)} - {None} == {"all-reduce"}
            ranks = compiled.matrix_keeps(target)[2]  # the whole slice
            assert compiled.compiled_to(target, "sweep", "reduce_scatter_2d", 32, ranks,
                                        calls) == "all-reduce"
    # The record, not the code, decides: a matrix kept at every size on both 2×2s, no permute.
    for target in record["targets"][1:3]:
        for row in target["programs"]:
            if row["program"] == "reduce_scatter_2d":
                row["compilesTo"] = "reduce-scatter"
    assert "stays one from 8 B to 32 MiB on a 2×2 (p = 4: v6e-4, v5litepod-4) and" in \
        compiled.compiled_ahead(record)["firstScreen"]


@pytest.mark.parametrize("machine, topology", [("v5litepod-4", "v5e:2x2"), ("v6e-4", "v6e:2x2")])
def test_a_2x2_is_meshed_as_its_ring_of_four_links(machine, topology):
    """libtpu's 2x2 meshed as 0, 1, 3, 2 (mesh.json), one coordinate a hop; the installed
    JAX orders the chips so, and names their kind as the model does."""
    from jax.experimental.mesh_utils import create_device_mesh, device_kind_handler_dict
    real = json.loads((FIXTURES / "tpu_v5e_2x2_compiled" / "mesh.json").read_text())[topology]
    ids, coords = zip(*real)
    assert list(ids) == [0, 1, 3, 2]
    for here, there in zip(coords, coords[1:] + coords[:1]):
        assert sum(abs(a - b) for a, b in zip(here, there)) == 1
    kind = model.DEVICE_KINDS[machine][0]
    assert kind in device_kind_handler_dict
    chips = [SimpleNamespace(id=id, coords=tuple(place), device_kind=kind, platform="tpu",
                             core_on_chip=0, slice_index=0, process_index=0)
             for id, place in sorted(real)]
    assert [chip.id for chip in create_device_mesh((4,), chips).flat] == list(ids)


@pytest.mark.parametrize("where", ["a link", "a device", "a folder"])
def test_data_out_refuses_what_it_would_replace_or_write_through_in_one_line(tmp_path, where,
                                                                           capsys):
    """As every lesson program's --data-out (lesson_code/program.py): exit 2, nothing left."""
    path = {"a link": tmp_path / "link.json", "a device": "/dev/null", "a folder": tmp_path}[where]
    if where == "a link":
        path.symlink_to(tmp_path / "target.json")
    refused(model.main, ["--data-out", str(path)], capsys)
    assert sorted(tmp_path.iterdir()) == ([tmp_path / "link.json"] if where == "a link" else [])
    model.main(["--data-out", str(tmp_path / "new.json")])
    assert (tmp_path / "new.json").read_bytes() == DATA.read_bytes()  # the committed file

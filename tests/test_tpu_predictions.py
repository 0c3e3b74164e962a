"""The TPU predictions: the committed data file is the model's output, every input has a
source, and the figure is drawn from that file alone."""
import json
import re

import pytest

from conftest import ROOT, SEED, recording_name
from lesson_code import tpu_predictions as model
from scripts.figures import KINDS

# The seed lesson's predictions: its own data file and its own sweep.
DATA = ROOT / "lesson_code" / "figures" / f"{SEED.id}-tpu-predictions.json"


def test_the_committed_predictions_are_the_models_output():
    """A hand edit of the numbers, or a model change without the file, fails here; the
    fix is the command in lesson_code/tpu_predictions.py's docstring."""
    assert json.loads(DATA.read_text()) == json.loads(json.dumps(model.predictions()))


def test_the_predictions_follow_the_ring_model():
    rows = {(row["machine"], row["collective"], row["bytes"]): row
            for row in model.predictions()["rows"]}
    # 32 B: p/2 = 2 hops of 1 us whatever the VM; an all-reduce is two phases.
    for machine in model.MACHINES:
        assert rows[(machine, "reduce_scatter", 32)]["predictedUs"] == 2.0
        assert rows[(machine, "all_reduce", 32)]["predictedUs"] == 4.0
        assert rows[(machine, "all_gather", 32)]["bound"] == "latency"
    # 1 MiB on v5e: V / (2 x 4.5e10 B/s), bandwidth-bound.
    row = rows[("v5litepod-4", "reduce_scatter", 2**20)]
    assert abs(row["predictedUs"] - 2**20 / 9e10 * 1e6) < 1e-3 and row["bound"] == "bandwidth"
    # v6e's links are twice as fast: half the time wherever bandwidth bounds it.
    assert rows[("v6e-4", "all_reduce", 32 * 2**20)]["predictedUs"] * 2 == \
        rows[("v5litepod-4", "all_reduce", 32 * 2**20)]["predictedUs"]
    assert model.crossover_bytes(model.MACHINES["v5litepod-4"]) == 180_000


def test_every_input_names_a_source_that_exists():
    for machine in model.MACHINES.values():
        assert machine["sources"] and set(machine["sources"]) <= set(model.SOURCES)
        assert machine["topologySource"] in (None, *model.SOURCES)
        if machine["topologySource"] is None:
            assert "assumed" in machine["topology"]
    for source in model.SOURCES.values():
        assert re.fullmatch(r"https://[\w./-]+", source["url"]), source


def test_the_figure_is_drawn_from_the_data_file_alone():
    kind = KINDS["tpu-predictions"]
    assert kind.input.format(id=SEED.id) == DATA.relative_to(ROOT).as_posix()
    svg = kind.render(json.loads(DATA.read_text()))
    assert svg == kind.render(json.loads(DATA.read_text()))  # the same bytes each time
    assert "<title>Predicted on 4 TPU chips, before any TPU run</title>" in svg
    # The table's cells and the description carry the model's numbers.
    assert "372.8 µs" in svg and "11.7 µs" in svg and "bandwidth-bound from 176 KiB" in svg


def tpu_sweep_fixture():
    """A TPU size sweep as the VM would record it: the committed sweep's format and rows,
    its machine a v6e chip, its medians a tenth of the CPU's (made-up TPU numbers)."""
    recording = json.loads((ROOT / recording_name(SEED, "sweep")).read_text())
    recording["environment"].update(backend="tpu", deviceKind="TPU v6 lite")
    recording["provenance"] = "recorded_tpu_computation"
    for row in recording["rows"]:
        row["samplesUs"] = [t / 10 for t in row["samplesUs"]]
    return recording


def test_a_tpu_sweep_is_drawn_over_the_prediction_with_the_ratio():
    data = json.loads(DATA.read_text())
    fixture = tpu_sweep_fixture()
    svg = KINDS["tpu-predictions"].render(data, fixture)
    assert "<title>Measured on 4 × TPU v6 lite (v6e-4) against the prediction</title>" in svg
    assert "measured /" in svg and "measured median: all-reduce" in svg
    # The ratios in the description are the recording's medians over the v6e-4 curve.
    from scripts.figures.tpu_predictions import row_medians
    ratios = []
    for collective, curve in data["curve"]["v6e-4"].items():
        predicted = dict(map(tuple, curve))
        ratios += [median / predicted[nbytes] for nbytes, median
                   in row_medians(fixture, collective, 4, predicted).items()]
    assert len(ratios) == 36  # 12 sizes x 3 collectives
    assert f"are {min(ratios):.2g} to {max(ratios):.2g} times the v6e-4 prediction" in svg
    fixture["environment"]["deviceKind"] = "TPU v4"
    try:
        KINDS["tpu-predictions"].render(data, fixture)
    except ValueError as error:
        assert "'TPU v4' is none of the predicted VMs'" in str(error)
    else:
        raise AssertionError("a recording from an unpredicted chip was drawn")


@pytest.mark.slow
def test_a_tpu_sweep_recording_changes_the_figure_and_the_page_with_no_edit(tmp_path):
    """Drop the recording in, redraw, build: the figure and the TPU page speak of it."""
    from conftest import project_copy, run_record
    from site_build import build

    project = project_copy(tmp_path / "project")
    figure = project / "figures" / f"{SEED.id}-tpu-predictions.svg"
    (project / recording_name(SEED, "tpu-sweep")).write_text(
        json.dumps(tpu_sweep_fixture(), indent=2) + "\n")
    run = run_record(project, "--render-only")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Measured on 4 × TPU v6 lite" in figure.read_text()
    check = run_record(project, "--check")
    assert f"{SEED.id}-tpu-predictions.svg" not in check.stdout + check.stderr
    site = build(project, tmp_path / "site")
    assert site.returncode == 0, site.stderr[-3000:]
    page = (tmp_path / "site" / "going-further" / "tpu" / "index.html").read_text()
    assert "Measured against predicted." in page and "No TPU size sweep" not in page


def test_the_device_kinds_are_the_ones_the_installed_jax_names():
    """A TPU recording finds its machine by device_kind: the names must be JAX's own, so
    a JAX upgrade that renames a chip fails here, not on a TPU VM."""
    from jax._src import mesh_utils

    from lesson_code import tpu_predictions

    assert mesh_utils._TPU_V5_LITE in tpu_predictions.DEVICE_KINDS["v5litepod-4"]
    assert mesh_utils._TPU_V6_LITE in tpu_predictions.DEVICE_KINDS["v6e-4"]

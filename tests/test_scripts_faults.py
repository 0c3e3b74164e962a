"""Faults in the machinery (a corrupt file, a measurement that cannot be fitted, a worker
or lesson that breaks its contract) end in one line naming the file and the fix, never a
traceback, and nothing written."""
import importlib
import json
from types import SimpleNamespace

import pytest

from conftest import FIRST_LESSON, ROOT, SEED, recording_name
from harness import RECORD, one_error, project, run, unchanged
from scripts import bench, record
from scripts.store import recordings
from scripts.store.lessons import load_lessons
from scripts.store.outputs import lesson_command
from scripts.sweep.measure import WorkerFailed, measure_in_subprocess

SWEEP = importlib.import_module(SEED.sweep)
COLLECTIVES, program_facts = SWEEP.COLLECTIVES, SWEEP.program_facts
RECORDING = ROOT / recording_name(FIRST_LESSON)


def one_line(text):
    assert "Traceback" not in text and len(text.strip().splitlines()) == 1, text
    return text.strip()


# Enough of the project for record.py --check and --render-only.
PARTS = ("requirements.txt", "constraints.txt", "scripts", "lesson_code", "recordings",
         "figures", "docs")


# --- a corrupt schema -----------------------------------------------------------------

@pytest.mark.parametrize("text", ["{not json", ""])
def test_a_corrupt_schema_names_the_schema_file_to_the_reader_and_the_build(
        tmp_path, monkeypatch, text):
    from mkdocs.exceptions import PluginError

    from scripts.pages import hooks as site_hooks

    schema = tmp_path / "schema.json"
    schema.write_text(text)
    monkeypatch.setattr(recordings, "SCHEMA_PATH", schema)
    with pytest.raises(recordings.RecordingError) as caught:
        recordings.load_recording(RECORDING)
    assert "schema.json: the schema cannot be read" in one_line(str(caught.value))
    assert caught.value.fix.startswith("git checkout -- ")
    with pytest.raises(PluginError) as caught:
        site_hooks.on_config({"docs_dir": "docs", "config_file_path": ROOT / "mkdocs.yml"})
    assert "schema.json: the schema cannot be read" in one_line(str(caught.value))


# --- bench.py ---------------------------------------------------------------------------

@pytest.fixture(autouse=True)
def quiet_host(monkeypatch):
    """No busy-host warning among the lines counted here (tests/test_bench.py checks it)."""
    import scripts.host
    monkeypatch.setattr(scripts.host, "host_load", lambda: {"cores": 2, "loadAverage1m": 0.0})


TINY = {"ranks": [4], "sizes": [8, 1024, 2**20], "blocks": 2, "samples": 3,
        "minSampleMs": 0.2}


def shrinking_rows(module, ranks, sizes, plan, block, root):
    """Times that fall as the messages grow, once per call and looped four times: no
    alpha-beta line can fit them."""
    rows = [{"collective": c, "ranks": ranks, "block": block, "position": 0,
             "requestedBytes": s, "bytes": s, "samplesUs": [looped * 1000.0 / (k + 1)] * 3,
             "callsPerSample": 1, "warmupCalls": 1, "collectivesPerCall": looped,
             "minorFaults": [0] * 3, "wrong": 0}
            for c in COLLECTIVES for k, s in enumerate(sizes) for looped in (1, 4)]
    host = {"cores": 2, "loadAverage1m": 0.1}
    return {"backend": {"backend": "cpu", "deviceKind": "cpu", "jax": "0"}, "rows": rows,
            "programs": program_facts(ranks), "host": {"before": host, "after": host}}


def test_a_sweep_that_never_reaches_bandwidth_is_recorded_and_analysed_as_such(
        tmp_path, monkeypatch):
    """What was measured is kept whatever it says: a line that cannot be fitted is the
    analysis's finding (no beta), not a reason to throw the measurement away."""
    monkeypatch.setattr(bench, "measure_in_subprocess", shrinking_rows)
    monkeypatch.setattr(bench, "measure_memcpy_gbps", lambda: 1.0)
    out = tmp_path / "sweep.json"
    assert bench.main(["--out", str(out)], plan=TINY) == 0
    analysis = json.loads((tmp_path / "sweep.analysis.json").read_text())
    assert analysis["fits"]["all_reduce"]["4"]["betaGBps"] is None
    assert (tmp_path / f"sweep.{SEED.id}-sweep.svg").exists()


def test_a_worker_that_prints_no_rows_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "silent_sweep.py").write_text(
        "import sys\n\ndef configure_devices(ranks):\n    sys.exit(0)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    with pytest.raises(WorkerFailed) as caught:
        measure_in_subprocess("silent_sweep", 4, [8], {})
    assert one_line(str(caught.value)) == (
        "the p=4 worker printed no rows (its last stdout line must be their JSON); "
        "nothing was written")


def raises(error):
    def fault(*args, **kwargs):
        raise error
    return fault


@pytest.mark.parametrize("measure, cache, line", [
    (raises(WorkerFailed("the p=4 worker printed no rows; nothing was written")), None,
     "bench.py: the p=4 worker printed no rows; nothing was written"),
    (shrinking_rows, raises(PermissionError(13, "Permission denied", "/sys/devices/system/cpu/"
                                                                     "cpu0/cache")),
     "bench.py: /sys/devices/system/cpu/cpu0/cache: Permission denied; nothing was written"),
], ids=["a failed worker", "an unreadable host file"])
def test_bench_reports_a_fault_in_one_line_and_writes_nothing(monkeypatch, capsys, tmp_path,
                                                              measure, cache, line):
    monkeypatch.setattr(bench, "measure_in_subprocess", measure)
    monkeypatch.setattr(bench, "measure_memcpy_gbps", lambda: 1.0)
    if cache:
        monkeypatch.setattr(bench, "l2_cache_bytes", cache)
    assert bench.main(["--out", str(tmp_path / "sweep.json")], plan=TINY) == 1
    assert one_line(capsys.readouterr().err) == line
    assert list(tmp_path.iterdir()) == []


# --- record.py ------------------------------------------------------------------------

def test_a_data_out_that_is_not_json_is_one_line(tmp_path):
    (tmp_path / "bad_data.py").write_text(
        "import sys\n\nopen(sys.argv[sys.argv.index('--data-out') + 1], 'w')"
        ".write('{not json')\n")
    with pytest.raises(record.RecordError) as caught:
        record.run_module("bad_data", tmp_path, tmp_path)
    message = one_line(str(caught.value))
    assert message.startswith("bad_data wrote bad_data.json (--data-out) that cannot be read "
                              "as JSON")
    assert message.endswith("nothing was written")


def test_a_lesson_without_environment_names_the_contract(tmp_path, monkeypatch, capsys):
    # On a copy: were the contract check to regress, the run would write there, not here.
    root = project(tmp_path / "repo")
    monkeypatch.setattr(record, "load_lessons", lambda: load_lessons(root))
    ran = SimpleNamespace(stdout=f"PASS: {FIRST_LESSON.id}\n", data={"gradient": [1.0]},
                          duration_s=0.1, notebook=None)
    monkeypatch.setattr(record, "run_cells", lambda *args: ran)
    with unchanged(root):
        assert record.main(["--lesson", FIRST_LESSON.id, "--all"]) == 1
    one_error(capsys.readouterr().err, "run_lesson() returned no `environment`",
              "lesson_code/CONTRACT.md requires it")


@pytest.mark.parametrize("path, text, command, status, said", [
    # The registry's ids follow the schema's lessonId pattern: the registry stops first.
    ("recordings/schema.json", "{not json", "--check", 2, "its header has no readable "
     "lessonId pattern; run `git checkout -- recordings/schema.json`"),
    (recording_name(SEED, "sweep"), "[1]", "--render-only", 1,
     "expected a JSON object; run `make bench`"),
    (recording_name(SEED), "{not json", "--render-only", 1, "not valid JSON (Expecting property "
     f"name enclosed in double quotes: line 1 column 2 (char 1)); run `{lesson_command(SEED)}`"),
])
def test_a_corrupt_file_is_one_line_naming_its_fix_and_touches_nothing(tmp_path, path, text,
                                                                       command, status, said):
    root = project(tmp_path / "repo", PARTS)
    (root / path).write_text(text)
    with unchanged(root):
        done = run(RECORD, command, cwd=root, timeout=120)
    assert (done.returncode, done.stdout) == (status, "")
    assert one_error(done.stderr) == f"error: {path}: {said}"
    assert command != "--check" or done.stderr.count("\n") == 1  # nothing before it

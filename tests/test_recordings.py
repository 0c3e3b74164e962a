"""The shared header every recording has, each lesson's own data schema, and the committed
CPU recording's values."""
import json
import re
import string

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import LESSONS, PUBLISHED_SEED, ROOT, SEED, module_file
from scripts.store.recordings import RecordingError, dumps, load_recording, validate

# The seed lesson's recordings: their values (its gradient, its panels) are its content.
LESSON_ID = SEED.id
RECORDING = ROOT / "recordings" / f"{LESSON_ID}.cpu.json"
MECHANISM = ROOT / "lesson_code" / "figures" / f"{LESSON_ID}-mechanism.json"
EVERY_RECORDING = sorted(p for p in (ROOT / "recordings").glob("*.json")
                         if p.name not in ("schema.json", "outputs.lock.json"))


def gradient_from_stdout(stdout):
    line = next(ln for ln in stdout.splitlines() if ln.startswith("Gradient reference: "))
    return json.loads(line.removeprefix("Gradient reference: "))


def test_the_schema_is_a_valid_schema():
    jsonschema.Draft202012Validator.check_schema(
        json.loads((ROOT / "recordings" / "schema.json").read_text()))


def test_each_lesson_s_data_schema_is_a_valid_schema():
    schemas = [lesson.data_schema for lesson in LESSONS.values() if lesson.data_schema]
    assert schemas  # the seed names one
    for schema in schemas:
        jsonschema.Draft202012Validator.check_schema(json.loads((ROOT / schema).read_text()))


def test_the_data_is_held_to_the_lesson_s_own_schema_and_the_file_to_its_lesson():
    from dataclasses import replace

    lesson = LESSONS[LESSON_ID]
    recording = json.loads(RECORDING.read_text())
    recording["data"]["budget"] = [{"ranks": "four"}]  # the seed's own field
    for held_to in (lesson, None):  # named by the caller, or by the recording's lessonId
        with pytest.raises(RecordingError, match=r"invalid at data/budget/0"):
            validate(recording, "recordings/x.json", lesson=held_to)
    # A lesson without a data schema: its data is its own, the header is still checked.
    plain = replace(lesson, data_schema=None)
    validate(recording, "recordings/x.json", lesson=plain)
    recording["generatedAt"] = "yesterday"
    with pytest.raises(RecordingError, match="invalid at generatedAt"):
        validate(recording, "recordings/x.json", lesson=plain)
    # A file of one lesson that names another is refused, so no recording can slip past
    # its lesson's schema by naming a lesson without one.
    named_other = json.loads(RECORDING.read_text()) | {"lessonId": "other-lesson"}
    with pytest.raises(RecordingError, match=f"it records 'other-lesson', and this file is "
                                             f"{SEED.id}'s"):
        validate(named_other, "recordings/x.json", lesson=lesson)


@pytest.mark.parametrize("path", EVERY_RECORDING, ids=lambda p: p.name)
def test_every_committed_recording_validates_and_survives_a_round_trip(path):
    recording = load_recording(path)
    assert json.loads(dumps(recording)) == recording
    assert recording["environment"]["cpuCount"] >= 1
    assert "rendererHash" not in recording  # informational in the seed only


@pytest.mark.parametrize("field, value", [("provenance", "made_up"),
                                          ("contentHash", "not-a-hash"),
                                          ("kind", "illustrative")])
def test_validation_rejects_a_broken_recording_in_one_line(field, value):
    recording = json.loads(RECORDING.read_text())
    recording[field] = value
    with pytest.raises(RecordingError) as error:
        validate(recording, "recordings/x.json")
    assert str(error.value).startswith(f"recordings/x.json: invalid at {field}: ")
    assert "\n" not in str(error.value)


def test_validation_rejects_a_panel_without_numbers():
    recording = json.loads(RECORDING.read_text())
    recording["data"]["panels"][0]["series"][0]["y"] = ["8", "2", "8"]
    with pytest.raises(RecordingError,
                       match=r"invalid at data/panels/0/series/0/y/\d: '8' is not of type"):
        validate(recording)


def test_a_sweep_without_its_rows_is_rejected_by_the_same_schema():
    sweep = json.loads((ROOT / "recordings" / f"{LESSON_ID}.sweep.json").read_text())
    del sweep["rows"]
    with pytest.raises(RecordingError, match="'rows' is a required property"):
        validate(sweep, "sweep")


def test_a_sweep_program_the_lesson_does_not_have_is_refused_by_the_lesson_s_schema():
    """The layout of a sweep is the shared schema's; the names of its programs are the
    lesson's (its data schema's $defs/sweep): the shared schema lets any name through."""
    sweep = json.loads((ROOT / "recordings" / f"{LESSON_ID}.sweep.json").read_text())
    sweep["rows"][0]["collective"] = "all_to_all"
    shared = json.loads((ROOT / "recordings" / "schema.json").read_text())
    assert list(jsonschema.Draft202012Validator(shared).iter_errors(sweep)) == []
    with pytest.raises(RecordingError, match=r"invalid at rows/0/collective: 'all_to_all' "
                                             r"is not one of"):
        validate(sweep, "sweep")


def test_the_shared_schema_names_no_lesson_s_programs():
    shared = (ROOT / "recordings" / "schema.json").read_text()
    for lesson in LESSONS.values():
        if lesson.data_schema:
            programs = json.loads((ROOT / lesson.data_schema).read_text()).get(
                "$defs", {}).get("sweepProgram", {}).get("enum", [])
            assert not [name for name in programs if f'"{name}"' in shared], lesson.id


def test_a_recording_path_that_is_a_directory_is_one_line(tmp_path):
    (tmp_path / "x.cpu.json").mkdir()
    with pytest.raises(RecordingError, match=r"is a directory, not a recording \(remove it\)"):
        load_recording(tmp_path / "x.cpu.json")


def test_the_published_seed_recording_validates():
    validate(json.loads(PUBLISHED_SEED.read_text()), "published seed")


def test_the_committed_recording_has_the_deterministic_values():
    """Derived here: p = 4, F = 2p = 8 float32 weights, so 32 gradient bytes."""
    recording = load_recording(RECORDING)
    values, payload = recording["data"]["panels"]
    assert values["series"][0]["y"] == [8, 8 // 4, 8]
    one_phase = 32 * 3 / 4
    assert payload["series"][0]["y"] == [2 * one_phase, one_phase, 2 * one_phase]
    assert recording["environment"]["backend"] == "cpu"
    assert recording["environment"]["deviceCount"] == 4
    assert recording["provenance"] == "recorded_cpu_computation"
    assert gradient_from_stdout(recording["stdout"]) == recording["data"]["gradient"]
    lines = recording["stdout"].splitlines()
    assert len(set(lines)) == len(lines) and lines[-1] == f"PASS: {LESSON_ID}"


def test_the_committed_recording_matches_the_published_one():
    seed, ours = json.loads(PUBLISHED_SEED.read_text()), load_recording(RECORDING)
    # Same shape: every published field is still there, but for the two the published
    # format carried that now live elsewhere (the figure's prose, an unread hash).
    assert set(seed) - {"diagram", "rendererHash"} <= set(ours)
    assert set(seed["environment"]) <= set(ours["environment"])
    assert set(seed["data"]) <= set(ours["data"])
    for key in ("schemaVersion", "lessonId", "kind", "provenance"):
        assert ours[key] == seed[key]
    for key in ("backend", "deviceCount"):
        assert ours["environment"][key] == seed["environment"][key]
    # One spelling on the site: the published "modeled" axis label reads "modelled" here.
    published_panels = json.loads(json.dumps(seed["data"]["panels"]).replace("modeled",
                                                                             "modelled"))
    assert ours["data"]["panels"] == published_panels
    published = gradient_from_stdout(seed["stdout"])
    assert len(ours["data"]["gradient"]) == len(published)
    for mine, theirs in zip(ours["data"]["gradient"], published):
        assert abs(mine - theirs) < 1e-8
    # The published first four lines, each once (the seed printed them twice, defect 1), in
    # their order; ours prints more between them, each step's line under its step.
    ours_lines, seed_lines = ours["stdout"].splitlines(), seed["stdout"].splitlines()
    heads = [line.split(":")[0] for line in ours_lines]
    found = [heads.index(line.split(":")[0]) for line in seed_lines[:4]]
    assert found == sorted(found) and all(heads.count(heads[i]) == 1 for i in found)
    assert [ours_lines[i] for i in found[1:3]] == seed_lines[1:3]


def test_the_mechanism_table_keeps_the_published_numbers():
    seed = json.loads(PUBLISHED_SEED.read_text())["diagram"]["panel"]
    ours = json.loads(MECHANISM.read_text())["table"]
    assert ours["headers"] == seed["headers"]
    for mine, theirs in zip(ours["rows"], seed["rows"]):
        assert mine[0] == theirs[0]
        # "[1+3 = 4]" shows the sum the published "[4]" only stated.
        assert [cell.split("= ")[-1].strip("[]") for cell in mine[1:]] == \
            [cell.strip("[]") for cell in theirs[1:]]


@pytest.mark.parametrize("text, words", [('{"type": 3}', "not a JSON Schema (at type"),
                                         ("{not json", "the schema cannot be read")])
def test_a_broken_data_schema_is_one_line_naming_it(tmp_path, text, words):
    from dataclasses import replace

    (tmp_path / "lesson_code").mkdir()
    (tmp_path / "lesson_code" / "bad.schema.json").write_text(text)
    lesson = replace(LESSONS[LESSON_ID], root=tmp_path, data_schema="lesson_code/bad.schema.json")
    with pytest.raises(RecordingError) as refused:
        validate(json.loads(RECORDING.read_text()), "recordings/x.json", lesson=lesson)
    message = str(refused.value)
    assert "\n" not in message and words in message and "bad.schema.json" in message


# --- what a pull request or a fetched file can hold (issue 37) --------------------------

def fifo(path):
    import os

    os.mkfifo(path)


@pytest.mark.parametrize("make, words", [
    (lambda path: path.symlink_to("/dev/zero"), "is a symbolic link"),
    (lambda path: path.symlink_to(RECORDING), "is a symbolic link"),  # even to a recording
    (fifo, "not a regular file"),
    (lambda path: path.write_bytes(b"") or path.open("r+b").truncate(33 * 2**20),
     "larger than 32 MiB"),
], ids=["link to /dev/zero", "link to a recording", "a pipe", "a sparse 33 MiB file"])
def test_a_recording_that_is_not_a_regular_file_of_its_own_is_refused_unread(tmp_path, make,
                                                                             words):
    path = tmp_path / f"{LESSON_ID}.tpu.json"
    make(path)
    with pytest.raises(RecordingError) as refused:
        load_recording(path)  # /dev/zero read to its end would never return
    message = str(refused.value)
    assert "\n" not in message and words in message and f"{LESSON_ID}.tpu.json" in message


@pytest.mark.parametrize("text, words", [
    ('{"schemaVersion": ' + "9" * 5000 + "}", "not valid JSON (Exceeds the limit"),
    ("[" * 100_000 + "]" * 100_000, "not valid JSON (nested deeper"),
], ids=["a 5,000-digit integer", "100,000 nested arrays"])
def test_json_python_cannot_hold_is_one_line_naming_the_file(tmp_path, text, words):
    path = tmp_path / f"{LESSON_ID}.cpu.json"
    path.write_text(text)
    with pytest.raises(RecordingError) as refused:
        load_recording(path)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(str(path)) and words in message


def test_a_recording_holds_no_more_stdout_lines_than_a_page_shows_whoever_reads_it():
    from scripts.store.recordings import MAX_STDOUT_LINES

    recording = json.loads(RECORDING.read_text())
    recording["stdout"] = "".join(f"{n}\n" for n in range(MAX_STDOUT_LINES + 1001)) + \
        f"PASS: {LESSON_ID}\n"  # 3,001 lines: far under the characters' limit
    with pytest.raises(RecordingError, match=rf"invalid at stdout: {MAX_STDOUT_LINES + 1002} "
                       rf"lines, and a recording holds at most {MAX_STDOUT_LINES}"):
        validate(recording, "recordings/x.cpu.json")


def test_data_nested_deeper_than_validation_walks_is_one_line():
    recording = json.loads(RECORDING.read_text())
    deep = []
    for _ in range(5000):  # what a lesson's run_lesson could return, before any JSON
        deep = [deep]
    recording["data"]["deep"] = deep
    with pytest.raises(RecordingError, match=r"^new recording x: nested too deeply to be a "
                       r"recording; run `python scripts/record.py`$"):
        validate(recording, "new recording x")


def test_a_recording_names_the_commit_its_inputs_come_from(tmp_path):
    """HEAD's sha and whether every input is as HEAD holds it; no commit outside a git
    checkout of its own (a copied tree inside another repository names none either)."""
    import subprocess

    from scripts.store.recordings import source_commit

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@localhost", *args],
                       cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "lesson.py").write_text("x = 1\n")
    (tmp_path / "other.py").write_text("y = 1\n")
    assert source_commit(tmp_path, ["lesson.py"]) is None  # no repository yet
    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "lesson")
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True,
                         text=True).stdout.strip()
    assert source_commit(tmp_path, ["lesson.py"]) == {"sha": sha, "clean": True}
    (tmp_path / "other.py").write_text("y = 2\n")  # not an input: still clean
    assert source_commit(tmp_path, ["lesson.py"]) == {"sha": sha, "clean": True}
    (tmp_path / "lesson.py").write_text("x = 2\n")
    assert source_commit(tmp_path, ["lesson.py"]) == {"sha": sha, "clean": False}
    copied = tmp_path / "copy"
    copied.mkdir()
    assert source_commit(copied, []) is None  # inside the repository, not one of its own


# --- a recording is untrusted input: what its formatted fields take --------------------
# A recording can come from a VM, a pull request or a hand edit. A field with a format
# (command, device kind, versions, file names, dates) refuses anything outside it, in one
# line naming the file and the field; free text is shown as text (tests/site_hostile.py).

TPU_FIXTURE = (ROOT / "tests" / "fixtures" / "tpu_recording.fixture.json").read_text()


def tpu_recording():
    return json.loads(TPU_FIXTURE)


def write(tmp_path, recording):
    path = tmp_path / f"{LESSON_ID}.tpu.json"
    path.write_text(json.dumps(recording))
    return path


def set_field(recording, field, value):
    *parents, last = [int(part) if part.isdigit() else part for part in field.split("/")]
    for part in parents:
        recording = recording[part]
    recording[last] = value


FORMATTED_FIELDS = ["command/1", "environment/deviceKind", "environment/jax",
                    "environment/numpy", "environment/python", "environment/platform",
                    "generatedAt", "provenance", "lessonId"]
# What HTML, Markdown, the snippets and the page directives read as markup, and line breaks.
MARKUP = '<>&"\'`[]{}\\!*|$#~\n\r\t\x00'


# One hostile payload a field, each refused in one line naming the file and the field...
@pytest.mark.parametrize("field, payload", list(zip(FORMATTED_FIELDS, [
    '<script>alert("XSS script")</script>', '<img src=x onerror=alert("XSS img")>',
    '[x](javascript:alert("XSS link"))', '--8<-- ".git/config"',
    '{{ rec:' + LESSON_ID + '.cpu:environment.jax }}', '{% include ".git/config" %}',
    '\\(\\href{javascript:alert("XSS tex")}{x}\\)', "ok\n", "x" * 300])))
def test_a_formatted_field_refuses_hostile_text(tmp_path, field, payload):
    recording = tpu_recording()
    set_field(recording, field, payload)
    with pytest.raises(RecordingError) as refused:
        load_recording(write(tmp_path, recording))
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(str(tmp_path / f"{LESSON_ID}.tpu.json"))
    assert f"invalid at {field}" in message


# ...and the rule they follow: no text holding a markup character, and none past 200
# characters, passes any formatted field.
@settings(max_examples=100, deadline=None)
@given(field=st.sampled_from(FORMATTED_FIELDS),
       text=st.builds(lambda before, mark, after: before + mark + after,
                      st.text(max_size=20), st.sampled_from(MARKUP), st.text(max_size=20))
       | st.text(alphabet=string.ascii_letters + string.digits + "._-", min_size=201,
                 max_size=300))
def test_no_formatted_field_takes_a_markup_character_or_a_long_text(field, text):
    recording = tpu_recording()
    set_field(recording, field, text)
    with pytest.raises(RecordingError, match=f"invalid at {re.escape(field)}"):
        validate(recording, "recordings/x.tpu.json")


@pytest.mark.parametrize("name", ["../.git/config", "/etc/passwd", "lesson_code/../../x.py",
                                  "./lesson_code/x.py", "lesson_code\\x.py",
                                  "`<img src=x onerror=alert(1)>`",
                                  "[x](javascript:alert(1)).py", "lesson_code/x.py\n"])
def test_a_content_file_name_must_be_a_plain_relative_path(tmp_path, name):
    recording = tpu_recording()
    recording["contentFiles"] = {name: "0" * 64}
    with pytest.raises(RecordingError, match=r"invalid at contentFiles: .* does not match"):
        load_recording(write(tmp_path, recording))


def test_the_formatted_fields_still_take_real_values(tmp_path):
    recording = tpu_recording()
    recording["environment"].update(deviceKind="NVIDIA H100 80GB HBM3",
                                    platform="macOS-14.5-arm64-arm-64bit",
                                    jax="0.10.2.dev20261101+cuda")
    recording["command"] = ["python", "scripts/tpu_job.py", "--zone=us-east5-b",
                            "--name", "tpu-1"]
    recording["contentFiles"] = {module_file(SEED): "0" * 64,
                                 "constraints.txt": "1" * 64}
    assert load_recording(write(tmp_path, recording))["command"][2] == "--zone=us-east5-b"


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_a_recording_holds_only_finite_numbers(tmp_path, number):
    recording = tpu_recording()
    recording["data"]["timing"] = {"all_reduce": {"medianUs": number}}
    with pytest.raises(RecordingError, match="data/timing/all_reduce/medianUs: .* not a "
                                             "finite number"):
        validate(recording, "new recording")
    with pytest.raises(ValueError):
        dumps(recording)  # never a bare NaN or Infinity token in a file
    path = tmp_path / "x.tpu.json"
    path.write_text(json.dumps(recording))  # as a hand edit would: NaN / Infinity tokens
    with pytest.raises(RecordingError) as refused:
        load_recording(path)
    assert "not a finite number" in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize("change", [
    lambda panels: panels.extend([panels[0]] * 3000),  # a figure of 3,000 bar charts
    lambda panels: panels[0]["series"].extend([panels[0]["series"][0]] * 100),
    lambda panels: panels[0]["series"][0]["y"].extend([1.0] * 100_000),
])
def test_the_figure_data_a_recording_holds_is_bounded(change):
    recording = tpu_recording()
    change(recording["data"]["panels"])
    with pytest.raises(RecordingError, match="invalid at data/panels"):
        validate(recording, "recording")


def test_a_recording_edited_after_it_was_validated_is_validated_again(tmp_path):
    """Validity is kept per process by the file's bytes: an edit is read afresh."""
    path = tmp_path / f"{LESSON_ID}.cpu.json"
    recording = json.loads(RECORDING.read_text())
    path.write_text(json.dumps(recording))
    assert load_recording(path) == load_recording(path) == recording
    recording["provenance"] = "made_up"
    path.write_text(json.dumps(recording))
    with pytest.raises(RecordingError, match="invalid at provenance: 'made_up' does not match"):
        load_recording(path)


def test_what_the_compiled_validator_alone_refuses_is_still_one_line():
    """Python's `$` matches before a final newline, the compiled validator's does not: its
    refusal stands, in one line naming the field."""
    sweep = json.loads((ROOT / "recordings" / f"{LESSON_ID}.sweep.json").read_text())
    programs = sweep["programs"]
    programs[f"{next(iter(programs))}\n"] = programs.pop(next(iter(programs)))
    with pytest.raises(RecordingError, match=r"^sweep: invalid at programs") as refused:
        validate(sweep, "sweep")
    assert "\n" not in str(refused.value)

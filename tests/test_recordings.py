"""Every recording: its schemas, the committed values, and the one reader of committed JSON,
which refuses in one line whatever a pull request or a fetched file can hold."""
import json
import os
import re
import string
from dataclasses import replace

import jsonschema
import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from conftest import LESSONS, PUBLISHED_SEED, ROOT, SEED, each_lesson, module_file
from harness import git, raised_in_one_line
from scripts.store.recordings import (MAX_STDOUT_LINES, RecordingError, dumps, load_recording,
                                      read_json, source_commit, validate)

LESSON_ID = SEED.id
RECORDING = ROOT / "recordings" / f"{LESSON_ID}.cpu.json"
SWEEP = ROOT / "recordings" / f"{LESSON_ID}.sweep.json"
MECHANISM = ROOT / "lesson_code" / "figures" / f"{LESSON_ID}-mechanism.json"
TPU_FIXTURE = ROOT / "tests" / "fixtures" / "tpu_recording.fixture.json"


def gradient_from_stdout(stdout):
    line = next(ln for ln in stdout.splitlines() if ln.startswith("Gradient reference: "))
    return json.loads(line.removeprefix("Gradient reference: "))


def test_the_schemas_are_valid_and_the_shared_one_names_no_lesson_s_programs():
    shared = (ROOT / "recordings" / "schema.json").read_text()
    jsonschema.Draft202012Validator.check_schema(json.loads(shared))
    own = [lesson.data_schema for lesson in LESSONS.values() if lesson.data_schema]
    assert own  # the seed names one
    for schema in map(json.loads, ((ROOT / path).read_text() for path in own)):
        jsonschema.Draft202012Validator.check_schema(schema)
        programs = schema.get("$defs", {}).get("sweepProgram", {}).get("enum", [])
        assert not [name for name in programs if f'"{name}"' in shared], programs


def test_the_data_is_held_to_the_lesson_s_own_schema_and_the_file_to_its_lesson():
    lesson, recording = LESSONS[LESSON_ID], json.loads(RECORDING.read_text())
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


@each_lesson
def test_every_committed_recording_validates_and_survives_a_round_trip(lesson):
    paths = sorted((ROOT / "recordings").glob(f"{lesson.id}.*.json"))
    assert paths, f"{lesson.id} has no recording"
    for recording in map(load_recording, paths):
        assert json.loads(dumps(recording)) == recording
        assert recording["environment"]["cpuCount"] >= 1
        assert "rendererHash" not in recording  # informational in the seed only
    with pytest.raises(ValueError):  # never a bare NaN or Infinity token in a file
        dumps({"medianUs": float("nan")})


def nested(depth):
    deep = []
    for _ in range(depth):
        deep = [deep]
    return deep


def set_field(recording, field, value):
    *parents, last = [int(part) if part.isdigit() else part for part in field.split("/")]
    for part in parents:
        recording = recording[part]
    recording[last] = value


def renamed_program(sweep):
    programs = sweep["programs"]
    first = next(iter(programs))
    programs[f"{first}\n"] = programs.pop(first)


REFUSED = {
    "a hash that is no digest": (RECORDING, lambda r: r.update(contentHash="not-a-hash"),
                                 "invalid at contentHash: "),
    "a kind no command makes": (RECORDING, lambda r: r.update(kind="illustrative"),
                                "invalid at kind: "),
    "a panel without numbers": (RECORDING, lambda r: set_field(
        r, "data/panels/0/series/0/y", ["8", "2", "8"]),
        r"invalid at data/panels/0/series/0/y/\d: '8' is not of type"),
    "a sweep without its rows": (SWEEP, lambda r: r.pop("rows"),
                                 "'rows' is a required property"),
    # The layout of a sweep is the shared schema's; its programs' names the lesson's.
    "a program the lesson does not have": (SWEEP, lambda r: set_field(
        r, "rows/0/collective", "all_to_all"),
        "invalid at rows/0/collective: 'all_to_all' is not one of"),
    # Python's `$` matches before a final newline, the compiled validator's does not.
    "a program name ending in a newline": (SWEEP, renamed_program, "invalid at programs"),
    "more lines than a page shows": (RECORDING, lambda r: r.update(stdout="".join(
        f"{n}\n" for n in range(MAX_STDOUT_LINES + 1001)) + f"PASS: {LESSON_ID}\n"),
        f"invalid at stdout: {MAX_STDOUT_LINES + 1002} lines, and a recording holds at "
        f"most {MAX_STDOUT_LINES}"),
    "data nested deeper than validation walks": (
        RECORDING, lambda r: set_field(r, "data/deep", nested(5000)),
        "nested too deeply to be a recording; run `python scripts/record.py`"),
    "a figure of 3,000 bar charts": (TPU_FIXTURE, lambda r: r["data"]["panels"].extend(
        r["data"]["panels"][:1] * 3000), "invalid at data/panels"),
    "a panel of 100 series": (TPU_FIXTURE, lambda r: r["data"]["panels"][0]["series"].extend(
        r["data"]["panels"][0]["series"][:1] * 100), "invalid at data/panels"),
    "a series of 100,000 bars": (TPU_FIXTURE, lambda r: set_field(
        r, "data/panels/0/series/0/y", [1.0] * 100_000), "invalid at data/panels"),
    "a timing of -inf": (TPU_FIXTURE, lambda r: set_field(
        r, "data/timing", {"all_reduce": {"medianUs": float("-inf")}}),
        "invalid at data/timing/all_reduce/medianUs: -inf is not a finite number"),
    # A content file's name must be a plain relative path.
    **{f"a content file named {name!r}": (TPU_FIXTURE, lambda r, name=name: r.update(
        contentFiles={name: "0" * 64}), r"invalid at contentFiles: .* does not match")
       for name in ("../.git/config", "/etc/passwd", "lesson_code/../../x.py",
                    "./lesson_code/x.py", "lesson_code\\x.py", "`<img src=x onerror=alert(1)>`",
                    "[x](javascript:alert(1)).py", "lesson_code/x.py\n")}}


@pytest.mark.parametrize("case", REFUSED)
def test_a_recording_that_does_not_fit_is_one_line_naming_the_field(case):
    source, change, words = REFUSED[case]
    recording = json.loads(source.read_text())
    change(recording)
    message = str(raised_in_one_line(RecordingError, validate, recording, "recordings/x.json"))
    assert message.startswith("recordings/x.json: ") and re.search(words, message), message


@pytest.mark.parametrize("text, words", [('{"type": 3}', "not a JSON Schema (at type"),
                                         ("{not json", "the schema cannot be read")])
def test_a_broken_data_schema_is_one_line_naming_it(tmp_path, text, words):
    (tmp_path / "lesson_code").mkdir()
    (tmp_path / "lesson_code" / "bad.schema.json").write_text(text)
    lesson = replace(LESSONS[LESSON_ID], root=tmp_path, data_schema="lesson_code/bad.schema.json")
    message = str(raised_in_one_line(RecordingError, validate, json.loads(RECORDING.read_text()),
                                     "recordings/x.json", lesson=lesson))
    assert words in message and "bad.schema.json" in message


def test_the_committed_recording_has_the_deterministic_and_the_published_values():
    """p = 4, F = 2p = 8 float32 weights: 32 gradient bytes."""
    seed, ours = json.loads(PUBLISHED_SEED.read_text()), load_recording(RECORDING)
    values, payload = ours["data"]["panels"]
    assert values["series"][0]["y"] == [8, 8 // 4, 8]
    assert payload["series"][0]["y"] == [2 * 32 * 3 / 4, 32 * 3 / 4, 2 * 32 * 3 / 4]
    assert gradient_from_stdout(ours["stdout"]) == ours["data"]["gradient"]
    lines = ours["stdout"].splitlines()
    assert len(set(lines)) == len(lines) and lines[-1] == f"PASS: {LESSON_ID}"
    validate(seed, "published seed")
    # Every published field is still there, but the figure's prose and an unread hash.
    assert set(seed) - {"diagram", "rendererHash"} <= set(ours)
    assert all(set(seed[part]) <= set(ours[part]) for part in ("environment", "data"))
    for key in ("schemaVersion", "lessonId", "kind", "provenance"):
        assert ours[key] == seed[key]
    assert (ours["environment"]["backend"], ours["environment"]["deviceCount"]) == \
        (seed["environment"]["backend"], seed["environment"]["deviceCount"]) == ("cpu", 4)
    # One spelling on the site: the published "modeled" axis label reads "modelled" here.
    assert ours["data"]["panels"] == json.loads(
        json.dumps(seed["data"]["panels"]).replace("modeled", "modelled"))
    np.testing.assert_allclose(ours["data"]["gradient"], gradient_from_stdout(seed["stdout"]),
                               rtol=0, atol=1e-8)
    # The published first four lines, each once (the seed printed them twice), in order.
    ours_lines, seed_lines = ours["stdout"].splitlines(), seed["stdout"].splitlines()
    heads = [line.split(":")[0] for line in ours_lines]
    found = [heads.index(line.split(":")[0]) for line in seed_lines[:4]]
    assert found == sorted(found) and all(heads.count(heads[i]) == 1 for i in found)
    assert [ours_lines[i] for i in found[1:3]] == seed_lines[1:3]
    # The mechanism's table: "[1+3 = 4]" shows the sum the published "[4]" only stated.
    table, published = json.loads(MECHANISM.read_text())["table"], seed["diagram"]["panel"]
    assert table["headers"] == published["headers"]
    assert [[mine[0], *(cell.split("= ")[-1].strip("[]") for cell in mine[1:])]
            for mine in table["rows"]] == \
        [[theirs[0], *(cell.strip("[]") for cell in theirs[1:])] for theirs in published["rows"]]


def test_a_recording_names_the_commit_its_inputs_come_from(tmp_path):
    """HEAD's sha and whether every input is as HEAD holds it; none outside a checkout of
    its own (a copied tree inside another repository)."""
    (tmp_path / "lesson.py").write_text("x = 1\n")
    (tmp_path / "other.py").write_text("y = 1\n")
    assert source_commit(tmp_path, ["lesson.py"]) is None  # no repository yet
    for args in (("init", "-q"), ("add", "-A"), ("commit", "-qm", "lesson")):
        git(tmp_path, *args)
    sha = git(tmp_path, "rev-parse", "HEAD").strip()
    assert source_commit(tmp_path, ["lesson.py"]) == {"sha": sha, "clean": True}
    (tmp_path / "other.py").write_text("y = 2\n")  # not an input: still clean
    assert source_commit(tmp_path, ["lesson.py"]) == {"sha": sha, "clean": True}
    (tmp_path / "lesson.py").write_text("x = 2\n")
    assert source_commit(tmp_path, ["lesson.py"]) == {"sha": sha, "clean": False}
    copied = tmp_path / "copy"
    copied.mkdir()
    assert source_commit(copied, []) is None  # inside the repository, not one of its own


# --- the one reader: what a pull request or a fetched file can hold ------------------------
# Every door reads committed JSON through read_json or load_recording (ruff's TID251 bans
# any other json.load in scripts/): each hostile file is tried here, once.

def hand_edited(number):
    """A hand edit's bare NaN or Infinity token."""
    def make(path):
        recording = json.loads(RECORDING.read_text())
        recording["data"]["gradient"][0] = number
        path.write_text(json.dumps(recording))
    return make


def written(content):
    return lambda path: path.write_bytes(content if isinstance(content, bytes)
                                         else content.encode())


HOSTILE = {
    "a 5,000-digit integer": (written('{"schemaVersion": ' + "9" * 5000 + "}"),
                              "not valid JSON (Exceeds the limit"),
    "100,000 nested arrays": (written("[" * 100_000 + "]" * 100_000),
                              "not valid JSON (nested deeper than a JSON reader goes)"),
    "a byte that is not UTF-8": (written(b'{"lessonId": "caf\xe9"}'),
                                 "not valid JSON ('utf-8' codec can't decode byte 0xe9"),
    "a truncated file": (written('{"rows": ['), "not valid JSON (Expecting value"),
    "a link to /dev/zero": (lambda path: path.symlink_to("/dev/zero"), "is a symbolic link"),
    "a link to a recording": (lambda path: path.symlink_to(RECORDING), "is a symbolic link"),
    "a pipe": (os.mkfifo, "not a regular file"),  # read to its end, either would never return
    "a directory": (lambda path: path.mkdir(), "is a directory, not a recording (remove it)"),
    "a sparse 33 MiB file": (lambda path: path.write_bytes(b"") or path.open("r+b").truncate(
        33 * 2**20), "larger than 32 MiB"),
    "nothing there": (lambda path: None, "missing"),
    "an array": (written("[]"), "expected a JSON object"),
    "NaN": (hand_edited(float("nan")), "invalid at data/gradient/0: nan is not a finite"),
    "Infinity": (hand_edited(float("inf")), "invalid at data/gradient/0: inf is not a finite")}

PARSED = ("an array", "NaN", "Infinity")


@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_file_is_refused_unread_in_one_line_naming_it(tmp_path, case):
    make, words = HOSTILE[case]
    path = tmp_path / f"{LESSON_ID}.cpu.json"
    make(path)
    message = str(raised_in_one_line(RecordingError, load_recording, path))
    assert message.startswith(f"{path}: ") and words in message
    assert message.endswith("; run `python scripts/record.py`")
    if case not in PARSED:  # the plain reader (a lock, an analysis) says the same
        assert message.startswith(str(raised_in_one_line(RecordingError, read_json, path)))


def test_a_recording_edited_after_it_was_validated_is_validated_again(tmp_path):
    path, recording = tmp_path / f"{LESSON_ID}.cpu.json", json.loads(RECORDING.read_text())
    path.write_text(json.dumps(recording))
    assert load_recording(path) == load_recording(path) == recording
    recording["provenance"] = "made_up"
    path.write_text(json.dumps(recording))
    with pytest.raises(RecordingError, match="invalid at provenance: 'made_up' does not match"):
        load_recording(path)


# --- a formatted field refuses markup (free text is shown as text: tests/site_hostile.py) --

FORMATTED_FIELDS = ["command/1", "environment/deviceKind", "environment/jax",
                    "environment/numpy", "environment/python", "environment/platform",
                    "generatedAt", "provenance", "lessonId"]
MARKUP = '<>&"\'`[]{}\\!*|$#~\n\r\t\x00'
HOSTILE_TEXT = ['<script>alert("XSS script")</script>', '<img src=x onerror=alert("XSS img")>',
                '[x](javascript:alert("XSS link"))', '--8<-- ".git/config"',
                '{{ rec:' + LESSON_ID + '.cpu:environment.jax }}', '{% include ".git/config" %}',
                '\\(\\href{javascript:alert("XSS tex")}{x}\\)', "ok\n", "x" * 300]


@settings(max_examples=40, deadline=None)
@given(field=st.sampled_from(FORMATTED_FIELDS),
       text=st.builds(lambda before, mark, after: before + mark + after,
                      st.text(max_size=20), st.sampled_from(MARKUP), st.text(max_size=20))
       | st.text(alphabet=string.ascii_letters + string.digits + "._-", min_size=201,
                 max_size=300))
def test_no_formatted_field_takes_a_markup_character_or_a_long_text(field, text):
    recording = json.loads(TPU_FIXTURE.read_text())
    set_field(recording, field, text)
    with pytest.raises(RecordingError, match=f"invalid at {re.escape(field)}"):
        validate(recording, "recordings/x.tpu.json")


for _field, _text in zip(FORMATTED_FIELDS, HOSTILE_TEXT):  # each payload in some field
    test_no_formatted_field_takes_a_markup_character_or_a_long_text = example(
        field=_field, text=_text)(test_no_formatted_field_takes_a_markup_character_or_a_long_text)


def test_the_formatted_fields_still_take_real_values():
    recording = json.loads(TPU_FIXTURE.read_text())
    recording["environment"].update(deviceKind="NVIDIA H100 80GB HBM3",
                                    platform="macOS-14.5-arm64-arm-64bit",
                                    jax="0.10.2.dev20261101+cuda")
    recording["command"] = ["python", "scripts/tpu_job.py", "--zone=us-east5-b", "--name", "tpu-1"]
    recording["contentFiles"] = {module_file(SEED): "0" * 64, "constraints.txt": "1" * 64}
    assert validate(recording, "recordings/x.tpu.json")["command"][2] == "--zone=us-east5-b"

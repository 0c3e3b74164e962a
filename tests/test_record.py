"""The recording pipeline: schema, hashes, freshness checks, figures, atomic writes.

Anything that writes runs on a copy of the repository in a temporary directory: the
copy's scripts/record.py finds its root from its own location, so it records, checks and
draws the copy and never this checkout.
"""
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

import lesson_hashes
from figure_specs import figure_problems, figure_specs, read_lock
from recordings import RecordingError, dumps, load_recording, schema, validate
from render_figures import render_mechanism_svg, render_panels_svg

ROOT = Path(__file__).resolve().parents[1]
LESSON_ID = "distributed-03"
RECORDING = ROOT / "recordings" / f"{LESSON_ID}.cpu.json"
SEED_RECORDING = ROOT.parent / "shared" / "seeds" / "004_f069282f8a5c0ec0.txt"
# What record.py reads and writes; docs/ because it also executes the notebook companion.
TREE = ("lesson_code", "scripts", "recordings", "figures", "docs", "requirements.txt",
        "constraints.txt")
OUTPUTS = ("recordings", "figures", "docs/notebooks")
LESSON_FIGURES = {"figures/distributed-03.svg": render_panels_svg,
                  "figures/distributed-03-mechanism.svg": render_mechanism_svg}
FIX_LINE = re.compile(r"^(recordings|figures|docs)/\S+: .+; (re)?run `python scripts/record\.py"
                      r"( --[\w-]+( \d+)?)?`$")


def seed_recording():
    """The published recording; a missing shared/ skips locally and fails under CI."""
    if not SEED_RECORDING.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{SEED_RECORDING} is missing; CI must check out shared/ beside "
                        f"the clone")
        pytest.skip(f"no published seed at {SEED_RECORDING} (shared/ is not beside this "
                    f"clone)")
    return json.loads(SEED_RECORDING.read_text())


def gradient_from_stdout(stdout):
    line = next(l for l in stdout.splitlines() if l.startswith("Gradient reference: "))
    return json.loads(line.removeprefix("Gradient reference: "))


# ------------------------------------------------------------------------ recordings --

def test_the_committed_recording_validates_and_survives_a_round_trip():
    recording = load_recording(RECORDING)
    again = json.loads(dumps(recording))
    assert again == recording
    validate(again)
    jsonschema.Draft202012Validator.check_schema(schema())


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


def test_the_published_seed_recording_validates():
    validate(seed_recording(), "published seed")


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
    seed, ours = seed_recording(), load_recording(RECORDING)
    # Same shape: every published field is still there (ours may add provenance detail).
    assert set(seed) <= set(ours)
    assert set(seed["environment"]) <= set(ours["environment"])
    assert set(seed["data"]) <= set(ours["data"])
    assert set(seed["diagram"]) == set(ours["diagram"])
    for key in ("schemaVersion", "lessonId", "kind", "provenance"):
        assert ours[key] == seed[key]
    for key in ("backend", "deviceCount"):
        assert ours["environment"][key] == seed["environment"][key]
    # One spelling on the site: the published "modeled" axis label reads "modelled" here.
    published_panels = json.loads(json.dumps(seed["data"]["panels"]).replace("modeled", "modelled"))
    assert ours["data"]["panels"] == published_panels
    assert [p["series"][0]["y"] for p in ours["data"]["panels"]] == [[8, 2, 8],
                                                                    [48.0, 24.0, 48.0]]
    for key in ("title", "prediction", "scope", "height", "panel"):
        assert ours["diagram"][key] == seed["diagram"][key], key
    published = gradient_from_stdout(seed["stdout"])
    assert len(ours["data"]["gradient"]) == len(published)
    for mine, theirs in zip(ours["data"]["gradient"], published):
        assert abs(mine - theirs) < 1e-8
    # The published first four lines, each once (the seed printed them twice, defect 1).
    ours_lines, seed_lines = ours["stdout"].splitlines(), seed["stdout"].splitlines()
    # Ours adds one line after the shapes: the reduce-scatter's shards, device by device.
    assert ours_lines.pop(2).startswith("Reduce-scatter shards (device, index, values): ")
    assert ours_lines[1:3] == seed_lines[1:3]
    assert ours_lines[3].split(":")[0] == seed_lines[3].split(":")[0]


# ---------------------------------------------------------------------------- hashes --

def copy_tree(destination, source=ROOT):
    destination.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", ".*.tmp")
    for name in TREE:
        if (source / name).is_dir():
            shutil.copytree(source / name, destination / name, ignore=ignore)
        elif (source / name).exists():
            shutil.copy2(source / name, destination / name)
    return destination


def edit(path, change):
    path.write_text(change(path.read_text()))


def append_comment(text):
    return text + "\n# A reader's note: the comment is part of what the page shows.\n"


@pytest.fixture
def hash_tree(tmp_path):
    root = copy_tree(tmp_path.resolve() / "repo")
    (root / "docs" / "lessons").mkdir(parents=True, exist_ok=True)
    (root / "docs" / "lessons" / "notes.md").write_text("# Notes\n")
    return root


def lesson_hash(root):
    return lesson_hashes.content_hash(root / "lesson_code" / "distributed_03.py", root)


def panels_renderer_hash(root):
    spec = next(s for s in figure_specs(LESSON_ID) if s.path == "figures/distributed-03.svg")
    return spec.renderer_hash(root)


def test_the_copied_tree_hashes_like_the_checkout(hash_tree):
    assert lesson_hash(hash_tree) == lesson_hash(ROOT)
    assert panels_renderer_hash(hash_tree) == panels_renderer_hash(ROOT)


def test_a_comment_in_the_lesson_changes_the_content_hash(hash_tree):
    before = lesson_hash(hash_tree)
    lesson = hash_tree / "lesson_code" / "distributed_03.py"
    before_files = lesson_hashes.content_files(lesson, hash_tree)
    edit(lesson, append_comment)
    assert lesson_hash(hash_tree) != before
    assert lesson_hashes.changed_files(before_files, lesson_hashes.content_files(
        lesson, hash_tree)) == ["lesson_code/distributed_03.py"]


def test_a_pin_changes_the_content_hash_and_its_comment_does_not(hash_tree):
    pins = hash_tree / "requirements.txt"
    before = lesson_hash(hash_tree)
    edit(pins, lambda t: t.replace("# Exact pins", "# Exact versions", 1))
    edit(pins, lambda t: re.sub(r"^(numpy==\S+)$", r"\1  # why this numpy", t, count=1,
                                flags=re.MULTILINE))
    edit(pins, lambda t: "# a new first comment\n\n" + t)
    assert lesson_hash(hash_tree) == before
    edit(pins, lambda t: re.sub(r"^numpy==[\w.]+", "numpy==1.0.0", t, count=1,
                                flags=re.MULTILINE))
    assert lesson_hash(hash_tree) != before


def test_files_the_lesson_does_not_import_leave_the_content_hash(hash_tree):
    before = lesson_hash(hash_tree)
    edit(hash_tree / "docs" / "lessons" / "notes.md", append_comment)
    edit(hash_tree / "lesson_code" / "distributed_03_exercises.py", append_comment)
    edit(hash_tree / "lesson_code" / "ring.py", append_comment)
    edit(hash_tree / "scripts" / "render_figures.py", append_comment)
    assert lesson_hash(hash_tree) == before


def test_a_module_the_lesson_imports_is_part_of_the_content_hash(hash_tree):
    helper = hash_tree / "lesson_code" / "lesson_helper.py"
    helper.write_text("SCALE = 1\n")
    edit(hash_tree / "lesson_code" / "distributed_03.py",
         lambda t: t.replace("import argparse\n", "import argparse\n"
                             "from lesson_code.lesson_helper import SCALE  # noqa\n", 1))
    before = lesson_hash(hash_tree)
    assert "lesson_code/lesson_helper.py" in lesson_hashes.content_files(
        hash_tree / "lesson_code" / "distributed_03.py", hash_tree)
    edit(helper, append_comment)
    assert lesson_hash(hash_tree) != before


def test_the_renderer_hash_follows_the_renderer_not_the_lesson(hash_tree):
    before = panels_renderer_hash(hash_tree)
    edit(hash_tree / "lesson_code" / "distributed_03.py", append_comment)
    edit(hash_tree / "requirements.txt", lambda t: t.replace("numpy==", "numpy==0", 1))
    assert panels_renderer_hash(hash_tree) == before
    edit(hash_tree / "scripts" / "render_figures.py", append_comment)
    after_renderer = panels_renderer_hash(hash_tree)
    assert after_renderer != before
    edit(hash_tree / "scripts" / "svg_output.py", append_comment)
    assert panels_renderer_hash(hash_tree) != after_renderer


# -------------------------------------------------------------- record.py on a copy --

def record_env():
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAX_PLATFORMS", "JAX_NUM_CPU_DEVICES")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_record(root, *args, timeout=300, python_flags=()):
    return subprocess.run([sys.executable, *python_flags, str(root / "scripts" / "record.py"),
                           *args], cwd=root, env=record_env(), capture_output=True,
                          text=True, timeout=timeout)


def snapshot(root):
    """Every file record.py may write, hidden ones included, with its bytes."""
    return {path.relative_to(root).as_posix(): path.read_bytes()
            for folder in OUTPUTS for path in sorted((root / folder).rglob("*"))
            if path.is_file()}


def leftover_temp_files(root):
    return [p for folder in OUTPUTS for p in (root / folder).rglob(".*.tmp")]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A copy of the checkout, recorded afresh by its own record.py: (root, the run)."""
    root = copy_tree(tmp_path_factory.mktemp("recorded").resolve() / "repo")
    run = run_record(root)
    assert run.returncode == 0, run.stderr[-3000:]
    return root, run


@pytest.fixture
def tree(recorded, tmp_path):
    """A private copy of the freshly recorded tree, for one test to change."""
    return copy_tree(tmp_path.resolve() / "repo", source=recorded[0])


def test_a_clean_record_run_writes_a_cpu_recording(recorded):
    root, run = recorded
    recording = load_recording(root / "recordings" / f"{LESSON_ID}.cpu.json")
    assert recording["provenance"] == "recorded_cpu_computation"
    assert recording["environment"]["backend"] == "cpu"
    assert recording["environment"]["deviceCount"] == 4
    assert recording["environment"]["processCount"] == 1
    assert recording["contentHash"] == lesson_hash(root)
    assert recording["command"] == ["python", "-m", "lesson_code.distributed_03",
                                    "--platform", "cpu", "--devices", "4"]
    lines = recording["stdout"].splitlines()
    assert len(lines) == len(set(lines)), "a line was recorded twice"
    assert lines[-1] == f"PASS: {LESSON_ID}"
    assert recording["data"]["gradient"] == gradient_from_stdout(recording["stdout"])
    assert f"record: wrote recordings/{LESSON_ID}.cpu.json" in run.stderr
    for name, render in LESSON_FIGURES.items():
        assert (root / name).read_text() == render(recording)
    assert leftover_temp_files(root) == []


def test_check_is_silent_on_a_fresh_tree(tree):
    run = run_record(tree, "--check")
    assert (run.returncode, run.stdout, run.stderr) == (0, "", "")


def test_check_reports_a_stale_recording(tree):
    edit(tree / "lesson_code" / "distributed_03.py", append_comment)
    run = run_record(tree, "--check")
    assert run.returncode == 1
    lines = run.stdout.splitlines()
    assert all(FIX_LINE.match(line) for line in lines), lines
    stale = [line for line in lines if line.startswith("recordings/")]
    assert f"recordings/{LESSON_ID}.cpu.json: stale, the lesson code or pins changed " \
           f"(lesson_code/distributed_03.py changed); run `python scripts/record.py`" in stale
    # The multi-process recording runs the same lesson module, so it goes stale too.
    if (tree / "recordings" / f"{LESSON_ID}.cpu-processes.json").exists():
        assert f"recordings/{LESSON_ID}.cpu-processes.json: stale, the lesson code or pins " \
               f"changed (lesson_code/distributed_03.py changed); run " \
               f"`python scripts/record.py --processes 4`" in stale
        assert len(stale) == 2
    else:
        assert len(stale) == 1


def test_check_reports_a_corrupt_recording(tree):
    (tree / "recordings" / f"{LESSON_ID}.cpu.json").write_text("{not json")
    run = run_record(tree, "--check")
    assert run.returncode == 1
    lines = run.stdout.splitlines()
    assert all(FIX_LINE.match(line) for line in lines), lines
    assert any(line.startswith(f"recordings/{LESSON_ID}.cpu.json: not valid JSON")
               for line in lines), lines
    assert "Traceback" not in run.stderr


def test_check_reports_a_recording_that_breaks_the_schema(tree):
    path = tree / "recordings" / f"{LESSON_ID}.cpu.json"
    edit(path, lambda t: t.replace('"recorded_cpu_computation"', '"recorded"', 1))
    run = run_record(tree, "--check")
    assert run.returncode == 1
    assert any(line.startswith(f"recordings/{LESSON_ID}.cpu.json: invalid at provenance")
               for line in run.stdout.splitlines()), run.stdout


def test_check_reports_a_missing_recording(tree):
    (tree / "recordings" / f"{LESSON_ID}.cpu.json").unlink()
    run = run_record(tree, "--check")
    assert run.returncode == 1
    lines = run.stdout.splitlines()
    assert f"recordings/{LESSON_ID}.cpu.json: missing; run `python scripts/record.py`" \
        in lines
    assert all(FIX_LINE.match(line) for line in lines), lines


def test_check_reports_a_hand_edited_figure(tree):
    edit(tree / "figures" / f"{LESSON_ID}.svg", lambda t: t.replace("</svg>", "<!-- -->\n</svg>"))
    run = run_record(tree, "--check")
    assert run.returncode == 1
    assert run.stdout.splitlines() == [
        f"figures/{LESSON_ID}.svg: edited by hand since record.py drew it; "
        f"run `python scripts/record.py --render-only`"]


def test_check_names_every_problem_on_its_own_line(tree):
    edit(tree / "figures" / f"{LESSON_ID}-mechanism.svg", lambda t: t + "\n")
    edit(tree / "figures" / f"{LESSON_ID}.svg", lambda t: t + "\n")
    run = run_record(tree, "--check")
    lines = run.stdout.splitlines()
    assert run.returncode == 1 and len(lines) == 2
    assert {line.split(":")[0] for line in lines} == {f"figures/{LESSON_ID}.svg",
                                                     f"figures/{LESSON_ID}-mechanism.svg"}


def test_check_imports_neither_jax_nor_matplotlib_and_is_quick(tree):
    run = run_record(tree, "--check", python_flags=("-X", "importtime"))
    assert run.returncode == 0, run.stdout
    imported = {line.rsplit("|", 1)[1].strip() for line in run.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    assert "jsonschema" in imported  # the import log was read
    heavy = sorted(m for m in imported if m.split(".")[0] in ("jax", "jaxlib", "matplotlib"))
    assert heavy == []
    started = time.perf_counter()
    assert run_record(tree, "--check").returncode == 0
    assert time.perf_counter() - started < 1.0


# --------------------------------------------------------------------------- figures --

def test_rendering_twice_gives_the_same_bytes():
    recording = load_recording(RECORDING)
    for render in LESSON_FIGURES.values():
        assert render(recording) == render(recording)


def test_committed_figures_are_what_the_committed_recording_draws():
    recording = load_recording(RECORDING)
    lock = read_lock()
    for name, render in LESSON_FIGURES.items():
        svg = render(recording)
        assert (ROOT / name).read_text() == svg, f"{name}: run python scripts/record.py " \
                                                 f"--render-only"
        spec = next(s for s in figure_specs(LESSON_ID) if s.path == name)
        assert figure_problems(spec, lock) == []
        assert lock[name]["sha256"] == hashlib.sha256(svg.encode()).hexdigest()


@pytest.mark.parametrize("name", sorted(LESSON_FIGURES))
def test_each_figure_is_accessible_text_without_a_date(name):
    svg = (ROOT / name).read_text()
    assert re.search(r"<svg [^>]*role=\"img\"", svg)
    assert re.search(r"<title>[^<]+</title>", svg)
    assert re.search(r"<desc>[^<]+</desc>", svg)
    assert "\\(" not in svg and "\\[" not in svg  # MathJax delimiters are not read aloud
    assert svg.count("<text") >= 5  # svg.fonttype none: labels stay text
    assert "DejaVuSans-" not in svg  # ... not glyph outlines
    assert "dc:date" not in svg and not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d", svg)


def test_the_figures_show_the_recorded_values():
    panels = (ROOT / "figures" / f"{LESSON_ID}.svg").read_text()
    desc = re.search(r"<desc>([^<]+)</desc>", panels).group(1)
    assert "all-reduce 8, reduce-scatter 2, after gather 8" in desc
    assert "all-reduce 48, reduce-scatter 24, scatter + gather 48" in desc
    mechanism = (ROOT / "figures" / f"{LESSON_ID}-mechanism.svg").read_text()
    for cell in ("Participant 0", "Reduce-scatter", "[4, 6]"):
        assert cell in mechanism


# ------------------------------------------------------------------------- atomicity --

BREAK_THE_LESSON = '''

_finished_lesson = run_lesson


def run_lesson(devices):
    _finished_lesson(devices)
    raise AssertionError("deliberately broken copy of the lesson")


if __name__ == "__main__":
'''


def test_a_failing_lesson_leaves_every_file_as_it_was(tree):
    lesson = tree / "lesson_code" / "distributed_03.py"
    edit(lesson, lambda t: t.replace('\n\nif __name__ == "__main__":\n', BREAK_THE_LESSON, 1))
    assert "deliberately broken" in lesson.read_text()
    before = snapshot(tree)
    run = run_record(tree)
    assert run.returncode == 1
    assert "AssertionError: deliberately broken copy of the lesson" in run.stderr
    assert "nothing was written" in run.stderr
    assert snapshot(tree) == before
    assert leftover_temp_files(tree) == []


def test_a_failing_renderer_after_the_recording_was_staged_leaves_nothing(tree):
    edit(tree / "scripts" / "render_figures.py", lambda t: t.replace(
        "def render_mechanism_svg(recording):\n",
        "def render_mechanism_svg(recording):\n    raise RuntimeError('renderer broke')\n", 1))
    before = snapshot(tree)
    run = run_record(tree)
    assert run.returncode != 0
    assert "printed PASS" in run.stderr and "renderer broke" in run.stderr
    assert snapshot(tree) == before
    assert leftover_temp_files(tree) == []


def test_an_interrupt_while_the_lesson_runs_leaves_every_file(tree):
    before = snapshot(tree)
    process = subprocess.Popen([sys.executable, str(tree / "scripts" / "record.py")],
                               cwd=tree, env=record_env(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        progress = []
        for line in process.stderr:
            progress.append(line)
            if line.startswith("record: running"):
                break
        process.send_signal(signal.SIGINT)
        _, rest = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait()
    assert any(line.startswith("record: running") for line in progress), progress
    assert process.returncode != 0
    assert "interrupted" in rest and "Traceback" not in rest
    assert snapshot(tree) == before
    assert leftover_temp_files(tree) == []


RENDER_ONLY = """
import sys
sys.path.insert(0, "scripts")
import record
record.record(record.discover_lessons(), render_only=True)
print(sorted(m for m in ("jax", "jaxlib", "matplotlib") if m in sys.modules))
"""


def test_render_only_redraws_the_figures_without_jax(tree, recorded):
    figure = tree / "figures" / f"{LESSON_ID}.svg"
    edit(figure, lambda t: t.replace("</svg>", "<!-- hand edit -->\n</svg>"))
    (tree / "figures" / f"{LESSON_ID}-mechanism.svg").unlink()
    recordings_before = {k: v for k, v in snapshot(tree).items()
                         if not k.startswith("figures/")}
    run = subprocess.run([sys.executable, "-c", RENDER_ONLY], cwd=tree, env=record_env(),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "['matplotlib']"
    fresh = snapshot(recorded[0])
    for name in LESSON_FIGURES:
        assert (tree / name).read_bytes() == fresh[name]
    assert {k: v for k, v in snapshot(tree).items()
            if not k.startswith("figures/")} == recordings_before
    assert run_record(tree, "--check").returncode == 0


def test_render_only_on_a_corrupt_recording_is_one_line_and_touches_nothing(tree):
    (tree / "recordings" / f"{LESSON_ID}.cpu.json").write_text("{not json")
    before = snapshot(tree)
    run = run_record(tree, "--render-only")
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: recordings/{LESSON_ID}.cpu.json: not valid JSON")
    assert last.endswith("`python scripts/record.py`")
    assert snapshot(tree) == before
    assert leftover_temp_files(tree) == []

"""record.py on a copy of the project: one execution, staged writes, failures leave nothing."""
import json
import os
import shutil
import subprocess
import sys

import nbformat
import numpy as np
import pytest

from conftest import FIRST_LESSON, ROOT, SEED, module_file, recording_name
from harness import (RECORD, changed, comment_in_first_section, edit, edited, files_under,
                     leftover_temp_files, one_error, passed, project, raised_in_one_line, run,
                     snapshot, unchanged, written)
from scripts import record
from scripts.plumbing.run_lock import exclusive_run
from scripts.record import MAX_STDOUT_LINES, RecordError, check_stdout
from scripts.store import freshness, hashes
from scripts.store.lessons import load_lessons
from scripts.store.outputs import lesson_command
from scripts.figures import KINDS
from scripts.runners.notebook import stdout_of
from scripts.store.recordings import load_recording

LESSON_ID = SEED.id
LESSON = module_file(SEED)


def check(root):  # what `record.py --check` prints of the seed
    return freshness.check(load_lessons(root), root, only=LESSON_ID)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """(root, the run): a copy of the checkout with the seed recorded afresh by its own record.py;
    the seed's alone, as the machinery is the same for every lesson: no cost per course lesson."""
    root = project(tmp_path_factory.mktemp("recorded") / "repo")
    return root, passed(run(RECORD, "--all", "--lesson", LESSON_ID, cwd=root))  # current or not


@pytest.fixture
def tree(recorded, tmp_path):
    return shutil.copytree(recorded[0], tmp_path.resolve() / "repo", symlinks=True)


def test_a_clean_record_run_writes_the_recordings_the_figures_and_the_notebook(recorded):
    root, done = recorded
    recording = load_recording(root / "recordings" / f"{LESSON_ID}.cpu.json")
    environment, copied = recording["environment"], load_lessons(root)[LESSON_ID]
    assert (recording["provenance"], environment["deviceCount"], environment["processCount"],
            recording["command"]) == ("recorded_cpu_computation", SEED.devices, 1,
                                      ["python", "scripts/record.py"])
    assert recording["contentHash"] == hashes.combined_hash(hashes.content_files(
        root / LESSON, root, copied.also_run_with()))
    lines = recording["stdout"].splitlines()
    assert len(lines) == len(set(lines)) and lines[-1] == f"PASS: {LESSON_ID}"
    for kind in ("panels", "mechanism", "ring-reduce-scatter", "ring-all-gather"):
        figure = KINDS[kind]
        source = json.loads((root / figure.input.format(id=LESSON_ID)).read_text())
        assert (root / figure.path.format(id=LESSON_ID)).read_text() == figure.render(source)
    assert f"record: wrote recordings/{LESSON_ID}.cpu.json" in done.stderr
    simulation = load_recording(root / "recordings" / f"{LESSON_ID}.simulation.json")
    # Its module and the program shell it runs on (`python -m`), with the pins.
    assert {module_file(SEED, SEED.simulation), "lesson_code/program.py"} <= \
        set(simulation["contentFiles"])
    # p = 4 ranks, a 32-byte vector: each sends (p-1)/p of it per phase.
    assert simulation["data"]["reduceScatter"]["bytesSent"] == [24, 24, 24, 24]
    assert leftover_temp_files(root) == [] and check(root) == []


def test_the_notebook_and_the_recording_are_one_execution(recorded):
    root, _ = recorded
    recording = load_recording(root / "recordings" / f"{LESSON_ID}.cpu.json")
    notebook = nbformat.read(root / "docs" / "notebooks" / f"{LESSON_ID}.ipynb", as_version=4)
    printed = stdout_of(notebook)
    # Line for line, timings included: the page and the notebook show the same run.
    assert printed == recording["stdout"]
    every = [t for block in recording["data"]["timing"]["samplesUs"]["all_reduce"] for t in block]
    # the lesson prints the median of all its samples, to one decimal
    assert f"'all_reduce': {round(float(np.median(every)), 1)}" in printed


def failing_step(text):  # fails its check, as a wrong result does (run_lesson's first cell)
    first = '    print(f"Devices: '
    return text.replace(first, '    assert False, "deliberately broken"\n' + first, 1)


def raising_on_import(text):
    """A statement outside every section raises: the notebook's cells never run it, but
    `python -m` does, so this is no lesson program to record."""
    end = text.index("\n", text.index("# --8<-- [end:")) + 1
    return text[:end] + "\nraise RuntimeError('a statement no section uses')\n" + text[end:]


def deprecated_call(text):
    """What CI sees after a JAX upgrade deprecates a call a step makes."""
    step = "    mesh = data_mesh(devices)\n"
    assert text.count(step) == 1
    return text.replace(step, step + "    with mesh:  # deprecated in JAX 0.10\n        pass\n")


ONE = ("--lesson", LESSON_ID)
SWEEP, CPU = recording_name(SEED, "sweep"), recording_name(SEED)
# Each failed run: what breaks the copy, record.py's arguments (and environment), the exit
# status and the one line (or its start and words); a request refused, or a file the
# registry needs, is that line alone. A device this machine lacks is a setup failure: exit 2.
FAILED_RUNS = {
    "a failing step": (edited(LESSON, failing_step), ONE, 1, (
        f"error: {LESSON_ID} failed in its notebook: ", "AssertionError: deliberately broken",
        "nothing was written")),
    "a deprecated JAX call in a step": (edited(LESSON, deprecated_call), ONE, 1, (
        "error: ", "DeprecationWarning: `with mesh:` context manager has been deprecated",
        "nothing was written")),
    # XLA_FLAGS=--bogus makes the kernel exit as JAX starts: its own stderr says why.
    "a lesson process that dies": (None, ("--all",), 1, (
        "error: ", "the lesson's kernel exited with status", "XLA_FLAGS: --bogus",
        "nothing was written"), {"XLA_FLAGS": "--bogus"}),
    "devices this machine cannot give": (None, (*ONE, "--platform", "gpu"), 2, (
        f"error: cannot set up {SEED.devices} GPU devices: ",)),
    "a failing renderer after the recording was staged": (edited(
        "scripts/figures/mechanism.py", lambda text: text.replace(
            "def render(diagram, variant=STATIC):\n",
            "def render(diagram, variant=STATIC):\n    raise ValueError('broke')\n", 1)),
        (*ONE, "--all"), 1, f"error: figures/{LESSON_ID}-mechanism.svg: mechanism renderer "
                            f"failed on lesson_code/figures/{LESSON_ID}-mechanism.json "
                            f"(ValueError: broke); fix scripts/figures/mechanism.py"),
    "a module that raises when imported": (edited(LESSON, raising_on_import), ONE, 1, (
        f"error: {LESSON_ID} failed in its notebook: {LESSON} raises when imported "
        f"(RuntimeError: a statement no section uses), though its cells ran: fix the "
        f"statements outside its sections; nothing was written")),
    # The registry's ids follow the schema's lessonId pattern: the registry stops first.
    "a corrupt schema": (written(("recordings/schema.json", "{not json")), ("--check",), 2,
                         "error: recordings/schema.json: the schema cannot be read (not valid "
                         "JSON (Expecting property name enclosed in double quotes: line 1 column "
                         "2 (char 1))); run `git checkout -- recordings/schema.json`"),
    "a corrupt sweep": (written((SWEEP, "[1]")), ("--render-only",), 1,
                        f"error: {SWEEP}: expected a JSON object; run `make bench`"),
    "a corrupt recording": (written((CPU, "{not json")), ("--render-only",), 1, (
        f"error: {CPU}: not valid JSON (Expecting property name enclosed in double quotes: "
        f"line 1 column 2 (char 1)); run `{lesson_command(SEED)}`")),
    "a refused request": (None, ("--processes", "3"), 2, "error: --processes 3 cannot be recorded "
                          "(the ranks check their shards bit for bit against NumPy, which holds "
                          "for 2, 4, 8, 16); run `python scripts/record.py --processes 4`")}


@pytest.mark.parametrize("case", FAILED_RUNS)
def test_a_failed_run_is_one_line_and_leaves_every_file_as_it_was(tree, case):
    breaks, args, status, said, *env = FAILED_RUNS[case]
    if breaks:
        breaks(tree)
    with unchanged(tree):
        done = run(RECORD, *args, cwd=tree, env=env[0] if env else None)
    assert (done.returncode, done.stdout) == (status, ""), done.stderr[-2000:]
    line = one_error(done.stderr)
    if isinstance(said, str):
        assert line == said and (status != 2 or done.stderr == f"{said}\n")
    else:
        assert line.startswith(said[0]) and all(word in line for word in said[1:]), line
    assert "\x1b[" not in line
    if "renderer" in case:
        assert "printed PASS" in done.stderr


RENDER_ONLY = """
import sys
sys.argv = ["record.py", "--render-only"]
from scripts import record
assert record.main() == 0
print(sorted(m for m in ("jax", "jaxlib", "matplotlib") if m in sys.modules))
"""


def test_render_only_redraws_the_figures_and_a_malformed_lock_entry_without_jax(tree, recorded):
    """A hand-edited figure, a deleted one, a broken lock entry: remade; every other entry kept."""
    figure = tree / "figures" / f"{LESSON_ID}.svg"
    edit(figure, lambda t: t.replace("</svg>", "<!-- hand edit -->\n</svg>"))
    broken = f"figures/{LESSON_ID}-mechanism.svg"
    (tree / broken).unlink()
    lock_file = tree / "recordings" / "outputs.lock.json"
    lock = json.loads(lock_file.read_text())
    lock[broken]["inputs"] = []
    lock_file.write_text(json.dumps(lock, indent=2))
    recordings_before = {k: v for k, v in snapshot(tree).items()
                         if k.startswith("recordings/") and not k.endswith("lock.json")}
    done = passed(run("-c", RENDER_ONLY, cwd=tree, timeout=120))
    assert done.stdout.strip() == "['matplotlib']"
    assert f"record: recordings/outputs.lock.json: the entry for {broken!r} needs a `sha256` " \
           f"and `inputs` mapping each file to its digest: what it locked is remade; the " \
           f"lock's {len(lock) - 1} other entries are kept" in done.stderr.splitlines()
    after = json.loads(lock_file.read_text())
    assert {name: entry for name, entry in after.items() if name != broken} == \
        {name: entry for name, entry in lock.items() if name != broken}
    assert isinstance(after[broken]["inputs"], dict)
    fresh = snapshot(recorded[0])
    for name in (f"figures/{LESSON_ID}.svg", f"figures/{LESSON_ID}-mechanism.svg"):
        assert (tree / name).read_bytes() == fresh[name]
    assert {k: v for k, v in snapshot(tree).items() if k in recordings_before} == recordings_before
    assert check(tree) == []


def test_a_current_tree_runs_nothing_and_a_comment_edit_re_renders_only_the_notebook(tree):
    with unchanged(tree):
        done = passed(run(RECORD, cwd=tree))
    assert "record: running" not in done.stderr
    assert f"record: {LESSON_ID}: recordings/{LESSON_ID}.cpu.json is current, not re-run " \
           f"(--all re-runs it)" in done.stderr
    edit(tree / LESSON, comment_in_first_section)  # a reader's note, shown in the notebook
    before = snapshot(tree)
    done = passed(run(RECORD, cwd=tree))
    assert "record: running" not in done.stderr  # no run, no JAX
    assert f"re-rendering docs/notebooks/{LESSON_ID}.ipynb from the executed cells" in done.stderr
    notebook = f"docs/notebooks/{LESSON_ID}.ipynb"
    assert changed(before, tree) == [notebook, "recordings/outputs.lock.json"]
    old, new = (nbformat.reads(text, as_version=4)
                for text in (before[notebook].decode(), (tree / notebook).read_text()))
    assert stdout_of(new) == stdout_of(old)  # the outputs of the run that made the recording
    assert any("# a comment readers see" in cell.source for cell in new.cells)
    assert check(tree) == []


# --- what a pull request commits ---------------------------------------------------------

@pytest.mark.parametrize("link, target", [("figures", "outside-figures"),
                                          (".run.lock", "outside-file")])
def test_a_link_out_of_the_checkout_is_refused_before_anything_is_written(tree, tmp_path,
                                                                         link, target):
    outside = tmp_path / target
    if link == "figures":
        shutil.move(tree / "figures", outside)  # what --render-only wrote and deleted in
    else:
        outside.write_text("someone's file\n")  # what the lock truncated and overwrote
        (tree / link).unlink(missing_ok=True)  # the recorded run's own
    before = files_under(outside)
    (tree / link).symlink_to(outside)
    edit(tree / "lesson_code" / "figures" / f"{LESSON_ID}-mechanism.json",  # to draw
         lambda text: text.replace('"title": "', '"title": "Edited: ', 1))
    done = run(RECORD, "--render-only", cwd=tree)
    assert done.returncode == 2  # refused before anything ran
    assert done.stderr == (f"error: {link} is a symbolic link (to {str(outside)!r}); what the "
                          f"pages, recordings and figures are made of must be files inside the "
                          f"checkout: replace the link with the file itself, or `git rm {link}`\n")
    assert files_under(outside) == before


# --- runs that cannot collide, and what a lesson may print ------------------------------

HOLD_THE_LOCK = """
import sys, time
from pathlib import Path
from scripts.plumbing.run_lock import exclusive_run
with exclusive_run("python scripts/record.py", Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(120)
"""


def test_record_refuses_while_another_run_holds_the_checkout(tmp_path, monkeypatch, capsys):
    """record.py --render-only (in-process) beside a run in progress: one line, its pid, nothing
    touched (nor its staged files); once that run is SIGKILLed (no clean-up), the lock is free."""
    root = project(tmp_path / "project")
    staged = root / "recordings" / f".{FIRST_LESSON.id}.cpu.json.{os.getpid()}.k2j4h1x8.tmp"
    staged.write_text("{}")  # the other run's, mid-way
    monkeypatch.setattr(record, "load_lessons", lambda: load_lessons(root))
    before = snapshot(root)  # the other run's staged file among them
    holder = subprocess.Popen([sys.executable, "-c", HOLD_THE_LOCK, str(root)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        assert record.main(["--render-only"]) == 1
        holder.kill()  # SIGKILL: no clean-up ran, and the kernel still releases the lock
        holder.wait()
        with exclusive_run("python scripts/record.py", root):
            assert (root / ".run.lock").read_text().split()[0] == str(os.getpid())
    finally:
        holder.kill()
        holder.wait()
    assert capsys.readouterr().err == (
        f"error: another run, pid {holder.pid}, is writing this checkout's recordings and figures; "
        f"wait for it to end, or stop it, then run `python scripts/record.py --render-only` "
        f"again\n")
    assert changed(before, root) == []


def test_a_lesson_that_prints_too_much_is_refused_in_one_line():
    flood = "".join(f"line {n}\n" for n in range(200_000)) + "PASS: x\n"
    refusal = raised_in_one_line(RecordError, check_stdout, "x", flood)
    assert f"at most {MAX_STDOUT_LINES} lines" in str(refusal)
    with pytest.raises(RecordError, match="printed 'same' more than once"):
        check_stdout("x", "".join(f"{n}\n" for n in range(MAX_STDOUT_LINES - 3))
                     + "same\nsame\nPASS: x\n")
    check_stdout("x", "".join(f"{n}\n" for n in range(MAX_STDOUT_LINES - 1)) + "PASS: x\n")


@pytest.mark.parametrize("argv", [[RECORD, "--check"], ["scripts/exercises.py"],
                                  ["scripts/bench.py", "--help"], ["scripts/tpu_job.py", "--help"]])
def test_a_command_without_the_pins_names_the_python_to_use_in_one_line(argv):
    """Each command run by a Python lacking the pins: this one, without its site-packages (-S)."""
    done = run("-S", *argv)
    assert done.returncode == 1
    one_error(done.stderr, "No module named", "lacks the project's pins", "`make setup`")


def test_in_the_venv_a_missing_module_is_a_bug_and_keeps_its_traceback():
    done = run("-c", "import scripts.cli; import a_module_nobody_wrote")
    assert done.returncode == 1 and "Traceback" in done.stderr
    assert "lacks the project's pins" not in done.stderr

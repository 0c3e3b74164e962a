"""record.py on a copy of the project: one execution, staged writes, failures leave nothing."""
import json
import os
import shutil
import signal
import subprocess
import sys

import nbformat
import numpy as np
import pytest

from conftest import (FIRST_LESSON, ROOT, SEED, clean_env, leftover_temp_files, module_file,
                      project_copy, run_record, snapshot)
from scripts.store import hashes
from scripts.store.lessons import load_lessons
from scripts.figures import KINDS
from scripts.runners.notebook import stdout_of
from scripts.store.outputs import lesson_command
from scripts.store.recordings import load_recording

# The seed lesson: what these runs record (its figures, its simulation) is its content.
LESSON_ID = SEED.id
LESSON = module_file(SEED)


def edit(path, change):
    path.write_text(change(path.read_text()))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A copy of the checkout, recorded afresh by its own record.py: (root, the run)."""
    root = project_copy(tmp_path_factory.mktemp("recorded").resolve() / "repo")
    run = run_record(root, "--all")  # every lesson, whether the committed files are current
    assert run.returncode == 0, run.stderr[-3000:]
    return root, run


@pytest.fixture
def tree(recorded, tmp_path):
    """A private copy of the freshly recorded tree, for one test to change."""
    return shutil.copytree(recorded[0], tmp_path.resolve() / "repo", symlinks=True)


def test_a_clean_record_run_writes_a_cpu_recording_and_its_notebook(recorded):
    root, run = recorded
    recording = load_recording(root / "recordings" / f"{LESSON_ID}.cpu.json")
    assert recording["provenance"] == "recorded_cpu_computation"
    assert recording["environment"]["deviceCount"] == SEED.devices
    assert recording["environment"]["processCount"] == 1
    copied = load_lessons(root)[LESSON_ID]
    assert recording["contentHash"] == hashes.content_hash(
        root / LESSON, root, copied.also_run_with())
    assert recording["command"] == ["python", "scripts/record.py"]
    lines = recording["stdout"].splitlines()
    assert len(lines) == len(set(lines)) and lines[-1] == f"PASS: {LESSON_ID}"
    for kind in ("panels", "mechanism", "ring-reduce-scatter", "ring-all-gather"):
        figure = KINDS[kind]
        source = json.loads((root / figure.input.format(id=LESSON_ID)).read_text())
        assert (root / figure.path.format(id=LESSON_ID)).read_text() == figure.render(source)
    assert f"record: wrote recordings/{LESSON_ID}.cpu.json" in run.stderr
    assert leftover_temp_files(root) == []
    assert run_record(root, "--check").stdout == ""


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


def test_the_simulation_is_recorded_and_the_ring_figure_drawn_from_it(recorded):
    root, _ = recorded
    simulation = load_recording(root / "recordings" / f"{LESSON_ID}.simulation.json")
    assert simulation["kind"] == "simulation"
    assert list(simulation["contentFiles"])[0] == module_file(SEED, SEED.simulation)
    # p = 4 ranks, a 32-byte vector: each sends (p-1)/p of it per phase.
    assert simulation["data"]["reduceScatter"]["bytesSent"] == [24, 24, 24, 24]


# A step that fails its check, the way a wrong result does: run_lesson's statements run
# in the notebook's cells, so the break is one of them.
PASS_LINE = '    print(f"PASS: {LESSON_ID}")\n'
BREAK_THE_LESSON = '    assert False, "deliberately broken copy of the lesson"\n' + PASS_LINE


def test_a_failing_lesson_leaves_every_file_as_it_was(tree):
    lesson = tree / LESSON
    edit(lesson, lambda t: t.replace(PASS_LINE, BREAK_THE_LESSON, 1))
    before = snapshot(tree)
    run = run_record(tree)
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert "AssertionError: deliberately broken copy of the lesson" in last
    assert "nothing was written" in last and "\x1b[" not in last
    assert snapshot(tree) == before
    assert leftover_temp_files(tree) == []


def test_devices_this_machine_cannot_give_are_a_setup_failure_exit_2(tree):
    """The run cell's first line sets up the devices; when that line fails (no GPU here),
    it is this machine's limit, not the lesson's bug: exit 2, and which line says so."""
    before = snapshot(tree)
    run = run_record(tree, "--platform", "gpu", "--lesson", LESSON_ID)
    errors = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert run.returncode == 2, run.stderr[-2000:]
    assert len(errors) == 1 and "Traceback" not in run.stderr
    assert errors[0].startswith(f"error: cannot set up {SEED.devices} GPU devices: ")
    assert snapshot(tree) == before


def test_a_failing_renderer_after_the_recording_was_staged_leaves_nothing(tree):
    edit(tree / "scripts" / "figures" / "mechanism.py", lambda t: t.replace(
        "def render(diagram, variant=STATIC):\n",
        "def render(diagram, variant=STATIC):\n    raise ValueError('broke')\n", 1))
    before = snapshot(tree)
    run = run_record(tree, "--all")
    assert run.returncode == 1
    assert "printed PASS" in run.stderr
    assert run.stderr.strip().splitlines()[-1] == (
        f"error: figures/{LESSON_ID}-mechanism.svg: mechanism renderer failed on "
        f"lesson_code/figures/{LESSON_ID}-mechanism.json (ValueError: broke); fix "
        f"scripts/figures/mechanism.py")
    assert snapshot(tree) == before
    assert leftover_temp_files(tree) == []


def test_an_interrupt_while_the_lesson_runs_leaves_every_file(tree):
    before = snapshot(tree)
    process = subprocess.Popen([sys.executable, str(tree / "scripts" / "record.py"), "--all"],
                               cwd=tree, env=clean_env(), stdout=subprocess.PIPE,
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
    assert process.returncode != 0
    assert "interrupted" in rest and "Traceback" not in rest
    assert snapshot(tree) == before
    assert leftover_temp_files(tree) == []


RENDER_ONLY = """
import sys
sys.argv = ["record.py", "--render-only"]
from scripts import record
assert record.main() == 0
print(sorted(m for m in ("jax", "jaxlib", "matplotlib") if m in sys.modules))
"""


def test_render_only_redraws_the_figures_without_jax(tree, recorded):
    figure = tree / "figures" / f"{LESSON_ID}.svg"
    edit(figure, lambda t: t.replace("</svg>", "<!-- hand edit -->\n</svg>"))
    (tree / "figures" / f"{LESSON_ID}-mechanism.svg").unlink()
    recordings_before = {k: v for k, v in snapshot(tree).items()
                         if k.startswith("recordings/") and not k.endswith("lock.json")}
    run = subprocess.run([sys.executable, "-c", RENDER_ONLY], cwd=tree, env=clean_env(),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "['matplotlib']"
    fresh = snapshot(recorded[0])
    for name in (f"figures/{LESSON_ID}.svg", f"figures/{LESSON_ID}-mechanism.svg"):
        assert (tree / name).read_bytes() == fresh[name]
    assert {k: v for k, v in snapshot(tree).items() if k in recordings_before} == \
        recordings_before
    assert run_record(tree, "--check").returncode == 0


def test_render_only_on_a_corrupt_recording_is_one_line_and_touches_nothing(tree):
    (tree / "recordings" / f"{LESSON_ID}.cpu.json").write_text("{not json")
    before = snapshot(tree)
    run = run_record(tree, "--render-only")
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: recordings/{LESSON_ID}.cpu.json: not valid JSON")
    assert last.endswith(f"`{lesson_command(SEED)}`")
    assert snapshot(tree) == before
    assert leftover_temp_files(tree) == []


def test_a_staged_file_left_by_a_killed_run_is_removed_by_the_next(tree):
    from conftest import ended_pid

    stray = tree / "figures" / f".{LESSON_ID}.svg.{ended_pid()}.abc123.tmp"
    stray.write_text("<svg")  # what SIGKILL mid-run leaves: never moved into place
    run = run_record(tree, "--render-only")
    assert run.returncode == 0, run.stderr[-2000:]
    assert leftover_temp_files(tree) == []


def test_a_current_tree_runs_nothing_and_changes_no_file(tree):
    before = snapshot(tree)
    run = run_record(tree)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "record: running" not in run.stderr
    assert f"record: {LESSON_ID}: recordings/{LESSON_ID}.cpu.json is current, not re-run " \
           f"(--all re-runs it)" in run.stderr
    assert snapshot(tree) == before


def test_a_comment_edit_re_renders_the_notebook_and_runs_no_jax(tree):
    start = "# --8<-- [start:configure_devices]\n"
    edit(tree / LESSON,
         lambda t: t.replace(start, start + "# A reader's note, shown in the notebook.\n", 1))
    before = snapshot(tree)
    run = run_record(tree)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "record: running" not in run.stderr  # no run, no JAX
    assert f"re-rendering docs/notebooks/{LESSON_ID}.ipynb from the executed cells" in run.stderr
    after = snapshot(tree)
    notebook = f"docs/notebooks/{LESSON_ID}.ipynb"
    assert sorted(k for k in after if after[k] != before.get(k)) == [
        notebook, "recordings/outputs.lock.json"]
    old, new = (nbformat.reads(files[notebook].decode(), as_version=4)
                for files in (before, after))
    assert stdout_of(new) == stdout_of(old)  # the outputs of the run that made the recording
    assert any("# A reader's note, shown in the notebook." in cell.source for cell in new.cells)
    assert run_record(tree, "--check").stdout == ""


def test_all_re_runs_a_current_lesson(tree):
    run = run_record(tree, "--all", "--lesson", LESSON_ID)
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"record: running {LESSON_ID} on {SEED.devices} CPU device(s)" in run.stderr


def test_one_plan_says_what_each_lesson_needs_and_why(tree):
    """scripts/plan.py, in-process on the recorded copy: what record.py then carries out."""
    from scripts.store.lessons import load_lessons
    from scripts.plan import RERENDER, RUN, Step, make_plan

    def planned(**options):
        plan = make_plan(load_lessons(tree), **options)
        return {each.lesson.id: each for each in plan.lessons}[LESSON_ID]

    recording = f"recordings/{LESSON_ID}.cpu.json"
    current = planned()
    assert current.steps == ()
    assert current.note == f"{LESSON_ID}: {recording} is current, not re-run (--all re-runs it)"
    assert planned(every=True).steps == (Step(recording, f"{recording}: --all re-runs it", RUN),)
    start = "# --8<-- [start:configure_devices]\n"
    edit(tree / LESSON, lambda t: t.replace(start, start + "# A reader's note.\n", 1))
    (rerender,) = planned().steps  # only the text changed: no run
    assert (rerender.output, rerender.fix) == (f"docs/notebooks/{LESSON_ID}.ipynb", RERENDER)
    assert "# A reader's note." in rerender.text
    edit(tree / LESSON, lambda t: t + "\nA_READERS_CONSTANT = 1\n")  # what runs changed
    (run,) = planned().steps
    assert (run.output, run.fix) == (recording, RUN)
    assert run.state.startswith(f"{recording}: stale, {LESSON} changed")


# --- what a pull request commits, and a reader that goes away (issue 37) ----------------

MECHANISM = f"lesson_code/figures/{LESSON_ID}-mechanism.json"


def stale_mechanism(tree):
    """A caption edit: the mechanism figure's four drawings are stale, nothing else."""
    edit(tree / MECHANISM, lambda text: text.replace('"title": "', '"title": "Edited: ', 1))


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
    before = {path: path.read_bytes() for path in
              ([outside] if outside.is_file() else sorted(outside.iterdir()))}
    (tree / link).symlink_to(outside)
    stale_mechanism(tree)
    run = run_record(tree, "--render-only")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr == (f"error: {link} is a symbolic link (to {str(outside)!r}); what the "
                          f"pages, recordings and figures are made of must be files inside "
                          f"the checkout: replace the link with the file itself, or "
                          f"`git rm {link}`\n")
    assert {path: path.read_bytes() for path in before} == before
    assert sorted(outside.iterdir() if outside.is_dir() else [outside]) == sorted(before)


def test_render_only_whose_reader_left_still_finishes_and_exits_as_it_would(tree):
    """`record.py --render-only 2>&1 | head -1`: every progress line after the first goes
    nowhere; the run writes everything and says 0, not 1."""
    stale_mechanism(tree)
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([sys.executable, "scripts/record.py", "--render-only"],
                              cwd=tree, env=clean_env(), stdout=write, stderr=write,
                              timeout=120)
    finally:
        os.close(write)
    assert done.returncode == 0
    assert run_record(tree, "--check").stdout == ""  # every figure drawn, the lock written


def test_one_malformed_lock_entry_is_remade_and_every_other_entry_kept(tree):
    lock_file = tree / "recordings" / "outputs.lock.json"
    lock = json.loads(lock_file.read_text())
    broken = f"figures/{LESSON_ID}-mechanism.svg"
    lock[broken]["inputs"] = []  # a hand edit or a bad merge
    lock_file.write_text(json.dumps(lock, indent=2))
    run = run_record(tree, "--render-only")
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"record: recordings/outputs.lock.json: the entry for {broken!r} needs a `sha256` " \
           f"and `inputs` mapping each file to its digest: what it locked is remade; the " \
           f"lock's {len(lock) - 1} other entries are kept" in run.stderr.splitlines()
    after = json.loads(lock_file.read_text())
    assert {name: entry for name, entry in after.items() if name != broken} == \
        {name: entry for name, entry in lock.items() if name != broken}  # was {} but this run's
    assert isinstance(after[broken]["inputs"], dict)
    assert run_record(tree, "--check").stdout == ""


@pytest.mark.parametrize("text", ['{"x": ' + "9" * 5000 + "}", "[" * 100_000 + "]" * 100_000])
def test_a_figure_s_data_file_python_cannot_hold_is_one_line(tmp_path, text):
    import dataclasses

    from scripts.store.derive import DeriveError, load_source

    (tmp_path / "data.json").write_text(text)
    with pytest.raises(DeriveError) as refused:
        load_source(dataclasses.replace(SEED, root=tmp_path), "data.json", {})
    assert "data.json: not valid JSON" in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_lesson_module_that_raises_when_imported_is_not_recorded(tree):
    """The notebook's cells hold only the statements its sections use; `python -m` runs
    them all. A module whose other statements raise is no lesson program to record."""
    module = tree / LESSON
    text = module.read_text()
    end = text.index("\n", text.index("# --8<-- [end:")) + 1  # after the first section
    module.write_text(text[:end] + "\nraise RuntimeError('a statement no section uses')\n"
                      + text[end:])
    before = snapshot(tree)
    run = run_record(tree)
    assert run.returncode == 1, run.stderr[-2000:]
    assert run.stderr.splitlines()[-1] == (
        f"error: {LESSON_ID} failed in its notebook: {LESSON} raises when imported "
        f"(RuntimeError: a statement no section uses), though its cells ran: fix the "
        f"statements outside its sections; nothing was written")
    assert snapshot(tree) == before and leftover_temp_files(tree) == []


# runs that cannot collide, and what a lesson may print ------------------------------------

HOLD_THE_LOCK = """
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from scripts.plumbing.run_lock import exclusive_run
with exclusive_run("python scripts/record.py", Path(sys.argv[2])):
    print("held", flush=True)
    time.sleep(120)
"""


@pytest.fixture
def lock_holder(tmp_path):
    """A process holding the run lock of the checkout at tmp_path/project, as a run does."""
    root = tmp_path / "project"
    root.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLD_THE_LOCK, str(ROOT), str(root)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        yield root, holder.pid
    finally:
        holder.kill()
        holder.wait()


def test_a_second_run_is_refused_naming_the_first(lock_holder):
    from scripts.plumbing.run_lock import RunLocked, exclusive_run

    root, pid = lock_holder
    with pytest.raises(RunLocked) as refused:
        with exclusive_run("python scripts/record.py --render-only", root):
            pytest.fail("two runs held the lock at once")
    message = str(refused.value)
    assert f"pid {pid}," in message and "\n" not in message
    assert "`python scripts/record.py --render-only`" in message


def test_the_lock_is_free_again_once_its_holder_is_killed(lock_holder):
    from scripts.plumbing.run_lock import exclusive_run

    root, pid = lock_holder
    os.kill(pid, 9)  # SIGKILL: no clean-up ran, and the kernel still releases the lock
    os.waitpid(pid, 0)
    with exclusive_run("python scripts/record.py", root):
        assert (root / ".run.lock").read_text().split()[0] == str(os.getpid())


def test_record_refuses_while_another_run_holds_the_checkout(tmp_path, monkeypatch, capsys):
    """record.py --render-only beside a run in progress: one line, its pid, nothing touched
    (it used to delete the other run's staged files and lose its recording). record.main
    in-process, on the registry of a copy that another process holds."""
    from conftest import snapshot
    from scripts import record
    from scripts.store.lessons import load_lessons

    root = tmp_path / "project"
    project_copy(root)
    staged = root / "recordings" / f".{FIRST_LESSON.id}.cpu.json.{os.getpid()}.k2j4h1x8.tmp"
    staged.write_text("{}")  # the other run's, mid-way
    monkeypatch.setattr(record, "load_lessons", lambda: load_lessons(root))
    holder = subprocess.Popen([sys.executable, "-c", HOLD_THE_LOCK, str(root), str(root)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        before = snapshot(root)
        status = record.main(["--render-only"])
    finally:
        holder.kill()
        holder.wait()
    assert status == 1
    assert capsys.readouterr().err == (
        f"error: another run, pid {holder.pid}, is writing this checkout's recordings and "
        f"figures; wait for it to end, or stop it, then run `python scripts/record.py "
        f"--render-only` again\n")
    assert snapshot(root) == before and staged.exists()


def test_a_lesson_that_prints_too_much_is_refused_in_one_line():
    from scripts.record import MAX_STDOUT_LINES, RecordError, check_stdout

    flood = "".join(f"line {n}\n" for n in range(200_000)) + "PASS: x\n"
    with pytest.raises(RecordError) as refused:
        check_stdout("x", flood)
    assert "\n" not in str(refused.value) and f"at most {MAX_STDOUT_LINES} lines" in \
        str(refused.value)
    with pytest.raises(RecordError, match="printed 'same' more than once"):
        check_stdout("x", "".join(f"{n}\n" for n in range(MAX_STDOUT_LINES - 3))
                     + "same\nsame\nPASS: x\n")
    check_stdout("x", "".join(f"{n}\n" for n in range(MAX_STDOUT_LINES - 1)) + "PASS: x\n")

"""Everything a maintainer or a pull request hands the build is untrusted input (issue 23).

Each test feeds one boundary a hostile or malformed input and asserts what the issue asks:
a refusal in one line naming the file, the field and the fix, or text that stays text.
No test runs JAX or asserts how fast anything is.
"""
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, SEED

CANARY = "CANARY-TOKEN-5be1c0d3"


# ----------------------------------------------------------- 1: the notebook page --

# ---------------------------------------------------------------- 2: the registry --

# ------------------------------------------------------- 14: --data-out targets --

def not_regular_files(tmp_path):
    """Paths that are there but are not regular files (no device node: a test run as
    root must never risk replacing one)."""
    target = tmp_path / "target.json"
    target.write_text("keep me")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "nowhere")
    return target, [link, fifo, dangling]


# The seed lesson's program and its ring simulation guard --data-out so (lesson_code/
# CONTRACT.md asks it of a lesson only for Ctrl-C and SIGTERM).
@pytest.mark.parametrize("module", [SEED.module, SEED.simulation])
def test_data_out_refuses_what_is_not_a_regular_file_before_running(tmp_path, module):
    from conftest import clean_env

    target, paths = not_regular_files(tmp_path)
    for path in paths:
        # No --devices: the refusal comes from argument parsing, before any JAX runs.
        run = subprocess.run([sys.executable, "-m", module, "--data-out", str(path)],
                             cwd=ROOT, env=clean_env(), capture_output=True, text=True,
                             timeout=120)
        assert run.returncode != 0 and "not a regular file" in run.stderr, run.stderr
        assert "Traceback" not in run.stderr and "PASS" not in run.stdout
        assert path.is_symlink() or stat.S_ISFIFO(path.lstat().st_mode)
    assert target.read_text() == "keep me"


def test_write_json_replaces_only_a_regular_file_or_makes_a_new_one(tmp_path):
    import importlib

    write_json = importlib.import_module(SEED.module).write_json

    target, paths = not_regular_files(tmp_path)
    for path in paths:
        with pytest.raises(OSError):
            write_json(str(path), {"a": 1})  # the path changed after --data-out was parsed
        assert path.is_symlink() or stat.S_ISFIFO(path.lstat().st_mode)
    assert target.read_text() == "keep me"
    write_json(str(target), {"a": 1})
    write_json(str(tmp_path / "new.json"), {"b": 2})
    assert json.loads(target.read_text()) == {"a": 1}
    assert json.loads((tmp_path / "new.json").read_text()) == {"b": 2}
    # A file already at the temporary name is never written through, and no .tmp is left.
    (tmp_path / f"new.json.{os.getpid()}.tmp").symlink_to(target)
    with pytest.raises(FileExistsError):
        write_json(str(tmp_path / "new.json"), {"c": 3})
    assert json.loads(target.read_text()) == {"a": 1}
    assert sorted(p.name for p in tmp_path.glob("*.tmp")) == [f"new.json.{os.getpid()}.tmp"]


# ------------------------------------------------------- 3: runs that cannot collide --

def test_only_staged_files_whose_run_is_gone_are_removed(tmp_path):
    from conftest import ended_pid
    from scripts.recordings import remove_stray_temps, staged_write

    gone = ended_pid()
    mine = staged_write(tmp_path / "a.json", "{}")  # this process is still running
    assert f".a.json.{os.getpid()}." in mine.name
    kept = [mine, tmp_path / f".b.json.{os.getpid()}.old.tmp",
            tmp_path / ".c.json.nopid.tmp",  # whose it is cannot be told: left alone
            tmp_path / "d.json.tmp"]  # not a staged name at all
    removed = [tmp_path / f".e.json.{gone}.x8y7z6w5.tmp", tmp_path / f".f.svg.{gone}.old.tmp"]
    for path in kept[1:] + removed:
        path.write_text("x")
    remove_stray_temps([tmp_path])
    assert all(path.exists() for path in kept)
    assert not any(path.exists() for path in removed)


# --------------------------------------------------- 5: a page's format codes are bounded --

# ------------------------------------------------------------------- 10: SITE_URL --

# ----------------------------------------------------------- 11: the link checker --

# ------------------------------------- 12: bounds on output, figure data and numbers --

@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_a_recording_holds_only_finite_numbers(tmp_path, number):
    from scripts.recordings import RecordingError, dumps, load_recording, validate

    recording = json.loads((ROOT / "tests/fixtures/tpu_recording.fixture.json").read_text())
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


# ------------------------------------------- 7 and 9: one line, whatever the input or locale --

# ------------------------------------------------- 13 and 17: messages that name the fix --

# ------------------------------------ 18: nothing in recordings/ passes unread --

# ------------------------------- 15: a lesson process that dies is noticed --

def test_record_notices_a_lesson_process_that_died_and_says_so_in_one_line(tmp_path):
    """XLA_FLAGS=--bogus makes the lesson's kernel exit as soon as JAX starts: record.py
    says so in one line, with what XLA printed (a kernel once held it until each cell's
    timeout, 180 s)."""
    from conftest import clean_env, project_copy, snapshot

    root = project_copy(tmp_path / "project")
    before = snapshot(root)
    run = subprocess.run([sys.executable, "scripts/record.py", "--all"], cwd=root,
                         env=clean_env(XLA_FLAGS="--bogus"), capture_output=True, text=True,
                         timeout=300)
    errors = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert run.returncode == 1 and len(errors) == 1 and "Traceback" not in run.stderr
    assert "the lesson's kernel exited with status" in errors[0]
    assert "XLA_FLAGS: --bogus" in errors[0]  # its own stderr says why
    assert errors[0].endswith("nothing was written")
    assert snapshot(root) == before


# ------------- 16: a SIGKILLed run leaves its lesson's files behind only until the next --

def kernel_files(parent_pid, deadline_s=120):
    """(pid, the connection file) of the kernel `parent_pid` started, once it runs."""
    import time

    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for proc in Path("/proc").iterdir():
            try:
                if not proc.name.isdigit() or \
                        int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) != parent_pid:
                    continue
                argv = (proc / "cmdline").read_bytes().split(b"\0")
            except (OSError, IndexError, ValueError):
                continue
            if b"ipykernel_launcher" in argv:
                return int(proc.name), Path(argv[argv.index(b"-f") + 1].decode())
        time.sleep(0.1)
    raise AssertionError("no kernel started")


def test_the_lesson_kernel_s_files_live_in_the_run_s_scratch_folder(tmp_path):
    import signal
    import tempfile

    from conftest import clean_env, project_copy
    from scripts.scratch import remove_abandoned

    root = project_copy(tmp_path / "project")
    run = subprocess.Popen([sys.executable, "scripts/record.py", "--all"], cwd=root,
                           env=clean_env(),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        host_pid, connection = kernel_files(run.pid)
        scratch = connection.parent
        assert scratch.parent == Path(tempfile.gettempdir())
        assert scratch.name.startswith(f"record-{run.pid}-"), connection
        assert connection.name == "kernel.json"
    finally:
        run.send_signal(signal.SIGKILL)  # no clean-up of its own can run
        run.wait()
        try:  # it dies with its parent (PR_SET_PDEATHSIG); this is in case it has not
            os.killpg(host_pid, signal.SIGKILL)
        except (ProcessLookupError, UnboundLocalError):
            pass
    # What SIGKILL leaves: the connection file (it holds the kernel's key), in the
    # scratch folder...
    assert connection.exists()
    remove_abandoned("record")  # ...which the next run's start-up removes
    assert not connection.exists() and not scratch.exists()


# ------------------------------------------- 8: Ctrl-C in the lesson program --

# The lesson program with run_lesson replaced by one that waits for the signal: the signal
# lands inside main() every time. "swallowed": a library catches the KeyboardInterrupt and
# carries on to print PASS, as some tries did.
SIGNALLED_LESSON = """
import importlib, sys, time
sys.path.insert(0, sys.argv[1])
lesson = importlib.import_module(sys.argv[3])

def waiting(devices):
    print("running", flush=True)
    try:
        # Short sleeps: a signal that one of JAX's threads received is handled once the
        # main thread is back in Python, as it is between the lesson's steps.
        for _ in range(600):
            time.sleep(0.1)
    except KeyboardInterrupt:
        if sys.argv[2] != "swallowed":
            raise
    print("PASS: " + lesson.LESSON_ID, flush=True)
    return {}

lesson.run_lesson = waiting
sys.exit(lesson.main(["--devices", "2"]))
"""


@pytest.mark.parametrize("how, status", [("SIGINT", 130), ("SIGTERM", 143),
                                         ("swallowed", 130)])
def test_a_signal_ends_the_lesson_program_in_one_line(how, status):
    import signal

    from conftest import clean_env

    run = subprocess.Popen([sys.executable, "-c", SIGNALLED_LESSON, str(ROOT), how,
                            SEED.module],
                           env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    assert run.stdout.readline() == "running\n"
    run.send_signal(signal.SIGTERM if how == "SIGTERM" else signal.SIGINT)
    out, err = run.communicate(timeout=60)
    name = "SIGTERM" if how == "SIGTERM" else "SIGINT"
    assert run.returncode == status
    assert err == f"error: interrupted by {name}; the lesson did not finish\n"


# -------------------------------------- 6: mkdocs serve keeps the last good site --

@pytest.mark.parametrize("change", [
    lambda panels: panels.extend([panels[0]] * 3000),  # a figure of 3,000 bar charts
    lambda panels: panels[0]["series"].extend([panels[0]["series"][0]] * 100),
    lambda panels: panels[0]["series"][0]["y"].extend([1.0] * 100_000),
])
def test_the_figure_data_a_recording_holds_is_bounded(change):
    from scripts.recordings import RecordingError, validate

    recording = json.loads((ROOT / "tests/fixtures/tpu_recording.fixture.json").read_text())
    change(recording["data"]["panels"])
    with pytest.raises(RecordingError, match="invalid at data/panels"):
        validate(recording, "recording")

"""Every fault ends clean: one line on stderr, a non-zero exit, every earlier file as it
was, no staged `.tmp` file, no process and no scratch folder left behind.

Ctrl-C and SIGTERM in each phase of record.py, a killed launcher of a multi-process run,
refused arguments, and write errors (a full disk, a read-only folder, a failed move).
Each test works on its own copy of the project.
"""
import importlib
import json
import os
import queue
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

from conftest import (FIXTURES, ROOT, SEED, clean_env, fixture_lesson_alone, leftover_temp_files,
                      project_copy, run_record, snapshot)
from scripts.plumbing.scratch import MARK, remove_abandoned

# The seed lesson: its run is long enough to be interrupted while its cells run, and its
# rank module is the one a hanging rank replaces.
LESSON_ID = SEED.id
SCRATCH = Path(tempfile.gettempdir())


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return project_copy(tmp_path_factory.mktemp("faults").resolve() / "repo")


def private_copy(pristine, tmp_path):
    """A copy of a module's pristine project, for one test to break."""
    return shutil.copytree(pristine, tmp_path.resolve() / "repo", symlinks=True)


@pytest.fixture
def tree(pristine, tmp_path):
    return private_copy(pristine, tmp_path)


def scratch_of(pid):
    """The scratch folders (the kernel's files, rank files) of the run with this pid."""
    return sorted(SCRATCH.glob(f"record-{pid}-*")) + sorted(SCRATCH.glob(f"ranks-{pid}-*"))


class Record:
    """`record.py ARGS` on a copy, its stderr read line by line as it runs."""

    def __init__(self, root, *args, **env):
        self.process = subprocess.Popen(
            [sys.executable, str(root / "scripts" / "record.py"), *args], cwd=root,
            env=clean_env(PYTHONDONTWRITEBYTECODE="1", **env), stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.lines, self._queue = [], queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stderr:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for_line(self, prefix, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.1)
            except queue.Empty:
                continue
            if line is None:
                pytest.fail(f"record.py ended before {prefix!r}: {self.lines}")
            self.lines.append(line)
            if line.startswith(prefix):
                return
        pytest.fail(f"no {prefix!r} within {timeout} s: {self.lines}")

    def wait_for_children(self, word, count, timeout=120):
        """Its descendant processes whose command line holds `word`, once `count` run."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [child for child in self.descendants()
                     if word in " ".join(command_line(child))]
            if len(found) >= count:
                return found
            time.sleep(0.1)
        pytest.fail(f"fewer than {count} {word} processes within {timeout} s: {self.lines}")

    def descendants(self):
        try:
            return psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def finish(self, timeout=60):
        """Exit status and every stderr line, once it has exited."""
        try:
            status = self.process.wait(timeout=timeout)
        finally:
            self.kill()
        while (line := self._queue.get(timeout=10)) is not None:
            self.lines.append(line)
        return status, self.lines

    def kill(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def command_line(process):
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def assert_gone(processes, timeout=15):
    _, alive = psutil.wait_procs(processes, timeout=timeout)
    alive = [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
    left = [command_line(p) for p in alive]
    for process in alive:
        process.kill()  # so a failing test leaves nothing running either
    assert left == []


def assert_one_error_line(lines, *words):
    """Progress lines (`record: ...`), then exactly one line: the error."""
    *progress, last = lines
    assert all(line.startswith("record: ") for line in progress), lines
    assert last.startswith("error: "), lines
    for word in words:
        assert word in last, last


# Appended to the copy's SVG helper: each figure then takes half a second longer to
# finish. Drawing them all takes about a second on a quiet machine, and a test that sends
# its signal when "drawing the figures" appears could otherwise, on a busy one, see the
# drawing end first and the signal land after every file was in place.
SLOW_FIGURES = """
import time as _time

_svg_text = svg_text


def svg_text(*args, **kwargs):
    _time.sleep(0.5)
    return _svg_text(*args, **kwargs)
"""


def make_every_figure_stale(root):
    """Edit the SVG helper every renderer imports, so every figure is redrawn, and slow
    each one down: the drawing phase then lasts seconds, long enough to be interrupted."""
    helper = root / "scripts" / "figures" / "svg.py"
    helper.write_text(helper.read_text() + SLOW_FIGURES)


# --- Ctrl-C and SIGTERM while record.py runs ---------------------------------------------

EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}


@pytest.mark.parametrize("phase, signum, times", [
    ("starting the lesson's kernel", signal.SIGINT, 1),
    ("running the cells", signal.SIGINT, 1),
    ("running the cells", signal.SIGTERM, 1),
    ("running the cells", signal.SIGINT, 3),  # an impatient Ctrl-C, Ctrl-C, Ctrl-C
    ("running the cells", signal.SIGHUP, 1),  # the terminal or the ssh session closed
    ("drawing the figures", signal.SIGINT, 1),
    ("drawing the figures", signal.SIGTERM, 1),
    ("drawing the figures", signal.SIGINT, 3),
    ("drawing the figures", signal.SIGHUP, 1),
])
def test_a_signal_in_each_phase_ends_the_run_in_one_line_and_changes_nothing(
        tree, phase, signum, times):
    make_every_figure_stale(tree)
    before = snapshot(tree)
    run = Record(tree, "--all")  # a current tree runs nothing without it
    try:
        run.wait_for_line("record: running")
        if phase == "running the cells":
            run.wait_for_children("ipykernel_launcher", 1)
            time.sleep(1.0)  # the kernel is up and the lesson's cells are running
        elif phase == "drawing the figures":
            run.wait_for_line("record: analysing and drawing the figures")
        children = run.descendants()
        for _ in range(times):
            run.process.send_signal(signum)
            time.sleep(0.05)
        status, lines = run.finish()
    finally:
        run.kill()
    assert status == EXIT[signum], lines
    name = signal.Signals(signum).name
    assert_one_error_line(lines, f"interrupted by {name}", "every earlier file is as it was")
    if phase != "drawing the figures":
        assert not any("printed PASS" in line for line in lines), lines  # it was that phase
    assert not any(line.startswith("record: wrote") for line in lines)
    assert snapshot(tree) == before
    assert leftover_temp_files(tree) == []
    assert_gone(children)  # the lesson's kernel, and anything it started
    assert scratch_of(run.process.pid) == []


def test_a_sigkill_while_the_cells_run_leaves_no_process_and_the_next_run_cleans_up(tree):
    before = snapshot(tree)
    run = Record(tree, "--all")  # a current tree runs nothing without it
    try:
        run.wait_for_line("record: running")
        kernels = run.wait_for_children("ipykernel_launcher", 1)
        time.sleep(1.0)
        run.process.send_signal(signal.SIGKILL)
        status, _ = run.finish()
    finally:
        run.kill()
    assert status == -signal.SIGKILL
    assert_gone(kernels, timeout=15)  # it dies with its parent (PR_SET_PDEATHSIG)
    assert snapshot(tree) == before  # nothing had been staged yet
    remove_abandoned("record")  # what the next record.py does first
    assert scratch_of(run.process.pid) == []


def test_a_signal_during_the_moves_waits_until_every_file_is_in_place(tmp_path):
    """The commit is one step: Ctrl-C in the middle of it is delivered after it."""
    from scripts.plumbing.interrupts import Interrupted, stop_on_signals
    from scripts.store.staging import Staging

    previous = signal.getsignal(signal.SIGINT)
    stop_on_signals()
    try:
        files = [tmp_path / name for name in ("a.json", "b.json", "c.json")]
        for path in files:
            path.write_text("old")
        moved = []

        def report(path):
            moved.append(path)

        with pytest.raises(Interrupted) as raised:
            with Staging() as staging:
                for path in files:
                    staging.add(path, "new")
                original = os.replace

                def replace_then_interrupt(source, target):
                    original(source, target)
                    if Path(target) == files[0]:
                        os.kill(os.getpid(), signal.SIGINT)  # after the first of three
                        time.sleep(0.05)  # time for Python to see it, were it not held

                os.replace = replace_then_interrupt
                try:
                    staging.commit(report)
                finally:
                    os.replace = original
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    assert raised.value.exit_status == 130
    assert raised.value.written  # the command's line says the new files are in place
    assert [path.read_text() for path in files] == ["new"] * 3
    assert moved == files
    assert list(tmp_path.glob(".*.tmp")) == []


def test_a_signal_python_swallowed_stops_the_commit_before_its_first_move(tmp_path):
    """Python discards an exception raised inside a garbage-collection callback, so the
    run goes on to its commit; the commit raises the signal again and moves nothing, and
    says so (a test once saw "after every new file was in place" with nothing moved)."""
    from scripts.plumbing import interrupts
    from scripts.store.staging import Staging

    previous = signal.getsignal(signal.SIGINT)
    interrupts.stop_on_signals()
    try:
        target = tmp_path / "a.json"
        target.write_text("old")
        with pytest.raises(interrupts.Interrupted) as raised:
            with Staging() as staging:
                staging.add(target, "new")
                try:
                    os.kill(os.getpid(), signal.SIGINT)
                    time.sleep(0.05)
                except interrupts.Interrupted:
                    pass  # what Python does to it inside a garbage-collection callback
                staging.commit()
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    assert raised.value.exit_status == 130 and not raised.value.written
    assert raised.value.outcome == "every earlier file is as it was"
    assert target.read_text() == "old"
    assert list(tmp_path.glob(".*.tmp")) == []


# --- killing the launcher of a multi-process run -----------------------------------------

def hanging_ranks(root):
    """The copy's registry names a rank that hangs once the lesson ran, so its peers wait
    for it in a collective: a run that only a signal can end. Returns the environment to
    start the run with: the rank hangs, and wraps the seed's rank module, which the
    registry no longer names (tests/fixtures/failing_rank.py)."""
    shutil.copy(FIXTURES / "failing_rank.py", root / "lesson_code" / "hanging_rank.py")
    registry = root / "lesson_code" / "lessons.toml"
    registry.write_text(registry.read_text().replace(
        f'rank_module = "{SEED.rank_module}"',
        'rank_module = "lesson_code.hanging_rank"'))
    return {"FAILING_RANK": "hang", "WRAPPED_RANK": SEED.rank_module}


@pytest.mark.parametrize("how", ["SIGTERM", "SIGTERM to the group", "SIGINT", "SIGKILL"])
def test_the_ranks_die_with_their_launcher(tree, how):
    hanging = hanging_ranks(tree)
    before = snapshot(tree)
    run = Record(tree, "--processes", "4", "--all", **hanging)
    try:
        run.wait_for_line("record: running")
        ranks = run.wait_for_children("lesson_code.hanging_rank", 4)
        time.sleep(1.0)  # the ranks are importing JAX or joining: well under way
        if how == "SIGTERM to the group":
            os.killpg(run.process.pid, signal.SIGTERM)  # a CI cancel
        else:
            run.process.send_signal(getattr(signal, how.split()[0]))
        status, lines = run.finish()
    finally:
        run.kill()
    assert_gone(ranks, timeout=10)
    assert snapshot(tree) == before
    assert leftover_temp_files(tree) == []
    if how == "SIGKILL":
        assert status == -signal.SIGKILL  # no word from it; the ranks died with it anyway
        left = scratch_of(run.process.pid)
        remove_abandoned("ranks")  # what the next multi-process run does first
        remove_abandoned("record")  # and the next record.py
        assert [folder for folder in left if folder.exists()] == []
    else:
        signum = signal.SIGINT if how == "SIGINT" else signal.SIGTERM
        assert status == EXIT[signum], lines
        assert_one_error_line(lines, f"interrupted by {signal.Signals(signum).name}")
        assert scratch_of(run.process.pid) == []


def test_a_scratch_folder_is_removed_only_once_its_process_is_gone(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    abandoned = tmp_path / f"ranks-{dead.pid}-abc123"
    in_use = tmp_path / f"ranks-{os.getpid()}-def456"
    other = tmp_path / f"record-{dead.pid}-abc123"
    unmarked = tmp_path / f"ranks-{dead.pid}-notours"  # a stranger's folder, by its name
    for folder in (abandoned, in_use, other, unmarked):
        folder.mkdir()
        (folder / "rank0.err").write_text("")
        if folder != unmarked:
            (folder / MARK).write_text("")
    remove_abandoned("ranks", tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [in_use.name, other.name, unmarked.name])


def sleeper(**env):
    """A process that sleeps until killed, in a session of its own, with `env` added."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                            env=dict(clean_env(), **env), start_new_session=True)


def test_the_next_run_kills_a_leftover_carrying_the_mark_of_a_run_that_is_gone(tmp_path,
                                                                             monkeypatch):
    """What a SIGKILLed record.py leaves under mpirun: ranks carrying its mark, which the
    next run kills as it starts; a process without a mark, or with a live run's, stays."""
    from scripts.plumbing.scratch import RUN_MARK, scratch_folder

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    leftover = sleeper(**{RUN_MARK: f"ranks-{dead.pid}-abc123"})
    unmarked = sleeper()
    live_run = sleeper(**{RUN_MARK: f"ranks-{os.getpid()}-def456"})
    try:  # Popen returns once each has exec'd: its environment is the one given
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        with scratch_folder("record"):  # a plain record.py, as it starts
            pass
        assert leftover.wait(timeout=15) == -signal.SIGKILL
        assert unmarked.poll() is None and live_run.poll() is None
    finally:
        for process in (leftover, unmarked, live_run):
            process.kill()
            process.wait()


def test_a_run_that_starts_no_ranks_still_removes_what_a_killed_rank_run_left(tmp_path,
                                                                            monkeypatch):
    from scripts.plumbing.scratch import scratch_folder

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    left = tmp_path / f"ranks-{gone.pid}-abc123"  # a SIGKILLed multi-process run's
    left.mkdir()
    (left / MARK).write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with scratch_folder("record") as scratch:  # a plain record.py: it starts no ranks
        assert sorted(tmp_path.iterdir()) == [scratch]
    assert list(tmp_path.iterdir()) == []


def test_a_signal_while_a_file_is_staged_leaves_no_empty_one(tmp_path, monkeypatch):
    """The clean-clone CI failure: SIGTERM between mkstemp and the staged list left
    `recordings/analysis/.<name>.<pid>.<random>.tmp`, empty, that no run removed."""
    from scripts.plumbing.interrupts import Interrupted
    from scripts.store import staging as staged

    def signal_arrives(*_):
        raise Interrupted(signal.SIGTERM)

    monkeypatch.setattr(staged.os, "fchmod", signal_arrives)  # just after mkstemp
    with pytest.raises(Interrupted):
        with staged.Staging() as staging:
            staging.add(tmp_path / "analysis" / "x.json", "{}")
    assert list((tmp_path / "analysis").iterdir()) == []


# --- the lock file, the reader of the output, and what a pull request commits -----------

@pytest.mark.parametrize("make, words", [
    (lambda path: path.mkdir(), "it is a directory; remove it"),
    (lambda path: path.symlink_to(path.parent.parent / "outside"),
     "it is a symbolic link; `git rm .run.lock` (it is never committed)"),
])
def test_a_lock_file_that_cannot_be_opened_is_one_line_and_writes_nothing_outside(tmp_path,
                                                                                  make,
                                                                                  words):
    from scripts.plumbing.run_lock import RunLocked, exclusive_run

    root = tmp_path / "checkout"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.write_text("someone's file\n")
    make(root / ".run.lock")
    with pytest.raises(RunLocked) as refused:
        with exclusive_run("python scripts/record.py", root):
            pytest.fail("the lock was taken")
    assert str(refused.value) == (".run.lock, the lock that keeps two runs of this checkout "
                                  f"apart, cannot be opened: {words}")
    assert outside.read_text() == "someone's file\n"  # was truncated and overwritten


# The lock taken by another user: imports first (as root, this Python lives where another
# user cannot read), then that user's ids, then the lock of a checkout it cannot write.
AS_ANOTHER_USER = """
import os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from scripts.plumbing.run_lock import RunLocked, exclusive_run
if os.geteuid() == 0:
    os.setgid(65534)
    os.setuid(65534)  # nobody
try:
    with exclusive_run("python scripts/record.py", Path(sys.argv[1])):
        print("taken")
except RunLocked as error:
    print(error)
"""


def test_another_user_s_or_a_read_only_checkout_s_lock_is_one_line(tmp_path):
    root = tmp_path / "checkout"
    root.mkdir()
    (root / ".run.lock").write_text("")
    (root / ".run.lock").chmod(0o444)  # for a run that is not root: its own, read-only
    root.chmod(0o555)
    try:
        done = subprocess.run([sys.executable, "-c", AS_ANOTHER_USER, str(root), str(ROOT)],
                              capture_output=True, text=True, timeout=60, env=clean_env())
    finally:
        root.chmod(0o755)
    assert done.stderr == "" and done.stdout == (
        ".run.lock, the lock that keeps two runs of this checkout apart, cannot be opened: "
        "Permission denied; run `python scripts/record.py` in a checkout this user can "
        "write, or remove a .run.lock that another user left\n")


def closed_pipe():
    """A pipe whose reader is already gone: what `| head -1` is once head has its line."""
    read, write = os.pipe()
    os.close(read)
    return write


def test_check_piped_to_a_reader_that_left_is_141_and_no_traceback(tree):
    make_every_figure_stale(tree)  # lines to print
    write = closed_pipe()
    try:
        done = subprocess.run([sys.executable, "scripts/record.py", "--check"], cwd=tree,
                              env=clean_env(), stdout=write, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")


# --- arguments refused before anything runs ----------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["--processes", "0"], "--processes 0 cannot be recorded (a multi-process run needs 2"),
    (["--processes", "1"], "--processes 1 cannot be recorded (a multi-process run needs 2"),
    (["--processes", "-4"], "--processes -4 cannot be recorded"),
    (["--processes", "3"], "--processes 3 cannot be recorded (the ranks check their shards"),
    (["--processes", "64"], "--processes 64 cannot be recorded (at most 16"),
    (["--processes", "4.0"], "argument --processes: invalid int value: '4.0'"),
    (["--processes", "four"], "argument --processes: invalid int value: 'four'"),
    (["--processes"], "argument --processes: expected one argument"),
    (["--processes", "4", "--devices", "4"], "it takes no --platform, --devices"),
    (["--processes", "4", "--platform", "tpu"], "it takes no --platform, --devices"),
    (["--devices", "8"], f"--devices 8: {LESSON_ID} is recorded on {SEED.devices} devices"),
    (["--devices", "0"], f"--devices 0: {LESSON_ID} is recorded on {SEED.devices} devices"),
    (["--platform", "tpu", "--devices", "8"], "--devices 8:"),
])
def test_a_request_that_cannot_work_is_refused_up_front(tree, args, message):
    before = snapshot(tree)
    run = run_record(tree, *args, timeout=120)
    assert run.returncode == 2, run.stderr
    # One line, the error itself: no "record: running ..." progress, so nothing was tried.
    assert run.stderr.count("\n") == 1, run.stderr  # one line: no usage, no traceback
    assert run.stderr.startswith("error: ") and message in run.stderr, run.stderr
    assert "`python " in run.stderr  # and the command to run instead
    assert snapshot(tree) == before


def test_another_device_count_names_the_registry_and_how_to_try_it(tree):
    run = run_record(tree, "--devices", "8", timeout=120)
    assert run.stderr == (
        f"error: --devices 8: {LESSON_ID} is recorded on {SEED.devices} devices, the count "
        f"its page describes (`devices` in lesson_code/lessons.toml); to try 8 without "
        f"recording, "
        f"run `python -m {SEED.module} --devices 8`\n")


def test_more_ranks_than_free_memory_holds_are_refused(monkeypatch):
    from scripts import record as record_module
    from scripts.store.lessons import load_lessons

    monkeypatch.setattr(record_module, "available_memory", lambda: 2**30)  # 1 GiB free
    args = record_module.parse_args(["--processes", "8"])
    with pytest.raises(record_module.UsageError, match=r"--processes 8 needs about 2\.3 "
                       r"GiB and this machine has 1\.0 GiB free"):
        record_module.refuse_what_cannot_work(args, load_lessons())


# --- write errors: a full disk, a read-only folder, a failed move --------------------------

# record.py in the copy, with one of the file system calls it makes broken first.
BROKEN_RECORD = """
import errno, os, sys, tempfile
{patch}
from scripts import record
sys.exit(record.main({args!r}))
"""
FULL_DISK = """
real_fdopen = os.fdopen
class Full:  # writes the first bytes, then the disk is full: a truncated file
    def __init__(self, out): self.out = out
    def __enter__(self): return self
    def __exit__(self, *exc): self.out.close()
    def write(self, data):
        self.out.write(data[:10]); self.out.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
os.fdopen = lambda fd, mode: Full(real_fdopen(fd, mode))
"""
READ_ONLY_RECORDINGS = """
real_mkstemp = tempfile.mkstemp
def mkstemp(*args, dir=None, **kwargs):
    if os.path.basename(dir) == "recordings":
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
    return real_mkstemp(*args, dir=dir, **kwargs)
tempfile.mkstemp = mkstemp
"""
LOCK_MOVE_FAILS = """
real_replace = os.replace
def replace(source, target):
    if str(target).endswith("outputs.lock.json"):  # after the figures were moved
        raise OSError(errno.EIO, os.strerror(errno.EIO))
    return real_replace(source, target)
os.replace = replace
"""


def broken_record(root, patch, *args):
    return subprocess.run([sys.executable, "-c", BROKEN_RECORD.format(patch=patch, args=args)],
                          cwd=root, env=clean_env(PYTHONDONTWRITEBYTECODE="1"),
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("patch, message", [
    (FULL_DISK, f"error: figures/{LESSON_ID}.svg: cannot be written (No space left on "
                f"device); nothing was changed"),
    (READ_ONLY_RECORDINGS, "error: recordings/outputs.lock.json: cannot be written "
                           "(Permission denied); nothing was changed"),
    (LOCK_MOVE_FAILS, "error: recordings/outputs.lock.json: cannot be moved into place "
                      "(Input/output error); every file is as it was"),
])
def test_a_write_error_is_one_line_and_changes_nothing(tree, patch, message):
    figure = tree / "figures" / f"{LESSON_ID}.svg"
    figure.write_text(figure.read_text().replace("</svg>", "<!-- hand edit -->\n</svg>"))
    before = snapshot(tree)
    run = broken_record(tree, patch, "--render-only")
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1] == message
    assert snapshot(tree) == before  # the figure moved before the lock failed is put back
    assert leftover_temp_files(tree) == []


def test_a_failed_move_puts_back_the_files_already_moved(tmp_path, monkeypatch):
    from scripts.store.staging import Staging, StagingError

    files = [tmp_path / name for name in ("recording.json", "figure.svg", "new.svg")]
    files[0].write_text("old recording")
    files[1].write_text("old figure")
    real_replace = os.replace

    def replace(source, target):
        if Path(target) == files[2]:
            raise OSError(28, os.strerror(28))
        return real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(StagingError, match="new.svg: cannot be moved into place"):
        with Staging() as staging:
            for path in files:
                staging.add(path, "new")
            staging.commit()
    assert files[0].read_text() == "old recording"
    assert files[1].read_text() == "old figure"
    assert not files[2].exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figure.svg", "recording.json"]


def replayed_sweep(committed):
    """bench.py's measure, answering with the committed sweep's rows: no JAX, no timing."""
    def measure(ranks, sizes, plan, block):
        rows = [row for row in committed["rows"]
                if row["ranks"] == ranks and row["block"] == block]
        backend = {k: committed["environment"][k] for k in ("backend", "deviceKind", "jax")}
        [host] = [h for h in committed["hosts"] if (h["block"], h["ranks"]) == (block, ranks)]
        return {"backend": backend, "rows": rows, "programs": committed["programs"][str(ranks)],
                "host": {"before": host["before"], "after": host["after"]}}
    return measure


@pytest.mark.parametrize("failing", ["figure", "lock"])
def test_bench_moves_recording_figure_and_lock_together_or_not_at_all(tree, monkeypatch,
                                                                       failing):
    import json

    from scripts import bench
    from scripts.store.lessons import load_lessons
    from scripts.store.staging import StagingError

    target = {"figure": f"{LESSON_ID}-sweep.svg", "lock": "outputs.lock.json"}[failing]
    real_replace = os.replace

    def replace(source, destination):
        if Path(destination).name == target and str(source).endswith(".tmp") \
                and ".old." not in str(source):
            raise OSError(28, os.strerror(28))
        return real_replace(source, destination)

    committed = json.loads((tree / "recordings" / f"{LESSON_ID}.sweep.json").read_text())
    before = snapshot(tree)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(bench, "measure_memcpy_gbps", lambda: committed["memcpyGBps"])
    with pytest.raises(StagingError, match=f"{target}: cannot be moved into place"):
        bench.record_sweep(load_lessons(tree)[LESSON_ID], None, [2, 4, 8], None,
                           {key: committed["method"][key] for key in bench.TIMING_KEYS},
                           measure=replayed_sweep(committed),
                           blocks=committed["method"]["blocks"])
    assert snapshot(tree) == before  # the recording moved first is back as it was
    assert leftover_temp_files(tree) == []


# --- a SIGKILL's leftovers ---------------------------------------------------------------

def test_staged_files_a_sigkill_left_are_ignored_by_git_and_removed_by_the_next_run(tree):
    from conftest import ROOT, ended_pid

    gone = ended_pid()  # the name says whose file it is; that run is gone
    strays = [tree / "recordings" / f".{LESSON_ID}.cpu.json.{gone}.abc123.tmp",
              tree / "recordings" / "analysis" / f".{LESSON_ID}.cpu.json.{gone}.q9r8.tmp",
              tree / "figures" / f".{LESSON_ID}.svg.{gone}.old.tmp",
              tree / "docs" / "notebooks" / f".{LESSON_ID}.ipynb.{gone}.x1y2.tmp"]
    # The project's .gitignore alone, in a repository of its own: what `git add` would skip.
    shutil.copy(ROOT / ".gitignore", tree / ".gitignore")
    subprocess.run(["git", "init", "--quiet", str(tree)], check=True)
    ignored = subprocess.run(["git", "check-ignore", "--no-index",
                              *(p.relative_to(tree).as_posix() for p in strays)],
                             cwd=tree, capture_output=True, text=True)
    assert ignored.stdout.split() == [p.relative_to(tree).as_posix() for p in strays]
    for stray in strays:
        stray.write_text("half")
    run = run_record(tree, "--render-only", timeout=120)
    assert run.returncode == 0, run.stderr
    assert leftover_temp_files(tree) == []


# --- --check and its fixes on broken inputs ----------------------------------------------

@pytest.fixture(scope="module")
def fixture_lesson_pristine(tmp_path_factory):
    return fixture_lesson_alone(tmp_path_factory.mktemp("fixture-lesson").resolve() / "repo")


@pytest.fixture
def fixture_lesson_tree(fixture_lesson_pristine, tmp_path):
    """A private copy of a project whose one lesson is the small fixture lesson."""
    return private_copy(fixture_lesson_pristine, tmp_path)


# A truncated lock is the machinery's fault, whatever the lessons: it is broken in a project
# whose one lesson is the fixture lesson, whose fix (--render-only) then redraws one figure
# rather than all of the seed's. The other two break files of the seed lesson itself.
@pytest.mark.parametrize("breakage, fix, project", [
    ("truncated lock", "--render-only", "fixture_lesson_tree"),
    ("corrupt sweep", None, "tree"),
    ("recording is a directory", None, "tree"),
])
def test_check_and_its_fix_end_in_one_line_per_file(request, breakage, fix, project):
    tree = request.getfixturevalue(project)
    if breakage == "truncated lock":
        lock = tree / "recordings" / "outputs.lock.json"
        lock.write_bytes(lock.read_bytes()[:300])
        broken = "recordings/outputs.lock.json: unreadable"
    elif breakage == "corrupt sweep":
        (tree / "recordings" / f"{LESSON_ID}.sweep.json").write_text('{"rows": [')
        broken = f"recordings/{LESSON_ID}.sweep.json: not valid JSON"
    else:
        path = tree / "recordings" / f"{LESSON_ID}.cpu.json"
        path.unlink()
        path.mkdir()
        broken = f"recordings/{LESSON_ID}.cpu.json: is a directory"
    check = run_record(tree, "--check", timeout=120)
    assert check.returncode == 1 and "Traceback" not in check.stderr + check.stdout
    assert any(line.startswith(broken) for line in check.stdout.splitlines()), check.stdout
    before = snapshot(tree)
    run = run_record(tree, "--render-only", timeout=120)
    assert "Traceback" not in run.stderr
    if fix:  # the lock is rebuilt from what is drawn now
        assert run.returncode == 0, run.stderr
        assert not any(line.startswith(broken)
                       for line in run_record(tree, "--check", timeout=120).stdout.splitlines())
    else:  # the figure drawn from it cannot be: one line naming the file, nothing written
        assert run.returncode == 1
        assert run.stderr.strip().splitlines()[-1].startswith(f"error: {broken}")
        assert snapshot(tree) == before
    assert leftover_temp_files(tree) == []


# --- --data-out of the lesson programs ---------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("module", [SEED.module, SEED.simulation])
@pytest.mark.parametrize("where", ["missing folder", "a folder"])
def test_a_data_out_that_cannot_be_written_is_refused_before_the_lesson_runs(
        tmp_path, module, where):
    from conftest import ROOT

    path = tmp_path / "missing" / "data.json" if where == "missing folder" else tmp_path
    run = subprocess.run([sys.executable, "-m", module, "--data-out", str(path)], cwd=ROOT,
                         env=clean_env(), capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and run.stdout == ""  # refused before the lesson printed
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("error: "), run.stderr
    assert str(path) in run.stderr
    assert sorted(tmp_path.rglob("*")) == []


RING_WRITE_FAILS = """
import errno, os, sys
real_replace = os.replace
def replace(source, target):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
os.replace = replace
from lesson_code import ring
ring.main(["--data-out", sys.argv[1]])
"""


@pytest.mark.slow
def test_a_data_out_write_that_fails_after_the_run_is_one_line_and_leaves_no_half_file(
        tmp_path):
    from conftest import ROOT

    out = tmp_path / "trace.json"
    out.write_text("the earlier trace")
    run = subprocess.run([sys.executable, "-c", RING_WRITE_FAILS, str(out)], cwd=ROOT,
                         env=clean_env(), capture_output=True, text=True, timeout=120)
    assert run.returncode == 1
    assert run.stderr == f"error: cannot write {out} (No space left on device)\n"
    assert out.read_text() == "the earlier trace"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.json"]


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
@pytest.mark.slow
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
    write_json = importlib.import_module(f"{SEED.module}_cli").write_json  # the seed's CLI

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


# The lesson program with run_lesson replaced by one that waits for the signal: the signal
# lands inside main() every time. "swallowed": a library catches the KeyboardInterrupt and
# carries on to print PASS, as some tries did. "closed": it prints a line every tenth of a
# second, for a reader that goes away.
SIGNALLED_LESSON = """
import importlib, runpy, sys, time, warnings
sys.path.insert(0, sys.argv[1])
how, module = sys.argv[2:4]
lesson = importlib.import_module(module)

def waiting(devices, *going_further):
    print("running", flush=True)
    try:
        # Short sleeps: a signal that one of JAX's threads received is handled once the
        # main thread is back in Python, as it is between the lesson's steps.
        for _ in range(600):
            time.sleep(0.1)
            if how == "closed":
                print("still running", flush=True)
    except KeyboardInterrupt:
        if how != "swallowed":
            raise
    print("PASS: " + lesson.LESSON_ID, flush=True)
    return {}

lesson.run_lesson = waiting
sys.argv[1:] = ["--devices", "2"]
warnings.simplefilter("ignore", RuntimeWarning)  # runpy's: the module was imported above
runpy.run_module(module, run_name="__main__")
"""


@pytest.mark.slow
@pytest.mark.parametrize("how, status", [("SIGINT", 130), ("SIGTERM", 143),
                                         ("SIGHUP", 129), ("swallowed", 130)])
def test_a_signal_ends_the_lesson_program_in_one_line(how, status):
    import signal

    from conftest import clean_env

    run = subprocess.Popen([sys.executable, "-c", SIGNALLED_LESSON, str(ROOT), how,
                            SEED.module],
                           env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    assert run.stdout.readline() == "running\n"
    name = "SIGINT" if how == "swallowed" else how
    run.send_signal(signal.Signals[name])
    out, err = run.communicate(timeout=60)
    assert run.returncode == status
    assert err == f"error: interrupted by {name}; the lesson did not finish\n"


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_lesson_program_imports_jax_is_one_line(signum):
    """Ctrl-C while `import jax` runs, before the program's own handlers: still one line
    and 128 + the signal, never a traceback or jaxlib's ImportError (lesson_code/__init__.py).
    The signal is sent once jaxlib's library is mapped into the process: inside the import."""
    import psutil

    from conftest import clean_env

    run = subprocess.Popen([sys.executable, "-m", SEED.module], cwd=ROOT, env=clean_env(),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    process, deadline = psutil.Process(run.pid), time.monotonic() + 60
    while not any("jaxlib" in mapped.path for mapped in process.memory_maps()):
        assert time.monotonic() < deadline and run.poll() is None, "jaxlib never loaded"
        time.sleep(0.01)
    run.send_signal(signum)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 128 + signum, err[-2000:]
    assert len(err.splitlines()) == 1, err[-2000:]
    assert err.startswith(f"error: interrupted by {signal.Signals(signum).name}")


def test_a_jax_device_count_that_is_not_a_number_is_one_line_before_jax_starts():
    from conftest import clean_env

    run = subprocess.run([sys.executable, "-m", SEED.module], cwd=ROOT, capture_output=True,
                         text=True, env=clean_env(JAX_NUM_CPU_DEVICES="four"), timeout=60)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr == ("error: JAX_NUM_CPU_DEVICES='four' is not a whole number; unset it "
                          "(the program sets the device count itself: --devices N)\n")


@pytest.mark.slow
def test_the_lesson_program_started_under_nohup_outlives_a_hangup():
    """nohup asks a run to outlive its terminal: SIGHUP, ignored when the program starts,
    stays ignored, and the lesson runs on to PASS (the stand-in's, after a Ctrl-C it
    swallows)."""
    from conftest import clean_env

    run = subprocess.Popen([sys.executable, "-c", SIGNALLED_LESSON, str(ROOT), "swallowed",
                            SEED.module],
                           env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True,
                           preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    assert run.stdout.readline() == "running\n"
    run.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    assert run.poll() is None  # still running
    run.send_signal(signal.SIGINT)  # the stand-in swallows it and prints PASS
    out, _ = run.communicate(timeout=60)
    assert "PASS" in out and run.returncode == 130


@pytest.mark.slow
def test_the_lesson_program_ends_quietly_when_its_reader_goes_away():
    """`python -m <lesson> | head -1`: head exits after one line, and the lesson's next
    print meets a closed pipe. It ends with 141, as a shell reports SIGPIPE, and says
    nothing: the reader who went away asked for no more. No signal is sent."""
    from conftest import clean_env

    read, write = os.pipe()
    run = subprocess.Popen([sys.executable, "-c", SIGNALLED_LESSON, str(ROOT), "closed",
                            SEED.module],
                           env=clean_env(), stdout=write, stderr=subprocess.PIPE)
    os.close(write)
    with os.fdopen(read, "rb") as reader:
        assert reader.readline() == b"running\n"
    _, err = run.communicate(timeout=60)  # its next line meets the closed pipe
    assert (run.returncode, err) == (141, b"")


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_bench_and_its_worker_ends_in_one_line_and_writes_nothing(tmp_path,
                                                                              signum):
    """As a terminal's Ctrl-C (or a CI cancel) does: the signal reaches the whole group."""
    from conftest import ROOT
    from test_bench import quick_sweep_program

    out = tmp_path / "sweep.json"
    bench = subprocess.Popen([sys.executable, "-c", quick_sweep_program(out)], cwd=ROOT,
                             env=clean_env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, start_new_session=True)
    try:
        workers = []
        deadline = time.monotonic() + 60
        while not workers and time.monotonic() < deadline:
            workers = [child for child in psutil.Process(bench.pid).children(recursive=True)
                       if "scripts.sweep.measure" in command_line(child)]
            time.sleep(0.1)
        assert workers, "no bench.py worker started within 60 s"
        time.sleep(1.0)  # the worker is importing JAX or measuring
        os.killpg(bench.pid, signum)
        _, stderr = bench.communicate(timeout=60)
    finally:
        if bench.poll() is None:
            os.killpg(bench.pid, signal.SIGKILL)
            bench.wait()
    last = stderr.decode().strip().splitlines()[-1]  # a line of its own, after the bar
    assert bench.returncode == EXIT[signum]
    assert last == (f"bench.py: interrupted by {signal.Signals(signum).name}; every earlier "
                    f"file is as it was")
    assert "Traceback" not in stderr.decode()
    assert_gone(workers)
    assert list(tmp_path.iterdir()) == []


# a lesson process that dies, and the files a SIGKILLed run leaves -------------------------

@pytest.mark.slow
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


def kernel_files(parent_pid, deadline_s=120):
    """(pid, the connection file) of the kernel `parent_pid` started, once it runs."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            children = psutil.Process(parent_pid).children()
        except psutil.NoSuchProcess:
            break
        for child in children:
            argv = command_line(child)
            if any("ipykernel_launcher" in word for word in argv):
                return child.pid, Path(argv[argv.index("-f") + 1])
        time.sleep(0.1)
    raise AssertionError("no kernel started")


@pytest.mark.slow
def test_the_lesson_kernel_s_files_live_in_the_run_s_scratch_folder(tmp_path):
    import signal
    import tempfile

    from conftest import clean_env, project_copy
    from scripts.plumbing.scratch import remove_abandoned

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

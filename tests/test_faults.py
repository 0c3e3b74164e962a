"""Every fault ends clean: one line on stderr, the status a shell expects, every earlier file as it
was, no staged `.tmp`, no process or scratch folder left: the signal matrix (tpu_job.py's steps:
test_tpu_job.py), SIGKILL, refused requests, faults in the machinery, a failed move,
lesson_code/program.py under each lesson (record.py's broken inputs: test_record.py)."""
import errno
import importlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Callable
from unittest.mock import Mock

import psutil
import pytest
from mkdocs.exceptions import PluginError

from conftest import (FIRST_LESSON, FIXTURES, LESSONS, SEED, each_lesson, lessons_with,
                      recording_name)
from harness import (RECORD, ROOT, Started, changed, clean_env, ended_pid, git, hanging_ranks,
                     leftover_temp_files, one_error, project, raised_in_one_line, refused, run,
                     snapshot, stdout_to, still_running, unchanged)
from test_bench import COMMITTED, QUICK, replayed  # QUICK: a small plan; replayed: no JAX
from test_exercises import fill
from scripts import bench, cli, host, record
from scripts.figures import FigureKind
from scripts.pages import hooks as site_hooks
from scripts.plumbing import interrupts
from scripts.plumbing.scratch import MARK, RUN_MARK, remove_abandoned, scratch_folder
from scripts.store import recordings, staging
from scripts.store.freshness import check
from scripts.store.lessons import load_lessons
from scripts.sweep.measure import WorkerFailed, measure_in_subprocess

# The seed lesson: long enough to interrupt while its cells run; its rank module hangs.
ID = SEED.id
SWEEP = importlib.import_module(SEED.sweep)
KEPT = "every earlier file is as it was"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return project(tmp_path_factory.mktemp("faults") / "repo", keep=[SEED.id])


@pytest.fixture
def tree(pristine, tmp_path):
    """A copy of the module's pristine project, for one test to break."""
    return shutil.copytree(pristine, tmp_path.resolve() / "repo", symlinks=True)


def stale_mechanism(tree):
    """A caption edit: the mechanism figure's four drawings are stale, nothing else."""
    data = tree / "lesson_code" / "figures" / f"{ID}-mechanism.json"
    data.write_text(data.read_text().replace('"title": "', '"title": "Edited: ', 1))


# --- SIGINT, SIGTERM, SIGHUP and nohup: the one handler, in-process -----------------------

@pytest.mark.parametrize("how, status", [("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129),
                                         ("swallowed SIGINT", 130), ("nohup SIGHUP", 0)])
def test_a_signal_ends_a_command_in_one_line_after_its_clean_up(how, status, capsys):
    """128 + the signal once every `finally` ran, through a second signal during the
    clean-up or a KeyboardInterrupt a library swallowed; under nohup it outlives the terminal."""
    name, nohup = how.split()[-1], how.startswith("nohup")
    if nohup:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    cleaned = []

    def body(*_):
        try:
            try:
                os.kill(os.getpid(), getattr(signal, name))
                time.sleep(0.05 if nohup else 10)  # the handler raises here
            except KeyboardInterrupt:
                if not how.startswith("swallowed"):
                    raise
        finally:  # an impatient second one, during the clean-up
            os.kill(os.getpid(), signal.SIGHUP if nohup else signal.SIGINT)
            time.sleep(0.05)
            cleaned.append(True)
        return 0

    assert cli.command(body)(["x"]) == status and cleaned == [True]
    assert capsys.readouterr().err == ("" if nohup else f"error: interrupted by {name}; {KEPT}\n")


# --- Ctrl-C in each phase of each command, in a subprocess -------------------------------

# record.py with one function paused: "record: paused in NAME" on stderr once the run is
# inside its NTH call, which goes on once GO exists (the test sends its signal first).
PAUSED_RECORD = """
import importlib, sys, time
from pathlib import Path
where, nth, go, *argv = sys.argv[1:]
module, name = where.split(":")
owner, calls = importlib.import_module(module), []
real = getattr(owner, name)

def paused(*args, **kwargs):
    calls.append(1)
    if len(calls) == int(nth):
        print(f"record: paused in {name}", file=sys.stderr, flush=True)
        while not Path(go).exists():
            time.sleep(0.05)
    return real(*args, **kwargs)

setattr(owner, name, paused)
from scripts import cli, record
sys.argv[1:] = argv
sys.exit(cli.run(record.main))
"""


@dataclass
class Phase:
    """A command to start in a copy, and how to know it reached the phase for the Ctrl-C."""
    argv: tuple
    reach: Callable
    line: str = KEPT  # what the one error line says is left
    written: bool = False  # the signal waited for the new files to be in place
    env: dict = field(default_factory=dict)
    group: bool = False  # to the whole group, as a terminal sends Ctrl-C
    go: Path = None  # touched once the signal is sent: a paused record.py goes on
    check: Callable = lambda command, lines: None


def record_phase(tree, *args, pause=None, **options):
    """record.py ARGS, paused at `pause` (module:function, which call) if given."""
    if pause is None:
        return Phase((RECORD, *args), **options)
    go = tree.parent / "go"
    return Phase(("-c", PAUSED_RECORD, *pause, go, *args), go=go,
                 reach=lambda command: command.wait_for_line("record: paused in"), **options)


def cells_running(command):
    command.wait_for_line("record: running")
    command.wait_for_children("ipykernel_launcher", 1)
    time.sleep(1.0)  # the kernel is up and the lesson's cells are running


def ranks_running(command):
    command.wait_for_children("lesson_code.hanging_rank", 4)
    time.sleep(1.0)  # the ranks are importing JAX or joining: well under way


def printed_pass(expected):
    def check(command, lines):
        assert any("printed PASS" in line for line in lines) == expected, lines
    return check


def hanging_exercise(tree):
    """The checker running a learner's endless loop that started a process outside its group."""
    mark = f"300.{time.monotonic_ns()}"  # `sleep MARK`: its own, found by its argument
    fill(tree, "make_it_yours", f"""
def make_it_yours(mesh, programs, problem):
    import subprocess
    subprocess.Popen(["sleep", "{mark}"], start_new_session=True)  # out of the group
    while True:
        pass
""")

    def sleeping():
        return [process for process in psutil.process_iter(["cmdline"])
                if mark in (process.info["cmdline"] or [])]

    def no_line_for_it(command, lines):
        assert command.stdout() == ""

    return Phase(("scripts/exercises.py", "--lesson", ID), line="no exercise is left running",
                 reach=lambda command: command.wait_until(sleeping), check=no_line_for_it)


def bench_phase(tree):
    program = (f"import sys; from scripts import bench, cli; sys.exit(cli.run(lambda: "
               f"bench.main(['--lesson', {ID!r}], plan={QUICK!r})))")
    return Phase(("-c", program), group=True, reach=lambda command: (
        command.wait_for_children("scripts.sweep.measure", 1), time.sleep(1.0)))


PHASES = {
    "record.py planning": lambda tree: record_phase(tree, pause=("scripts.plan:make_plan", 1)),
    "record.py kernel starting": lambda tree: record_phase(
        tree, "--all", reach=lambda command: command.wait_for_line("record: running"),
        check=printed_pass(False)),
    "record.py cells running": lambda tree: record_phase(tree, "--all", reach=cells_running,
                                                         check=printed_pass(False)),
    "record.py ranks running": lambda tree: record_phase(
        tree, "--processes", "4", "--all", reach=ranks_running, env=hanging_ranks(tree, SEED)),
    "record.py derive": lambda tree: record_phase(
        tree, "--all", pause=("scripts.record:stage_derived", 1), check=printed_pass(True)),
    "record.py commit": lambda tree: record_phase(
        tree, "--render-only", pause=("scripts.store.staging:keep_old", 2), written=True,
        line="after every new file was in place"),
    "bench.py measuring": bench_phase,
    "exercises.py running an exercise": hanging_exercise,
    "exercises.py as a scaffold hands over": lambda tree: Phase(
        ("-m", f"{SEED.module}_exercises", "--reference"), line="no exercise is left running",
        reach=lambda command: command.wait_until(lambda: "scripts/exercises.py" in " ".join(
            psutil.Process(command.pid).cmdline())))}


@pytest.mark.parametrize("phase", PHASES)
def test_ctrl_c_in_each_phase_of_each_command_is_one_line_and_leaves_nothing(phase, tree):
    """130 and one line; what it started, its scratch folders and staged files gone; every
    file as it was, or, in the commit, every new one in place."""
    if phase == "record.py commit":
        stale_mechanism(tree)  # something to draw
    started = PHASES[phase](tree)
    temp = tree.parent / "tmp"  # the command's TMPDIR, empty before and after
    temp.mkdir()
    before = snapshot(tree)
    with Started(*started.argv, cwd=tree, env={"TMPDIR": str(temp), **started.env}) as command:
        started.reach(command)
        children = command.descendants()
        command.signal(signal.SIGINT, group=started.group)
        if started.go:
            started.go.touch()
        status, lines = command.finish()
    assert status == 130, lines
    one_error(lines, "interrupted by SIGINT", started.line)
    assert still_running(children) == [] and list(temp.iterdir()) == []
    assert leftover_temp_files(tree) == []
    if started.written:
        assert check(load_lessons(tree), tree) == []
    else:
        assert changed(before, tree) == []
    started.check(command, lines)


@pytest.mark.parametrize("killed", ["the kernel", "the ranks"])
def test_after_a_sigkill_no_process_is_left_and_the_next_run_removes_its_files(tree, killed,
                                                                               monkeypatch):
    """No clean-up of its own runs, and nothing it started is left: its scratch folder (the kernel's
    connection file holds its key) the next run removes. What saves the ranks is dies_with
    (PR_SET_PDEATHSIG), as it does mpirun's children and the exercise child. The kernel would end
    without it: ipykernel's parent poller (JPY_PARENT_PID, set by jupyter_client) ends an orphaned
    kernel itself, so this case shows that no kernel is left, not that dies_with ends it."""
    ranks = killed == "the ranks"
    temp = tree.parent / "tmp"  # its own: a run in another test would remove what it left
    temp.mkdir()
    env = {"TMPDIR": str(temp), **(hanging_ranks(tree, SEED) if ranks else {})}
    with unchanged(tree), Started(RECORD, *(("--processes", "4") if ranks else ()), "--all",
                                  cwd=tree, env=env) as command:
        children = command.wait_for_children(
            "lesson_code.hanging_rank" if ranks else "ipykernel_launcher", 4 if ranks else 1)
        time.sleep(1.0)
        left, argv = sorted(temp.glob(f"*-{command.pid}-*")), children[0].cmdline()
        command.signal(signal.SIGKILL)
        assert command.finish()[0] == -signal.SIGKILL
    assert still_running(children) == []
    if not ranks:
        connection = Path(argv[argv.index("-f") + 1])
        assert connection.name == "kernel.json" and connection.parent in left
    assert left and all(folder.exists() for folder in left)
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    remove_abandoned("record")  # what the next record.py does first
    remove_abandoned("ranks")  # and the next multi-process run
    assert list(temp.glob(f"*-{command.pid}-*")) == []


# --- what the next run removes ------------------------------------------------------------

def sleeper(**env):
    """A process that sleeps until killed, in a session of its own, with `env` added."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                            env=dict(clean_env(), **env), start_new_session=True)


def test_the_next_run_removes_what_a_run_that_is_gone_left_and_nothing_else(tmp_path, monkeypatch):
    """Scratch folders and processes marked by a run that is gone (a SIGKILLed record.py,
    under mpirun too) go as the next run of any kind starts; a live run's, a stranger's stay."""
    gone, mine = ended_pid(), os.getpid()
    for name in (f"ranks-{gone}-abc123", f"record-{gone}-abc123", f"ranks-{mine}-def456"):
        (tmp_path / name).mkdir()
        (tmp_path / name / MARK).write_text("")
    (tmp_path / f"ranks-{gone}-notours").mkdir()  # a stranger's, by its name alone
    leftover = sleeper(**{RUN_MARK: f"ranks-{gone}-abc123"})
    unmarked, live = sleeper(), sleeper(**{RUN_MARK: f"ranks-{mine}-def456"})
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    try:  # Popen returns once each has exec'd: its environment is the one given
        with scratch_folder("record") as scratch:  # a plain record.py: it starts no ranks
            assert sorted(tmp_path.iterdir()) == sorted([
                scratch, tmp_path / f"ranks-{mine}-def456", tmp_path / f"ranks-{gone}-notours"])
        assert leftover.wait(timeout=15) == -signal.SIGKILL
        assert unmarked.poll() is None and live.poll() is None
    finally:
        for process in (leftover, unmarked, live):
            process.kill()
            process.wait()


def test_an_unreadable_lock_and_staged_files_a_sigkill_left_are_the_next_run_s_to_mend(
        tree, monkeypatch):
    """--check names the lock; --render-only (in-process, each drawing a stub) remakes every
    file it locked and removes the staged files, which git ignores."""
    lock = tree / "recordings" / "outputs.lock.json"
    lock.write_bytes(lock.read_bytes()[:300])
    unreadable = "recordings/outputs.lock.json: unreadable"
    assert any(unreadable in line for line in check(load_lessons(tree), tree))
    gone = ended_pid()  # the name says whose file it is; that run is gone
    strays = [tree / "recordings" / f".{ID}.cpu.json.{gone}.abc123.tmp",
              tree / "recordings" / "analysis" / f".{ID}.cpu.json.{gone}.q9r8.tmp",
              tree / "figures" / f".{ID}.svg.{gone}.old.tmp",
              tree / "docs" / "notebooks" / f".{ID}.ipynb.{gone}.x1y2.tmp"]
    # The project's .gitignore alone, in a repository of its own: what `git add` would skip.
    shutil.copy(ROOT / ".gitignore", tree / ".gitignore")
    git(tree, "init", "--quiet")
    names = [path.relative_to(tree).as_posix() for path in strays]
    assert git(tree, "check-ignore", "--no-index", *names).split() == names
    for stray in strays:
        stray.write_text("half")
    monkeypatch.setattr(record, "load_lessons", lambda: load_lessons(tree))
    monkeypatch.setattr(FigureKind, "render", lambda self, data, *_: "<svg>new</svg>\n")
    assert record.main(["--render-only"]) == 0 and leftover_temp_files(tree) == []
    assert not any(unreadable in line for line in check(load_lessons(tree), tree))


def test_a_signal_while_a_file_is_staged_leaves_no_empty_one(tmp_path, monkeypatch):
    """SIGTERM between mkstemp and the staged list once left an empty `.tmp` no run removed."""
    signal_arrives = Mock(side_effect=interrupts.Interrupted(signal.SIGTERM))
    monkeypatch.setattr(staging.os, "fchmod", signal_arrives)  # just after mkstemp
    with pytest.raises(interrupts.Interrupted):
        with staging.Staging() as staged:
            staged.add(tmp_path / "analysis" / "x.json", "{}")
    assert list((tmp_path / "analysis").iterdir()) == []


def test_a_signal_python_swallowed_stops_the_commit_before_its_first_move(tmp_path):
    """Python discards an exception raised in a garbage-collection callback, so the run goes
    on to its commit, which raises the signal again, moves nothing, and says so."""
    interrupts.stop_on_signals()  # conftest puts the handlers back
    target = tmp_path / "a.json"
    target.write_text("old")
    with pytest.raises(interrupts.Interrupted) as raised:
        with staging.Staging() as staged:
            staged.add(target, "new")
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
            except interrupts.Interrupted:
                pass  # what Python does to it inside a garbage-collection callback
            staged.commit()
    assert raised.value.exit_status == 130 and not raised.value.written
    assert raised.value.outcome == KEPT and target.read_text() == "old"
    assert list(tmp_path.glob(".*.tmp")) == []


# --- the lock file, and a reader that goes away ------------------------------------------

# The lock as a user meets it: imports first (as root, this Python lives where another
# user cannot read), then, for another user's, that user's ids.
AS_A_USER = """
import os, sys
from pathlib import Path
from scripts.plumbing.run_lock import RunLocked, exclusive_run
if sys.argv[2] == "another" and os.geteuid() == 0:
    os.setgid(65534)
    os.setuid(65534)  # nobody
try:
    with exclusive_run("python scripts/record.py", Path(sys.argv[1])):
        print("taken")
except RunLocked as error:
    print(error)
"""


@pytest.mark.parametrize("lock, words", [
    ("a directory", "it is a directory; remove it"),
    ("a link", "it is a symbolic link; `git rm .run.lock` (it is never committed)"),
    ("another user's", "Permission denied; run `python scripts/record.py` in a checkout this "
                       "user can write, or remove a .run.lock that another user left")])
def test_a_lock_file_that_cannot_be_opened_is_one_line_and_writes_nothing_outside(
        tmp_path, lock, words):
    root = tmp_path / "checkout"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.write_text("someone's file\n")  # what a lock through a link would truncate
    if lock == "a directory":
        (root / ".run.lock").mkdir()
    elif lock == "a link":
        (root / ".run.lock").symlink_to(outside)
    else:
        (root / ".run.lock").write_text("")
        (root / ".run.lock").chmod(0o444)  # for a run that is not root: its own, read-only
        root.chmod(0o555)
    try:
        done = run("-c", AS_A_USER, root, lock.split()[0], timeout=60)
    finally:
        root.chmod(0o755)
    assert (done.stderr, done.stdout) == ("", ".run.lock, the lock that keeps two runs of this "
                                              f"checkout apart, cannot be opened: {words}\n")
    assert outside.read_text() == "someone's file\n"


# Each command with its stdout a pipe whose reader is gone (`| head -1`): 141, as SIGPIPE
# would end it, silently. With stderr gone too (`2>&1 | head -1`) the run finishes as it would.
CLOSED_PIPE = {
    "record.py --check": ((RECORD, "--check"), 141),
    "record.py --render-only 2>&1": ((RECORD, "--render-only"), 0),
    "exercises.py": (("scripts/exercises.py", "--lesson", ID, "--exercise",
                      "communication_budget", "--reference"), 141),
    "tpu_job.py --dry-run": (("scripts/tpu_job.py", "--name", "t", "--zone", "us-east5-b",
                              "--dry-run"), 141)}


@pytest.mark.parametrize("command", CLOSED_PIPE)
def test_a_reader_that_goes_away_ends_each_command_quietly(tree, command):
    argv, status = CLOSED_PIPE[command]
    stale_mechanism(tree)  # lines to print, figures to draw
    both = command.endswith("2>&1")
    with stdout_to("closed") as write:
        done = run(*argv, cwd=tree, stdout=write, stderr=write if both else subprocess.PIPE)
    assert (done.returncode, done.stderr or "") == (status, "")
    if both:
        assert check(load_lessons(tree), tree) == []  # every figure drawn


# --- arguments refused before anything runs ----------------------------------------------

@pytest.mark.parametrize("args, message", [  # words of the line
    (["--processes", "1"], "--processes 1 cannot be recorded (a multi-process run needs 2"),
    (["--processes", "-4"], "--processes -4 cannot be recorded"),
    (["--processes", "3"], "--processes 3 cannot be recorded (the ranks check their shards"),
    (["--processes", "64"], "--processes 64 cannot be recorded (at most 16"),
    (["--processes", "8"], "--processes 8 needs about 2.3 GiB and this machine has 2.0 GiB free"),
    (["--processes", "4.0"], "argument --processes: invalid int value: '4.0'"),
    (["--processes"], "argument --processes: expected one argument"),
    (["--processes", "4", "--devices", "4"], "it takes no --platform, --devices"),
    (["--processes", "4", "--platform", "tpu"], "it takes no --platform, --devices"),
    (["--launcher", "mpirun"], "--launcher mpirun starts the processes of a multi-process run; "
                               "run `python scripts/record.py --processes 4 --launcher mpirun`"),
    (["--calls", "5"], "--calls sets the repeated calls of a multi-process run, 1 or more: run "
                       "`python scripts/record.py --processes 4 --calls 5`"),
    (["--processes", "4", "--calls", "0"], "--calls sets the repeated calls"),
    (["--devices", "0"], f"--devices 0: {ID} is recorded on {SEED.devices} devices"),
    (["--platform", "tpu", "--devices", "8"], "--devices 8:"),
    (["--devices", "8"], f"--devices 8: {ID} is recorded on {SEED.devices} devices, the count "
                         "its page describes (`devices` in lesson_code/lessons.toml); to try 8 "
                         f"without recording, run `python -m {SEED.module} --devices 8`")])
def test_a_request_that_cannot_work_is_refused_up_front(args, message, monkeypatch, capsys):
    """One line, exit 2, with the command to run instead, before any file is read."""
    monkeypatch.setattr(record, "available_memory", lambda: 2**31)  # 4 ranks fit, 8 do not
    line = refused(cli.command(lambda argv: record.refuse_what_cannot_work(
        record.parse_args(argv), LESSONS)), args, capsys)
    assert line.startswith("error: ") and message in line and "`python " in line, line


# --- a corrupt file, a sweep that cannot be fitted, a worker or lesson that breaks its --
# --- contract: one line naming the file and the fix, never a traceback, nothing written --

@pytest.mark.parametrize("text", ["{not json", ""])
def test_a_corrupt_schema_names_the_schema_file_to_the_reader_and_the_build(
        tmp_path, monkeypatch, text):
    schema = tmp_path / "schema.json"
    schema.write_text(text)
    monkeypatch.setattr(recordings, "SCHEMA_PATH", schema)
    error = raised_in_one_line(recordings.RecordingError, recordings.load_recording,
                               ROOT / recording_name(FIRST_LESSON))
    assert error.fix.startswith("git checkout -- ")
    for error in (error, raised_in_one_line(PluginError, site_hooks.on_config, {
            "docs_dir": "docs", "config_file_path": ROOT / "mkdocs.yml"})):
        assert "schema.json: the schema cannot be read" in str(error)


@pytest.fixture
def quiet_host(monkeypatch):
    """No busy-host warning among the lines counted here (tests/test_bench.py checks it)."""
    monkeypatch.setattr(host, "host_load", lambda: {"cores": 2, "loadAverage1m": 0.0})


def shrinking_rows(module, ranks, sizes, plan, block, root):
    """Times that fall as the messages grow, once per call and looped 4 times: no alpha-beta fit."""
    rows = [{"collective": c, "ranks": ranks, "block": block, "position": 0,
             "requestedBytes": s, "bytes": s, "samplesUs": [looped * 1000.0 / (k + 1)] * 3,
             "callsPerSample": 1, "warmupCalls": 1, "collectivesPerCall": looped,
             "minorFaults": [0] * 3, "wrong": 0}
            for c in SWEEP.COLLECTIVES for k, s in enumerate(sizes) for looped in (1, 4)]
    load = {"cores": 2, "loadAverage1m": 0.1}
    return {"backend": {"backend": "cpu", "deviceKind": "cpu", "jax": "0"}, "rows": rows,
            "programs": SWEEP.program_facts(ranks), "host": {"before": load, "after": load}}


def test_a_sweep_that_never_reaches_bandwidth_is_recorded_and_analysed_as_such(
        tmp_path, monkeypatch, quiet_host):
    """What was measured is kept whatever it says: a line that cannot be fitted is the
    analysis's finding (no beta), not a reason to throw the measurement away."""
    monkeypatch.setattr(bench, "measure_in_subprocess", shrinking_rows)
    monkeypatch.setattr(bench, "measure_memcpy_gbps", lambda: 1.0)
    out = tmp_path / "sweep.json"
    assert bench.main(["--out", str(out)], plan=QUICK) == 0
    analysis = json.loads((tmp_path / "sweep.analysis.json").read_text())
    assert analysis["fits"]["all_reduce"]["4"]["betaGBps"] is None
    assert (tmp_path / f"sweep.{SEED.id}-sweep.svg").exists()


def test_a_worker_that_prints_no_rows_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "silent_sweep.py").write_text(
        "import sys\n\ndef configure_devices(ranks):\n    sys.exit(0)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    error = raised_in_one_line(WorkerFailed, measure_in_subprocess, "silent_sweep", 4, [8], {})
    assert str(error) == ("the p=4 worker printed no rows (its last stdout line must be their "
                          "JSON); nothing was written")


@pytest.mark.parametrize("measure, cache, line", [
    (Mock(side_effect=WorkerFailed("the p=4 worker printed no rows; nothing was written")), None,
     "bench.py: the p=4 worker printed no rows; nothing was written"),
    (shrinking_rows, Mock(side_effect=PermissionError(13, "Permission denied",
                                                      "/sys/devices/system/cpu/cpu0/cache")),
     "bench.py: /sys/devices/system/cpu/cpu0/cache: Permission denied; nothing was written"),
], ids=["a failed worker", "an unreadable host file"])
def test_bench_reports_a_fault_in_one_line_and_writes_nothing(monkeypatch, capsys, tmp_path,
                                                              quiet_host, measure, cache, line):
    monkeypatch.setattr(bench, "measure_in_subprocess", measure)
    monkeypatch.setattr(bench, "measure_memcpy_gbps", lambda: 1.0)
    if cache:
        monkeypatch.setattr(bench, "l2_cache_bytes", cache)
    assert bench.main(["--out", str(tmp_path / "sweep.json")], plan=QUICK) == 1
    assert capsys.readouterr().err == f"{line}\n" and list(tmp_path.iterdir()) == []


def test_a_data_out_that_is_not_json_is_one_line(tmp_path):
    (tmp_path / "bad_data.py").write_text(
        "import sys\n\nopen(sys.argv[sys.argv.index('--data-out') + 1], 'w').write('{not json')\n")
    message = str(raised_in_one_line(record.RecordError, record.run_module, "bad_data",
                                     tmp_path, tmp_path))
    assert message.startswith("bad_data wrote bad_data.json (--data-out) that cannot be read as "
                              "JSON") and message.endswith("nothing was written")


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


# --- a move that fails ----------------------------------------------------------------

@pytest.mark.parametrize("command", ["record.py --render-only", "bench.py"])
def test_when_the_lock_cannot_move_every_file_moved_before_it_is_put_back(
        tree, command, monkeypatch, capsys):
    """The lock moves last; in-process, each drawing a stub (any failing move: test_staging.py)."""
    real_replace = os.replace

    def replace(source, destination):
        if Path(destination).name == "outputs.lock.json" and ".old." not in str(source):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real_replace(source, destination)

    figure = tree / "figures" / f"{ID}.svg"  # hand-edited: redrawn, and moved, first
    figure.write_text(figure.read_text().replace("</svg>", "<!-- hand edit -->\n</svg>"))
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(FigureKind, "render", lambda self, data, *_: "<svg>new</svg>\n")
    monkeypatch.setattr(bench, "measure_memcpy_gbps", lambda: COMMITTED["memcpyGBps"])
    monkeypatch.setattr(record, "load_lessons", lambda: load_lessons(tree))
    with unchanged(tree):
        if command == "bench.py":
            with pytest.raises(staging.StagingError, match="outputs.lock.json: cannot be moved"):
                bench.record_sweep(load_lessons(tree)[ID], None, [2, 4, 8], None,
                                   {key: COMMITTED["method"][key] for key in bench.TIMING_KEYS},
                                   measure=replayed, blocks=COMMITTED["method"]["blocks"])
        else:
            assert record.main(["--render-only"]) == 1
            one_error(capsys.readouterr().err, "error: ", "recordings/outputs.lock.json: cannot "
                      "be moved into place (Input/output error); every file is as it was")


# A test deadlocked inside native code, as a collective whose peer never comes leaves one:
# no bytecode runs again in its thread.
STUCK = """import ctypes

def test_stuck_in_native_code():
    mutex = ctypes.create_string_buffer(64)  # a zeroed pthread_mutex_t, of the default kind
    ctypes.CDLL(None).pthread_mutex_lock(mutex)
    ctypes.CDLL(None).pthread_mutex_lock(mutex)  # by its owner again: it never returns

def test_after_it():
    pass
"""


@pytest.mark.slow  # a pytest of its own, with xdist's workers
def test_a_test_stuck_in_native_code_ends_the_run_with_its_stack(tmp_path):
    """pyproject.toml's limits, shortened, under `make test`'s flags: every thread's stack
    (the stuck line among them), its worker ended, the run stopped, within a minute."""
    (tmp_path / "test_stuck.py").write_text(STUCK)
    done = run("-m", "pytest", "-c", ROOT / "pyproject.toml", "--rootdir", tmp_path,
               "-p", "no:cacheprovider", "-o", "timeout=4", "-o", "faulthandler_timeout=2",
               "-n", "2", "--dist", "loadfile", "--max-worker-restart", "0", "test_stuck.py",
               cwd=tmp_path, timeout=60)
    assert done.returncode == 1, done.stdout
    assert 'test_stuck.py", line 6 in test_stuck_in_native_code' in done.stderr
    assert "crashed while running 'test_stuck.py::test_stuck_in_native_code'" in done.stdout
    assert "1 failed in" in done.stdout and "passed" not in done.stdout  # the run stopped


# --- the lesson programs: lesson_code/program.py, and each lesson's on it -------------------

# A lesson that only prints, run on the shell as `python -m` runs a lesson's: its
# SHELL_LESSON says what happens while it runs. Its machine has 8 CPU devices, no TPU; its
# registry (beside it, as lesson_code/lessons.toml is beside each lesson) gives it 3.
SHELL_REGISTRY = ('[[lesson]]\nid = "shell-lesson"\nmodule = "shell_lesson"\ndevices = 3\n'
                  'device_counts = [1, 3, 9]\n')
SHELL_LESSON = """\"\"\"shell-lesson · The program shell's own lesson.\"\"\"
import os, signal, sys, time

def configure_devices(platform="cpu", count=4):
    if platform != "cpu":
        import jax
        jax.config.update("jax_platforms", platform)
        return jax.devices()
    return ["cpu"] * min(count, 8)

def run_lesson(devices):
    how, path = os.environ.get("SHELL_LESSON", ""), sys.argv[-1]
    if how.startswith("SIG"):
        try:
            os.kill(os.getpid(), getattr(signal, how.split()[0]))
            time.sleep(0.1 if "nohup" in how else 10)
        except KeyboardInterrupt:
            if "swallowed" not in how:
                raise
    if how == "lines":
        print("a line\\n" * 20000)
    if how == "relinked":  # the path changes while the lesson runs
        os.remove(path)
        os.symlink(os.path.join(os.path.dirname(path), "target.json"), path)
    if how == "taken":  # a link where the data would be staged
        os.symlink(os.path.join(os.path.dirname(path), "target.json"), f"{path}.{os.getpid()}.tmp")
    print("PASS: shell-lesson")
    return {"devices": len(devices)}
"""

# Each case: the arguments ({tmp}: a folder holding target.json, a link to it, a fifo, a
# dangling link and a regular file old.json), SHELL_LESSON, the status, the line it ends on.
# Beside, the programs of a lesson's registry `field` (a rank module, a simulation): each
# case its arguments and the words of its usage line.
SHELL, BESIDE = json.loads((FIXTURES / "program_shell_cases.json").read_text()).values()


def not_regular_files(folder):
    """old.json, and what is no regular file (no device node: a run as root must never risk
    replacing one), beside target.json, which one of them links to."""
    (folder / "target.json").write_text("keep me")
    (folder / "old.json").write_text("old")
    (folder / "link.json").symlink_to(folder / "target.json")
    os.mkfifo(folder / "fifo.json")
    (folder / "dangling.json").symlink_to(folder / "nowhere")
    return [folder / f"{name}.json" for name in ("link", "fifo", "dangling")]


@pytest.mark.parametrize("case", SHELL)
def test_the_program_shell_keeps_each_promise_in_one_line(case, tmp_path):
    """Every lesson's `python -m`: exit 0 on its registry's device count, its data written
    whole (a new file renamed in) and only onto a regular file, or one line and the status
    a shell expects; no other file touched, no `.tmp`."""
    argv, how, status, line = SHELL[case]
    (tmp_path / "shell_lesson.py").write_text(SHELL_LESSON)
    (tmp_path / "lessons.toml").write_text(SHELL_REGISTRY)
    folder = tmp_path / "out"
    folder.mkdir()
    others, old = not_regular_files(folder), (folder / "old.json").stat().st_ino
    with stdout_to("closed" if how == "lines" else how) as pipe:
        done = run("-c", "import sys; from lesson_code import program; sys.exit(program.main("
                   "'shell_lesson'))", *(arg.format(tmp=folder) for arg in argv), stdout=pipe,
                   stderr=subprocess.PIPE, env={"SHELL_LESSON": how, "PYTHONPATH": tmp_path},
                   preexec_fn=lambda: "nohup" in how and signal.signal(signal.SIGHUP,
                                                                       signal.SIG_IGN))
    assert done.returncode == status, done.stderr
    assert done.stderr == (line and one_error(done.stderr, line) + "\n")  # that line alone
    if status == 2:
        assert done.stdout == ""  # refused before the lesson ran
    new = {"--data-out a new file": "new.json", "--data-out a file": "old.json"}.get(case)
    if new:
        assert done.stdout.endswith("PASS: shell-lesson\n")
        assert json.loads((folder / new).read_text()) == {"devices": 3}
        assert (folder / "old.json").stat().st_ino != old or new != "old.json"  # renamed in
    elif how != "relinked":
        assert (folder / "old.json").read_text() == "old"
    assert (folder / "target.json").read_text() == "keep me"
    assert all(path.is_symlink() or stat.S_ISFIFO(path.lstat().st_mode) for path in others)
    assert [path.is_symlink() for path in folder.glob("*.tmp")] == [True] * (how == "taken")
    assert not (folder / "missing").exists()


@pytest.mark.parametrize("case", BESIDE)
def test_a_program_beside_the_lesson_refuses_a_flag_out_of_range_in_one_line(case):
    """A lesson's rank module and simulation, on the same shell: one usage line, exit 2."""
    field, argv, words = BESIDE[case]
    done = run("-m", getattr(lessons_with(field)[0], field), *argv, timeout=120)
    assert (done.returncode, done.stdout) == (2, "")
    one_error(done.stderr, words)


# What any program under lesson_code/ prints, to a reader gone (`| true`) or a full disk,
# a lot (met while printing) or a line (met at exit); started as `python -m` starts one.
PRINTS = "from lesson_code import program; program.guard_the_start(); print({text})"


@pytest.mark.parametrize("text", ["'a line'", "'a line\\n' * 20000"])
@pytest.mark.parametrize("stdout, status, words", [
    ("closed", 141, None), ("full", 1, "error: cannot write the output (No space left on "
                                       "device); free space on its disk")])
def test_any_program_here_ends_on_a_closed_or_full_stdout_in_one_line(text, stdout, status, words):
    with stdout_to(stdout) as pipe:
        done = run("-c", PRINTS.format(text=text), stdout=pipe, stderr=subprocess.PIPE)
    assert done.returncode == status
    assert done.stderr == (words and one_error(done.stderr, words) + "\n" or "")


def test_a_lesson_program_started_by_a_python_without_jax_is_one_line():
    """`python -S`: a Python without the site's packages, as the system's is."""
    for module in (FIRST_LESSON.module, lessons_with("simulation")[0].simulation):
        done = run("-S", "-m", module, timeout=60)
        assert (done.returncode, done.stdout) == (2, "")
        one_error(done.stderr, f"error: {sys.executable} has no ",
                  "which every lesson program needs; run it with the checkout's "
                  ".venv/bin/python")


@pytest.mark.slow
@each_lesson
def test_each_lesson_s_program_is_the_program_shell(lesson, tmp_path):
    """What the table above holds, the lesson's `python -m` gives: one start a promise. Its
    file runs once, imported as itself; it runs on one device and on one more than its own,
    or refuses them in one line where its registry entry says it runs on fewer counts."""
    not_regular_files(tmp_path)
    with Started("-m", lesson.module) as command:  # Ctrl-C once jaxlib is mapped in: importing
        maps = psutil.Process(command.pid).memory_maps
        command.wait_until(lambda: any("jaxlib" in mapped.path for mapped in maps()))
        command.signal(signal.SIGINT)
        ended = (*command.finish(), command.stdout())
    assert ended == (130, ["error: interrupted by SIGINT while starting; nothing ran"], "")
    for env, data_out, words in [({"JAX_NUM_CPU_DEVICES": "four"}, "old.json", "not a whole"),
                                 ({}, "link.json", "is a symbolic link")]:
        done = run("-m", lesson.module, "--data-out", tmp_path / data_out, env=env, timeout=180)
        assert (done.returncode, done.stdout) == (2, "")  # refused before the lesson ran
        one_error(done.stderr, words)
    done = run("-v", "-m", lesson.module, "--data-out", tmp_path / "old.json", timeout=180)
    assert done.returncode == 0 and done.stdout.endswith(f"PASS: {lesson.id}\n")
    assert len(re.findall(rf"^# code object from .*/{lesson.path().stem}(\.py|\.cpython-\d+\.pyc)$",
                          done.stderr, re.MULTILINE)) == 1  # not again as __main__
    data = json.loads((tmp_path / "old.json").read_text())  # written whole: run_lesson's
    assert data["environment"]["deviceCount"] == lesson.devices
    assert (tmp_path / "target.json").read_text() == "keep me"
    assert (tmp_path / "link.json").is_symlink() and list(tmp_path.glob("*.tmp")) == []
    for count in (1, lesson.devices + 1):  # a one-device collective is one JAX drops
        done = run("-m", lesson.module, "--devices", count, timeout=180)
        if not lesson.device_counts or count in lesson.device_counts:
            assert done.returncode == 0 and done.stdout.endswith(f"PASS: {lesson.id}\n"), \
                done.stderr[-2000:]
        else:
            assert (done.returncode, done.stdout) == (2, "")
            one_error(done.stderr, f"--devices {count}: this lesson runs on ")

"""The rank module under Open MPI, run for real on loopback, as clusters start JAX: its
recording checked against the `--processes 4` one, its ranks killed on every exit path."""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from conftest import SEED, recording_name
from harness import (RECORD, Started, hanging_ranks, one_error, passed, project, raised_in_one_line,
                     run, scratch_of, skip_or_fail, still_running, unchanged)
from scripts.plumbing.scratch import RUN_MARK, scratch_folder
from scripts.runners import mpirun
from scripts.runners.processes import ProcessRunError
from scripts.store.recordings import load_recording

LESSON_ID = SEED.id
RANK_MODULE = SEED.rank_module
PROCESS_RECORDING = recording_name(SEED, "cpu-processes")
SCRATCH = f"ranks-{os.getpid()}-*"  # this process's runs' scratch folders (plumbing.scratch)


@pytest.fixture
def needs_mpirun():
    if shutil.which("mpirun") is None:
        skip_or_fail("mpirun is missing: `make test` installs Debian's openmpi-bin (as root)",
                     what="the mpirun tests")


def marked_ranks_left(launcher_pid):
    """Running processes still marked by an mpirun run `launcher_pid` started."""
    return [process.pid for process in psutil.process_iter(["environ"])
            if (process.info["environ"] or {}).get(RUN_MARK, "").startswith(
                f"ranks-{launcher_pid}-")]


# --- Open MPI, run for real ----------------------------------------------------------------

def test_mpirun_records_the_process_run_as_the_processes_launcher_did(needs_mpirun, tmp_path):
    """Its recording passes the schema and --check, with the committed bytes per rank."""
    root = project(tmp_path / "repo")
    before = json.loads((root / PROCESS_RECORDING).read_text())
    done = passed(run(RECORD, "--processes", "4", "--launcher", "mpirun", "--calls", "5",
                      "--all", cwd=root, timeout=600))
    assert f"running {LESSON_ID} as 4 JAX processes under mpirun" in done.stderr
    recording = load_recording(root / PROCESS_RECORDING)  # the schema, as --check reads it
    assert recording["command"] == ["python", "scripts/record.py", "--processes", "4",
                                    "--launcher", "mpirun", "--calls", "5"]
    assert recording["data"]["launch"] == {"launcher": "mpirun", "processes": 4, "hosts": 1,
                                           "coordinatorHost": "127.0.0.1"}
    assert recording["environment"]["processCount"] == 4
    # The host, read once before the ranks started: what the page's busy-host sentence reads.
    assert 0 <= recording["environment"]["busyCoresAtStart"] <= recording["environment"]["cpuCount"]
    assert recording["environment"]["loadAverage1m"] >= 0
    assert recording["stdout"].endswith(f"PASS: {LESSON_ID}\n")
    # The bytes may differ by what a call sends beyond the model at 32 bytes: gloo's headers
    # and notifications, the same at any size.
    allowed = {row["collective"]: max(row["excessBytesPerRank"])
               for row in before["data"]["traffic"] if row["gradientBytes"] == 32}
    for key in ("traffic", "ringTraffic"):
        assert len(recording["data"][key]) == len(before["data"][key])
        for old, new in zip(before["data"][key], recording["data"][key]):
            assert (old["collective"], old["gradientBytes"]) == (new["collective"],
                                                                 new["gradientBytes"])
            for was, now in zip(old["observedBytesPerRank"], new["observedBytesPerRank"]):
                assert abs(now - was) <= allowed[old["collective"]], (key, old, was, now)
    assert all(row["observedBytesPerRank"] == [0.0] * 4
               for row in recording["data"]["trafficBaseline"])
    check = run(RECORD, "--check", cwd=root)
    # Other files may be stale on a branch not re-recorded; not mpirun's or its figure.
    assert [line for line in check.stdout.splitlines()
            if "cpu-processes" in line or "traffic" in line] == []


def test_a_rank_that_dies_under_mpirun_ends_the_run_in_one_line(needs_mpirun, monkeypatch):
    monkeypatch.setenv("FAILING_RANK", "exit")  # tests/fixtures/failing_rank.py
    scratch_before = set(Path(tempfile.gettempdir()).glob(SCRATCH))
    error = raised_in_one_line(ProcessRunError, mpirun.run_mpirun, "tests.fixtures.failing_rank",
                               ranks=4, timeout_s=120, calls=1)
    assert str(error).startswith("rank 2 exited with status 3 under mpirun; all 4 ranks "
                                 "killed"), error
    assert "failing_rank fixture" in error.stderr_tail and marked_ranks_left(os.getpid()) == []
    assert set(Path(tempfile.gettempdir()).glob(SCRATCH)) - scratch_before == set()


def test_a_missing_mpirun_or_a_port_taken_is_refused_before_mpirun_starts(monkeypatch):
    monkeypatch.setattr(subprocess, "Popen", None)  # nothing may be started
    with monkeypatch.context() as patch, pytest.raises(
            mpirun.MissingLauncher, match=r"^mpirun is not installed; run `apt-get install -y "
                                          r"openmpi-bin`"):
        patch.setattr(shutil, "which", lambda name: None)
        mpirun.run_mpirun(RANK_MODULE, ranks=4)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        monkeypatch.setenv("JAX_COORDINATOR_PORT", str(port))
        with pytest.raises(ProcessRunError, match=rf"the coordinator's port {port} on "
                           r"127\.0\.0\.1 is taken \(JAX_COORDINATOR_PORT\); free it"):
            mpirun.run_mpirun(RANK_MODULE, ranks=4)
        for value in ("eighty", "²", "８０", "99999"):  # "²" and "８０" pass str.isdigit()
            monkeypatch.setenv("JAX_COORDINATOR_PORT", value)
            with pytest.raises(ProcessRunError, match=rf"^JAX_COORDINATOR_PORT={value!r} is "
                               r"not a TCP port; set it to one from 1 to 65535"):
                mpirun.run_mpirun(RANK_MODULE, ranks=4)


@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL to mpirun", "SIGKILL to record.py"])
def test_a_ctrl_c_or_a_kill_leaves_no_rank_and_changes_nothing(needs_mpirun, tmp_path, how):
    """Ctrl-C or a killed mpirun: one line, the ranks killed with it. A SIGKILLed record.py
    can leave ranks waiting in a collective: the next run kills them, as it starts."""
    tree, hung = project(tmp_path / "repo"), tmp_path / "hung"
    env = hanging_ranks(tree, SEED)  # the ranks wait in a collective: only a signal ends it
    if how == "SIGKILL to record.py":  # the next run (this process) cleans up in its TMPDIR
        env.update(FAILING_RANK="hang-early", FAILING_RANK_HUNG=str(hung))
    else:  # a TMPDIR of its own, to list after; short, for Open MPI's sockets
        tmpdir = Path(tempfile.mkdtemp(prefix="mpi-", dir="/tmp"))
        env["TMPDIR"] = str(tmpdir)
    with unchanged(tree), Started(RECORD, "--processes", "4", "--launcher", "mpirun", "--all",
                                  cwd=tree, env=env) as command:
        # mpirun's own command line names the module too: it and the four ranks.
        ranks = command.wait_for_children("lesson_code.hanging_rank", 5)
        if how == "SIGKILL to record.py":
            command.wait_until(hung.exists)  # rank 2 reached its first collective
            time.sleep(0.5)  # its peers, which joined with it, are in that collective too
            command.signal(signal.SIGKILL)
            command.process.wait()
            with scratch_folder("record"):  # what the next run does first
                pass
        else:
            time.sleep(1.0)  # importing JAX or joining: well under way
            if how == "SIGINT":
                command.signal(signal.SIGINT)
            else:
                [launcher] = [child for child in ranks if child.name() == "mpirun"]
                launcher.kill()
            status, lines = command.finish()
    assert still_running(ranks) == []
    if how == "SIGINT":
        assert status == 130, lines
        one_error(lines, "interrupted by SIGINT")
        # Its scratch folders and Open MPI's session folder (ompi.<host>.<uid>) went too.
        assert list(tmpdir.iterdir()) == []
    elif how == "SIGKILL to mpirun":
        assert status == 1, lines
        one_error(lines, "mpirun was killed by SIGKILL; its 4 ranks were killed",
                  "nothing was written")
    if how != "SIGKILL to record.py":
        shutil.rmtree(tmpdir, ignore_errors=True)
    assert marked_ranks_left(command.pid) == [] and scratch_of(command.pid) == []

"""The process a lesson's cells run in (scripts/runners/cells.py and cell_host.py) and the
reading of other work that overlaps a run's start (scripts/host.py): what each does, on
small inputs, with no JAX."""
import os
import signal
import subprocess
import sys

import pytest

from scripts import host
from scripts.runners.cells import CellRaised, ExecutionFailed, execute


def outputs_of(results):
    return [[(o["output_type"], o.get("name"), o.get("text") or o.get("data"))
             for o in result["outputs"]] for result in results]


def test_cells_share_one_main_namespace_and_keep_what_they_print_in_order(tmp_path):
    results, _ = execute([
        "import sys\nx = 41\nprint('one')\nprint('warn', file=sys.stderr)\nprint('two')",
        "def f():\n    return x + 1\nprint(__name__, f.__module__)",
        "f()",  # a cell ending in an expression shows its value, as in a notebook
        "y = f()",  # ...and one ending in an assignment shows nothing
    ], tmp_path)
    assert outputs_of(results) == [
        [("stream", "stdout", "one\n"), ("stream", "stderr", "warn\n"),
         ("stream", "stdout", "two\n")],
        [("stream", "stdout", "__main__ __main__\n")],
        [("execute_result", None, {"text/plain": "42"})],
        [],
    ]
    assert [result["cell"] for result in results] == [1, 2, 3, 4]


def test_a_stream_kept_from_an_earlier_cell_writes_into_the_cell_running_now(tmp_path):
    results, _ = execute(["import sys\nout = sys.stdout", "out.write('later\\n')\n0"],
                         tmp_path)
    assert outputs_of(results)[1][0] == ("stream", "stdout", "later\n")


def test_the_working_folder_is_importable_and_this_repository_is_not(tmp_path):
    (tmp_path / "beside.py").write_text("NAME = 'beside'\n")
    results, _ = execute([
        "import beside, importlib.util\nprint(beside.NAME, "
        "importlib.util.find_spec('scripts') is None)"], tmp_path)
    assert outputs_of(results) == [[("stream", "stdout", "beside True\n")]]


def test_a_cell_that_raises_stops_the_run_and_says_which_line(tmp_path):
    with pytest.raises(CellRaised) as raised:
        execute(["print('before')", "a = 1\nraise ValueError('no\\nluck')", "print('never')"],
                tmp_path)
    assert str(raised.value) == "ValueError: no luck"  # one line
    assert raised.value.index == 1 and raised.value.error["line"] == 2
    assert any("ValueError" in line for line in raised.value.error["traceback"])
    assert not any("cell_host.py" in line for line in raised.value.error["traceback"])


def test_sys_exit_in_a_cell_is_that_cell_s_error_as_in_a_notebook(tmp_path):
    with pytest.raises(CellRaised, match="SystemExit: 4"):
        execute(["import sys\nsys.exit(4)"], tmp_path)


@pytest.mark.parametrize("cell, how", [
    ("import os\nos._exit(7)", "exited with status 7"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "was killed by SIGKILL"),
])
def test_a_process_that_dies_in_a_cell_is_one_line_naming_the_cell(tmp_path, cell, how):
    with pytest.raises(ExecutionFailed) as failed:
        execute(["print('fine')", f"import sys\nprint('dying', file=sys.__stderr__)\n{cell}"],
                tmp_path)
    message = str(failed.value)
    assert f"the lesson's Python process {how} while cell 2 of 2 ran" in message
    assert message.endswith("its stderr: dying") and "\n" not in message


def test_a_run_past_its_time_limit_is_stopped_with_all_it_started(tmp_path):
    # 4 s: time for the process to start and write the sleeper's pid on a busy machine.
    with pytest.raises(ExecutionFailed, match="ran past its 4 s time limit") as failed:
        execute(["import subprocess\nsleeper = subprocess.Popen(['sleep', '60'])\n"
                 "open('sleeper.pid', 'w').write(str(sleeper.pid))\n"
                 "import time\ntime.sleep(60)"], tmp_path, timeout_s=4)
    assert not failed.value.setup
    # The sleeper was in the process's own session: killed with it, and not running
    # once execute() has raised (a zombie waiting for init to reap it has finished).
    stat = f"/proc/{(tmp_path / 'sleeper.pid').read_text()}/stat"
    assert not os.path.exists(stat) or \
        open(stat).read().rsplit(")", 1)[1].split()[0] in ("Z", "X")


def test_on_start_is_told_the_pid_and_meanwhile_runs_while_the_cells_do(tmp_path):
    seen = []
    results, made = execute(["import os\nprint(os.getpid())"], tmp_path,
                            on_start=seen.append, meanwhile=lambda: "made")
    assert made == "made"
    assert outputs_of(results) == [[("stream", "stdout", f"{seen[0]}\n")]]


# --- other work, read while our own run starts ------------------------------------------

# A spinner that uses a fixed amount of CPU time, however busy the machine, and exits.
SPIN = "import time\nwhile time.process_time() < 0.4: pass"
# Long enough for the spinner to start, spin and exit inside the window on a busy host.
SPIN_WINDOW_S = 3.0


def test_a_process_named_to_the_window_is_taken_off_what_reads_as_other_work():
    """Two windows over the same seconds, one told of a process of ours that spins: they
    differ by exactly that process's CPU time (bookkeeping, not this machine's speed:
    whatever else runs is in both). The spinner ends inside the windows and is read
    before it is reaped, so what it used is what both windows saw of it, even where the
    test itself is slow to read it."""
    ours, everyone = host.OtherWork(SPIN_WINDOW_S), host.OtherWork(SPIN_WINDOW_S)
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])
    ours.include(spinner.pid)
    try:
        taken_off, seen = ours.busy_cores, everyone.busy_cores  # the window has closed
        # Exited but not reaped (a zombie keeps its CPU times in /proc; reaping would
        # move them into our own children's times and out of `spun`).
        with open(f"/proc/{spinner.pid}/stat", encoding="utf-8") as stat:
            ended_inside = stat.read().rsplit(")", 1)[1].split()[0] == "Z"
        spun = host.cpu_seconds([spinner.pid]) - host.cpu_seconds()
    finally:
        spinner.wait()
    assert ended_inside, f"the spinner outlived a {SPIN_WINDOW_S} s window"
    assert taken_off is not None and seen is not None and spun > 0.3
    # What the spinner used is what separates the two readings (to the ticks' 10 ms and
    # the two decimals each reading keeps).
    assert seen - taken_off == pytest.approx(spun / SPIN_WINDOW_S, abs=0.03)


def test_the_plain_reading_waits_its_window_and_says_none_without_proc_stat(monkeypatch):
    assert host.busy_cores(0.05) is not None
    monkeypatch.setattr(host, "idle_and_total", lambda: (_ for _ in ()).throw(OSError()))
    assert host.busy_cores(0.05) is None
    assert host.OtherWork(0.05).busy_cores is None


# --- a signal whose exception Python discarded ------------------------------------------

@pytest.fixture
def a_lost_signal(monkeypatch):
    """As after interrupts._raise fired in a garbage-collection callback, where Python
    discards the exception: the signal is in `received`, its SIG_IGN in place, and
    nothing was raised (conftest's fixture puts the handlers back afterwards)."""
    from scripts import interrupts

    interrupts.received.append(signal.SIGTERM)
    for signum in interrupts.SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def test_waiting_for_the_lesson_s_process_notices_a_lost_signal(a_lost_signal):
    from scripts.interrupts import Interrupted
    from scripts.runners.cells import wait

    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        with pytest.raises(Interrupted, match="SIGTERM"):
            wait(sleeper, timeout_s=30)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_waiting_for_the_ranks_notices_a_lost_signal(a_lost_signal, tmp_path):
    from scripts.interrupts import Interrupted
    from scripts.children import kill_all
    from scripts.runners.processes import wait_for

    sleepers = [subprocess.Popen(["sleep", "60"], start_new_session=True) for _ in range(2)]
    try:
        with pytest.raises(Interrupted, match="SIGTERM"):
            wait_for(sleepers, timeout_s=30, scratch=tmp_path)
    finally:
        kill_all(sleepers)

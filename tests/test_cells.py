"""The Jupyter kernel a lesson's cells run in (scripts/runners/cells.py, through nbclient):
what it guarantees, on small inputs, with no JAX."""
import signal
import sys
from pathlib import Path

import nbformat
import psutil
import pytest

from harness import finished
from scripts.runners.cells import CellRaised, ExecutionFailed, execute


def notebook_of(*sources):
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)
                                           for source in sources])


def outputs_of(notebook):
    return [[(o["output_type"], o.get("name"), o.get("text") or o.get("data"))
             for o in cell.outputs] for cell in notebook.cells]


@pytest.mark.slow
def test_the_cells_run_in_one_kernel_and_keep_what_each_printed(tmp_path):
    executed = execute(notebook_of(
        "import sys\nx = 41\nprint('one')\nprint('warn', file=sys.stderr)\nprint('two')",
        "def f():\n    return x + 1\nprint(__name__, f.__module__)",
        "f()",  # a cell ending in an expression shows its value, as in a notebook
        "y = f()",  # ...and one ending in an assignment shows nothing
    ), tmp_path)
    assert outputs_of(executed) == [
        [("stream", "stdout", "one\ntwo\n"), ("stream", "stderr", "warn\n")],
        [("stream", "stdout", "__main__ __main__\n")],
        [("execute_result", None, {"text/plain": "42"})],
        [],
    ]
    assert [cell.execution_count for cell in executed.cells] == [1, 2, 3, 4]
    assert executed.metadata["language_info"]["name"] == "python"


@pytest.mark.slow
def test_the_working_folder_is_importable(tmp_path):
    """What a notebook beside its own files imports, as in a reader's Jupyter. (That the
    companion imports nothing of this repository, which the editable install makes
    importable anywhere, is read from its cells: tests/test_notebook.py.)"""
    (tmp_path / "beside.py").write_text("NAME = 'beside'\n")
    executed = execute(notebook_of("import beside\nprint(beside.NAME)"), tmp_path)
    assert outputs_of(executed) == [[("stream", "stdout", "beside\n")]]


@pytest.mark.slow
def test_the_kernel_is_this_python_s_and_runs_no_startup_file_of_the_user(tmp_path,
                                                                          monkeypatch):
    startup = tmp_path / "startup.py"
    startup.write_text("print('from the user's startup file')\nSTARTED = True\n")
    monkeypatch.setenv("PYTHONSTARTUP", str(startup))
    executed = execute(notebook_of("import sys\nprint(sys.executable, 'STARTED' in dir())"),
                       tmp_path)
    assert outputs_of(executed) == [[("stream", "stdout", f"{sys.executable} False\n")]]


@pytest.mark.slow
def test_a_cell_that_raises_stops_the_run_and_says_which_line(tmp_path):
    notebook = notebook_of("print('before')", "a = 1\nraise ValueError('no\\nluck')",
                           "print('never')")
    with pytest.raises(CellRaised) as raised:
        execute(notebook, tmp_path)
    assert str(raised.value) == "ValueError: no luck"  # one line, no terminal colours
    assert (raised.value.index, raised.value.line, raised.value.setup) == (1, 2, False)
    assert notebook.cells[2].execution_count is None  # never ran


@pytest.mark.slow
def test_sys_exit_in_a_cell_is_that_cell_s_error_as_in_a_notebook(tmp_path):
    with pytest.raises(CellRaised, match="SystemExit: 4"):
        execute(notebook_of("import sys\nsys.exit(4)"), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("cell, how", [
    ("import os\nos._exit(7)", "exited with status 7"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "was killed by SIGKILL"),
])
def test_a_kernel_that_dies_in_a_cell_is_one_line_naming_the_cell(tmp_path, cell, how):
    with pytest.raises(ExecutionFailed) as failed:
        execute(notebook_of("print('fine')", f"import sys\nprint('dying', file=sys.__stderr__)\n"
                                             f"{cell}"), tmp_path, timeout_s=120)
    message = str(failed.value)
    # nbclient noticed the dead kernel itself (DeadKernelError): had it waited for the
    # cell's time limit instead, the line would say "ran past its 120 s time limit".
    assert f"the lesson's kernel {how} while cell 2 of 2 ran" in message
    assert message.endswith("its stderr: dying") and "\n" not in message


@pytest.mark.slow
def test_a_kernel_on_a_machine_without_tcp_sockets_is_named_with_its_cause(tmp_path):
    """What libzmq printed as it aborted the kernel on a TPU v5e sandbox that opens no TCP
    socket (tests/fixtures/tpu_v5e_one_chip/): the line says why, and what to do."""
    with pytest.raises(ExecutionFailed) as failed:
        execute(notebook_of("import os, sys\nprint('Address family not supported by protocol "
                            "(src/ip_resolver.cpp:542)', file=sys.__stderr__, flush=True)\n"
                            "os.abort()"), tmp_path, timeout_s=120)
    message = str(failed.value)
    assert "was killed by SIGABRT while cell 1 of 1 ran" in message and "\n" not in message
    assert "opens no TCP socket" in message and "python -m" in message


@pytest.mark.slow
def test_a_cell_past_its_time_limit_is_stopped_with_all_the_kernel_started(tmp_path):
    # 4 s: time for the kernel to start and write the sleeper's pid on a busy machine.
    with pytest.raises(ExecutionFailed, match="cell 1 of 1 ran past its 4 s time limit") \
            as failed:
        execute(notebook_of("import subprocess\nsleeper = subprocess.Popen(['sleep', '60'])\n"
                            "open('sleeper.pid', 'w').write(str(sleeper.pid))\n"
                            "import time\ntime.sleep(60)"), tmp_path, timeout_s=4)
    assert not failed.value.setup
    assert finished(int((tmp_path / "sleeper.pid").read_text()))


@pytest.mark.slow
def test_the_kernel_s_files_live_in_the_working_folder_and_go_with_the_kernel(tmp_path):
    executed = execute(notebook_of("import os\nfrom ipykernel.connect import "
                                   "get_connection_file\n"
                                   "print(os.getpid(), get_connection_file())"), tmp_path)
    [[(_, _, printed)]] = outputs_of(executed)
    pid, connection = printed.split()
    assert Path(connection).parent == tmp_path  # not the user's Jupyter runtime folder
    assert finished(int(pid))
    # The connection file (it holds the kernel's key) and the sockets are gone; what the
    # kernel printed below Python stays, for the one line a dead kernel gets.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ipython", "kernel.err"]


@pytest.mark.slow
def test_a_kernel_printing_on_its_stderr_cannot_block(tmp_path):
    """XLA logs from C++ on file descriptor 2: no pipe there for anyone to fill."""
    executed = execute(notebook_of("import os\nfor _ in range(64):\n"
                                   "    os.write(2, b'x' * 2**16)\nprint('done')"),
                       tmp_path, timeout_s=120)
    assert outputs_of(executed) == [[("stream", "stdout", "done\n")]]
    assert (tmp_path / "kernel.err").stat().st_size >= 64 * 2**16


# --- a signal whose exception Python discarded ------------------------------------------
# (Ctrl-C while the cells run, end to end: the signal matrix in tests/test_faults.py.)

def kernels_running():
    """This process's kernels that still run (a zombie has finished)."""
    return [child for child in psutil.Process().children(recursive=True)
            if child.status() != psutil.STATUS_ZOMBIE
            and "ipykernel_launcher" in " ".join(child.cmdline())]


@pytest.mark.slow
def test_a_signal_lost_in_a_garbage_collection_callback_still_stops_the_run(tmp_path):
    """As after interrupts._raise fired where Python discards the exception: the signal is
    in `received`, its SIG_IGN in place, nothing was raised. Waiting for the kernel notices
    (conftest's fixture puts the handlers back afterwards)."""
    from scripts.plumbing import interrupts

    interrupts.received.append(signal.SIGTERM)
    for signum in interrupts.SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    with pytest.raises(interrupts.Interrupted, match="SIGTERM"):
        execute(notebook_of("import time\ntime.sleep(60)"), tmp_path)
    assert kernels_running() == []  # the one it was starting, too

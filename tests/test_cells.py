"""The Jupyter kernel a lesson's cells run in, on small inputs, with no JAX. (Ctrl-C while
the cells run: the signal matrix in tests/test_faults.py.)"""
import re
import signal
import sys
from pathlib import Path

import nbformat
import psutil
import pytest

from conftest import SEED, module_file
from harness import finished, raised_in_one_line
from scripts.plumbing import interrupts
from scripts.runners import cells
from scripts.runners.cells import CellRaised, ExecutionFailed, execute

pytestmark = pytest.mark.slow  # each test starts a kernel


def notebook_of(*sources):
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in sources])


def test_the_cells_run_in_one_kernel_and_keep_what_each_printed(tmp_path, monkeypatch):
    """One kernel, this Python's, in the working folder, without the user's startup file;
    a lot written on fd 2 (as XLA does) cannot block it; its files go with it."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "beside.py").write_text("NAME = 'beside'\n")
    startup = tmp_path / "startup.py"
    startup.write_text("print('from the user's startup file')\nSTARTED = True\n")
    monkeypatch.setenv("PYTHONSTARTUP", str(startup))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # no __pycache__ beside beside.py
    executed = execute(notebook_of(
        "import sys\nx = 41\nprint('one')\nprint('warn', file=sys.stderr)\nprint('two')",
        "def f():\n    return x + 1\nprint(__name__, f.__module__)",
        "f()",  # a cell ending in an expression shows its value, as in a notebook
        "y = f()",  # ...and one ending in an assignment shows nothing
        "import beside\nprint(beside.NAME, sys.executable, 'STARTED' in dir())",
        "import os\nfor _ in range(64):\n    os.write(2, b'x' * 2**16)\nfrom ipykernel.connect "
        "import get_connection_file\nprint(os.getpid(), get_connection_file())",
    ), work, timeout_s=120)
    *outputs, [(_, _, printed)] = [
        [(out["output_type"], out.get("name"), out.get("text") or out.get("data"))
         for out in cell.outputs] for cell in executed.cells]
    assert outputs == [
        [("stream", "stdout", "one\ntwo\n"), ("stream", "stderr", "warn\n")],
        [("stream", "stdout", "__main__ __main__\n")],
        [("execute_result", None, {"text/plain": "42"})],
        [],
        [("stream", "stdout", f"beside {sys.executable} False\n")]]
    assert [cell.execution_count for cell in executed.cells] == [1, 2, 3, 4, 5, 6]
    assert executed.metadata["language_info"]["name"] == "python"
    pid, connection = printed.split()
    assert Path(connection).parent == work  # not the user's Jupyter runtime folder
    assert finished(int(pid))
    # The connection file (the kernel's key) is gone; kernel.err stays for a dead kernel.
    assert sorted(p.name for p in work.iterdir()) == ["beside.py", "ipython", "kernel.err"]
    assert (work / "kernel.err").stat().st_size >= 64 * 2**16


@pytest.mark.parametrize("cell, line, said", [
    ("a = 1\nraise ValueError('no\\nluck')", 2, "ValueError: no luck"),  # no colours either
    ("import sys\nsys.exit(4)", None, "SystemExit: 4")])  # that cell's error, as in a notebook
def test_a_cell_that_raises_stops_the_run_and_says_which_line(tmp_path, cell, line, said):
    notebook = notebook_of("print('before')", cell, "print('never')")
    raised = raised_in_one_line(CellRaised, execute, notebook, tmp_path)
    assert (str(raised), raised.index, raised.line, raised.setup) == (said, 1, line, False)
    assert notebook.cells[2].execution_count is None


@pytest.mark.parametrize("cell, how, tail", [
    ("os._exit(7)", "exited with status 7", "its stderr: dying$"),
    ("os.kill(os.getpid(), signal.SIGKILL)", "was killed by SIGKILL", "its stderr: dying$"),
    # libzmq's abort on a TPU v5e sandbox that opens no TCP socket: the line says why.
    ("print('Address family not supported by protocol (src/ip_resolver.cpp:542)', "
     "file=sys.__stderr__, flush=True)\nos.abort()", "was killed by SIGABRT",
     "opens no TCP socket.*python -m")])
def test_a_kernel_that_dies_in_a_cell_is_one_line_naming_the_cell(tmp_path, cell, how, tail):
    message = str(raised_in_one_line(ExecutionFailed, execute, notebook_of(
        "print('fine')", f"import os, signal, sys\nprint('dying', file=sys.__stderr__)\n{cell}"),
        tmp_path, timeout_s=120))
    # Noticed at once, not after the cell's 120 s time limit.
    assert f"the lesson's kernel {how} while cell 2 of 2 ran" in message
    assert re.search(tail, message), message


def test_a_cell_past_its_time_limit_is_stopped_with_all_the_kernel_started(tmp_path):
    # The limit counts from the cell's start, the kernel already up: 2 s is ample.
    with pytest.raises(ExecutionFailed, match="cell 1 of 1 ran past its 2 s time limit") as failed:
        execute(notebook_of("import subprocess\nsleeper = subprocess.Popen(['sleep', '60'])\n"
                            "open('sleeper.pid', 'w').write(str(sleeper.pid))\n"
                            "import time\ntime.sleep(60)"), tmp_path, timeout_s=2)
    assert not failed.value.setup and finished(int((tmp_path / "sleeper.pid").read_text()))


def test_a_signal_lost_in_a_garbage_collection_callback_still_stops_the_run(tmp_path):
    """As after interrupts._raise fired where Python discards the exception: the signal is
    in `received`, nothing raised. Waiting for the kernel notices."""
    interrupts.received.append(signal.SIGTERM)
    for signum in interrupts.SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    with pytest.raises(interrupts.Interrupted, match="SIGTERM"):
        execute(notebook_of("import time\ntime.sleep(60)"), tmp_path)
    assert [child for child in psutil.Process().children(recursive=True)
            if child.status() != psutil.STATUS_ZOMBIE
            and "ipykernel_launcher" in " ".join(child.cmdline())] == []  # the one starting too


def test_a_cell_past_its_time_limit_names_the_module_line_it_opens_at(tmp_path, monkeypatch):
    """The time limit is a rule a lesson meets (CONTRACT.md): its line says where."""
    def timed_out(notebook, working_dir):
        raise ExecutionFailed("cell 1 of 9 ran past its 600 s time limit and was stopped", cell=0)
    monkeypatch.setattr(cells, "execute", timed_out)
    message = str(raised_in_one_line(ExecutionFailed, cells.run, SEED, tmp_path))
    first = next(cell.source for cell in cells.build_notebook(SEED, "cpu", SEED.devices).cells
                 if cell.cell_type == "code").split("\n")[0]
    line = SEED.path().read_text().splitlines().index(first) + 1
    assert message.startswith(f"{module_file(SEED)}:{line}: cell 1 of 9 ran past its 600 s")
    assert message.endswith("the rule (lesson_code/CONTRACT.md): each cell within 600 s, so "
                            "time less there")

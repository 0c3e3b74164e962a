"""The one execution of a lesson: its notebook's cells, run once, in order, in a fresh
Jupyter kernel, by nbclient. What the cells print IS the recording's stdout, and its data
is `results` from the same kernel, so the companion and the recording never disagree.
"""
import atexit
import logging
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError

from scripts.plumbing.children import describe, dies_with, kill_all, stderr_tail
from scripts.plumbing.interrupts import raise_if_interrupted
from scripts.store.recordings import read_json
from scripts.runners.module import LESSON_TIMEOUT_S
from scripts.runners.notebook import build_notebook, setup_line, stdout_of

# Not nbclient's log of a dead kernel or a failed cell on stderr: record.py's one line.
QUIET = logging.getLogger("scripts.runners.cells")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False


class ExecutionFailed(Exception):
    """The cells did not all run; str() is the one line to show."""

    def __init__(self, message, setup=False, cell=None):
        super().__init__(message)
        self.setup = setup  # configure_devices itself failed
        self.cell = cell  # the code cell (from 0) stopped at its time limit


class CellRaised(ExecutionFailed):
    """A cell raised: `index`, which code cell (from 0); `line`, which line (or None)."""

    def __init__(self, index, ename, evalue, line):
        evalue = " ".join(evalue.split())
        super().__init__(f"{ename}: {evalue}" if evalue else ename)
        self.index, self.line = index, line


@dataclass(frozen=True)
class Execution:
    notebook: object  # executed, the data cell removed
    stdout: str  # every cell's stdout, in order
    data: dict  # run_lesson's result in the same kernel
    duration_s: float


def execute(notebook, working_dir, timeout_s=LESSON_TIMEOUT_S):
    """Run the notebook's code cells in order in a fresh kernel, filling in their outputs;
    CellRaised or ExecutionFailed otherwise. Every way out kills the kernel first. nbclient
    runs on a thread (MAINTAINING.md, "How a run executes")."""
    working_dir = Path(working_dir)
    # This Python's own ipykernel, its sockets and key in the run's scratch folder; kept
    # here: nbclient lets go of it when it is done.
    manager = AsyncKernelManager(kernel_name="python3",
                                 kernel_spec_manager=KernelSpecManager(kernel_dirs=[]),
                                 transport="ipc", ip=str(working_dir / "kernel"),
                                 connection_file=str(working_dir / "kernel.json"), log=QUIET)
    running = []  # the index of each cell as it starts: the last is where it stopped
    client = NotebookClient(
        notebook, km=manager, timeout=timeout_s, record_timing=False, log=QUIET,
        coalesce_streams=True,  # one output per stream per cell, as a reader's notebook
        shutdown_kernel="immediate",  # SIGKILL once the last cell has run
        # XLA's C++ logging goes to a file: nothing blocks on it, its tail says why a kernel died.
        extra_arguments=["--IPKernelApp.capture_fd_output=False"],
        resources={"metadata": {"path": str(working_dir)}},
        on_cell_execute=lambda cell, cell_index: running.append(cell_index))
    failures, finished = [], threading.Event()
    # This environment, less what would run the user's code before the first cell.
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONSTARTUP"}
    environment["IPYTHONDIR"] = str(working_dir / "ipython")

    def run_the_cells():
        try:
            with open(working_dir / "kernel.err", "wb") as log:
                client.execute(cleanup_kc=True, stdout=log, stderr=log, env=environment,
                               preexec_fn=dies_with(os.getpid()))
        except Exception as error:  # noqa: BLE001 - raised below, on record.py's thread
            failures.append(error)
        finally:
            # Else a kernel killed while starting leaves it to fail, with a traceback, at exit.
            atexit.unregister(client._cleanup_kernel)
            finished.set()

    threading.Thread(target=run_the_cells, name="nbclient", daemon=True).start()
    kernel = None  # its Popen once started, kept to say how it died
    try:
        while not finished.wait(0.02):  # polled: a signal Python discarded still stops it
            raise_if_interrupted()
            kernel = kernel or kernel_process(manager)
        kernel = kernel or kernel_process(manager)
    finally:  # kill the kernel's process group, again until nbclient's thread has ended
        deadline = time.monotonic() + 30
        while True:
            kill_all({kernel, kernel_process(manager)} - {None})
            if finished.wait(0.2) or time.monotonic() > deadline:
                break
    if failures:
        raise one_line(failures[0], notebook, running, working_dir, kernel, timeout_s)
    return notebook


def kernel_process(manager):
    return getattr(manager.provisioner, "process", None) if manager.provisioner else None


CELL_LINE = re.compile(r"Cell In\[\d+\], line (\d+)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def one_line(error, notebook, running, working_dir, kernel, timeout_s):
    """ExecutionFailed for what nbclient raised, naming the code cell it stopped in."""
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    at = sum(cell.cell_type == "code" for cell in notebook.cells[:running[-1]]) \
        if running else 0  # the code cell it stopped in, from 0
    if isinstance(error, CellExecutionError):
        shown = [ANSI.sub("", line) for output in code[at].outputs
                 if output.output_type == "error" for line in output.traceback]
        # IPython names the cell's own frame first ("Cell In[7], line 1"): which line.
        line = next(filter(None, map(CELL_LINE.search, shown)), None)
        return CellRaised(at, error.ename, error.evalue, line and int(line.group(1)))
    if isinstance(error, CellTimeoutError):
        return ExecutionFailed(f"cell {at + 1} of {len(code)} ran past its {timeout_s} s "
                               f"time limit and was stopped", cell=at)
    status = kernel.poll() if kernel is not None else None
    how = describe(status) if status is not None else "died"
    said = stderr_tail(working_dir / "kernel.err")
    if NO_TCP in said:
        said += NO_TCP_WHY
    return ExecutionFailed(f"the lesson's kernel {how} while cell {at + 1} of {len(code)} "
                           f"ran; its stderr: {said}")


# ipykernel binds tcp://127.0.0.1 whatever the transport (MAINTAINING.md, the TPU job).
NO_TCP = "Address family not supported by protocol (src/ip_resolver.cpp"
NO_TCP_WHY = ("; this machine opens no TCP socket, which a Jupyter kernel needs even on "
              "loopback: record on a machine with a loopback network, or run the lesson "
              "alone with `python -m <its module> --platform <platform>`")


def run(lesson, working_dir, platform="cpu", devices=4):
    """Execute `lesson` once: its notebook, stdout and run_lesson's data."""
    notebook = build_notebook(lesson, platform, devices)
    data_path = Path(working_dir) / "data.json"
    modules = [lesson.path(), *lesson.also_run_with()]
    # Removed from the companion: the result written out, then each module run whole, as
    # an import runs it, after the lesson, so it cannot touch the devices' set-up.
    notebook.cells += [nbformat.v4.new_code_cell(
        f"import json as _json\nwith open({str(data_path)!r}, 'w') as _out:\n"
        f"    _json.dump(results, _out)"), nbformat.v4.new_code_cell(
        # The going-further module imports the lesson, from the checkout.
        f"import runpy as _runpy, sys as _sys; _sys.path.insert(0, {str(lesson.root)!r})\n"
        + "".join(f"_runpy.run_path({str(path)!r}, run_name='imported_lesson_module')\n"
                  for path in modules))]
    code = [cell.source for cell in notebook.cells if cell.cell_type == "code"]
    imports_the_module = len(code) - 1
    started = time.perf_counter()
    try:
        execute(notebook, working_dir)
    except CellRaised as raised:
        if raised.index == imports_the_module:
            # Line 1 sets the path up; line 2 + i runs modules[i].
            path = modules[min(max((raised.line or 2) - 2, 0), len(modules) - 1)]
            raise ExecutionFailed(f"{path.parent.name}/{path.name} raises when imported "
                                  f"({raised}), though its cells ran: fix the statements "
                                  f"outside its sections") from None
        raised.setup = bool(raised.line) and code[raised.index].splitlines()[
            raised.line - 1:raised.line] == [setup_line(platform, devices)]
        raise
    except ExecutionFailed as failed:  # the time limit: where in the module that cell opens
        if failed.cell is None:
            raise
        first = code[failed.cell].split("\n")[0].strip()
        line = next((number for number, text in enumerate(
            lesson.path().read_text().splitlines(), 1) if text.strip() == first), 1)
        raise ExecutionFailed(f"{lesson.path().relative_to(lesson.root)}:{line}: {failed}; the "
                              f"rule (lesson_code/CONTRACT.md): each cell within "
                              f"{LESSON_TIMEOUT_S} s, so time less there") from None
    duration = time.perf_counter() - started
    del notebook.cells[-2:]
    data = read_json(data_path)  # the lesson's own output: anything JSON can say
    return Execution(notebook, stdout_of(notebook), data, duration)

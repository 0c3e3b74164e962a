"""The one execution of a lesson: its notebook's cells, run once, in order, in a fresh
Python process (scripts/runners/cell_host.py).

The last cell runs the lesson; what the cells print to stdout IS the recording's stdout,
and the data the recording keeps is `run_lesson`'s result from that same process (written
by one extra cell, removed before the notebook is saved). So the notebook companion and
the recording never disagree.

Why a plain process and not a Jupyter kernel: the cells are plain Python, and a kernel
added about a second to every recording (ipykernel, ZeroMQ and their handshakes) for
nothing the notebook shows; its ZeroMQ threads could also abort at exit and print into
record.py's stderr. tests/test_notebook.py still runs the committed notebook in a real
Jupyter kernel, as a reader does.
"""
import json
import os
import platform as host_platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from scripts.interrupts import raise_if_interrupted
from scripts.runners.cell_host import CELL_RAISED
from scripts.runners.notebook import as_notebook, notebook_cells, stdout_of
from scripts.children import describe, dies_with, kill_all, stderr_tail

HOST = Path(__file__).with_name("cell_host.py")
LESSON_TIMEOUT_S = 600


class ExecutionFailed(Exception):
    """The cells did not all run; str() is the one line to show."""

    def __init__(self, message, setup):
        super().__init__(message)
        self.setup = setup  # True when configure_devices itself failed


@dataclass(frozen=True)
class Execution:
    notebook: object  # executed, the data cell removed
    stdout: str  # every cell's stdout, in order
    data: dict  # run_lesson's result in the same process
    duration_s: float


def start_host(cells_path, results_path, working_dir):
    with open(working_dir / "cells.out", "wb") as out, \
            open(working_dir / "cells.err", "wb") as err:
        # Files, not pipes: nothing the process prints outside a cell (XLA's C++ logging)
        # can block it. A session of its own, so killpg reaches what it started; and it
        # dies with record.py, even when record.py is SIGKILLed.
        return subprocess.Popen([sys.executable, str(HOST), str(cells_path),
                                 str(results_path)], cwd=working_dir,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                start_new_session=True, preexec_fn=dies_with(os.getpid()))


def read_results(results_path):
    """One {"cell", "outputs", "error"} per cell that finished; a line cut short by a
    process that died while writing it is not a result."""
    results = []
    for line in results_path.read_text(encoding="utf-8").splitlines():
        try:
            results.append(json.loads(line))
        except ValueError:
            break
    return results


def execute(sources, working_dir, timeout_s=LESSON_TIMEOUT_S, on_start=None,
            meanwhile=None):
    """Run the code cells `sources` in order in a fresh process; return one result per
    cell ({"cell": its number, "outputs": nbformat outputs, "error": None}).

    Raises CellRaised when a cell raises, ExecutionFailed when the process dies or the run
    outlives `timeout_s`. `on_start(pid)` is told the process id as soon as it runs;
    `meanwhile()` runs while the cells do, and its value is returned beside the results.
    Ctrl-C and SIGTERM (record.py raises Interrupted for both), like every other way out
    of here, kill the process and all it started before they pass on.
    """
    working_dir = Path(working_dir)
    cells_path, results_path = working_dir / "cells.json", working_dir / "results.jsonl"
    cells_path.write_text(json.dumps(sources), encoding="utf-8")
    results_path.write_text("", encoding="utf-8")
    process = start_host(cells_path, results_path, working_dir)
    try:
        if on_start is not None:
            on_start(process.pid)
        made = meanwhile() if meanwhile is not None else None
        status = wait(process, timeout_s)
    finally:
        kill_all([process])  # anything it started, too; returns once none of it runs
    results = read_results(results_path)
    failed = results[-1]["error"] if results else None
    if status == CELL_RAISED and failed:
        raise CellRaised(len(results) - 1, failed)
    if status != 0 or len(results) != len(sources):
        raise ExecutionFailed(
            f"the lesson's Python process {describe(status)} while cell {len(results) + 1} "
            f"of {len(sources)} ran; its stderr: {stderr_tail(working_dir / 'cells.err')}",
            False)
    return results, made


def wait(process, timeout_s, poll_s=0.02):
    """The process's exit status, polled: a signal whose Interrupted Python discarded (it
    landed in a garbage-collection callback) still stops the wait, which a blocking wait
    would not notice until the time limit."""
    deadline = time.monotonic() + timeout_s
    while (status := process.poll()) is None:
        raise_if_interrupted()
        if time.monotonic() > deadline:
            raise ExecutionFailed(f"the lesson ran past its {timeout_s} s time limit and "
                                  f"was stopped", False)
        time.sleep(poll_s)
    return status


class CellRaised(ExecutionFailed):
    """A cell raised: str() is its exception on one line; `index` says which cell."""

    def __init__(self, index, error):
        evalue = " ".join(error["evalue"].split())
        super().__init__(f"{error['ename']}: {evalue}" if evalue else error["ename"], False)
        self.index, self.error = index, error


def language_info():
    """What a kernel reports about itself, which notebook viewers read (the highlighting
    of mkdocs-jupyter among them)."""
    return {"name": "python", "version": host_platform.python_version(),
            "mimetype": "text/x-python", "file_extension": ".py",
            "codemirror_mode": {"name": "ipython", "version": 3},
            "nbconvert_exporter": "python", "pygments_lexer": "ipython3"}


def run(module_path, lesson_id, working_dir, platform="cpu", devices=4, on_start=None):
    """Execute the lesson once; return the notebook, its stdout and run_lesson's data."""
    cells = notebook_cells(module_path, lesson_id, platform, devices)
    sources = [source for kind, source in cells if kind == "code"]
    data_path = Path(working_dir) / "data.json"
    data_cell = (f"import json as _json\nwith open({str(data_path)!r}, 'w') as _out:\n"
                 f"    _json.dump(results, _out)")  # plumbing, not part of the companion
    started = time.perf_counter()
    try:
        results, notebook = execute(sources + [data_cell], working_dir, on_start=on_start,
                                    meanwhile=lambda: as_notebook(cells, lesson_id))
    except CellRaised as raised:
        # The run cell's first line sets up the devices: a failure there is this
        # machine's, not the lesson's.
        raised.setup = raised.index == len(sources) - 1 and raised.error["line"] == 1
        raise
    duration = time.perf_counter() - started
    import nbformat

    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    for cell, result in zip(code, results):
        cell.outputs = [nbformat.from_dict(output) for output in result["outputs"]]
        cell.execution_count = result["cell"]
    notebook.metadata["language_info"] = language_info()
    data = json.loads(data_path.read_text(encoding="utf-8"))
    return Execution(notebook, stdout_of(notebook), data, duration)

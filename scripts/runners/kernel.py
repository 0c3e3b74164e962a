"""The one execution of a lesson: its module as notebook cells, run once in a fresh kernel.

The cells are cut from the lesson module at its `--8<--` section markers, so the notebook
holds the same code as the page and the program. The last cell runs the lesson; what its
cells print to stdout IS the recording's stdout, and the data the recording keeps is
`run_lesson`'s result from that same kernel (fetched by one extra cell, removed before the
notebook is saved). So the notebook companion and the recording never disagree.
The `if __name__ == "__main__"` guard is left out (a kernel's __name__ is "__main__").
"""
import ast
import json
import logging
import os
import re
import signal
import threading
import time
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

MARKER = re.compile(r"^# --8<-- \[(start|end):([\w-]+)\]\s*$")
MAIN_GUARD = 'if __name__ == "__main__":'
ANSI = re.compile(r"\x1b\[[0-9;]*m")


class ExecutionFailed(Exception):
    """A cell raised; str() is its one-line error, terminal colours removed."""

    def __init__(self, message, setup):
        super().__init__(message)
        self.setup = setup  # True when configure_devices itself failed


@dataclass(frozen=True)
class Execution:
    notebook: object  # executed, the data cell removed
    stdout: str  # every cell's stdout, in order
    data: dict  # run_lesson's result in the same kernel
    duration_s: float


def source_blocks(source):
    """[(section name or None, code)] in file order, markers and main guard removed."""
    source = source.split(MAIN_GUARD)[0]
    docstring = ast.get_docstring(ast.parse(source)) or ""
    body = source.split('"""', 2)[2] if source.lstrip().startswith('"""') else source
    blocks, name, lines = [], None, []
    for line in body.splitlines():
        marker = MARKER.match(line)
        if marker:
            blocks.append((name, "\n".join(lines).strip()))
            name, lines = (marker.group(2) if marker.group(1) == "start" else None), []
        else:
            lines.append(line)
    blocks.append((name, "\n".join(lines).strip()))
    return docstring, [(n, code) for n, code in blocks if code]


def run_cell_source(platform, devices):
    return f'devices = configure_devices("{platform}", {devices})\nresults = run_lesson(devices)'


# --------------------------------------------------------------- what a cell teaches --
# The notebook holds the lesson's named sections, under the titles the pages give them,
# and, from the code between sections, only the definitions those sections use (a
# helper that packages results, a constant): no command-line plumbing, no argparse.

def defined_names(statement):
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name}
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in statement.names}
    if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        return {node.id for target in targets for node in ast.walk(target)
                if isinstance(node, ast.Name)}
    return set()


def used_names(code):
    return {node.id for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Name)}


def top_level_statements(code):
    """[(source of one statement, with the comments just above it, its names)]."""
    lines, pieces, start = code.splitlines(), [], 0
    for statement in ast.parse(code).body:
        text = "\n".join(lines[start:statement.end_lineno]).strip()
        pieces.append((text, defined_names(statement)))
        start = statement.end_lineno
    return pieces


def teaching_blocks(blocks, run_source):
    """The named sections, and the statements between them that they need, in order."""
    pieces = [(name, code, set()) if name else (None, text, names)
              for name, code in blocks
              for text, names in ([(code, set())] if name else top_level_statements(code))]
    needed = used_names(run_source).union(*(used_names(code) for name, code, _ in pieces
                                            if name))
    kept = set()
    while True:  # a kept helper may need another: follow until nothing new is needed
        more = {i for i, (name, _, names) in enumerate(pieces)
                if not name and i not in kept and names & needed}
        if not more:
            break
        kept |= more
        needed |= set().union(*(used_names(pieces[i][1]) for i in more))
    out = []
    for i, (name, code, _) in enumerate(pieces):
        if name:
            out.append((name, code))
        elif i in kept:
            if out and out[-1][0] is None:  # neighbouring helpers share one cell
                out[-1] = (None, out[-1][1] + "\n\n\n" + code)
            else:
                out.append((None, code))
    return out


INCLUDE = re.compile(r'^[ \t>]*--8<-- "(?P<file>[^":]+):(?P<section>[\w-]+)"', re.MULTILINE)
HEADING = re.compile(r"^(#{2,4}) (.+?)\s*$", re.MULTILINE)


def page_titles(module_path, lesson_id):
    """{section: the title of the page heading it is shown under}, the lesson page first."""
    root, file = module_path.parents[1], f"{module_path.parent.name}/{module_path.name}"
    docs = root / "docs"
    lesson_page = docs / "lessons" / f"{lesson_id}.md"
    pages = [lesson_page] + sorted(p for p in docs.rglob("*.md") if p != lesson_page)
    titles = {}
    for page in pages:
        if not page.is_file():
            continue
        text = page.read_text(encoding="utf-8")
        for include in INCLUDE.finditer(text):
            if include.group("file") != file:
                continue
            above = [h.group(2) for h in HEADING.finditer(text, 0, include.start())]
            if above:
                titles.setdefault(include.group("section"), above[-1])
    return titles


def build_notebook(module_path, lesson_id, platform="cpu", devices=4):
    docstring, blocks = source_blocks(module_path.read_text(encoding="utf-8"))
    title, _, intro = docstring.partition("\n")
    run_source = run_cell_source(platform, devices)
    titles = page_titles(module_path, lesson_id)
    cells = [nbformat.v4.new_markdown_cell(
        f"# {title.rstrip('.')}\n\n{intro.strip()}\n\nGenerated from `{module_path.parent.name}/"
        f"{module_path.name}` by `scripts/record.py`, which also executed it: the outputs "
        f"below are real. Run it top to bottom in a fresh kernel (JAX {version('jax')})."
    )]
    shown = None
    for name, code in teaching_blocks(blocks, run_source):
        heading = titles.get(name)
        if heading and heading != shown:
            cells.append(nbformat.v4.new_markdown_cell(f"## {heading}"))
            shown = heading
        cells.append(nbformat.v4.new_code_cell(code))
    cells.append(nbformat.v4.new_markdown_cell(
        f"## Set up the devices and run everything\n\nSet up {devices} logical "
        f"{platform.upper()} devices first (in a fresh kernel, before any other JAX call), "
        f"then run every step and check."))
    cells.append(nbformat.v4.new_code_cell(run_source))
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    notebook.metadata["lesson"] = {"id": lesson_id}
    return notebook


def execute(notebook, working_dir, timeout_s=600):
    """Run every cell in a fresh kernel; a cell that raises raises ExecutionFailed.

    nbclient answers SIGINT and SIGTERM itself when it runs on the main thread: it shuts
    the kernel down and carries on, to fail later with an AssertionError, or to finish. On
    a worker thread it leaves them alone, so Ctrl-C reaches record.py, which stops the
    kernel (and everything it started) before it passes the interrupt on.
    """
    # IPC sockets in the scratch folder: the kernel is reachable from this user only,
    # and ipykernel does not warn about an unencrypted TCP port. The connection file (it
    # holds the kernel's key) goes there too: by default it is a mkstemp file in the
    # system's temporary folder, which a SIGKILLed run would leave there for good.
    kernel = KernelManager(kernel_name="python3", transport="ipc",
                           ip=str(Path(working_dir) / "kernel"),
                           connection_file=str(Path(working_dir) / "kernel.json"), log=QUIET)
    client = NotebookClient(notebook, km=kernel, timeout=timeout_s, record_timing=False,
                            resources={"metadata": {"path": str(working_dir)}}, log=QUIET)
    failure = []
    worker = threading.Thread(target=catching(client.execute, failure), name="notebook",
                              daemon=True)
    try:
        worker.start()
        died = wait_while_kernel_lives(worker, kernel)
        if died is not None:
            kill_kernel(kernel)
            worker.join(timeout=5)
            failure.append(KernelExited(died))
    except BaseException:  # Ctrl-C, SIGTERM: no kernel may outlive record.py
        deadline = time.monotonic() + 30
        while worker.is_alive() and time.monotonic() < deadline:
            kill_kernel(kernel)  # again each time: the worker may be starting one
            worker.join(timeout=0.2)
        kill_kernel(kernel)
        failure.append("interrupted")
        raise
    finally:
        if not worker.is_alive() and kernel.has_kernel:
            kernel.shutdown_kernel(now=bool(failure))  # a clean run's kernel exits itself
    if failure:
        raise one_line(failure[0])
    return notebook


class KernelExited(Exception):
    """The kernel process ended while a cell ran; str() says how."""

    def __init__(self, status):
        how = f"killed by signal {-status}" if status < 0 else f"exit status {status}"
        super().__init__(f"the kernel died while the lesson ran ({how}; XLA exits so on "
                         f"an XLA_FLAGS value it cannot parse); run the lesson program alone "
                         f"(python -m lesson_code.<module>) to see its own error")


# A kernel found dead is given this long for nbclient to notice it first.
DEAD_KERNEL_GRACE_S = 2.0


def wait_while_kernel_lives(worker, kernel):
    """Join the worker; None when it ends by itself, the kernel's exit status when the
    kernel process ended first. nbclient notices a kernel that dies mid-cell only through
    a reply that never comes, so a kernel aborting at start-up (XLA_FLAGS=--bogus) would
    otherwise hold record.py for every cell's full timeout."""
    dead_since = None
    while worker.is_alive():
        worker.join(timeout=0.25)
        process = getattr(kernel.provisioner, "process", None) if kernel.provisioner else None
        status = process.poll() if process is not None else None
        if status is None:
            dead_since = None
        elif dead_since is None:
            dead_since = time.monotonic()
        elif time.monotonic() - dead_since > DEAD_KERNEL_GRACE_S and worker.is_alive():
            return status
    return None


# nbclient and jupyter_client log kernel trouble to stderr; the one line record.py prints
# says it instead.
QUIET = logging.getLogger("scripts.runners.kernel")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False


def catching(function, failures):
    def run():
        try:
            function()
        except Exception as error:  # re-raised on the main thread
            failures.append(error)
    return run


def kill_kernel(kernel):
    """SIGKILL the kernel's process group: jupyter_client starts it in a session of its
    own, so this reaches anything the kernel started, too."""
    process = getattr(kernel.provisioner, "process", None) if kernel.provisioner else None
    if process is None:
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # already gone
    process.wait()


def one_line(error):
    """ExecutionFailed for what a worker thread raised: its last meaningful line."""
    if isinstance(error, KernelExited):
        return ExecutionFailed(str(error), False)
    if isinstance(error, CellTimeoutError):
        return ExecutionFailed("a cell ran past its time limit and was stopped", False)
    if isinstance(error, DeadKernelError):
        return ExecutionFailed(f"the kernel died ({error})", False)
    if not isinstance(error, CellExecutionError):
        return ExecutionFailed(f"{type(error).__name__}: {error}", False)
    lines = [line for line in ANSI.sub("", str(error)).strip().splitlines() if line]
    setup = "configure_devices(" in str(error).split("-----")[0] \
        and not any("run_lesson" in line for line in lines[-3:])
    return ExecutionFailed(lines[-1] if lines else "a cell failed", setup)


def coalesce_streams(cell):
    """Merge consecutive outputs of one stream, so a printed line is never cut in two."""
    merged = []
    for output in cell.get("outputs", []):
        if (merged and output.output_type == "stream" and merged[-1].output_type == "stream"
                and merged[-1].name == output.name):
            merged[-1].text += output.text
        else:
            merged.append(output)
    cell.outputs = merged


def stdout_of(notebook):
    return "".join(output.text for cell in notebook.cells if cell.cell_type == "code"
                   for output in cell.outputs
                   if output.output_type == "stream" and output.name == "stdout")


def run(module_path, lesson_id, working_dir, platform="cpu", devices=4):
    """Execute the lesson once; return the notebook, its stdout and run_lesson's data."""
    notebook = build_notebook(module_path, lesson_id, platform, devices)
    data_path = Path(working_dir) / "data.json"
    notebook.cells.append(nbformat.v4.new_code_cell(
        f"import json as _json\nwith open({str(data_path)!r}, 'w') as _out:\n"
        f"    _json.dump(results, _out)"))
    started = time.perf_counter()
    execute(notebook, working_dir)
    duration = time.perf_counter() - started
    notebook.cells.pop()  # the data cell: plumbing, not part of the companion
    for cell in notebook.cells:
        if cell.cell_type == "code":
            coalesce_streams(cell)
    data = json.loads(data_path.read_text(encoding="utf-8"))
    return Execution(notebook, stdout_of(notebook), data, duration)


def rerender(executed_text, module_path, lesson_id, platform="cpu", devices=4):
    """The companion rebuilt from today's module text around the outputs of an earlier
    execution, for a module whose code (its syntax tree) is unchanged: the same program
    ran, only its comments or docstrings read differently. Each code cell keeps the
    outputs, execution count and id of its executed counterpart. None when the cells no
    longer line up one to one (a section marker added or removed): then only a run makes
    the companion."""
    executed = nbformat.reads(executed_text, as_version=4)
    notebook = build_notebook(module_path, lesson_id, platform, devices)
    if [c.cell_type for c in executed.cells] != [c.cell_type for c in notebook.cells]:
        return None
    for old, new in zip(executed.cells, notebook.cells):
        new.id, new.metadata = old.get("id", new.id), old.metadata
        if new.cell_type == "code":
            new.outputs, new.execution_count = old.outputs, old.execution_count
    notebook.metadata = executed.metadata
    return notebook


def notebook_text(notebook):
    return nbformat.writes(notebook) + "\n"

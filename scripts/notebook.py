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
import re
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

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


def build_notebook(module_path, lesson_id, platform="cpu", devices=4):
    docstring, blocks = source_blocks(module_path.read_text())
    title, _, intro = docstring.partition("\n")
    cells = [nbformat.v4.new_markdown_cell(
        f"# {title.rstrip('.')}\n\n{intro.strip()}\n\nGenerated from `{module_path.parent.name}/"
        f"{module_path.name}` by `scripts/record.py`, which also executed it: the outputs "
        f"below are real. Run it top to bottom in a fresh kernel (JAX {version('jax')})."
    )]
    for name, code in blocks:
        if name:
            cells.append(nbformat.v4.new_markdown_cell(f"## {name.replace('_', ' ').capitalize()}"))
        cells.append(nbformat.v4.new_code_cell(code))
    cells.append(nbformat.v4.new_markdown_cell(
        f"## Set up the devices and run everything\n\nSet up {devices} logical "
        f"{platform.upper()} devices first (in a fresh kernel, before any other JAX call), "
        f"then run every step and check."))
    cells.append(nbformat.v4.new_code_cell(run_cell_source(platform, devices)))
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    notebook.metadata["lesson"] = {"id": lesson_id}
    return notebook


def execute(notebook, working_dir, timeout_s=600):
    """Run every cell in a fresh kernel; a cell that raises raises ExecutionFailed."""
    # IPC sockets in the scratch folder: the kernel is reachable from this user only,
    # and ipykernel does not warn about an unencrypted TCP port.
    kernel = KernelManager(kernel_name="python3", transport="ipc",
                           ip=str(Path(working_dir) / "kernel"))
    try:
        NotebookClient(notebook, km=kernel, timeout=timeout_s, record_timing=False,
                       resources={"metadata": {"path": str(working_dir)}}).execute()
    except CellExecutionError as error:
        lines = [line for line in ANSI.sub("", str(error)).strip().splitlines() if line]
        setup = "configure_devices(" in str(error).split("-----")[0] \
            and not any("run_lesson" in line for line in lines[-3:])
        raise ExecutionFailed(lines[-1] if lines else "a cell failed", setup) from None
    finally:
        if kernel.has_kernel:
            kernel.shutdown_kernel(now=False)
    return notebook


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
    import time

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
    return Execution(notebook, stdout_of(notebook), json.loads(data_path.read_text()),
                     duration)


def notebook_text(notebook):
    return nbformat.writes(notebook) + "\n"

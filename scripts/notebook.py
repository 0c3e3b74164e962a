"""The notebook companion: the lesson module as cells, executed once by record.py.

The cells are cut from the lesson module at its `--8<--` section markers, so the notebook
holds the same code as the page and the program; the outputs are those of a real run.
It must run top to bottom in a fresh kernel, so the `if __name__ == "__main__"` guard is
left out (a kernel's __name__ is "__main__") and a last cell runs the lesson.
"""
import ast
import os
import re

from pathlib import Path

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

MARKER = re.compile(r"^# --8<-- \[(start|end):([\w-]+)\]\s*$")
MAIN_GUARD = 'if __name__ == "__main__":'


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


def build_notebook(module_path, lesson_id, content_hash, devices=4):
    docstring, blocks = source_blocks(module_path.read_text())
    title, _, intro = docstring.partition("\n")
    cells = [nbformat.v4.new_markdown_cell(
        f"# {title.rstrip('.')}\n\n{intro.strip()}\n\nGenerated from `{module_path.parent.name}/"
        f"{module_path.name}` by `scripts/record.py`, which also executed it: the outputs "
        f"below are real. Run it top to bottom in a fresh kernel (JAX {jax_version()})."
    )]
    for name, code in blocks:
        if name:
            cells.append(nbformat.v4.new_markdown_cell(f"## {name.replace('_', ' ').capitalize()}"))
        cells.append(nbformat.v4.new_code_cell(code))
    cells.append(nbformat.v4.new_markdown_cell(
        f"## Set up the devices and run everything\n\nSet up {devices} logical CPU devices first (in a fresh "
        f"kernel, before any other JAX call), then run every step and check."))
    cells.append(nbformat.v4.new_code_cell(
        f'devices = configure_devices("cpu", {devices})\nresults = run_lesson(devices)'))
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    notebook.metadata["lesson"] = {"id": lesson_id, "contentHash": content_hash}
    return notebook


def jax_version():
    from importlib.metadata import version
    return version("jax")


def execute(notebook, working_dir, timeout_s=600):
    """Run every cell in a fresh kernel; an error in any cell raises."""
    saved = {k: os.environ.pop(k) for k in ("JAX_PLATFORMS", "JAX_NUM_CPU_DEVICES")
             if k in os.environ}
    # IPC sockets in the scratch folder: the kernel is reachable from this user only,
    # and ipykernel does not warn about an unencrypted TCP port.
    kernel = KernelManager(kernel_name="python3", transport="ipc",
                           ip=str(Path(working_dir) / "kernel"))
    try:
        NotebookClient(notebook, km=kernel, timeout=timeout_s, record_timing=False,
                       resources={"metadata": {"path": str(working_dir)}}).execute()
    finally:
        if kernel.has_kernel:
            kernel.shutdown_kernel(now=False)
        os.environ.update(saved)
    return notebook


def notebook_text(notebook):
    return nbformat.writes(notebook) + "\n"

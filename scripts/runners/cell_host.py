"""The fresh Python process a lesson's notebook cells run in, one after another:
`python scripts/runners/cell_host.py CELLS RESULTS`, started by scripts/runners/cells.py,
never by hand.

What a Jupyter kernel does for a notebook run top to bottom, without the kernel: the
cells run in order in one `__main__` namespace, each cell's printing is kept as that
cell's stdout and stderr (in the order it was printed), and a cell that ends in an
expression shows its value, as a kernel's display hook does. Nothing else of IPython is
needed: the lesson's cells are plain Python (no magics), which is what lets a reader run
the companion in any kernel. After each cell, one JSON line goes to RESULTS, flushed, so
that when this process dies the parent still knows which cell it died in. A cell that
raises ends the run with exit status 3 and its traceback in that line.

Standard library only, and nothing from this repository: a notebook's cells import what
they need themselves, as a downloaded companion must.
"""
import ast
import builtins
import io
import json
import linecache
import os
import sys
import traceback
import types

CELL_RAISED = 3  # the exit status that says: a cell raised, its line says what


class CellOutput(io.TextIOBase):
    """sys.stdout or sys.stderr for the whole run: what is written goes to the outputs of
    the cell running now (`current`, which the host switches), so stdout and stderr keep
    the order they were printed in, and a logger or warning that kept a reference to the
    stream from an earlier cell still writes into the right one."""

    current = []  # the running cell's outputs, shared by both streams

    def __init__(self, name):
        super().__init__()
        self.name = name

    def writable(self):
        return True

    def write(self, text):
        outputs = CellOutput.current
        if outputs and outputs[-1].get("name") == self.name:
            outputs[-1]["text"] += text  # a kernel merges them too
        else:
            outputs.append({"output_type": "stream", "name": self.name, "text": text})
        return len(text)


def split_last_expression(tree):
    """(the cell without its last statement, that statement's expression) when the cell
    ends in an expression, whose value a notebook shows; else (the cell, None)."""
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        return ast.Module(body=tree.body[:-1], type_ignores=[]), \
            ast.Expression(body=tree.body[-1].value)
    return tree, None


def failure(error, filename):
    """The error line: a notebook's error output, and the line of the cell it came from
    (the outermost frame in the cell: for the run cell, which call failed)."""
    frames = traceback.extract_tb(error.__traceback__)
    lines = [frame.lineno for frame in frames if frame.filename == filename]
    shown = traceback.format_exception(error)
    return {"ename": type(error).__name__, "evalue": str(error),
            "traceback": [line for line in shown if __file__ not in line],
            "line": lines[0] if lines else None}


def run_cell(number, source, namespace):
    """(outputs, error or None) of one cell, run in `namespace`."""
    filename = f"<cell {number}>"
    # A traceback shows the cell's own lines, as in a notebook.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    outputs = CellOutput.current = []
    try:
        body, last = split_last_expression(ast.parse(source, filename))
        exec(compile(body, filename, "exec"), namespace)
        if last is not None:
            value = eval(compile(last, filename, "eval"), namespace)
            if value is not None:
                outputs.append({"output_type": "execute_result", "metadata": {},
                                "execution_count": number,
                                "data": {"text/plain": repr(value)}})
        return outputs, None
    except BaseException as error:  # SystemExit too: in a notebook it is a cell's error
        return outputs, failure(error, filename)


def main(argv):
    cells_path, results_path = argv
    with open(cells_path, encoding="utf-8") as cells_file:
        cells = json.load(cells_file)
    # As in a kernel: the working folder first on the path, not this file's folder.
    sys.path[0] = ""
    # The cells' own __main__, so what they define is __main__.<name>, as in a notebook.
    main_module = types.ModuleType("__main__")
    main_module.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main_module
    sys.stdout, sys.stderr = CellOutput("stdout"), CellOutput("stderr")
    error = None
    with open(results_path, "w", encoding="utf-8") as results:
        for number, source in enumerate(cells, 1):
            outputs, error = run_cell(number, source, main_module.__dict__)
            results.write(json.dumps({"cell": number, "outputs": outputs,
                                      "error": error}) + "\n")
            results.flush()
            if error is not None:
                break
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__  # what exit prints: the log
    if error is not None:
        return CELL_RAISED
    # Every cell ran and its results are on disk. A kernel would now wait for the next
    # cell; tearing the interpreter down instead (XLA's thread pools, JAX's atexit) takes
    # about a third of a second that nothing reads, so leave at once.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

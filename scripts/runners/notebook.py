"""A lesson's notebook companion: its module cut into cells, as the pages show it.

The cells are cut from the lesson module at its `--8<--` section markers, so the notebook
holds the same code as the page and the program. The last cell sets up the devices and
runs the lesson; scripts/runners/cells.py executes the cells once in a Jupyter kernel,
and what they print IS the recording's stdout, so the notebook companion and the recording
never disagree. The `if __name__ == "__main__"` guard is left out (a notebook's __name__
is "__main__"). A lesson's going-further module (lessons.toml `going_further`) follows
the lesson's cells, less its imports of the lesson (those names are already defined
there), and the run cell hands its `run_going_further` to `run_lesson`.
"""
import ast
import hashlib
import re
import symtable
from importlib.metadata import version

import nbformat

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


def run_cell_source(platform, devices, going_further=False):
    more = ", run_going_further" if going_further else ""
    return (f'devices = configure_devices("{platform}", {devices})\n'
            f'results = run_lesson(devices{more})')


def without_imports_of(module, code):
    """`code` less its top-level statements that import `module`: in the notebook, the
    cells before it have defined those names, and the repository is not importable."""
    def imports_it(statement):
        if isinstance(statement, ast.ImportFrom):
            return statement.module == module
        return isinstance(statement, ast.Import) and \
            any(alias.name == module for alias in statement.names)

    lines = code.splitlines()
    for statement in reversed(ast.parse(code).body):
        if imports_it(statement):
            del lines[statement.lineno - 1:statement.end_lineno]
    return "\n".join(lines).strip()


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
    """The module-level names `code` reads, in any of its scopes: a function's parameters
    and local variables are not among them, so a local named `main` keeps no `def main()`."""
    names, tables = set(), [symtable.symtable(code, "<section>", "exec")]
    while tables:
        table = tables.pop()
        names |= {symbol.get_name() for symbol in table.get_symbols()
                  if symbol.is_referenced() and symbol.is_global()}
        tables += table.get_children()
    return names


def top_level_statements(code):
    """[(source of one statement, with the comments just above it, its names)]."""
    lines, pieces, start = code.splitlines(), [], 0
    for statement in ast.parse(code).body:
        text = "\n".join(lines[start:statement.end_lineno]).strip()
        pieces.append((text, defined_names(statement)))
        start = statement.end_lineno
    return pieces


def imports_only(code):
    return all(isinstance(statement, (ast.Import, ast.ImportFrom))
               for statement in ast.parse(code).body)


def teaching_blocks(blocks, run_source):
    """The named sections, and the statements between them that they need, in order."""
    pieces = [(name, code, set()) if name else (None, text, names)
              for name, code in blocks
              for text, names in ([(code, set())] if name else top_level_statements(code))]
    needed = used_names(run_source).union(*(used_names(code) for name, code, _ in pieces
                                            if name))
    # What a section imports is there already: an import that only repeats it (the
    # going-further module's own `import jax`) is left out.
    shown = set().union(*(names for name, code, _ in pieces if name
                          for _, names in top_level_statements(code)))
    kept = set()
    while True:  # a kept helper may need another: follow until nothing new is needed
        more = {i for i, (name, text, names) in enumerate(pieces)
                if not name and i not in kept
                and names & needed - (shown if imports_only(text) else set())}
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
                apart = "\n" if imports_only(out[-1][1]) and imports_only(code) else "\n\n\n"
                out[-1] = (None, out[-1][1] + apart + code)
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


def notebook_cells(lesson, platform="cpu", devices=4):
    """[(cell type, source)] of `lesson`'s companion (a registry Lesson: its module, its
    id and its going-further module, if it has one)."""
    module_path, lesson_id = lesson.path(), lesson.id
    further = lesson.path(lesson.going_further) if lesson.going_further else None
    docstring, blocks = source_blocks(module_path.read_text(encoding="utf-8"))
    title, _, intro = docstring.partition("\n")
    titles = page_titles(module_path, lesson_id)
    if further:
        module = f"{module_path.parent.name}.{module_path.stem}"
        blocks += [(name, code if name else without_imports_of(module, code))
                   for name, code in source_blocks(further.read_text(encoding="utf-8"))[1]]
        titles = {**page_titles(further, lesson_id), **titles}
    run_source = run_cell_source(platform, devices, further is not None)
    sources = " and ".join(f"`{path.parent.name}/{path.name}`"
                           for path in (module_path, further) if path)
    cells = [("markdown",
              f"# {title.rstrip('.')}\n\n{intro.strip()}\n\nGenerated from {sources} by "
              f"`scripts/record.py`, which also executed it: the outputs below are real. Run "
              f"it top to bottom in a fresh kernel (JAX {version('jax')}).")]
    shown = None
    for name, code in teaching_blocks(blocks, run_source):
        heading = titles.get(name)
        if heading and heading != shown:
            cells.append(("markdown", f"## {heading}"))
            shown = heading
        cells.append(("code", code))
    cells.append(("markdown",
                  f"## Set up the devices and run everything\n\nSet up {devices} logical "
                  f"{platform.upper()} devices first (in a fresh kernel, before any other JAX "
                  f"call), then run every step and check."))
    cells.append(("code", run_source))
    return cells


def cell_id(number, source):
    """A cell's id, from its place and its text: the same cells get the same ids on every
    run, so a re-record changes the notebook's bytes only where its content changed."""
    return hashlib.sha256(f"{number}\0{source}".encode()).hexdigest()[:8]


def as_notebook(cells, lesson_id):
    """The nbformat notebook of notebook_cells()."""
    made = {"markdown": nbformat.v4.new_markdown_cell, "code": nbformat.v4.new_code_cell}
    notebook = nbformat.v4.new_notebook(cells=[
        made[kind](source, id=cell_id(number, source))
        for number, (kind, source) in enumerate(cells)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    notebook.metadata["lesson"] = {"id": lesson_id}
    return notebook


def build_notebook(lesson, platform="cpu", devices=4):
    return as_notebook(notebook_cells(lesson, platform, devices), lesson.id)


def stdout_of(notebook):
    return "".join(output.text for cell in notebook.cells if cell.cell_type == "code"
                   for output in cell.outputs
                   if output.output_type == "stream" and output.name == "stdout")


def rerender(executed_text, lesson, platform="cpu", devices=4):
    """The companion rebuilt from today's module text around the outputs of an earlier
    execution, for a module whose code (its syntax tree) is unchanged: the same program
    ran, only its comments or docstrings read differently. Each code cell keeps the
    outputs, execution count and id of its executed counterpart. None when the cells no
    longer line up one to one (a section marker added or removed): then only a run makes
    the companion."""
    executed = nbformat.reads(executed_text, as_version=4)
    notebook = build_notebook(lesson, platform, devices)
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

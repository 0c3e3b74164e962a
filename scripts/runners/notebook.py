"""A lesson's notebook companion: its module cut into cells, as the pages show it, each
step's output under its code.

The cells are the module's `--8<--` sections, the page's code; what the sections need from
between them joins the cell it serves. `run_lesson` is not shown whole: its statements,
after the device set-up, end the cells of the steps they use (lay_out), and a going-further
module's sections and `run_going_further` follow the same way. scripts/runners/cells.py
runs the cells once: what they print IS the recording's stdout (lesson_code/CONTRACT.md).
"""
import ast
import hashlib
import re
import symtable
import textwrap
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


def setup_line(platform, devices):
    """Ends Step 1's cell; a failure on this line is this machine's, not the lesson's."""
    return f'devices = configure_devices("{platform}", {devices})'


def without(code, module):
    """`code` less its imports of `module` (in the notebook the cells above define those
    names; the repository is not importable there) and its `run_lesson`, whose statements
    end the steps' cells instead."""
    def dropped(statement):
        if isinstance(statement, ast.Import):
            return any(alias.name == module for alias in statement.names)
        return getattr(statement, "module", None) == module or \
            getattr(statement, "name", None) == "run_lesson"

    lines = code.splitlines()
    for statement in reversed(ast.parse(code).body):
        if dropped(statement):
            del lines[statement.lineno - 1:statement.end_lineno]
    return "\n".join(lines).strip()


def body_statements(source, function, result):
    """(parameter names, statements) of `function` in `source`: each statement with the
    comments above it, dedented, its docstring left out and `return X` as `result = X`."""
    lines = source.splitlines()
    definition = next(statement for statement in ast.parse(source).body
                      if getattr(statement, "name", None) == function)
    body, start = definition.body, definition.body[0].lineno - 1
    if ast.get_docstring(definition):
        body, start = body[1:], body[0].end_lineno
    statements = []
    for statement in body:
        text = textwrap.dedent("\n".join(lines[start:statement.end_lineno])).rstrip()
        if isinstance(statement, ast.Return):
            text = re.sub(r"^return\b", f"{result} =", text, count=1, flags=re.MULTILINE)
        statements.append(text)
        start = statement.end_lineno
    return [arg.arg for arg in definition.args.args], statements


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
    """[(section, code)]: the sections, and of the statements between them only those they
    or `run_source` need (a constant, a helper; no command line), in order."""
    pieces = [(name, code, set()) if name else (None, text, names)
              for name, code in blocks if code
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
    # A kept helper joins the cell of the section after it, which it serves; those after
    # the last section join its cell.
    cells, waiting = [], []
    for i, (name, code, _) in enumerate(pieces):
        if name or i in kept:
            waiting.append(code)
        if name:
            cells, waiting = cells + [(name, waiting)], []
    if waiting:
        name, codes = cells.pop() if cells else (None, [])
        cells.append((name, codes + waiting))
    return [(name, codes[0] + "".join(
        ("\n" if imports_only(before) and imports_only(code) else "\n\n\n") + code
        for before, code in zip(codes, codes[1:]))) for name, codes in cells]


def lay_out(cells, statements):
    """[the statements that end each cell]: each at the first cell by which all it reads
    is defined, never before the statement ahead of it; so each result follows its code."""
    first = {}
    for i, (_, code) in enumerate(cells):
        for _, names in top_level_statements(code):
            first.update({name: i for name in names if name not in first})
    placed, at = [[] for _ in cells], 0
    for statement in statements:
        at = max([at] + [first[name] for name in used_names(statement) if name in first])
        placed[at].append(statement)
    return placed


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
    source = module_path.read_text(encoding="utf-8")
    docstring, blocks = source_blocks(source)
    title, _, intro = docstring.partition("\n")
    titles = page_titles(module_path, lesson_id)
    parameters, steps = body_statements(source, "run_lesson", "results")
    steps, closing = [setup_line(platform, devices)] + steps, []
    if further:
        further_source = further.read_text(encoding="utf-8")
        blocks += source_blocks(further_source)[1]
        titles = {**page_titles(further, lesson_id), **titles}
        # The statement that calls run_lesson's `going_further` becomes that function's
        # body, laid out over its sections; what follows it closes the last cell.
        at = next(i for i, step in enumerate(steps) if parameters[1] in used_names(step))
        target = ast.unparse(ast.parse(steps[at]).body[0].targets[0])
        steps, closing = (steps[:at] + body_statements(further_source, "run_going_further",
                                                       target)[1], steps[at + 1:])
    module = f"{module_path.parent.name}.{module_path.stem}"
    taught = teaching_blocks([(name, without(code, module)) for name, code in blocks],
                             "\n".join(steps + closing))
    placed = lay_out(taught, steps)
    placed[-1] += closing
    sources = " and ".join(f"`{path.parent.name}/{path.name}`"
                           for path in (module_path, further) if path)
    cells = [("markdown",
              f"# {title.rstrip('.')}\n\n{intro.strip()}\n\nGenerated from {sources} by "
              f"`scripts/record.py`, which also executed it: the outputs below are real, each "
              f"under the step that printed it. Run it top to bottom in a fresh kernel (JAX "
              f"{version('jax')}).")]
    shown = None
    for (name, code), run in zip(taught, placed):
        heading = titles.get(name)
        if heading and heading != shown:
            cells.append(("markdown", f"## {heading}"))
            shown = heading
        run = "\n".join(run).strip("\n")
        cells.append(("code", f"{code}\n\n\n{run}" if run else code))
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
    """The companion rebuilt from today's module text around an earlier execution's
    outputs, cell by cell, for code whose syntax tree is unchanged (a comment or a
    docstring edit). None when the cells no longer line up: then only a run makes it."""
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

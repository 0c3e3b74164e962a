"""The notebook companion: cut from the lesson module, and runnable in a fresh kernel."""
import nbformat

from conftest import ROOT
from scripts.runners.kernel import build_notebook, execute, source_blocks, stdout_of

LESSON = ROOT / "lesson_code" / "distributed_03.py"
COMMITTED = ROOT / "docs" / "notebooks" / "distributed-03.ipynb"
RECORDING = ROOT / "recordings" / "distributed-03.cpu.json"


def test_cells_are_the_lesson_sections_in_file_order():
    _, blocks = source_blocks(LESSON.read_text())
    names = [name for name, _ in blocks if name]
    source = LESSON.read_text()
    assert names == sorted(names, key=lambda n: source.index(f"[start:{n}]"))
    assert {"configure_devices", "run_lesson", "make_it_yours"} <= set(names)
    assert not any('__name__ == "__main__"' in code for _, code in blocks)


def test_the_committed_notebook_printed_exactly_the_committed_recording():
    import json

    notebook = nbformat.read(COMMITTED, as_version=4)
    printed = stdout_of(notebook)
    assert printed == json.loads(RECORDING.read_text())["stdout"]
    assert printed.rstrip().endswith("PASS: distributed-03")
    assert not any("_json.dump" in cell.source for cell in notebook.cells)


def test_downloaded_notebook_runs_top_to_bottom_in_a_fresh_kernel(tmp_path):
    # The committed file as a reader downloads it, outputs cleared, in an empty folder:
    # nothing from this repository is importable there.
    notebook = nbformat.read(COMMITTED, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    execute(notebook, tmp_path)
    printed = "".join(out.get("text", "") for out in notebook.cells[-1].outputs)
    assert printed.rstrip().endswith("PASS: distributed-03")
    assert printed.count("Gradient reference:") == 1


def test_a_fresh_build_matches_the_committed_cells():
    fresh = build_notebook(LESSON, "distributed-03")
    committed = nbformat.read(COMMITTED, as_version=4)
    assert [c.source for c in fresh.cells] == [c.source for c in committed.cells]


def test_the_notebook_teaches_and_holds_no_command_line_plumbing():
    notebook = build_notebook(LESSON, "distributed-03")
    code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    for plumbing in ("def environment_problem", "class SetupError", "class OneLineParser",
                     "def parse_args", "def main", "argparse", "sys.exit"):
        assert plumbing not in code, plumbing
    headings = [line[3:] for cell in notebook.cells if cell.cell_type == "markdown"
                for line in cell.source.splitlines() if line.startswith("## ")]
    # Every heading is one a page shows (the sections' titles there), or the run cell's.
    page_headings = {line.lstrip("#").strip() for page in (ROOT / "docs").rglob("*.md")
                     for line in page.read_text().splitlines() if line.startswith("##")}
    assert set(headings) - page_headings == {"Set up the devices and run everything"}
    # The steps keep the page's titles.
    assert "Step 1 · Configure four logical devices" in headings

"""The notebook companion: cut from the lesson module, and runnable in a fresh kernel."""
import nbformat

from conftest import ROOT
from lesson_hashes import content_hash
from notebook import build_notebook, execute, source_blocks

LESSON = ROOT / "lesson_code" / "distributed_03.py"
COMMITTED = ROOT / "docs" / "notebooks" / "distributed-03.ipynb"


def test_cells_are_the_lesson_sections_in_file_order():
    _, blocks = source_blocks(LESSON.read_text())
    names = [name for name, _ in blocks if name]
    source = LESSON.read_text()
    assert names == sorted(names, key=lambda n: source.index(f"[start:{n}]"))
    assert {"configure_devices", "run_lesson", "make_it_yours"} <= set(names)
    assert not any('__name__ == "__main__"' in code for _, code in blocks)


def test_committed_notebook_is_executed_from_the_current_code():
    notebook = nbformat.read(COMMITTED, as_version=4)
    assert notebook.metadata["lesson"]["contentHash"] == content_hash(LESSON)
    outputs = "".join(out.get("text", "") for cell in notebook.cells
                      if cell.cell_type == "code" for out in cell.get("outputs", []))
    assert outputs.rstrip().endswith("PASS: distributed-03")


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
    fresh = build_notebook(LESSON, "distributed-03", content_hash(LESSON))
    committed = nbformat.read(COMMITTED, as_version=4)
    assert [c.source for c in fresh.cells] == [c.source for c in committed.cells]

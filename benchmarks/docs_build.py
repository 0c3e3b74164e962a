"""The docs build against the build a reader of mkdocs-jupyter would expect: a benchmark.

    python benchmarks/docs_build.py [--pairs 5]

Times `mkdocs build --strict` of this site against an mkdocs-jupyter site that executes the
first lesson's notebook companion (its cells, outputs cleared) as it builds, in turns,
A B A B, and prints the ratio of each pair and their median. The target (issue 40): the
site's build at most 0.5 times the executing one; it reads recordings and never runs JAX.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.store.lessons import load_lessons  # noqa: E402
from scripts.store.outputs import for_lesson  # noqa: E402


def executing_site(folder):
    """A one-page mkdocs-jupyter site that executes the companion notebook, outputs cleared,
    at every build (its cache off: otherwise every build after the first reads the last)."""
    lesson = next(iter(load_lessons().values()))
    notebook = json.loads((ROOT / for_lesson(lesson).notebook).read_text(encoding="utf-8"))
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "lesson.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    (folder / "mkdocs.yml").write_text(
        "site_name: executing\ntheme: {name: material}\nnav: [lesson.ipynb]\n"
        "plugins: [{mkdocs-jupyter: {execute: true, cache: false}}]\n", encoding="utf-8")
    return folder


def timed(command, cwd):
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    return time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="docs-build-") as scratch:
        scratch = Path(scratch)
        reference = executing_site(scratch / "executing")
        ours = [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(scratch / "a")]
        theirs = [sys.executable, "-m", "mkdocs", "build", "-d", str(scratch / "b")]
        timed(ours, ROOT), timed(theirs, reference)  # warm-up: caches, compiled bytecode
        ratios = []
        for pair in range(args.pairs):
            load = os.getloadavg()[0]
            a, b = timed(ours, ROOT), timed(theirs, reference)
            ratios.append(a / b)
            print(f"pair {pair + 1}: site {a:.2f} s, executing {b:.2f} s, ratio {a / b:.2f} "
                  f"(load {load:.2f})")
    print(f"median ratio {statistics.median(ratios):.2f} over {len(ratios)} pairs "
          f"(target at most 0.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

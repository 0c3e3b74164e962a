"""The lesson page's code: its snippets run when pasted in page order, and the JAX error it
quotes is the one JAX raises. (Its prose budget is `make lint`'s: tests/lint_budgets.py.)"""
import re

import pytest

from conftest import LESSONS, ROOT, SEED, module_file
from harness import passed, run, snippet_sections

PAGE = ROOT / "docs" / "lessons" / f"{SEED.id}.md"  # the seed's own content


@pytest.mark.slow
def test_the_steps_run_when_pasted_in_page_order_and_raise_the_error_the_page_quotes(tmp_path):
    page = PAGE.read_text()
    names = re.findall(r'--8<-- "' + re.escape(module_file(SEED)) + r':(\w+)"', page)
    sections, steps = snippet_sections(SEED.path()), names[:names.index("measure") + 1]
    assert steps[0] == "configure_devices" and len(steps) >= 7, steps
    quoted = re.search(r"```text\n(out_specs is P\(\).*?)\n```", page, re.DOTALL)
    assert quoted, "the page quotes JAX's replication error in a ```text block"
    program = tmp_path / "program.py"
    program.write_text("\n\n".join(sections[name] for name in steps) + """
devices = configure_devices("cpu", 4)
mesh = data_mesh(devices)
problem = make_problem(len(devices))
x, y, w = place(mesh, problem)
programs = build_programs(mesh, problem.n_total)
sliced = programs.shard_gradient(x, y, w)
assert_matches(sliced, reference_gradient(problem), slice_len=2)
print(shard_listing(sliced)[1][:2], len(completed_samples(programs.gather, sliced)))

import numpy as np
from jax.sharding import PartitionSpec as P
gather = jax.jit(jax.shard_map(lambda g: jax.lax.all_gather(g, "data", tiled=True),
                               mesh=mesh, in_specs=P("data"), out_specs=P()))
try:
    gather(np.arange(8, dtype=np.float32))
except ValueError as error:
    print(" ".join(str(error).split()))
""")
    listing, error = passed(run(program, cwd=tmp_path, timeout=120)).stdout.strip().split("\n", 1)
    assert listing == "(1, '2:4') 25"
    assert " ".join(quoted.group(1).split()) in error, error


def test_the_lesson_links_every_going_further_page_and_no_heading_holds_tex():
    page = PAGE.read_text()
    for name in ("ring-simulator", "processes", "sweep", "tpu"):
        assert f"../going-further/{name}.md" in page, name
    assert f"(../{module_file(SEED)})" in page  # the program, downloadable
    pages = [ROOT / "docs" / "lessons" / f"{lesson.id}.md" for lesson in LESSONS.values()]
    for path in [*pages, *sorted((ROOT / "docs" / "going-further").glob("*.md"))]:
        text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.MULTILINE | re.DOTALL)
        for heading in re.findall(r"^#+ .*$", text, re.MULTILINE):
            assert "$" not in heading and "\\(" not in heading, f"{path.name}: {heading}"

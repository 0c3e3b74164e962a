"""The lesson page's code: its snippets runnable in the order the page shows them, and the
JAX error it quotes the one JAX really raises. (Its prose budget is `make lint`'s,
tests/lint_budgets.py.)"""
import os
import re
import subprocess
import sys

import pytest

from conftest import LESSONS, ROOT, SEED, module_file

# The seed lesson's page: the tests below that read it are about that lesson's content.
PAGE = ROOT / "docs" / "lessons" / f"{SEED.id}.md"


def clean_env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JAX_", "XLA_")) and k != "PYTHONPATH"}
    return {**env, "PYTHONDONTWRITEBYTECODE": "1"}


def run_alone(tmp_path, program):
    """`program` run as a file outside the repository: nothing else to import."""
    script = tmp_path / "program.py"
    script.write_text(program)
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=clean_env(),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


@pytest.mark.slow
def test_the_steps_run_when_pasted_in_page_order(tmp_path):
    """A learner who pastes Step 1 to Step 7 into an empty file, in order, can run it."""
    names = re.findall(r'--8<-- "' + re.escape(module_file(SEED)) + r':(\w+)"', PAGE.read_text())
    sections = {m[1]: m[2] for m in re.finditer(
        r"^# --8<-- \[start:(\w+)\]\n(.*?)^# --8<-- \[end:\1\]$", SEED.path().read_text(),
        re.MULTILINE | re.DOTALL)}
    steps = names[:names.index("measure") + 1]
    assert steps[0] == "configure_devices" and len(steps) >= 7, steps
    printed = run_alone(tmp_path, "\n\n".join(sections[name] for name in steps) + """
devices = configure_devices("cpu", 4)
mesh = data_mesh(devices)
problem = make_problem(len(devices))
x, y, w = place(mesh, problem)
programs = build_programs(mesh, problem.n_total)
sliced = programs.shard_gradient(x, y, w)
assert_matches(sliced, reference_gradient(problem), slice_len=2)
print(shard_listing(sliced)[1][:2], len(completed_samples(programs.gather, sliced)))
""")
    assert printed.strip() == "(1, '2:4') 25"


@pytest.mark.slow
def test_the_page_quotes_the_error_jax_raises_without_invarying(tmp_path):
    quoted = re.search(r"```text\n(out_specs is P\(\).*?)\n```", PAGE.read_text(), re.DOTALL)
    assert quoted, "the page quotes JAX's replication error in a ```text block"
    printed = run_alone(tmp_path, """
import jax
jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_num_cpu_devices", 4)
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P
mesh = Mesh(np.asarray(jax.devices()), ("data",))
gather = jax.jit(jax.shard_map(lambda g: jax.lax.all_gather(g, "data", tiled=True),
                               mesh=mesh, in_specs=P("data"), out_specs=P()))
try:
    gather(np.arange(8, dtype=np.float32))
except ValueError as error:
    print(" ".join(str(error).split()))
""")
    assert " ".join(quoted.group(1).split()) in printed, printed


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

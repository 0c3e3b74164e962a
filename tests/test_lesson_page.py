"""The lesson page's shape: short enough to read in one sitting, its snippets runnable in
order, and the JAX error it quotes the one JAX really raises."""
import os
import re
import subprocess
import sys

import pytest

from conftest import LESSONS, ROOT, SEED, each_lesson, module_file, recording_name

# The seed lesson's page: the tests below that read it are about that lesson's content.
PAGE = ROOT / "docs" / "lessons" / f"{SEED.id}.md"
LESSON_FILE = SEED.path()
# The published lesson has about 2,000 words of prose; the page may be 1.5 times that.
MAX_PROSE_WORDS = 3000

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,}).*?^(?P=indent)(?P=fence)[ \t]*$",
                   re.MULTILINE | re.DOTALL)
FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.DOTALL)
SNIPPET = re.compile(r'^[ \t]*--8<--.*$', re.MULTILINE)
DIRECTIVE = re.compile(r"\{\{.*?\}\}", re.DOTALL)
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def prose_words(markdown):
    """Words a reader reads: code, snippet includes, directives and comments removed."""
    for pattern in (FRONT_MATTER, FENCE, COMMENT, SNIPPET, DIRECTIVE):
        markdown = pattern.sub(" ", markdown)
    return [word for word in markdown.split() if re.search(r"[A-Za-z0-9]", word)]


def test_prose_words_leaves_out_code_and_directives():
    page = ("---\nlesson: x\n---\n# Two words\n\n```python\nimport a, b, c\n```\n"
            "    ```text\n    recorded output\n    ```\n"
            '--8<-- "lesson_code/x.py:y"\n{{ rec:a:b|g }} <!-- a note -->\n- one | two\n')
    assert prose_words(page) == ["Two", "words", "one", "two"]


def lesson_page(lesson):
    """A lesson's page: docs/lessons/<id>.md (lesson_code/CONTRACT.md)."""
    return ROOT / "docs" / "lessons" / f"{lesson.id}.md"


@each_lesson
def test_each_lesson_page_is_at_most_one_and_a_half_times_the_published_prose(lesson):
    page = lesson_page(lesson)
    assert page.is_file(), f"{lesson.id} has no page: write {page.relative_to(ROOT)}"
    words = len(prose_words(page.read_text()))
    assert words <= MAX_PROSE_WORDS, \
        f"{page.relative_to(ROOT)} has {words} words of prose, over {MAX_PROSE_WORDS}; " \
        f"move the deeper material to a page under docs/going-further/"


def page_snippets(page_text, source):
    """The sections of `source` the page includes, in the order the page shows them."""
    names = re.findall(r'--8<-- "' + re.escape(module_file(SEED)) + r':(\w+)"', page_text)
    sections = {m.group(1): m.group(2) for m in re.finditer(
        r"^# --8<-- \[start:(\w+)\]\n(.*?)^# --8<-- \[end:\1\]$", source,
        re.MULTILINE | re.DOTALL)}
    return names, sections


def clean_env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JAX_", "XLA_")) and k != "PYTHONPATH"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


@pytest.mark.slow
def test_the_steps_run_when_pasted_in_page_order(tmp_path):
    """A learner who pastes Step 1 to Step 7 into an empty file, in order, can run it."""
    names, sections = page_snippets(PAGE.read_text(), LESSON_FILE.read_text())
    steps = names[:names.index("measure") + 1]
    assert steps[0] == "configure_devices" and len(steps) >= 7, steps
    pasted = "\n\n".join(sections[name] for name in steps) + """
devices = configure_devices("cpu", 4)
mesh = data_mesh(devices)
problem = make_problem(len(devices))
x, y, w = place(mesh, problem)
programs = build_programs(mesh, problem.n_total)
sliced = programs.shard_gradient(x, y, w)
assert_matches(sliced, reference_gradient(problem), slice_len=2)
print(shard_listing(sliced)[1][:2], len(completed_samples(programs.gather, sliced)))
"""
    script = tmp_path / "pasted.py"  # outside the repository: nothing else to import
    script.write_text(pasted)
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=clean_env(),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "(1, '2:4') 25"


@pytest.mark.slow
def test_the_page_quotes_the_error_jax_raises_without_invarying(tmp_path):
    quoted = re.search(r"```text\n(out_specs is P\(\).*?)\n```", PAGE.read_text(), re.DOTALL)
    assert quoted, "the page quotes JAX's replication error in a ```text block"
    script = tmp_path / "no_invarying.py"
    script.write_text("""
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
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=clean_env(),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert " ".join(quoted.group(1).split()) in run.stdout, run.stdout


def test_every_going_further_page_is_linked_from_the_lesson():
    page = PAGE.read_text()
    for name in ("ring-simulator", "processes", "sweep", "tpu"):
        assert f"../going-further/{name}.md" in page, name
    assert f"(../{module_file(SEED)})" in page  # the program, downloadable


def test_no_heading_holds_tex():
    pages = [lesson_page(lesson) for lesson in LESSONS.values()]
    for path in [*pages, *sorted((ROOT / "docs" / "going-further").glob("*.md"))]:
        text = FENCE.sub("", path.read_text())
        for heading in re.findall(r"^#+ .*$", text, re.MULTILINE):
            assert "$" not in heading and "\\(" not in heading, f"{path.name}: {heading}"


def test_the_recording_keeps_every_timing_sample_and_the_page_reads_the_analysis():
    """Recordings hold what was measured (every sample of every interleaved block, the
    order, the host's load); statistics and words come from the derived analysis."""
    import json
    data = json.loads((ROOT / recording_name(SEED)).read_text())["data"]
    timing = data["timing"]
    assert "timingVerdict" not in data
    names = ["all_reduce", "reduce_scatter", "all_gather_only"]
    assert sorted(timing["samplesUs"]) == sorted(names)
    assert all(len(blocks) == timing["blocks"] >= 5 for blocks in timing["samplesUs"].values())
    assert all(len(block) == timing["samplesPerBlock"] for blocks in timing["samplesUs"].values()
               for block in blocks)
    # The programs take turns: each block starts with another program.
    assert len({turn[0] for turn in timing["order"]}) == len(names)
    assert sorted(timing["hostBefore"]) == ["cores", "loadAverage1m"]
    page = PAGE.read_text()
    assert "{{ rec:" + SEED.id + ".cpu.analysis:timing.programs.all_reduce.words }}" in page
    assert "{{ rec:" + SEED.id + ".cpu.analysis:timing.host.words }}" in page

"""One freshness model: each output's inputs, what changed, and the one command that fixes it.

Every check here edits a copy of the committed tree and asks what `record.py --check` says
of it: freshness.check() in-process, or the command itself where how it runs is the point
(its imports, a missing package, the locale); nothing is recorded.
"""
import hashlib
import json
import re
import subprocess
import sys

import pytest

from conftest import (FIRST_LESSON, SEED, clean_env, each_lesson, module_file, project_copy,
                      recording_name, rederive_analyses)
from scripts.store import hashes
from scripts.store.freshness import check
from scripts.store.lessons import load_lessons
from scripts.store.outputs import (analysis_outputs, figure_data_outputs, figure_outputs,
                                   lesson_command, notebook_output)

# The seed lesson: the tests below that follow its rank module, sweep, analyses and
# mechanism table are about what it is made of; the others run for every lesson.
LESSON_ID = SEED.id
LESSON = module_file(SEED)
STEM = SEED.module.rsplit(".", 1)[1]  # its other modules are named after it
RENDER = "`python scripts/record.py --render-only`"


def record_fix(lesson, command="python scripts/record.py"):
    """The fix a line names: with `--lesson <id>` once the registry lists others."""
    return f"`{lesson_command(lesson, command)}`"


RECORD = record_fix(SEED)
PROCESSES = record_fix(SEED, "python scripts/record.py --processes 4")
# A path may hold \xNN: the bytes of a name that is not UTF-8 (scripts.display).
LINE = re.compile(r"^[\w./\\-]+: .+; run `[^`]+`$")


def drawings(figure):
    """A figure, its variants (scripts/figures/variants.py) and its data (CSV, JSON, drawn
    by the same renderer from the same input): each a file of its own."""
    return [f"{figure.removesuffix('.svg')}{suffix}"
            for suffix in (".svg", "-dark.svg", "-narrow.svg", "-narrow-dark.svg", ".csv",
                           ".json")]


def edit(path, change):
    path.write_text(change(path.read_text()))


def append_comment(text):
    return text + "\n# A reader's note: the comment is part of what the page shows.\n"


def append_code(text):
    """A change to what the module executes (a comment would key nothing new)."""
    return text + "\nA_READERS_CONSTANT = 1\n"


def run_check(root, *python_flags):
    code = ("import sys; sys.argv = ['record.py', '--check']; "
            "sys.path.insert(0, '.'); from scripts import record; sys.exit(record.main())")
    return subprocess.run([sys.executable, *python_flags, "-c", code], cwd=root,
                          env=clean_env(PYTHONDONTWRITEBYTECODE="1"), capture_output=True,
                          text=True, timeout=120)


def problems(root):
    """What `record.py --check` prints for the checkout at `root`: freshness.check(), the
    one function it calls, run in-process on that checkout's registry. Its file names are
    relative to that checkout, as record.py, run there, names them."""
    lines = [line.replace(f"{root}/", "") for line in check(load_lessons(root), root)]
    assert all(LINE.match(line) for line in lines), lines
    return lines


@pytest.fixture
def tree(tmp_path):
    return project_copy(tmp_path.resolve() / "repo")


def lesson_hash(root, module=LESSON):
    return hashes.content_hash(root / module, root)


def in_a_section(text, line):
    """`text` with `line` added inside its first snippet section, which the notebook shows."""
    marker = text.index("# --8<-- [start:")
    end = text.index("\n", marker) + 1
    return text[:end] + line + text[end:]


@each_lesson
@pytest.mark.parametrize("shown_edit", [
    lambda t: in_a_section(t, "# A reader's note: shown by the notebook and the page.\n"),
    lambda t: t.replace('"""', '"""A docstring that reads better. ', 1),
])
def test_a_comment_or_docstring_re_renders_the_notebook_and_re_records_nothing(tree, shown_edit,
                                                                                lesson):
    # A recording is keyed on the code as executed: comments and docstrings cannot change
    # what the program measures. The notebook shows the text, so it alone is stale.
    module = module_file(lesson)
    before = lesson_hash(tree, module)
    edit(tree / module, shown_edit)
    assert lesson_hash(tree, module) == before
    assert problems(tree) == [f"docs/notebooks/{lesson.id}.ipynb: stale, {module} changed; "
                              f"run {record_fix(lesson)}"]


@each_lesson
def test_a_heading_over_a_shown_section_re_renders_the_notebook_and_re_records_nothing(
        tree, lesson):
    """The notebook titles its cells with the headings the pages show each section under
    (scripts/runners/notebook.py page_titles), so those pages are its inputs too: a heading
    edit makes it stale, and record.py re-renders it from the executed cells."""
    from scripts.store.outputs import read_lock
    from scripts.plan import RERENDER, notebook_step

    page = next(path for path in notebook_output(lesson).text_inputs(tree)
                if path.startswith("docs/"))
    edit(tree / page, lambda text: re.sub(r"^## (.+)$", r"## \1, retitled", text, count=1,
                                          flags=re.M))
    assert problems(tree) == [f"docs/notebooks/{lesson.id}.ipynb: stale, {page} changed; "
                              f"run {record_fix(lesson)}"]
    step = notebook_step(load_lessons(tree)[lesson.id], read_lock(tree))
    assert step.fix == RERENDER and ", retitled" in step.text


def test_a_code_edit_in_the_lesson_asks_for_a_re_record_naming_the_file(tree):
    edit(tree / LESSON, lambda t: t + "\nUNUSED_BY_THE_LESSON = 1\n")
    lines = problems(tree)
    assert f"recordings/{LESSON_ID}.cpu.json: stale, {LESSON} changed; run {RECORD}" in lines
    # The rank module imports the lesson, so the process run is stale too, and the
    # notebook, which shows the module (it is remade by the same run).
    assert f"recordings/{LESSON_ID}.cpu-processes.json: stale, {LESSON} changed; run " \
           f"{PROCESSES}" in lines
    assert f"docs/notebooks/{LESSON_ID}.ipynb: stale, {LESSON} changed; run {RECORD}" in lines
    assert len(lines) == 3


def test_a_renderer_edit_asks_for_a_re_render_only(tree):
    edit(tree / "scripts" / "figures" / "sweep.py", append_comment)
    # sweep.py is shared by both sweep figures (their layout): each of their drawings.
    assert sorted(problems(tree)) == sorted(
        f"{drawing}: stale, scripts/figures/sweep.py changed; run {RENDER}"
        for figure in ("sweep", "sweep-ratios")
        for drawing in drawings(f"figures/{LESSON_ID}-{figure}.svg"))


def test_the_shared_svg_helper_is_part_of_every_figure(tree):
    edit(tree / "scripts" / "figures" / "svg.py", append_comment)
    lines = problems(tree)
    # Every figure of every registered lesson and its data, and nothing else.
    assert {line.split(":")[0] for line in lines} == {
        output.path for lesson in load_lessons(tree).values()
        for output in [*figure_outputs(lesson), *figure_data_outputs(lesson)]}
    assert all(line.endswith(f"scripts/figures/svg.py changed; run {RENDER}")
               for line in lines)


def test_a_caption_edit_redraws_the_figure_and_re_records_nothing(tree):
    edit(tree / "lesson_code" / "figures" / f"{LESSON_ID}-mechanism.json",
         lambda t: t.replace("Table with one row", "A table with one row"))
    assert problems(tree) == [
        f"{figure}: stale, lesson_code/figures/{LESSON_ID}-mechanism.json changed; run {RENDER}"
        for figure in drawings(f"figures/{LESSON_ID}-mechanism.svg")]


def test_the_notebook_builder_is_an_input_of_every_notebook(tree):
    edit(tree / "scripts" / "runners/notebook.py", append_comment)
    # One line per registered lesson, its fix naming the lesson once there are several.
    assert problems(tree) == [
        f"docs/notebooks/{lesson.id}.ipynb: stale, scripts/runners/notebook.py changed; run "
        f"`{notebook_output(lesson).fix}`" for lesson in load_lessons(tree).values()]


def test_the_sweep_measurement_is_stale_only_when_its_measuring_code_changes(tree):
    edit(tree / module_file(SEED, SEED.sweep), append_code)
    assert problems(tree) == [f"recordings/{LESSON_ID}.sweep.json: stale, "
                              f"{module_file(SEED, SEED.sweep)} changed; run `make bench`"]


def test_a_wording_change_in_an_analysis_asks_for_render_only_never_a_re_measure(tree):
    """The words a page prints come from the derived analysis: rewording one, or changing
    a threshold or the statistics, re-renders the analyses and what is drawn from them;
    no recording goes stale (content review M5, style review problem 1)."""
    edit(tree / "lesson_code" / f"{STEM}_sweep_analysis.py",
         lambda t: t.replace("TOLERANCE = 1.25", "TOLERANCE = 1.5", 1))
    # The figure drawn from the sweep's analysis follows when --render-only remakes it.
    assert sorted(problems(tree)) == sorted([
        *[f"recordings/analysis/{LESSON_ID}.{variant}.json: stale, "
          f"lesson_code/{STEM}_sweep_analysis.py changed; run {RENDER}"
          for variant in ("cpu", "cpu-processes", "sweep")]])
    edit(tree / "scripts" / "intervals.py", append_code)
    assert all(line.endswith(f"run {RENDER}") for line in problems(tree))


def test_how_an_analysis_is_kept_is_an_input_of_every_analysis_and_of_nothing_else(tree):
    edit(tree / "scripts" / "analysis_text.py", append_comment)
    # An analysis of a hardware run that is not here (the TPU sweep) is not expected.
    assert sorted(problems(tree)) == sorted(
        f"{output.path}: stale, scripts/analysis_text.py changed; run {RENDER}"
        for lesson in load_lessons(tree).values() for output in analysis_outputs(lesson)
        if (tree / output.source).exists())


def test_a_format_change_redraws_and_re_measures_nothing(tree):
    # How sizes are written (scripts/units.py) is no input of any recording: only the
    # figures that print sizes import it, and the analysis that writes the sweep's size
    # labels (one module for all its variants).
    edit(tree / "scripts" / "units.py", append_code)
    assert sorted(problems(tree)) == sorted([
        *[f"{drawing}: stale, scripts/units.py changed; run {RENDER}"
          for figure in ("sweep", "sweep-ratios", "traffic", "tpu-predictions")
          for drawing in drawings(f"figures/{LESSON_ID}-{figure}.svg")],
        *[f"recordings/analysis/{LESSON_ID}.{variant}.json: stale, scripts/units.py changed; "
          f"run {RENDER}" for variant in ("cpu", "cpu-processes", "sweep")]])


def test_the_bench_cli_is_no_input_of_any_recording(tree):
    edit(tree / "scripts" / "bench.py", append_comment)
    assert problems(tree) == []


def test_a_deleted_renderer_fails_the_check(tree):
    (tree / "scripts" / "figures" / "traffic.py").unlink()
    assert problems(tree) == [f"{figure}: its code "
                              f"scripts/figures/traffic.py is missing; restore it, or drop the "
                              f"figure from lesson_code/lessons.toml, then; run {RENDER}"
                              for figure in drawings(f"figures/{LESSON_ID}-traffic.svg")]


def test_a_missing_or_orphan_variant_is_named(tree):
    """A variant is checked like the figure: missing, it is named with the command that
    draws it; an SVG no lesson's figure claims (a variant of a kind no longer drawn) is
    named with the command that removes it."""
    (tree / "figures" / f"{LESSON_ID}-sweep-narrow-dark.svg").unlink()
    (tree / "figures" / f"{LESSON_ID}-retired-dark.svg").write_text("<svg/>")
    assert problems(tree) == [
        f"figures/{LESSON_ID}-retired-dark.svg: belongs to no figure of a lesson in "
        f"lesson_code/lessons.toml (scripts/figures/__init__.py names each kind's files); "
        f"run `git rm figures/{LESSON_ID}-retired-dark.svg`",
        f"figures/{LESSON_ID}-sweep-narrow-dark.svg: missing; run {RENDER}"]


def test_a_hand_edited_figure_is_named(tree):
    edit(tree / "figures" / f"{LESSON_ID}.svg", lambda t: t.replace("</svg>", "<!-- -->\n</svg>"))
    assert problems(tree) == [f"figures/{LESSON_ID}.svg: edited by hand since it was made; "
                              f"run {RENDER}"]


@pytest.mark.parametrize("corrupt, expected", [
    ("recordings/outputs.lock.json", "recordings/outputs.lock.json: unreadable"),
    (f"recordings/{LESSON_ID}.sweep.json", f"recordings/{LESSON_ID}.sweep.json: not valid JSON"),
    (f"recordings/{LESSON_ID}.cpu.json", f"recordings/{LESSON_ID}.cpu.json: not valid JSON"),
])
def test_a_corrupt_file_is_one_line_not_a_traceback(tree, corrupt, expected):
    (tree / corrupt).write_text("{not json")
    assert any(line.startswith(expected) for line in problems(tree))


def test_the_check_names_a_recording_path_that_is_a_directory(tree):
    path = tree / "recordings" / f"{LESSON_ID}.cpu.json"
    path.unlink()
    path.mkdir()
    assert any(line.startswith(f"recordings/{LESSON_ID}.cpu.json: is a directory")
               for line in problems(tree))


def test_a_missing_recording_names_the_command(tree):
    (tree / "recordings" / f"{LESSON_ID}.cpu.json").unlink()
    assert f"recordings/{LESSON_ID}.cpu.json: missing; run {RECORD}" in problems(tree)


@pytest.mark.slow
def test_check_imports_neither_jax_nor_matplotlib(tree):
    """How fast --check answers is a benchmark's question (paired farm-bench runs against
    a bare Python start); here only what it imports, which decides most of it."""
    run = run_check(tree, "-X", "importtime")
    assert run.returncode == 0, run.stdout
    imported = {line.rsplit("|", 1)[1].strip() for line in run.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    assert "jsonschema_rs" in imported  # the import log was read
    assert "jsonschema" not in imported  # only a refusal is worded by it
    assert sorted(m for m in imported if m.split(".")[0] in ("jax", "jaxlib", "matplotlib")) == []
    assert run_check(tree).returncode == 0


def test_a_pin_changes_the_content_hash_and_its_comment_does_not(tree):
    pins = tree / "requirements.txt"
    before = lesson_hash(tree)
    edit(pins, lambda t: re.sub(r"^(numpy==\S+)$", r"\1  # why this numpy", t, count=1,
                                flags=re.MULTILINE))
    edit(pins, lambda t: "# a new first comment\n\n" + t)
    assert lesson_hash(tree) == before
    edit(pins, lambda t: re.sub(r"^numpy==[\w.]+", "numpy==1.0.0", t, count=1,
                                flags=re.MULTILINE))
    assert lesson_hash(tree) != before
    assert f"recordings/{LESSON_ID}.cpu.json: stale, requirements.txt changed; run {RECORD}" \
        in problems(tree)


def test_a_runtime_pin_stales_the_analyses_too(tree):
    # Their intervals are SciPy's (scripts/intervals.py): a SciPy bump re-derives each
    # analysis, which names the pin file itself, not only through its recording.
    edit(tree / "requirements.txt",
         lambda t: re.sub(r"^scipy==\S+$", "scipy==1.0.0", t, count=1, flags=re.MULTILINE))
    found = problems(tree)
    derived = [variant for variant in SEED.analyses  # a hardware run's, once it is here
               if (tree / "recordings" / "analysis" / f"{LESSON_ID}.{variant}.json").exists()]
    assert derived
    for variant in derived:
        assert (f"recordings/analysis/{LESSON_ID}.{variant}.json: stale, requirements.txt "
                f"changed; run {RENDER}") in found, found


@pytest.mark.parametrize("tool", ["ruff", "pytest", "playwright", "mkdocs"])
def test_a_site_test_or_lint_pin_re_records_nothing(tree, tool):
    # mkdocs is the site's (requirements.txt); ruff, pytest and playwright the tests' and
    # the linter's (requirements-test.txt); constraints.txt repeats those it freezes.
    bumped = re.compile(rf"^({re.escape(tool)}==)\S+$", re.MULTILINE)
    pins = ("requirements.txt", "requirements-test.txt", "constraints.txt")
    for name in pins:
        edit(tree / name, lambda t: bumped.sub(r"\g<1>99.0.0", t))
    home = "requirements.txt" if tool == "mkdocs" else "requirements-test.txt"
    assert "99.0.0" in (tree / home).read_text()
    assert problems(tree) == []


def test_a_transitive_pin_of_the_runtime_re_records(tree):
    edit(tree / "constraints.txt",
         lambda t: re.sub(r"^ml_dtypes==\S+$", "ml_dtypes==0.0.1", t, flags=re.MULTILINE))
    assert f"recordings/{LESSON_ID}.cpu.json: stale, constraints.txt changed; run {RECORD}" \
        in problems(tree)


def test_files_the_lesson_does_not_import_leave_its_hash(tree):
    before = lesson_hash(tree)
    edit(tree / "lesson_code" / f"{STEM}_exercises.py", append_code)
    edit(tree / module_file(SEED, SEED.simulation), append_code)
    edit(tree / "scripts" / "figures" / "panels.py", append_code)
    assert lesson_hash(tree) == before


def test_a_module_the_lesson_imports_is_part_of_its_hash(tree):
    helper = tree / "lesson_code" / "lesson_helper.py"
    helper.write_text("SCALE = 1\n")
    edit(tree / LESSON, lambda t: t.replace(
        "import jax\n", "import jax\nfrom lesson_code.lesson_helper import SCALE\n", 1))
    before = lesson_hash(tree)
    assert "lesson_code/lesson_helper.py" in hashes.content_files(tree / LESSON, tree)
    edit(helper, append_comment)
    assert lesson_hash(tree) == before  # a comment: the same code
    edit(helper, lambda t: t.replace("SCALE = 1", "SCALE = 2"))
    assert lesson_hash(tree) != before


def cli_check(root, *python_flags):
    """`python scripts/record.py --check` as a reader types it."""
    return subprocess.run([sys.executable, *python_flags, "scripts/record.py", "--check"],
                          cwd=root, env=clean_env(PYTHONDONTWRITEBYTECODE="1"),
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_any_changed_byte_is_checked_afresh(tree):
    assert cli_check(tree).returncode == 0
    edit(tree / "figures" / f"{LESSON_ID}.svg", lambda t: t.replace("</svg>", "<!-- -->\n</svg>"))
    run = cli_check(tree)
    assert (run.returncode, run.stdout) == (1, f"figures/{LESSON_ID}.svg: edited by hand since "
                                               f"it was made; run {RENDER}\n")
    (tree / "figures" / f"{LESSON_ID}.svg").unlink()  # a file gone is a change too
    assert cli_check(tree).stdout == f"figures/{LESSON_ID}.svg: missing; run {RENDER}\n"


@pytest.mark.slow
def test_a_recording_validated_once_is_validated_again_when_its_bytes_change(tree):
    assert cli_check(tree).returncode == 0  # valid before the edit
    path = tree / "recordings" / f"{LESSON_ID}.cpu.json"
    edit(path, lambda t: t.replace('"schemaVersion": 1', '"schemaVersion": "one"', 1))
    lines = problems(tree)
    assert any(line.startswith(f"recordings/{LESSON_ID}.cpu.json: invalid at schemaVersion")
               for line in lines), lines


@pytest.mark.slow
def test_a_committed_cache_decides_nothing_check_says(tree):
    """A `.cache/memo/` a pull request commits (`git add -f`) once answered --check: one
    forged entry made a stale lesson pass. Nothing reads .cache now: with forged entries
    there, --check says exactly what it says without them."""
    committed_code = hashes.code_digest(tree / LESSON)  # what the recording is keyed on
    edit(tree / LESSON, append_code)
    without = cli_check(tree)
    recording = f"recordings/{LESSON_ID}.cpu.json"
    assert without.returncode == 1 and f"{recording}: stale, {LESSON} changed" in without.stdout
    memo = tree / ".cache" / "memo"
    memo.mkdir(parents=True)
    # The old memo's tables: the edited module's bytes answered with the committed code's
    # digest (so the lesson would read as current), a check answered "nothing stale", and
    # a table that is not JSON.
    key = hashlib.sha256((tree / LESSON).read_bytes()).hexdigest()
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    (memo / "module.json").write_text(json.dumps(
        {f"{key}:{version}": {"code": committed_code, "imports": []}}))
    (memo / "check.json").write_text(json.dumps({key: {"lines": [], "status": 0}}))
    (memo / "valid.json").write_text("{not json")
    forged = cli_check(tree)
    assert (forged.returncode, forged.stdout, forged.stderr) == \
        (without.returncode, without.stdout, without.stderr)


def test_an_analysis_of_a_hardware_run_is_expected_once_that_run_is_here(tree):
    """lessons.toml analyses the TPU sweep no VM has run yet: nothing is missing. Once the
    recording lands, its analysis is missing until --render-only makes it."""
    from fixtures.tpu_recording_fixture import write_tpu_sweep

    assert problems(tree) == []
    write_tpu_sweep(tree / "recordings" / f"{LESSON_ID}.tpu-sweep.json", tree)
    assert f"recordings/analysis/{LESSON_ID}.tpu-sweep.json: missing; run {RENDER}" in \
        problems(tree)


# --- committed JSON Python cannot hold, and names that are not UTF-8 (issue 37) ---------

@pytest.mark.parametrize("text, words", [('{"x": ' + "9" * 5000 + "}", "Exceeds the limit"),
                                         ("[" * 100_000 + "]" * 100_000, "nested deeper")],
                         ids=["a 5,000-digit integer", "100,000 nested arrays"])
@pytest.mark.parametrize("path", ["recordings/outputs.lock.json",
                                  f"recordings/{LESSON_ID}.simulation.json"])
def test_committed_json_python_cannot_hold_is_one_line_naming_the_file(tree, path, text,
                                                                       words):
    (tree / path).write_text(text)
    lines = [line for line in problems(tree) if line.startswith(f"{path}: ")]
    assert lines and all(words in line for line in lines), problems(tree)


def test_a_recording_whose_name_is_not_utf_8_is_one_line(tree):
    import os

    stray = os.fsdecode(b"caf\xe9.cpu.json")  # Latin-1, as a checkout on another system made it
    (tree / "recordings" / stray).write_text("{}")
    (tree / "figures" / stray.replace(".cpu.json", ".svg")).write_text("<svg/>")
    assert r"figures/caf\xe9.svg: belongs to no figure" in "\n".join(problems(tree))
    assert r"recordings/caf\xe9.cpu.json: belongs to no lesson in lesson_code/lessons.toml " \
           r"(a recording is named <lesson id>.<variant>.json); run `git rm " \
           r"recordings/caf\xe9.cpu.json`" in problems(tree)


# the lock, the import closure and recordings/ as untrusted input --------------------------

@pytest.mark.parametrize("entry", [{"sha256": "0" * 64, "inputs": []},
                                   {"sha256": "0" * 64, "inputs": None},
                                   {"sha256": "0" * 64}, {"inputs": {}},
                                   {"sha256": 3, "inputs": {}},
                                   {"sha256": "0" * 64, "inputs": {"a.py": 1}}])
def test_a_malformed_lock_entry_is_one_line(tmp_path, entry):
    from scripts.store.outputs import LockError, read_lock

    (tmp_path / "recordings").mkdir()
    (tmp_path / "recordings" / "outputs.lock.json").write_text(
        json.dumps({"figures/x.svg": entry}))
    with pytest.raises(LockError) as refused:
        read_lock(tmp_path)
    assert "\n" not in str(refused.value) and "'figures/x.svg'" in str(refused.value)


@pytest.mark.parametrize("content, words", [(b"def broken(:\n", "not valid Python (line 1"),
                                            (b"x = '\xff\xfe'\n", "not UTF-8"),
                                            (b"x = 1\x00\n", "not valid Python")])
def test_an_unreadable_module_in_an_import_closure_is_one_line(tmp_path, content, words):
    from scripts.store.hashes import ClosureError, import_closure

    (tmp_path / "lesson_code").mkdir()
    (tmp_path / "lesson_code" / "lesson.py").write_text("import lesson_code.helper\n")
    (tmp_path / "lesson_code" / "helper.py").write_bytes(content)
    with pytest.raises(ClosureError) as refused:
        import_closure(tmp_path / "lesson_code" / "lesson.py", tmp_path)
    assert str(refused.value).startswith("lesson_code/helper.py: " + words)


@pytest.fixture(scope="module")
def ascii_project(tmp_path_factory):
    from conftest import project_copy

    return project_copy(tmp_path_factory.mktemp("ascii") / "project")


def ascii_locale_run(root, *args):
    from conftest import clean_env

    # No UTF-8 mode and no locale coercion: Python's default encoding is then ASCII.
    env = clean_env(LC_ALL="C", LANG="C", PYTHONCOERCECLOCALE="0", PYTHONUTF8="0")
    return subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True,
                          text=True, encoding="utf-8", timeout=300)


def test_check_reads_utf_8_in_an_ascii_locale(ascii_project):
    run = ascii_locale_run(ascii_project, "scripts/record.py", "--check")
    assert "codec" not in run.stderr + run.stdout and "Traceback" not in run.stderr
    assert run.returncode in (0, 1) and run.stderr == ""
    assert all("; run `" in line for line in run.stdout.splitlines())


def test_check_names_a_closure_module_that_is_not_python(ascii_project, tmp_path):
    import shutil

    root = shutil.copytree(ascii_project, tmp_path / "project", symlinks=True)
    (root / "lesson_code" / "ring.py").write_bytes(b"def broken(:\n")
    run = ascii_locale_run(root, "scripts/record.py", "--check")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr.strip() == ("error: lesson_code/ring.py: not valid Python (line 1: "
                                  "invalid syntax); fix that file")


def test_check_names_a_malformed_lock_entry(ascii_project, tmp_path):
    import shutil

    root = shutil.copytree(ascii_project, tmp_path / "project", symlinks=True)
    lock = root / "recordings" / "outputs.lock.json"
    entries = json.loads(lock.read_text())
    name = sorted(entries)[0]
    entries[name]["inputs"] = []
    lock.write_text(json.dumps(entries))
    run = ascii_locale_run(root, "scripts/record.py", "--check")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert any(line.startswith(f"recordings/outputs.lock.json: the entry for {name!r}")
               for line in run.stdout.splitlines()), run.stdout


def test_a_recording_of_an_unknown_variant_says_to_remove_it(tmp_path):
    from conftest import project_copy
    from scripts.store.freshness import check
    from scripts.store.lessons import load_lessons

    root = project_copy(tmp_path / "project", parts=("scripts", "lesson_code", "recordings",
                                                     "figures", "docs", "requirements.txt",
                                                     "constraints.txt"))
    weird = recording_name(FIRST_LESSON, "weird")
    (root / weird).write_text("{not json")
    lines = check(load_lessons(root), root)
    assert (f"{weird}: not valid JSON" in "\n".join(lines))
    assert any(f"{weird}: not valid JSON" in line and line.endswith(f"run `git rm {weird}`")
               for line in lines)


@pytest.mark.parametrize("name, text", [("other.json", "{not json"), ("notes.JSON", "{}"),
                                        ("psum-99.cpu.json", "{}")])
def test_a_json_file_no_lesson_claims_fails_check_and_the_build(tmp_path, name, text):
    from conftest import project_copy
    from scripts.store.freshness import check, load_all
    from scripts.store.lessons import load_lessons

    root = project_copy(tmp_path / "project", parts=("scripts", "lesson_code", "recordings",
                                                     "figures", "docs", "requirements.txt",
                                                     "constraints.txt"))
    (root / "recordings" / name).write_text(text)
    lessons = load_lessons(root)
    expected = (f"recordings/{name}: belongs to no lesson in lesson_code/lessons.toml "
                f"(a recording is named <lesson id>.<variant>.json); run `git rm "
                f"recordings/{name}`")
    assert expected in check(lessons, root)
    assert expected in load_all(lessons, root)[1]  # the build's on_config stops on it


@pytest.mark.parametrize("stale", [False, True])
def test_the_site_gets_a_stale_hardware_recording_marked_not_refused(tree, stale):
    """load_all: the TPU recording comes back as a Loaded value naming what changed since
    it was made, and no line stops the build (CI cannot re-run a TPU job)."""
    from fixtures.tpu_recording_fixture import write_tpu_recording
    from scripts.store.freshness import load_all

    lesson = load_lessons(tree)[LESSON_ID]
    write_tpu_recording(tree / recording_name(lesson, "tpu"), lesson.path(), tree,
                        stale=stale)
    rederive_analyses(tree)  # its analysis, as `--render-only` makes it once it lands
    loaded, lines = load_all(load_lessons(tree), tree)
    tpu = loaded[f"{LESSON_ID}.tpu"]
    assert (tpu.stem, tpu.path, tpu.recording["lessonId"]) == \
        (f"{LESSON_ID}.tpu", recording_name(lesson, "tpu"), LESSON_ID)
    assert bool(tpu.stale) == stale and set(tpu.stale) <= set(tpu.recording["contentFiles"])
    assert lines == [] and loaded[f"{LESSON_ID}.cpu"].stale == ()
    assert loaded[f"{LESSON_ID}.cpu.analysis"].path == f"recordings/analysis/{LESSON_ID}.cpu.json"

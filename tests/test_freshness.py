"""One freshness model: each output's inputs, what changed, and the one command that fixes
it, asked of an edited copy of the tree (freshness.check() in-process, as --check calls it)."""
import ast
import json
import modulefinder
import os
import re
import tempfile
import tokenize
from io import BytesIO
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from conftest import ROOT, SEED, module_file, recording_name
from fixtures.tpu_recording_fixture import write_tpu_sweep
from harness import edit, project, raised_in_one_line, run, written
from scripts import record
from scripts.plan import RERENDER, notebook_step
from scripts.runners.notebook import build_notebook
from scripts.store import hashes
from scripts.store.freshness import check, load_all
from scripts.store.lessons import load_lessons
from scripts.store.outputs import (LockError, analysis_outputs, figure_data_outputs,
                                   figure_outputs, lesson_command, notebook_output, read_lock,
                                   recording_outputs)

LESSON_ID = SEED.id
LESSON = module_file(SEED)
STEM = SEED.module.rsplit(".", 1)[1]  # its other modules are named after it
RENDER = "python scripts/record.py --render-only"
RECORD = lesson_command(SEED)
PROCESSES = lesson_command(SEED, "python scripts/record.py --processes 4")
# A path may hold \xNN: the bytes of a name that is not UTF-8 (scripts.display).
LINE = re.compile(r"^[\w./\\-]+: .+; run `[^`]+`$")


def drawings(figure):
    """A figure of the seed: its four variants and its data (CSV, JSON), each a file."""
    return [f"figures/{LESSON_ID}{figure}{suffix}"
            for suffix in (".svg", "-dark.svg", "-narrow.svg", "-narrow-dark.svg", ".csv",
                           ".json")]


def append_comment(text):
    return text + "\n# A reader's note: the comment is part of what the page shows.\n"


def append_code(text):
    """A change to what the module executes (a comment would key nothing new)."""
    return text + "\nA_READERS_CONSTANT = 1\n"


def problems(root):
    """What `record.py --check` prints for the checkout at `root`, names relative to it."""
    lines = [line.replace(f"{root}/", "") for line in check(load_lessons(root), root)]
    assert all(LINE.match(line) for line in lines), lines
    return lines


@pytest.fixture
def tree(tmp_path):
    return project(tmp_path.resolve() / "repo")


# --- an edit asks for exactly the work it invalidates ------------------------------------
# Each case: the file(s) edited, the edit, and the (output, fix) pairs --check then names.

def every_recording(root):
    return [(output.path, output.fix) for lesson in load_lessons(root).values()
            for output in recording_outputs(lesson, root) if output.required]


def every_analysis(root, reading=None, lessons=None):
    """Each analysis whose recording exists, of `lessons` (ids) only or whose code imports
    `reading`: a lesson's analysis need import no other lesson's, nor the course's statistics."""
    return [(output.path, RENDER) for lesson in load_lessons(root).values()
            if lessons is None or lesson.id in lessons
            for output in analysis_outputs(lesson) if (root / output.source).exists()
            and (reading is None or root / reading in imported(root / output.code, root))]


def imported(code, root):
    """The project's files `code` imports, as the standard library's modulefinder finds
    them: not by the closure under test."""
    finder = modulefinder.ModuleFinder(path=[str(root)])
    finder.run_script(str(code))
    return {Path(module.__file__) for module in finder.modules.values() if module.__file__}


def rendered(*figures):
    return [(path, RENDER) for figure in figures for path in drawings(figure)]


def pinned(package, version="99.0.0"):
    return lambda text: re.sub(rf"^({re.escape(package)}==)\S+$", rf"\g<1>{version}", text,
                               flags=re.MULTILINE)


THE_LESSON_S_RUN = [(recording_name(SEED), RECORD),  # the rank module imports the lesson
                    (recording_name(SEED, "cpu-processes"), PROCESSES),
                    (notebook_output(SEED).path, RECORD)]  # shown, and remade by that run
EDITS = {
    "the lesson's code": (LESSON, append_code, THE_LESSON_S_RUN),
    # The lesson does not import them; the one run records them, the notebook shows them.
    "the going-further steps": (module_file(SEED, SEED.going_further), append_code,
                                THE_LESSON_S_RUN),
    "the sweep's measuring code": (module_file(SEED, SEED.sweep), append_code,
                                   [(recording_name(SEED, "sweep"), "make bench")]),
    "the simulation's code": (module_file(SEED, SEED.simulation), append_code,
                              [(recording_name(SEED, "simulation"), RECORD)]),
    "an exercise scaffold": (f"lesson_code/{STEM}_exercises.py", append_code, []),
    "the sweep figures' layout": ("scripts/figures/sweep.py", append_comment,
                                  rendered("-sweep", "-sweep-ratios")),
    "the SVG helper": ("scripts/figures/svg.py", append_comment, lambda root: [
        (output.path, RENDER) for lesson in load_lessons(root).values()
        for output in [*figure_outputs(lesson), *figure_data_outputs(lesson)]]),
    "a figure's caption": (f"lesson_code/figures/{LESSON_ID}-mechanism.json", lambda text:
                           text.replace("Table with one row", "A table with one row"),
                           rendered("-mechanism")),
    "the notebook builder": ("scripts/runners/notebook.py", append_comment, lambda root: [
        (notebook_output(lesson).path, notebook_output(lesson).fix)
        for lesson in load_lessons(root).values()]),
    # The words a page prints come from the derived analyses: a threshold, the statistics
    # or how an analysis is kept re-derives them; no recording goes stale.
    "a threshold": (f"lesson_code/{STEM}_sweep_faults.py", lambda text: text.replace(
        "REMOVED_BELOW = 0.5", "REMOVED_BELOW = 0.4", 1),
        lambda root: every_analysis(root, lessons=[LESSON_ID])),
    "the statistics": ("scripts/intervals.py", append_code,
                       lambda root: every_analysis(root, "scripts/intervals.py")),
    "the sweep's reading": ("scripts/sweep/reading.py", append_code,
                            lambda root: every_analysis(root, "scripts/sweep/reading.py")),
    "how an analysis is kept": ("scripts/analysis_text.py", append_comment, every_analysis),
    # The figures that print sizes, and the analyses that write the sweep's size labels.
    "how sizes are written": ("scripts/units.py", append_code, lambda root: [
        *rendered("-sweep", "-sweep-ratios", "-traffic", "-tpu-predictions"),
        *every_analysis(root, "scripts/units.py")]),
    "bench's command line": ("scripts/bench.py", append_comment, []),
    # SciPy (the analyses' intervals call it) as any runtime pin, and a pin it freezes.
    "a runtime pin": ("requirements.txt", pinned("scipy", "1.0.0"),
                      lambda root: every_recording(root) + every_analysis(root)),
    "a transitive pin": ("constraints.txt", pinned("ml_dtypes", "0.0.1"),
                         lambda root: every_recording(root) + every_analysis(root)),
    "a pin's comment": ("requirements.txt", lambda text: "# a new first comment\n\n" + re.sub(
        r"^(numpy==\S+)$", r"\1  # why this numpy", text, flags=re.MULTILINE), []),
    # mkdocs is the site's, ruff the linter's, mkdocs-jupyter a benchmark's; constraints.txt
    # repeats the pins it freezes.
    **{f"the {tool} pin": ((home, "constraints.txt"), pinned(tool), []) for tool, home in (
        ("ruff", "requirements-test.txt"), ("mkdocs", "requirements.txt"),
        ("mkdocs-jupyter", "benchmarks/requirements.txt"))}}


@pytest.mark.parametrize("case", EDITS)
def test_an_edit_asks_for_exactly_the_work_it_invalidates(tree, case):
    edited, change, expected = EDITS[case]
    first, *others = [edited] if isinstance(edited, str) else edited
    before = (tree / first).read_text()
    for name in (first, *others):
        edit(tree / name, change)
    assert (tree / first).read_text() != before  # the edit found what it edits
    expected = expected(tree) if callable(expected) else expected
    assert sorted(problems(tree)) == sorted(
        f"{path}: stale, {first} changed; run `{fix}`" for path, fix in expected)


def test_what_the_notebook_shows_as_text_re_renders_it_and_re_records_nothing(lesson_copy):
    """A comment or a page edit stales the notebook alone (it shows the module's text under
    the pages' headings), and record.py re-renders it from the executed cells, retitled."""
    tree, lesson = lesson_copy
    module = module_file(lesson)
    titles = [cell.source[3:] for cell in build_notebook(lesson, devices=lesson.devices).cells
              if cell.cell_type == "markdown" and cell.source.startswith("## ")]
    pages = [path for path in notebook_output(lesson).text_inputs(tree) if path.startswith("docs/")]
    as_it_was = {page: (tree / page).read_bytes() for page in pages}
    before = hashes.content_files(tree / module, tree)
    edit(tree / module, append_comment)
    edit(tree / pages[0], lambda text: text + "\nA paragraph the notebook does not show.\n")
    for page, title in ((page, title) for page in pages for title in titles):
        edit(tree / page, lambda text: re.sub(rf"^(#{{2,4}}) {re.escape(title)}$",
                                              rf"\1 {title}, retitled", text, flags=re.M))
    assert hashes.content_files(tree / module, tree) == before  # a comment runs nothing new
    changed = [module, *(page for page in pages if (tree / page).read_bytes() != as_it_was[page])]
    assert problems(tree) == [f"{notebook_output(lesson).path}: stale, "
                              f"{', '.join(sorted(changed))} changed; run "
                              f"`{notebook_output(lesson).fix}`"]
    step = notebook_step(lesson, read_lock(tree))
    assert step.fix == RERENDER and all(f"## {title}, retitled" in step.text for title in titles)


# --- what a recording is keyed on: its code as executed ----------------------------------

def digest_of(source):
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "module.py").write_text(source)
        return hashes.code_digest(Path(folder) / "module.py")


def tokens(source, *types):
    return [token for token in tokenize.tokenize(BytesIO(source.encode()).readline)
            if token.type in types]


def replaced(lines, start, end, text):
    """`lines` with the span from (line, column) `start` to `end` replaced by `text`."""
    (first, begin), (last, stop) = start, end
    return [*lines[:first - 1], lines[first - 1][:begin] + text + lines[last - 1][stop:],
            *lines[last:]]


# Every module a lesson may bring (its program, steps, rank, sweep, analysis, renderer).
LESSON_CODE = [path for path in sorted((ROOT / "lesson_code").glob("*.py"))
               if tokens(path.read_text(), tokenize.NUMBER)]


@settings(max_examples=12, deadline=None)
@given(path=st.sampled_from(LESSON_CODE), data=st.data())
def test_comments_and_docstrings_anywhere_leave_the_digest_and_a_token_does_not(path, data):
    """Generated comments at the ends of lines and a rewritten docstring; one number changed."""
    source = path.read_text()
    lines = source.split("\n")
    commented = list(lines)
    ends = {token.start[0] for token in tokens(source, tokenize.NEWLINE, tokenize.NL)}
    for number in data.draw(st.sets(st.sampled_from(sorted(ends)), max_size=5)):
        text = data.draw(st.text(st.characters(exclude_categories=["Cc", "Cs"]), max_size=30))
        commented[number - 1] += f"  # {text}"
    assert digest_of("\n".join(commented)) == digest_of(source)
    docstrings = [node.body[0].value for node in ast.walk(ast.parse(source))
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
                  and ast.get_docstring(node, clean=False) is not None]
    if docstrings:
        node = data.draw(st.sampled_from(docstrings))
        start, end = ((row, len(lines[row - 1].encode()[:column].decode()))  # bytes to chars
                      for row, column in ((node.lineno, node.col_offset),
                                          (node.end_lineno, node.end_col_offset)))
        rewritten = replaced(lines, start, end, repr(data.draw(st.text(max_size=40))))
        assert digest_of("\n".join(rewritten)) == digest_of(source)
    token = data.draw(st.sampled_from(tokens(source, tokenize.NUMBER)))
    changed = replaced(lines, token.start, token.end, f"({token.string} + 1)")
    assert digest_of("\n".join(changed)) != digest_of(source)


@pytest.mark.parametrize("content, said", [
    (b"def broken(:\n", "not valid Python (line 1: invalid syntax); fix that file"),
    (b"x = '\xff\xfe'\n", "not UTF-8 (byte 5); save it as UTF-8"),
    (b"x = 1\x00\n", "not valid Python; fix that file")])
def test_check_names_a_closure_module_that_cannot_be_read(tree, content, said, monkeypatch, capsys):
    """One line and exit 1 (record.main in-process, on the copy's registry)."""
    (tree / "lesson_code" / "ring.py").write_bytes(content)  # the simulation's module
    monkeypatch.setattr(record, "load_lessons", lambda: load_lessons(tree))
    assert record.main(["--check"]) == 1
    assert capsys.readouterr().err == f"error: lesson_code/ring.py: {said}\n"


# --- one broken tree, checked once: each breakage, and the lines --check names it by ------

def unclaimed(path, kind="lesson in lesson_code/lessons.toml (a recording is named <lesson "
                        "id>.<variant>.json)"):
    return f"{path}: belongs to no {kind}; run `git rm {path}`"


A_FIGURE = "figure of a lesson in lesson_code/lessons.toml (scripts/figures/__init__.py " \
           "names each kind's files)"
CAFE = os.fsdecode(b"caf\xe9")  # a name in Latin-1, as a checkout on another system made it
SWEEP, SIMULATION, CPU, TPU_SWEEP = (recording_name(SEED, variant) for variant in
                                     ("sweep", "simulation", "cpu", "tpu-sweep"))

BREAKAGES = {
    "a renderer deleted": (lambda root: (root / "scripts/figures/traffic.py").unlink(), [
        f"{path}: its code scripts/figures/traffic.py is missing; restore it, or drop the "
        f"figure from lesson_code/lessons.toml, then; run `{RENDER}`"
        for path in drawings("-traffic")]),
    "a drawing deleted": (lambda root: (root / drawings("-sweep")[3]).unlink(),
                          [f"{drawings('-sweep')[3]}: missing; run `{RENDER}`"]),
    "a drawing edited by hand": (lambda root: edit(root / drawings("-mechanism")[0], lambda
                                                   text: text.replace("</svg>", "<!-- --></svg>")),
                                 [f"{drawings('-mechanism')[0]}: edited by hand since it was "
                                  f"made; run `{RENDER}`"]),
    "files no figure claims": (written(*((f"figures/{LESSON_ID}-retired{ending}", "x")
                                         for ending in ("-dark.svg", ".csv", ".json"))), [
        unclaimed(f"figures/{LESSON_ID}-retired{ending}", A_FIGURE)
        for ending in ("-dark.svg", ".csv", ".json")]),
    # lessons.toml analyses the TPU sweep no VM has run yet: nothing was missing. Once it
    # lands, its analysis is missing, and the figure it is drawn over is stale.
    "a TPU sweep arrives": (lambda root: write_tpu_sweep(root / TPU_SWEEP, root), [
        f"recordings/analysis/{LESSON_ID}.tpu-sweep.json: missing; run `{RENDER}`",
        *(f"{path}: stale, {TPU_SWEEP} changed; run `{RENDER}`"
          for path in drawings("-tpu-predictions"))]),
    "a truncated sweep": (written((SWEEP, '{"rows": [')), [
        f"{SWEEP}: not valid JSON (Expecting value: line 1 column 11 (char 10)); run `make bench`",
        f"recordings/analysis/{LESSON_ID}.sweep.json: stale, {SWEEP} changed; run `{RENDER}`"]),
    "a recording that is a directory": (
        lambda root: (root / SIMULATION).unlink() or (root / SIMULATION).mkdir(), [
        f"{SIMULATION}: is a directory, not a recording (remove it); run `{RECORD}`",
        *(f"{path}: stale, {SIMULATION} changed; run `{RENDER}`"
          for path in [*drawings("-ring-reduce-scatter"), *drawings("-ring-all-gather")])]),
    "a recording deleted": (lambda root: (root / CPU).unlink(), [
        f"{CPU}: missing; run `{RECORD}`",
        *(f"{path}: its input {CPU} is missing; run `{fix}`" for path, fix in [
            *((path, RENDER) for path in drawings("")),
            (f"recordings/analysis/{LESSON_ID}.cpu.json", RENDER),
            (notebook_output(SEED).path, RECORD)])]),
    "a recording of a variant no command makes": (
        written((recording_name(SEED, "weird"), "{not json")),
        [f"{recording_name(SEED, 'weird')}: not valid JSON (Expecting property name enclosed "
         f"in double quotes: line 1 column 2 (char 1)); run `git rm "
         f"{recording_name(SEED, 'weird')}`"]),
    "JSON no lesson claims": (written(("recordings/other.json", "{not json"),
                                      ("recordings/notes.JSON", "{}"),
                                      ("recordings/psum-99.cpu.json", "{}")),
        [unclaimed(f"recordings/{name}")
         for name in ("other.json", "notes.JSON", "psum-99.cpu.json")]),
    "names that are not UTF-8": (written((f"recordings/{CAFE}.cpu.json", "{}"),
                                         (f"figures/{CAFE}.svg", "<svg/>")),
        [unclaimed(r"recordings/caf\xe9.cpu.json"), unclaimed(r"figures/caf\xe9.svg",
                                                               A_FIGURE)]),
    # A committed `.cache/memo/` (`git add -f`) must not answer --check with a forged verdict.
    "a committed cache": (written((".cache/memo/check.json", '{"lines": [], "status": 0}'),
                                  (".cache/memo/valid.json", "{not json")), [])}


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    """The project with every breakage at once, and what --check says of it."""
    root = project(tmp_path_factory.mktemp("broken").resolve() / "repo")
    for make, _ in BREAKAGES.values():
        make(root)
    return root, problems(root)


def test_check_names_each_breakage_in_its_lines_and_the_build_stops_on_them(broken):
    """Then load_all (the build's on_config) stops on the recordings and unclaimed files as
    --check names them, and on nothing else (it never draws)."""
    root, lines = broken
    unsaid = {case: [line for line in named if line not in lines]
              for case, (_, named) in BREAKAGES.items()}
    assert {case: missing for case, missing in unsaid.items() if missing} == {}
    expected = [line for _, named in BREAKAGES.values() for line in named]
    assert sorted(lines) == sorted(expected)  # nothing else, and each line once
    built = [line.replace(f"{root}/", "") for line in load_all(load_lessons(root), root)[1]]
    assert {line.split(": ")[0] for line in built} <= {line.split(": ")[0] for line in lines}
    assert {*BREAKAGES["JSON no lesson claims"][1], *BREAKAGES["a truncated sweep"][1][:1],
            *BREAKAGES["a recording deleted"][1][:1]} <= set(built)


# --check in an ASCII locale (no UTF-8 mode, no coercion), with JAX, matplotlib and
# jsonschema unimportable: it needs none (jsonschema only words a refusal).
CHECK = ("import sys; sys.modules.update(dict.fromkeys(['jax', 'jaxlib', 'matplotlib', "
         "'jsonschema'])); sys.argv[1:] = ['--check']; from scripts import cli, record; "
         "sys.exit(cli.run(record.main))")
ASCII = {"LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}


@pytest.mark.slow
def test_the_command_prints_those_lines_in_an_ascii_locale_without_jax(broken):
    root, lines = broken
    done = run("-c", CHECK, cwd=root, env=ASCII)
    assert (done.returncode, done.stderr, done.stdout) == (1, "", "".join(
        f"{line}\n" for line in lines))


@pytest.mark.parametrize("text, words", [
    *((json.dumps({"figures/x.svg": entry}), "the entry for 'figures/x.svg' needs") for entry in
      [{"sha256": "0" * 64, "inputs": []}, {"inputs": {}},
       {"sha256": "0" * 64, "inputs": {"a.py": 1}}]),
    ('{"figures/x.svg": {"sha', "recordings/outputs.lock.json: unreadable: not valid JSON")])
def test_a_malformed_lock_is_one_line(tmp_path, text, words):
    (tmp_path / "recordings").mkdir()
    (tmp_path / "recordings" / "outputs.lock.json").write_text(text)
    assert words in str(raised_in_one_line(LockError, read_lock, tmp_path))

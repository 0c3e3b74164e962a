"""A second, different lesson (tests/fixtures/second_lesson/) added to a copy as the README says:
recorded, checked, linted and built, scripts/ and tests/ unchanged; the copy's tests take it too."""
import json
import re
import shutil

import nbformat
import pytest

from conftest import FIXTURE_ID, ROOT, SEED, lessons_with, run_record
from harness import DIGESTED, PROJECT_PARTS, digests, passed, project as fresh_project, run
from scripts import record as record_script
from scripts.store.lessons import load_lessons
from site_build import build


@pytest.fixture(scope="module")
def project(fixture_course, tmp_path_factory):
    """fixture_course, copied for this module's tests to change; its digests before the
    lesson came, and the stderr of the record.py run that recorded it."""
    root = shutil.copytree(fixture_course, tmp_path_factory.mktemp("second") / "repo",
                           symlinks=True)
    before = json.loads((fixture_course.parent / "before.json").read_text())
    assert FIXTURE_ID == "psum-01"
    return root, before, (fixture_course.parent / "record.log").read_text()


def test_it_records_on_two_devices_with_nothing_under_scripts_or_tests_changed(project):
    root, before, stderr = project
    assert "record: running psum-01 on 2 CPU device(s)" in stderr
    assert f"record: running {SEED.id}" not in stderr  # current: left alone
    after = digests(root, DIGESTED)
    assert digests(root, ["scripts", "tests"]) == digests(ROOT, ["scripts", "tests"])
    assert sorted(set(after) - set(before)) == [  # added: its timing figure from its analysis
        "docs/notebooks/psum-01.ipynb",
        *(f"figures/psum-01-psum-{name}.{ending}" for name in ("bars", "timing")
          for ending in ("csv", "json", "svg")),
        "recordings/analysis/psum-01.cpu.json", "recordings/psum-01.cpu.json"]
    assert sorted(k for k in before if before[k] != after[k]) == ["recordings/outputs.lock.json"]
    recording = json.loads((root / "recordings" / "psum-01.cpu.json").read_text())
    assert recording["environment"]["deviceCount"] == 2
    timed = "Timed psum and a sum on one device, in turns, in 5 blocks\n"
    assert recording["stdout"] == \
        f"Devices: 2 × cpu\npsum over 2 devices: 3.0\n{timed}PASS: psum-01\n"
    assert recording["data"]["sum"] == 3.0
    notebook = nbformat.read(root / "docs" / "notebooks" / "psum-01.ipynb", as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    # Step 1's cell sets up the devices and shows them; the psum's cell shows its sum.
    assert 'configure_devices("cpu", 2)' in code[0].source
    assert [cell.outputs[0].text for cell in code] == \
        ["Devices: 2 × cpu\n", f"psum over 2 devices: 3.0\n{timed}PASS: psum-01\n"]


def test_the_check_lint_and_strict_build_pass_and_show_its_page(project, tmp_path):
    root, *_ = project
    # --lesson narrows whose freshness is checked, not whose files belong to a lesson.
    for lesson in ((), ("--lesson", "psum-01"), ("--lesson", SEED.id)):
        check = run_record(root, "--check", *lesson)
        assert (check.returncode, check.stdout) == (0, ""), check.stdout
    # `make lint`: its steps open with their imports (pyproject.toml), within the budgets.
    for lint in (("-m", "ruff", "check", "--no-cache", "."), ("tests/lint_budgets.py",)):
        passed(run(*lint, cwd=root, timeout=120))
    passed(build(root, tmp_path / "site"))
    page = (tmp_path / "site" / "lessons" / "psum-01" / "index.html").read_text()
    assert "the sum is\n3." in page or "the sum is 3" in " ".join(page.split())
    assert "PASS: psum-01" in page
    # The course lists it: in the navigation of every page, and on the home page.
    home = (tmp_path / "site" / "index.html").read_text()
    for html in (page, home):
        assert "Lesson: One all-reduce on two devices" in html
        assert 'href="notebooks/psum-01/"' in html or 'href="../../notebooks/psum-01/"' in html
    assert '<strong><a href="lessons/psum-01/">One all-reduce on two devices</a></strong>' in home
    # In the nav it comes after the lessons before it, each with its notebook.
    assert home.index("Notebook companion") < home.index("Lesson: One all-reduce on two devices")
    assert 'href="../../lesson_code/psum_01.py"' in page
    assert 'href="../../notebooks/psum-01/psum-01.ipynb"' in page
    assert (tmp_path / "site" / "notebooks" / "psum-01" / "psum-01.ipynb").is_file()
    (root / "recordings" / "psum-01.cpu.json").rename(root / "recordings" / "aside.json")
    try:
        check = run_record(root, "--check", "--lesson", SEED.id)
        # psum-01's missing recording is not the seed's business; the stray file is.
        assert check.returncode == 1
        assert check.stdout.startswith("recordings/aside.json: belongs to no lesson")
        assert "psum-01.cpu.json" not in check.stdout, check.stdout
    finally:
        (root / "recordings" / "aside.json").rename(root / "recordings" / "psum-01.cpu.json")


@pytest.mark.slow
def test_make_lint_before_it_is_recorded_is_one_line_as_check_says(tmp_path):
    """Issue 57: a new lesson not recorded yet ended `make lint` in a traceback."""
    root = fresh_project(tmp_path / "repo", PROJECT_PARTS + ("tests",), lesson=True, keep=[SEED.id])
    lint, check = run("tests/lint_budgets.py", cwd=root, timeout=120), run_record(root, "--check")
    assert (lint.returncode, check.returncode) == (1, 1)
    assert lint.stderr == f"{check.stdout.splitlines()[0]}; `python scripts/record.py " \
                          f"--check` lists them all\n"


def test_processes_skip_it_since_it_has_no_rank_module(project, monkeypatch, capsys):
    # The real 4-process run is tests/test_multiprocess.py's, stubbed here.
    root, *_ = project
    ran, real_record_processes = [], record_script.record_processes
    monkeypatch.setattr(record_script, "load_lessons", lambda: load_lessons(root))
    monkeypatch.setattr(record_script, "record_processes",
                        lambda lesson, processes, staging, *launcher:
                        ran.append((lesson.id, processes)) or {})
    assert record_script.main(["--processes", "4", "--all"]) == 0
    assert ran == [(lesson.id, 4) for lesson in lessons_with("rank_module")]
    assert "record: skipping psum-01: it has no rank_module in lesson_code/lessons.toml" in \
        capsys.readouterr().err
    # Named with --lesson, a lesson without a rank module is an error, not a skip.
    monkeypatch.setattr(record_script, "record_processes", real_record_processes)
    assert record_script.main(["--processes", "4", "--lesson", "psum-01"]) == 1
    assert "psum-01 has no rank_module" in capsys.readouterr().err


def test_the_tests_about_the_lesson_run_for_it_unchanged(project):
    # Collected, psum-01 is among their cases; that they pass for it is
    # `make test-two-lessons`'s (the whole suite, in a copy like this one).
    root, *_ = project
    collected = passed(run("-m", "pytest", "--collect-only", "-q", "-m", "", "-p",
                           "no:cacheprovider", "tests", cwd=root, timeout=600))
    cases = [line for line in collected.stdout.splitlines() if "::" in line]
    # Every test that runs once per lesson (@each_lesson) runs for it too, once...
    own = [case for case in cases if re.search(r"\[psum-01(\.\w+)*\]$", case)]
    assert [case for case in cases if case.endswith(f"[{SEED.id}]")
            and case.replace(f"[{SEED.id}]", "[psum-01]") not in own] == []
    for test in ("test_figures.py::test_the_committed_figure_is_what_its_renderer_draws",
                 "test_recordings.py::test_every_committed_recording_validates",
                 "test_notebook.py::test_downloaded_notebook_runs_top_to_bottom",
                 "test_site.py::test_a_lesson_page_shows_its_recording"):
        assert any(case.startswith(f"tests/{test}") for case in own), test
    # ...and those are all it adds: one case per test, not one per file or figure; what the
    # machinery owes every lesson runs on the fixture lesson in any course (lesson_copy).
    naming = [case for case in cases if "psum-01" in case or "psum_01" in case]
    assert len(naming) <= 12, naming


def test_its_own_renderer_draws_its_figure_from_its_recording(project, tmp_path):
    root, *_ = project
    recording = json.loads((root / "recordings" / "psum-01.cpu.json").read_text())
    probe = ("import json, sys; sys.modules['jax'] = None; "
             "from lesson_code.psum_bars import render; "
             "sys.stdout.write(render(json.load(open('recordings/psum-01.cpu.json')))); "
             "sys.stderr.write(repr(sorted(m for m in sys.modules "
             "if m.startswith('lesson_code'))))")
    drawn = passed(run("-c", probe, cwd=root, timeout=120))
    # No lesson program (nor JAX) was imported to draw it, and the committed SVG is its output.
    assert drawn.stderr == "['lesson_code', 'lesson_code.psum_bars']"
    assert (root / "figures" / "psum-01-psum-bars.svg").read_text() == drawn.stdout
    assert recording["data"]["values"] == [1.0, 2.0]
    assert "<desc>device 0 holds 1, device 1 holds 2; psum leaves 3 on every device</desc>" \
        in drawn.stdout
    # A renderer may name its lesson's analysis as what it draws (DRAWN_FROM): its data says
    # so, and the page's words and the figure then read the same numbers.
    timing = json.loads((root / "figures" / "psum-01-psum-timing.json").read_text())
    assert (timing["drawnFrom"], timing["recording"]) == (
        "recordings/analysis/psum-01.cpu.json", "recordings/psum-01.cpu.json")
    analysis = json.loads((root / timing["drawnFrom"]).read_text())
    assert analysis["words"] in (root / "figures" / "psum-01-psum-timing.svg").read_text()


def test_its_renderer_and_its_data_schema_are_checked_like_any_other_lesson_s(project, tmp_path):
    root = shutil.copytree(project[0], tmp_path / "repo", symlinks=True)
    renderer = root / "lesson_code" / "psum_bars.py"  # an input: an edit makes it stale
    renderer.write_text(renderer.read_text().replace('"#4C78A8"', '"#54A24B"'))
    check = run_record(root, "--check")
    assert check.stdout == "".join(
        f"figures/psum-01-psum-bars{ending}: stale, lesson_code/psum_bars.py changed; run "
        f"`python scripts/record.py --render-only`\n" for ending in (".svg", ".csv", ".json"))
    # --check and the build apply the registry's data schema after the shared header: one
    # line naming the field, and with two lessons registered the fix names its lesson.
    path = root / "recordings" / "psum-01.cpu.json"
    recording = json.loads(path.read_text())
    recording["data"]["sum"] = "three"
    path.write_text(json.dumps(recording))
    check = run_record(root, "--check")
    assert check.returncode == 1
    assert "recordings/psum-01.cpu.json: invalid at data/sum: 'three' is not of type " \
           "'number'; run `python scripts/record.py --lesson psum-01`" in \
           check.stdout.splitlines()
    # The seed's data fits its own schema, not psum-01's: each lesson, its own.
    assert not any(line.startswith(f"recordings/{SEED.id}") for line in check.stdout.splitlines())
    built = build(root, tmp_path / "site")
    assert built.returncode != 0 and "invalid at data/sum" in built.stderr

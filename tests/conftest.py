"""Test-wide set-up: JAX's settings, the registry the tests iterate, the tiers, and the
fixtures built once per run (plain helpers: tests/harness.py)."""
import collections
import fcntl
import json
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

# Set before any test module touches JAX, which fixes them at its first device query: eight
# devices give meshes of 2, 4 and 8 from jax.devices()[:p].
os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["JAX_NUM_CPU_DEVICES"] = "8"

# Under nohup SIGHUP is ignored, and stays ignored in every process started; the tests of
# SIGHUP need it delivered. A caught signal is reset to its default by exec, so a handler
# that does nothing keeps pytest alive (as nohup asked) and gives the children the default.
signal.signal(signal.SIGHUP, lambda signum, frame: None)

# No JAX in either; after the settings above.
from harness import (DIGESTED, FIXTURES, PROJECT_PARTS, ROOT, RECORD,  # noqa: E402,F401
                     add_fixture_lesson, clean_env, digests, ended_pid, fixture_entry,
                     passed, project, rederive_analyses, run)
from scripts.plumbing import interrupts  # noqa: E402
from scripts.store.lessons import load_lessons  # noqa: E402

# The published lesson's recording, copied in: tests read nothing outside the repository.
PUBLISHED_SEED = FIXTURES / "published_seed.json"


def run_record(root, *args, timeout=300):
    return run(RECORD, *args, cwd=root, timeout=timeout)


# A test about "the lesson" runs once per registered lesson (@each_lesson), so a lesson
# added as the README says is tested with no change here.
LESSONS = load_lessons(ROOT)  # never empty: the registry refuses a file with no lesson
each_lesson = pytest.mark.parametrize("lesson", list(LESSONS.values()), ids=list(LESSONS))

# Some lesson, any: for checks of the machinery that need one recording.
FIRST_LESSON = next(iter(LESSONS.values()))
# The fixture lesson a course author adds (tests/fixtures/second_lesson/), in a copy.
FIXTURE_ID = fixture_entry()[1]


def recording_name(lesson, variant="cpu"):
    return f"recordings/{lesson.id}.{variant}.json"


def module_file(lesson, module=None):
    """The lesson's module (or another of its modules) as a path below the root."""
    return lesson.path(module).relative_to(lesson.root).as_posix()


def each_lesson_with(*fields):
    """Parametrize over the lessons that have `fields`, each case named `<id>.<field>...`:
    a plain `[<id>]` says a test runs for every lesson (tests/test_second_lesson.py)."""
    return pytest.mark.parametrize("lesson", lessons_with(*fields),
                                   ids=lambda lesson: ".".join((lesson.id, *fields)))


def lessons_with(*fields):
    """The registered lessons that name every one of `fields` (a rank module, a sweep...).
    A parametrization over none of them is an error, never a silent pass."""
    chosen = [lesson for lesson in LESSONS.values()
              if all(getattr(lesson, name) for name in fields)]
    if not chosen:
        raise pytest.UsageError(f"no registered lesson has {', '.join(fields)}: the tests "
                                f"of those need one (lesson_code/lessons.toml)")
    return chosen


# The seed: the first lesson with every optional part (rank module, going further,
# simulation, sweeps, analysis), found in the registry: for the tests of those parts.
SEED = lessons_with("rank_module", "going_further", "simulation", "sweep", "tpu_sweep",
                    "analysis")[0]


def built_once(request, tmp_path_factory, name, make):
    """`make(folder)` once per test run, its folder shared: under pytest-xdist the first
    worker builds while the others wait on a lock; all only read it."""
    shared = tmp_path_factory.getbasetemp()
    if hasattr(request.config, "workerinput"):  # an xdist worker (not its environment,
        shared = shared.parent  # which a pytest it starts inherits): the run's own folder
    folder, done = shared / name, shared / f"{name}.done"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, however it ends
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a failed try left
            folder.mkdir()
            done.write_text(str(make(folder)))
    return Path(done.read_text())


# Where CI publishes the site: a GitHub Pages project site, under /<repository>/.
SUB_PATH = "lesson-site"


@pytest.fixture(scope="session")
def built_site(request, tmp_path_factory):
    """The site as CI publishes it (under SUB_PATH), built strictly from the working tree
    without JAX, once per run for the page checks and the browser alike."""
    from site_build import build

    def make(folder):
        passed(build(ROOT, folder / SUB_PATH, {"SITE_URL": f"http://127.0.0.1/{SUB_PATH}/"}))
        return folder / SUB_PATH

    return built_once(request, tmp_path_factory, "built-site", make)


@pytest.fixture(scope="session")
def fixture_course(request, tmp_path_factory):
    """The project (its tests too) cut to the seed, the fixture lesson added and recorded by the
    plain `record.py`, once per run; beside it record.log (that run's stderr) and before.json
    (the copy's digests before the lesson came). Copy it to change it."""
    def make(folder):
        # Without the fixture lesson too, where this tree has it.
        root = project(folder / "repo", PROJECT_PARTS + ("tests", "benchmarks"), keep=[SEED.id])
        (folder / "before.json").write_text(json.dumps(digests(root, DIGESTED)))
        add_fixture_lesson(root)
        done = run_record(root)
        (folder / "record.log").write_text(done.stderr)
        assert done.returncode == 0, done.stderr[-3000:]
        return root

    return built_once(request, tmp_path_factory, "fixture-course", make)


# What the machinery promises every lesson (a broken recording, stale code, one line for
# each) is tested on two lessons, however many the course has: the seed, in a copy of this
# tree, and the fixture lesson, in a copy of fixture_course.
@pytest.fixture(params=["seed", "fixture-lesson"])
def lesson_copy(request, tmp_path):
    """(a copy of the project for the test to break, the Lesson to break in it)."""
    if request.param == "seed":
        root = project(tmp_path / "repo", keep=[SEED.id])
        return root, load_lessons(root)[SEED.id]
    root = shutil.copytree(request.getfixturevalue("fixture_course"), tmp_path / "repo",
                           symlinks=True)
    return root, load_lessons(root)[FIXTURE_ID]


@pytest.fixture(scope="session")
def reference_site(request, tmp_path_factory):
    """The bare mkdocs-material reference site (tests/site_reference.py), built once."""
    from site_reference import build_reference

    return built_once(request, tmp_path_factory, "reference", build_reference)


@pytest.fixture(scope="session")
def hostile_site(request, tmp_path_factory):
    """The site built from recordings and a notebook that carry hostile text
    (tests/site_hostile.py), once per test run; its project beside it, in ../project."""
    from site_hostile import build_hostile_site

    return built_once(request, tmp_path_factory, "hostile", build_hostile_site)


# The tiers: plain `pytest` is the unit tier (pyproject.toml's addopts), `-m slow` and
# `-m browser` the others, `make test` all (-m ""). A test is slow or browser by one of these
# fixtures, or by a mark of its own where it starts JAX, record.py, a kernel or a build.
SLOW_FIXTURES = {
    "built_site", "reference_site", "hostile_site",  # a strict site build
    "project", "lesson_copy",  # a copy to build, record or check exercises in
    "pristine", "fixture_course", "recorded",  # record.py
    "run", "needs_mpirun",  # JAX processes, mpirun
    "clone"}  # a clone the TPU job runs in, end to end, through the fake gcloud's processes
BROWSER_FIXTURES = {"browser", "serve", "served", "visits", "reference_findings",
                    "classic_scrollbars"}


@pytest.hookimpl(tryfirst=True)  # before -m deselects by these marks
def pytest_collection_modifyitems(items):
    """Each test's tier from its fixtures; the files with the most heavy tests first, each
    whole and in order, so that no long file begun last keeps one `make test` worker alone."""
    weight = collections.Counter()
    for item in items:
        names = set(item.fixturenames)
        if names & BROWSER_FIXTURES:
            item.add_marker(pytest.mark.browser)
        # Three tiers, each test in one: a browser test is not also slow (its build is).
        if names & SLOW_FIXTURES and not item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.slow)
        weight[item.path] += any(map(item.get_closest_marker, ("slow", "browser")))
    items.sort(key=lambda item: -weight[item.path])  # a stable sort


@pytest.fixture(autouse=True)
def signals_as_they_were():
    """Each test starts with Ctrl-C as a terminal gives it (a suite run in the background
    inherits SIGINT ignored, and its children would too), and leaves the signal state as it
    found it: a main() run in-process installs interrupts.py's handlers and memory."""
    handlers = {signum: signal.getsignal(signum) for signum in interrupts.SIGNALS}
    hook = sys.unraisablehook
    if handlers[signal.SIGINT] is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    for signum, handler in handlers.items():
        signal.signal(signum, handler)
    sys.unraisablehook = hook
    interrupts.received.clear()
    interrupts.files_in_place = False

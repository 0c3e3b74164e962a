"""The exercise checker (scripts/exercises.py) as a learner meets it, mistakes included.

Each case edits a copy of the project's scaffolds the way a learner might (a slip, a
shortcut, a sys.exit) and runs the checker there: every exercise gets one line of its
own, and no edit makes a wrong answer pass.
"""
import subprocess
import sys

import pytest

from conftest import LESSONS, ROOT, SEED, clean_env, project_copy
from scripts.exercises import child_environment, exercise_names

# The seed lesson's exercises: its scaffolds, its checks and the mistakes they name.
ID = SEED.id
SCAFFOLDS = f"lesson_code/{SEED.module.rsplit('.', 1)[1]}_exercises.py"
RING_SCAFFOLD = "lesson_code/ring_exercises.py"
NAMES = ["make_it_yours", "communication_budget", "zero_accounting", "clip_by_global_norm",
         "ring_all_gather"]


def check(root, *args):
    return subprocess.run([sys.executable, str(root / "scripts" / "exercises.py"), *args],
                          cwd=root, env=clean_env(PYTHONDONTWRITEBYTECODE="1"),
                          capture_output=True, text=True, timeout=600)


def lines_by_exercise(run):
    assert "Traceback" not in run.stdout + run.stderr, run.stderr[-2000:]
    lines = run.stdout.splitlines()
    assert [line.split(":")[0].split()[-1] for line in lines] == NAMES, lines
    return dict(zip(NAMES, lines))


def solved(source, name, body):
    """`source` with the function `name` replaced by `body` (a whole def)."""
    start = source.index(f"def {name}(")
    end = source.index("# --8<-- [end:", start)
    return source[:start] + body.strip() + "\n" + source[end:]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return project_copy(tmp_path_factory.mktemp("exercises"))


def test_the_registry_names_the_checks_and_the_checker_reads_their_names():
    lesson = SEED
    assert lesson.exercises == f"{SEED.module}_checks"
    assert exercise_names(lesson) == NAMES
    env = child_environment(lesson.devices)
    assert (env["JAX_NUM_CPU_DEVICES"], env["JAX_PLATFORMS"]) == (str(lesson.devices), "cpu")


def test_scaffolds_are_unfinished_and_the_references_pass():
    run = check(ROOT, "--lesson", ID)
    assert run.returncode == 1
    lines = lines_by_exercise(run)
    hole = 'todo("bytes one rank sends in one ring phase, B_RS")'
    line = next(number for number, text in
                enumerate((ROOT / SCAFFOLDS).read_text().splitlines(), 1) if hole in text)
    assert lines["communication_budget"] == (
        "unfinished communication_budget: TODO: bytes one rank sends in one ring phase, "
        f"B_RS ({SCAFFOLDS}:{line})")
    assert all(line.startswith("unfinished ") for line in lines.values()), lines
    reference = check(ROOT, "--lesson", ID, "--reference")
    assert reference.returncode == 0, reference.stdout + reference.stderr[-2000:]
    assert reference.stdout.splitlines() == [f"ok {name}" for name in NAMES]


def test_each_mistake_and_shortcut_is_that_exercises_failure(project):
    source = (ROOT / SCAFFOLDS).read_text()
    # Zeros for an answer, and an attempt at the checker's answers from the import.
    source = solved(source, "make_it_yours", """
def make_it_yours(mesh, programs, problem):
    return np.zeros(problem.w.shape), np.ones(problem.w.shape)
""")
    # The lesson's central mistake: the gather forgotten.
    source = solved(source, "communication_budget", """
def communication_budget(gradient_bytes=2**20, ranks=(2, 4, 8)):
    return [{"ranks": p, "all_reduce_bytes": gradient_bytes * (p - 1) // p,
             "scatter_gather_bytes": gradient_bytes * (p - 1) // p,
             "shard_storage_bytes": gradient_bytes // p} for p in ranks]
""")
    # Calling the site's own solution.
    source = solved(source, "zero_accounting", f"""
def zero_accounting(traffic, gradient_bytes=2**20, ranks=4, state_per_weight=1):
    from {SEED.going_further} import zero_accounting as theirs
    return theirs(traffic, gradient_bytes, ranks, state_per_weight)
""")
    # The local norm: no psum.
    source = solved(source, "clip_by_global_norm", """
def clip_by_global_norm(g_slice, max_norm):
    squares = jnp.sum(g_slice * g_slice)
    return g_slice * jnp.minimum(1.0, max_norm / jnp.sqrt(squares))
""")
    source += (f"\nimport {SEED.exercises} as _checks\n"
               "_checks.budget_answer = lambda *a, **k: []  # tampering, on import\n")
    (project / SCAFFOLDS).write_text(source)
    ring = (ROOT / RING_SCAFFOLD).read_text()
    (project / RING_SCAFFOLD).write_text(solved(ring, "ring_all_gather", """
def ring_all_gather(chunk):
    import os
    os._exit(0)
"""))
    run = check(project, "--lesson", ID)
    assert run.returncode == 1
    lines = lines_by_exercise(run)
    assert lines["make_it_yours"].startswith("wrong make_it_yours: expected is not"), lines
    assert lines["communication_budget"].startswith(
        "wrong communication_budget: at p = 2, scatter_gather_bytes is 524288, one phase "
        "(B_RS alone): you forgot the all-gather"), lines
    assert lines["zero_accounting"] == (
        "wrong zero_accounting: calls the lesson's own solution "
        f"{SEED.going_further}.zero_accounting; write the answer in the scaffold "
        "instead"), lines
    assert lines["clip_by_global_norm"].startswith(
        "wrong clip_by_global_norm: no collective: each device scaled its slice by its own"), \
        lines
    assert lines["ring_all_gather"] == (
        "wrong ring_all_gather: the exercise's process ended with exit status 0 before its "
        "check finished; remove the sys.exit / os._exit call"), lines


def test_a_syntax_error_a_sys_exit_and_an_endless_loop_are_one_line_each(project):
    source = (ROOT / SCAFFOLDS).read_text()
    (project / SCAFFOLDS).write_text(source.replace("budget = []", "budget = [", 1))
    ring = (ROOT / RING_SCAFFOLD).read_text()
    (project / RING_SCAFFOLD).write_text(solved(ring, "ring_all_gather", """
def ring_all_gather(chunk):
    while True:
        pass
"""))
    # The endless loop spins a core until the limit: 8 s, ample for the four slips above
    # to fail at import (the sys.exit below gets 5 s to import JAX and exit).
    run = check(project, "--lesson", ID, "--time-limit", "8")
    assert run.returncode == 1
    lines = lines_by_exercise(run)
    for name in NAMES[:4]:
        assert lines[name].startswith(f"wrong {name}: syntax error ("), lines
        assert f"{SCAFFOLDS}:" in lines[name]
    assert lines["ring_all_gather"].startswith(
        "wrong ring_all_gather: still running after 8 s, stopped"), lines

    (project / SCAFFOLDS).write_text(solved(source, "communication_budget", """
def communication_budget(gradient_bytes=2**20, ranks=(2, 4, 8)):
    import sys
    sys.exit(0)
"""))
    run = check(project, "--lesson", ID, "--time-limit", "5")
    assert lines_by_exercise(run)["communication_budget"] == (
        "wrong communication_budget: the exercise's process ended with exit status 0 "
        "before its check finished; remove the sys.exit / os._exit call")


@pytest.mark.parametrize("args, message", [
    (["--devices", "-1"], "error: the checker runs each lesson on its own device count"),
    (["--devices=8"], "error: the checker runs each lesson on its own device count"),
    (["--lesson", "nope"], "error: no lesson 'nope' in lesson_code/lessons.toml"),
    (["--time-limit", "0"], "error: --time-limit 0 must be between 0 and 3600"),
])
def test_a_request_that_cannot_work_is_refused_in_one_line(args, message):
    run = check(ROOT, *args)
    assert run.returncode == 2
    assert run.stdout == "" and run.stderr.startswith(message), run.stderr
    assert len(run.stderr.splitlines()) == 1


def test_another_lessons_exercises_run_on_its_own_device_count(tmp_path):
    """A lesson with 8 devices and its own checks: nothing under scripts/ changes, and
    each exercise sees the lesson's 8 devices, not the seed lesson's 4."""
    from conftest import FIXTURES

    project = project_copy(tmp_path / "project")
    for name in ("psum_08_exercises.py", "psum_08_checks.py"):
        (project / "lesson_code" / name).write_text(
            (FIXTURES / "exercises_lesson" / name).read_text())
    registry = project / "lesson_code" / "lessons.toml"
    registry.write_text(registry.read_text() + '\n[[lesson]]\nid = "psum-08"\n'
                        f'module = "{SEED.module}"\ndevices = 8\n'
                        'exercises = "lesson_code.psum_08_checks"\n')
    run = check(project, "--lesson", "psum-08")
    assert run.returncode == 1 and run.stdout.startswith("unfinished count_devices: TODO: the "
                                                         "sum of `one`"), run.stdout + run.stderr
    run = check(project, "--lesson", "psum-08", "--reference")
    assert (run.returncode, run.stdout) == (0, "ok count_devices\n"), run.stdout + run.stderr
    # Every lesson at once: one line per exercise, each named by its lesson.
    run = check(project, "--reference")
    assert run.returncode == 0, run.stdout + run.stderr
    assert exercise_names(SEED) == NAMES
    assert run.stdout.splitlines() == [
        f"{lesson.id}: ok {name}" for lesson in LESSONS.values() if lesson.exercises
        for name in exercise_names(lesson)] + ["psum-08: ok count_devices"]


def processes_in(folder):
    """Pids of the processes whose working directory is `folder`."""
    import os

    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/cwd") == str(folder):
                found.append(int(pid))
        except OSError:
            continue
    return found


def test_ctrl_c_stops_the_checker_and_its_running_exercise(project):
    import signal
    import time

    source = (ROOT / SCAFFOLDS).read_text()
    (project / SCAFFOLDS).write_text(solved(source, "make_it_yours", """
def make_it_yours(mesh, programs, problem):
    while True:
        pass
"""))
    checker = subprocess.Popen([sys.executable, str(project / "scripts" / "exercises.py"),
                                "--lesson", ID], cwd=project,
                               env=clean_env(PYTHONDONTWRITEBYTECODE="1"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(processes_in(project)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)  # until the exercise's own process is running
    time.sleep(1)
    checker.send_signal(signal.SIGINT)
    stdout, stderr = checker.communicate(timeout=60)
    assert checker.returncode == 130, stdout + stderr
    assert stderr == "error: interrupted by SIGINT; the running exercise was stopped\n"
    assert "Traceback" not in stdout
    assert processes_in(project) == []

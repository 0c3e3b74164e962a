"""The exercise checker (scripts/exercises.py) as a learner meets it, mistakes included.

Each case edits a copy of the project's scaffolds the way a learner might (a slip the
pages name, a shortcut, an attack on the checker, a process that misbehaves) and runs the
checker there: every exercise gets one line of its own, no edit makes a wrong answer
pass, and nothing the exercise started outlives the check.
"""
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, LESSONS, ROOT, SEED, clean_env, module_file, project_copy
from lesson_code import ring_checks
from lesson_code.exercise import Exercise
from scripts.exercises import load_exercises
from scripts.judge_exercise import child_environment
from scripts.learner_copy import ChecksError, without

# The seed lesson's exercises: its scaffolds, its checks and the mistakes they name.
ID = SEED.id
SCAFFOLDS = f"lesson_code/{SEED.module.rsplit('.', 1)[1]}_exercises.py"
RING_SCAFFOLD = "lesson_code/ring_exercises.py"
NAMES = ["make_it_yours", "communication_budget", "zero_accounting", "clip_by_global_norm",
         "ring_all_gather"]
# What the checker reads: the registry, the checks, the recordings they use.
CHECKER_PARTS = ("scripts", "lesson_code", "recordings")


def check(root, *args, **popen):
    return subprocess.run([sys.executable, str(root / "scripts" / "exercises.py"), *args],
                          cwd=root, env=clean_env(PYTHONDONTWRITEBYTECODE="1"),
                          capture_output=True, text=True, timeout=600, **popen)


def lines_by_exercise(run, names=NAMES):
    assert "Traceback" not in run.stdout + run.stderr, run.stderr[-2000:]
    lines = run.stdout.splitlines()
    assert [line.split(":")[0].split()[-1] for line in lines] == names, lines
    return dict(zip(names, lines))


def section(path, name):
    """The snippet section `name` of `path`: a reference solution, as the page shows it."""
    text = (ROOT / path).read_text()
    return re.search(rf"# --8<-- \[start:{name}\]\n(.*?)# --8<-- \[end:{name}\]", text,
                     re.DOTALL)[1]


def solved(source, name, body):
    """`source` with the function `name` replaced by `body` (a whole def)."""
    start = source.index(f"def {name}(")
    end = source.index("# --8<-- [end:", start)
    return source[:start] + body.strip() + "\n" + source[end:]


def slip(solution, right, wrong):
    """A reference solution with one line the learner got wrong."""
    assert right in solution, right
    return solution.replace(right, wrong)


def processes_running(marker):
    """Pids of the running processes with `marker` among their arguments."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker.encode() in arguments:
            found.append(int(pid))
    return found


def left_running(marker):
    """The marked processes still running, killed so that no test leaves them behind."""
    found = processes_running(marker)
    for pid in found:
        os.kill(pid, signal.SIGKILL)
    return found


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return project_copy(tmp_path_factory.mktemp("exercises"), CHECKER_PARTS)


@pytest.fixture
def scaffolds(project):
    """The project's two scaffold files, as the repository has them, for a test to edit."""
    for path in (SCAFFOLDS, RING_SCAFFOLD):
        (project / path).write_text((ROOT / path).read_text())
    yield project
    for path in (SCAFFOLDS, RING_SCAFFOLD):
        (project / path).write_text((ROOT / path).read_text())


def fill(project, path, name, body):
    (project / path).write_text(solved((project / path).read_text(), name, body))


# ----------------------------------------------------------------- the registry --

def test_the_registry_names_the_checks_and_the_checker_takes_their_list():
    assert SEED.exercises == f"{SEED.module}_checks"
    exercises = load_exercises(SEED)
    assert all(isinstance(exercise, Exercise) for exercise in exercises)
    assert [exercise.name for exercise in exercises] == NAMES
    env = child_environment(SEED.devices)
    assert (env["JAX_NUM_CPU_DEVICES"], env["JAX_PLATFORMS"]) == (str(SEED.devices), "cpu")


def test_the_learners_copy_stands_in_for_a_function_and_keeps_every_line_number():
    source = '"""A module."""\nimport os\n\n\ndef solution(x):\n    """Doc,\n    two lines."""\n' \
             '    return x + 1  # the answer\n\n\ndef helper():\n    return os.sep\n'
    stubbed = without(source, {"solution": "the lesson's own solution m.solution"})
    assert len(stubbed.splitlines()) == len(source.splitlines())
    assert stubbed.splitlines()[10:] == source.splitlines()[10:]  # helper, where it was
    namespace = {}
    exec(compile(stubbed, "m.py", "exec"), namespace)
    from lesson_code.exercise import CalledTheSolution
    with pytest.raises(CalledTheSolution, match="^the lesson's own solution m.solution$"):
        namespace["solution"](1)
    with pytest.raises(ChecksError, match="^nested is not a `def` at the top"):
        without(source, {"nested": "?"})


@pytest.mark.parametrize("field, value, message", [
    ("name", 5, "an exercise's name is an identifier in quotes"),
    ("scaffold", "os:path", "exercise count_devices: scaffold is \"module:function\" under "
                            "lesson_code/"),
    ("answer", lambda devices: devices, "exercise count_devices: answer must be a function "
                                        "defined with `def` at the top of its module"),
])
def test_an_exercise_says_which_field_is_wrong(field, value, message):
    fields = dict(name="count_devices", scaffold="lesson_code.x_exercises:count_devices",
                  reference=section, answer=section, attempt=section, compare=section)
    with pytest.raises(TypeError, match=f"^{re.escape(message)}"):
        Exercise(**{**fields, field: value})


# ---------------------------------------------------------- scaffolds and solutions --

@pytest.mark.slow
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


def ring_exercise(*args, root=ROOT):
    """`python -m lesson_code.ring_exercises ARGS`, the command the ring's page gives."""
    return subprocess.run([sys.executable, "-m", "lesson_code.ring_exercises", *args],
                          cwd=root, env=clean_env(PYTHONDONTWRITEBYTECODE="1"),
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_the_ring_scaffold_alone_is_one_line_naming_its_first_hole():
    run = ring_exercise()
    assert (run.returncode, run.stderr) == (1, ""), run.stderr
    assert run.stdout.startswith("unfinished ring_all_gather: TODO: f32[p, F/p] zeros with "
                                 "this device's chunk in row r (lesson_code/ring_exercises.py:")


@pytest.mark.slow
@pytest.mark.parametrize("devices", ["2", "8"])
def test_the_ring_solution_passes_on_other_ring_sizes(devices):
    run = ring_exercise("--reference", "--devices", devices)
    assert (run.returncode, run.stdout) == (0, "ok ring_all_gather\n"), run.stderr


def test_the_ring_check_rejects_xla_all_gather_and_an_unfinished_ring():
    import jax

    from lesson_code.ring_collectives import AXIS, ring_all_gather

    def check_ring(implementation):  # both halves, in this process: the logic alone
        ring_checks.compare_ring_all_gather(ring_checks.run_ring_all_gather(implementation),
                                            ring_checks.ring_answer(len(jax.devices())))

    check_ring(ring_all_gather)  # the reference, on all 8 test devices
    with pytest.raises(AssertionError, match=r"^uses \{'all_gather': 1\}"):
        check_ring(lambda c: jax.lax.all_gather(c, AXIS, tiled=True))
    with pytest.raises(AssertionError, match=r"^device \d holds wrong values in chunk"):
        check_ring(lambda c: ring_all_gather(c, steps=3))


# ---------------------------------------------------- each mistake the pages name --

GOING_FURTHER = module_file(SEED, SEED.going_further)

CLIPPING = section(GOING_FURTHER, "clipping")
PSUM_OF_SQUARES = 'squares = jax.lax.psum(jnp.sum(g_slice * g_slice), "data")'
RING = section("lesson_code/ring_collectives.py", "ring_all_gather") \
    .replace("def ring_all_gather(chunk, steps=None):", "def ring_all_gather(chunk):")
ZERO = section(GOING_FURTHER, "zero_accounting")
MAKE_IT_YOURS = section(module_file(SEED), "make_it_yours")

# (exercise, its scaffold file, the learner's function, the start of the checker's line):
# each the lesson's solution with the one slip a page says the checker catches.
MISTAKES = {
    # autodiff.md, "Clipping a sharded gradient": the two tempting mistakes...
    "each slice clipped by its own norm": (
        "clip_by_global_norm", SCAFFOLDS,
        slip(CLIPPING, PSUM_OF_SQUARES, "squares = jnp.sum(g_slice * g_slice)"),
        "wrong clip_by_global_norm: no collective: each device scaled its slice by its own "
        "slice's norm; psum the sum of squares"),
    "the gradient gathered to take its norm": (
        "clip_by_global_norm", SCAFFOLDS,
        slip(CLIPPING, PSUM_OF_SQUARES,
             'squares = jnp.sum(jax.lax.all_gather(g_slice, "data", tiled=True) ** 2)'),
        "wrong clip_by_global_norm: the program gathers the gradient to take its norm, which "
        "sends (p-1)/p of it per rank"),
    # ...and "exactly one all-reduce, of one scalar", with the values compared with NumPy.
    "the squares summed across devices before within": (
        "clip_by_global_norm", SCAFFOLDS,
        slip(CLIPPING, PSUM_OF_SQUARES,
             'squares = jnp.sum(jax.lax.psum(g_slice * g_slice, "data"))'),
        "wrong clip_by_global_norm: expected exactly one psum, of one scalar (4 bytes); this "
        "program asks for all_reduce of tensor<2xf32>"),
    "the slices' norms summed": (
        "clip_by_global_norm", SCAFFOLDS,
        slip(CLIPPING, PSUM_OF_SQUARES,
             'squares = jax.lax.psum(jnp.sqrt(jnp.sum(g_slice * g_slice)), "data") ** 2'),
        "wrong clip_by_global_norm: one scalar psum, but the clipped gradient is wrong"),
    # build-the-ring.md: the whole vector on every device, p - 1 ppermutes and nothing else.
    "jax.lax.all_gather for the ring": (
        "ring_all_gather", RING_SCAFFOLD,
        "def ring_all_gather(chunk):\n    return jax.lax.all_gather(chunk, AXIS, tiled=True)",
        "wrong ring_all_gather: uses {'all_gather': 1}: a ring all-gather needs only "
        "ppermute"),
    "a ring one step short": (
        "ring_all_gather", RING_SCAFFOLD,
        slip(RING, "range(p - 1 if steps is None else steps)", "range(p - 2)"),
        "wrong ring_all_gather: device 0 holds wrong values in chunk(s) [1] of 4"),
    # The lesson page, "Account for the complete communication cycle": storing less is
    # not sending less.
    "the all-gather forgotten": (
        "communication_budget", SCAFFOLDS,
        slip(section(module_file(SEED), "transfer_budget"),
             "scatter_then_gather = scatter + scatter", "scatter_then_gather = scatter"),
        "wrong communication_budget: B_AR != B_RS + B_AG: count the gather"),
    # autodiff.md, ZeRO-3: "gathered for the forward pass and ... again for the backward".
    "ZeRO-3 gathering once": (
        "zero_accounting", SCAFFOLDS,
        slip(ZERO, '"zero_3": ("all_gather", "all_gather", "reduce_scatter")',
             '"zero_3": ("all_gather", "reduce_scatter")'),
        "wrong zero_accounting: zero_3 sends as much as data parallel: ZeRO-3 gathers the "
        "weights for the forward pass AND again for the backward pass"),
    # The lesson page, "Make it yours": check the all-reduce and every rebuilt replica.
    "the devices never asked": (
        "make_it_yours", SCAFFOLDS,
        "\n".join(line for line in MAKE_IT_YOURS.splitlines() if "assert_matches" not in line),
        "wrong make_it_yours: the devices never saw the reversed rows"),
}


@pytest.mark.parametrize("mistake", MISTAKES)
def test_each_mistake_a_page_names_gets_its_own_message(scaffolds, mistake):
    name, path, body, message = MISTAKES[mistake]
    fill(scaffolds, path, name, body)
    run = check(scaffolds, "--lesson", ID, "--exercise", name)
    assert run.returncode == 1, run.stdout + run.stderr
    assert lines_by_exercise(run, [name])[name].startswith(message)


def test_the_ring_command_refuses_a_ring_that_calls_the_lessons_own(scaffolds):
    fill(scaffolds, RING_SCAFFOLD, "ring_all_gather", """
def ring_all_gather(chunk):
    from lesson_code.ring_collectives import ring_all_gather as theirs
    return theirs(chunk)
""")
    run = ring_exercise(root=scaffolds)
    assert (run.returncode, run.stderr) == (1, ""), run.stderr
    assert run.stdout == ("wrong ring_all_gather: calls the lesson's own solution "
                          "lesson_code.ring_collectives.ring_all_gather; write the answer in "
                          "the scaffold instead\n")


def test_a_syntax_error_a_sys_exit_and_an_endless_loop_are_one_line_each(scaffolds):
    source = (ROOT / SCAFFOLDS).read_text()
    (scaffolds / SCAFFOLDS).write_text(source.replace("budget = []", "budget = [", 1))
    fill(scaffolds, RING_SCAFFOLD, "ring_all_gather", """
def ring_all_gather(chunk):
    while True:
        pass
""")
    # The endless loop spins a core until the limit: 8 s, ample for the four slips above
    # to fail at import.
    run = check(scaffolds, "--lesson", ID, "--time-limit", "8")
    assert run.returncode == 1
    lines = lines_by_exercise(run)
    for name in NAMES[:4]:
        assert lines[name].startswith(f"wrong {name}: syntax error ("), lines
        assert f"{SCAFFOLDS}:" in lines[name]
    assert lines["ring_all_gather"].startswith(
        "wrong ring_all_gather: still running after 8 s, stopped"), lines

    (scaffolds / SCAFFOLDS).write_text(solved(source, "communication_budget", """
def communication_budget(gradient_bytes=2**20, ranks=(2, 4, 8)):
    import sys
    sys.exit(0)
"""))
    run = check(scaffolds, "--lesson", ID, "--exercise", "communication_budget")
    assert lines_by_exercise(run, ["communication_budget"])["communication_budget"] == (
        "wrong communication_budget: the exercise's process ended with exit status 0 "
        "before its check finished; remove the sys.exit / os._exit call")


# ------------------------------------------------- attacks on the checker's verdict --

# Each of these printed `ok` on 05c3190, where the learner's process held the token, the
# result pipe and the checks.
ATTACKS = {
    # Walk up to the runner's frame, write an "ok" verdict with its token, exit at once.
    "communication_budget": """
def communication_budget(gradient_bytes=2**20, ranks=(2, 4, 8)):
    import json, os, sys
    frame = sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if hasattr(value, "write") and not getattr(value, "closed", True):
                token = frame.f_locals.get("token", "")
                value.write(json.dumps({"token": token, "state": "ok",
                                        "line": "ok communication_budget",
                                        "result": [], "raised": None}))
                value.flush()
                os._exit(0)
        frame = frame.f_back
    os._exit(0)
""",
    # Call the solution the checks module holds.
    "clip_by_global_norm": """
def clip_by_global_norm(g_slice, max_norm):
    from CHECKS_MODULE import EXERCISES
    [me] = [e for e in EXERCISES if e.name == "clip_by_global_norm"]
    return me.reference(g_slice, max_norm)
""",
    # Reload the lesson module, which puts back the solution a tripwire replaced.
    "zero_accounting": """
def zero_accounting(traffic, gradient_bytes=2**20, ranks=4, state_per_weight=1):
    import importlib
    import GOING_FURTHER_MODULE as lesson
    return importlib.reload(lesson).zero_accounting(traffic, gradient_bytes, ranks,
                                                    state_per_weight)
""",
    # Ask the checks for their answer.
    "make_it_yours": """
def make_it_yours(mesh, programs, problem):
    from CHECKS_MODULE import EXERCISES
    [me] = [e for e in EXERCISES if e.name == "make_it_yours"]
    right = me.answer(len(mesh.devices.flat))
    return right["expected"], right["wrong_labels"]
""",
}
# The seed's own modules, by its registry entry, in place of the names above.
ATTACKS = {name: body.replace("CHECKS_MODULE", SEED.exercises)
           .replace("GOING_FURTHER_MODULE", SEED.going_further)
           for name, body in ATTACKS.items()}
# Replace the checks' functions as the scaffold is imported, before they run.
RING_ATTACK = """
import lesson_code.ring_checks as _checks

_checks.check_ring_all_gather = lambda implementation: None
_checks.run_ring_all_gather = lambda implementation: {"devices": [], "lowered": ""}
_checks.compare_ring_all_gather = lambda got, answer: None
"""


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    project = project_copy(tmp_path_factory.mktemp("attacked"), CHECKER_PARTS)
    for name, body in ATTACKS.items():
        fill(project, SCAFFOLDS, name, body)
    (project / RING_SCAFFOLD).write_text((ROOT / RING_SCAFFOLD).read_text() + RING_ATTACK)
    run = check(project, "--lesson", ID)
    assert run.returncode == 1, run.stdout + run.stderr
    return lines_by_exercise(run)


def test_a_verdict_written_from_the_learners_frames_is_not_a_verdict(attacked):
    assert attacked["communication_budget"] == (
        "wrong communication_budget: the exercise's process ended with exit status 0 before "
        "its check finished; remove the sys.exit / os._exit call")


def test_replacing_the_checks_at_import_changes_nothing(attacked):
    assert attacked["ring_all_gather"].startswith(
        "unfinished ring_all_gather: TODO: f32[p, F/p] zeros"), attacked


def test_the_solution_is_out_of_reach_through_the_checks(attacked):
    assert attacked["clip_by_global_norm"] == (
        "wrong clip_by_global_norm: calls the lesson's own solution "
        f"{SEED.going_further}.clip_by_global_norm; write the answer in the scaffold instead")


def test_the_solution_is_out_of_reach_through_a_reload(attacked):
    assert attacked["zero_accounting"] == (
        "wrong zero_accounting: calls the lesson's own solution "
        f"{SEED.going_further}.zero_accounting; write the answer in the scaffold instead")


def test_the_answer_is_out_of_reach_through_the_checks(attacked):
    assert attacked["make_it_yours"] == (
        "wrong make_it_yours: calls the check's own answer "
        f"{SEED.exercises}.make_it_yours_answer; write the answer in the scaffold instead")


# ------------------------------------------------------ the learner's process, bounded --

MARK = f"300.{os.getpid()}"  # `sleep MARK`: found in /proc by its argument
LIMITS = {
    # Leaves its own session through a shell that exits at once: an orphan nobody waits for.
    "make_it_yours": f"""
def make_it_yours(mesh, programs, problem):
    import subprocess
    subprocess.Popen(["sh", "-c", "sleep {MARK} &"], start_new_session=True).wait()
    return np.zeros(problem.w.shape), np.zeros(problem.w.shape)
""",
    # The right answer, and a process left behind holding stderr.
    "communication_budget": f"""
def communication_budget(gradient_bytes=2**20, ranks=(2, 4, 8)):
    import subprocess
    subprocess.Popen(["sleep", "{MARK}"])
    return [{{"ranks": p, "all_reduce_bytes": 2 * (gradient_bytes * (p - 1) // p),
             "scatter_gather_bytes": 2 * (gradient_bytes * (p - 1) // p),
             "shard_storage_bytes": gradient_bytes // p}} for p in ranks]
""",
    "zero_accounting": """
def zero_accounting(traffic, gradient_bytes=2**20, ranks=4, state_per_weight=1):
    import sys
    sys.stderr.write("x" * 300_000_000)
""",
    "clip_by_global_norm": """
def clip_by_global_norm(g_slice, max_norm):
    held = np.ones(2_500_000_000, np.uint8)
    return g_slice
""",
    "ring_all_gather": f"""
def ring_all_gather(chunk):
    import subprocess, time
    for _ in range(40):
        subprocess.Popen(["sleep", "{MARK}"])
    time.sleep(60)
""",
}


@pytest.fixture(scope="module")
def bounded(tmp_path_factory):
    """One checker run over the LIMITS, measuring the checker's own peak memory."""
    project = project_copy(tmp_path_factory.mktemp("bounded"), CHECKER_PARTS)
    for name, body in LIMITS.items():
        fill(project, RING_SCAFFOLD if name == "ring_all_gather" else SCAFFOLDS, name, body)
    # VmHWM, the peak of this process's own memory: getrusage's ru_maxrss also keeps the
    # peak of the process it was started from (Linux carries it across exec), here pytest's.
    measured = ("import sys\nsys.path.insert(0, '.')\n"
                "from scripts.exercises import main\nstatus = main(sys.argv[1:])\n"
                "print(next(line.split()[1] for line in open('/proc/self/status')\n"
                "           if line.startswith('VmHWM:')), file=sys.stderr)\n"
                "sys.exit(status)")
    run = subprocess.run([sys.executable, "-c", measured, "--lesson", ID], cwd=project,
                         env=clean_env(PYTHONDONTWRITEBYTECODE="1"), capture_output=True,
                         text=True, timeout=600)
    left = left_running(MARK)
    assert run.returncode == 1, run.stdout + run.stderr
    return lines_by_exercise(run), int(run.stderr.splitlines()[-1]) * 1024, left


def test_nothing_an_exercise_starts_outlives_its_check(bounded):
    _, _, left = bounded
    assert left == []


def test_a_process_left_holding_stderr_keeps_a_right_answer_right(bounded):
    lines, _, _ = bounded
    assert lines["communication_budget"] == "ok communication_budget"


def test_a_process_in_a_session_of_its_own_is_killed_too(bounded):
    lines, _, _ = bounded
    # The exercise's own verdict, unchanged; the sleep it left is gone (the test above).
    assert lines["make_it_yours"].startswith("wrong make_it_yours: expected is not"), lines


def test_300_mb_on_stderr_stop_at_the_output_limit_and_the_checker_never_holds_them(bounded):
    lines, checker_peak, _ = bounded
    assert lines["zero_accounting"] == ("wrong zero_accounting: its stderr reached the 1 MiB "
                                        "output limit and was cut there; print less")
    # The checker computes the answers itself, so JAX is in its memory: 170-450 MB seen,
    # by load and by how much the compiler cached. Holding the 300 MB it was sent took
    # 878 MB (05c3190, where the checker read the stream whole); cutting it keeps the peak
    # where JAX alone puts it, far below that.
    assert checker_peak < 650_000_000, checker_peak


def test_allocating_2_5_gb_is_over_the_memory_limit(bounded):
    lines, _, _ = bounded
    assert lines["clip_by_global_norm"].startswith(
        "wrong clip_by_global_norm: over the memory limit (2 GiB beyond what JAX holds) at "
        f"{SCAFFOLDS}:"), lines


def test_a_process_count_past_the_limit_stops_the_exercise(bounded):
    lines, _, _ = bounded
    assert lines["ring_all_gather"] == ("wrong ring_all_gather: ran more than 16 processes at "
                                        "once, all stopped; an exercise needs one")


# ------------------------------------------------------------------ the command line --

@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (["--devices", "8"], "error: --devices needs --exercise NAME: a lesson's exercises run "
                         "on its own device count"),
    (["--lesson", ID, "--exercise", "ring_all_gather", "--devices=0"],
     "error: --devices 0 must be between 1 and 256"),
    (["--exercise", "ring_all_gather"], "error: --exercise ring_all_gather needs --lesson ID"),
    (["--lesson", ID, "--exercise", "nope"],
     f"error: no exercise 'nope' in {SEED.exercises}; try --exercise make_it_yours"),
    (["--lesson", "nope"], "error: no lesson 'nope' in lesson_code/lessons.toml"),
    (["--time-limit", "0"], "error: --time-limit 0 must be between 0 and 3600"),
])
def test_a_request_that_cannot_work_is_refused_in_one_line(args, message):
    run = check(ROOT, *args)
    assert run.returncode == 2
    assert run.stdout == "" and run.stderr.startswith(message), run.stderr
    assert len(run.stderr.splitlines()) == 1


def with_fixture_lesson(project, checks=None):
    """The 8-device fixture lesson added to `project`, with `checks` as its checks
    module's source if given; the registry entry names it."""
    for name in ("psum_08_exercises.py", "psum_08_checks.py"):
        (project / "lesson_code" / name).write_text(
            (FIXTURES / "exercises_lesson" / name).read_text())
    if checks is not None:
        (project / "lesson_code" / "psum_08_checks.py").write_text(checks)
    registry = project / "lesson_code" / "lessons.toml"
    registry.write_text(registry.read_text() + '\n[[lesson]]\nid = "psum-08"\n'
                        f'module = "{SEED.module}"\ndevices = 8\n'
                        'exercises = "lesson_code.psum_08_checks"\n')
    return project


@pytest.mark.slow
def test_another_lessons_exercises_run_on_its_own_device_count(tmp_path):
    """A lesson with 8 devices and its own checks: nothing under scripts/ changes, and
    each exercise sees the lesson's 8 devices, not the seed lesson's 4."""
    project = with_fixture_lesson(project_copy(tmp_path / "project", CHECKER_PARTS))
    run = check(project, "--lesson", "psum-08")
    assert run.returncode == 1 and run.stdout.startswith("unfinished count_devices: TODO: the "
                                                         "sum of `one`"), run.stdout + run.stderr
    run = check(project, "--lesson", "psum-08", "--reference")
    assert (run.returncode, run.stdout) == (0, "ok count_devices\n"), run.stdout + run.stderr
    # Every lesson at once: one line per exercise, each named by its lesson.
    run = check(project, "--reference")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines() == [
        f"{lesson.id}: ok {exercise.name}" for lesson in LESSONS.values() if lesson.exercises
        for exercise in load_exercises(lesson)] + ["psum-08: ok count_devices"]


CHECKS = (FIXTURES / "exercises_lesson" / "psum_08_checks.py").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("checks, message", [
    (CHECKS.replace("def answer(devices):", "def answer(devices)"),
     "error: lesson_code/psum_08_checks.py:13: expected ':'; fix the checks module "
     "(lesson_code/CONTRACT.md, \"Exercises\")"),
    (CHECKS.replace('Exercise("count_devices"', "Exercise(5"),
     "error: lesson_code/psum_08_checks.py:32: TypeError: an exercise's name is an "
     "identifier in quotes, such as Exercise(\"clip_by_global_norm\", ...), not 5; fix the "
     "checks module (lesson_code/CONTRACT.md, \"Exercises\")"),
    (CHECKS.replace("EXERCISES = [", "EXERCISES = tuple([").replace("compare)]", "compare)])"),
     "error: lesson_code/psum_08_checks.py: EXERCISES must be a list of "
     "lesson_code.exercise.Exercise(...)"),
], ids=["does not parse", "named by a number", "not a list"])
def test_a_checks_module_that_cannot_be_used_is_one_line_naming_the_fix(tmp_path, checks,
                                                                        message):
    project = with_fixture_lesson(project_copy(tmp_path / "project", CHECKER_PARTS), checks)
    run = check(project, "--lesson", "psum-08")
    assert (run.returncode, run.stdout) == (2, ""), run.stdout + run.stderr
    assert run.stderr.startswith(message) and len(run.stderr.splitlines()) == 1, run.stderr


@pytest.mark.slow
def test_a_closed_stdout_ends_the_check_with_141_and_no_traceback():
    checker = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "exercises.py"),
                                "--lesson", ID, "--reference"], cwd=ROOT,
                               env=clean_env(PYTHONDONTWRITEBYTECODE="1"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert checker.stdout.readline() == b"ok make_it_yours\n"
    checker.stdout.close()  # as `| head -1` does once it has its line
    stderr = checker.stderr.read().decode()
    assert (checker.wait(timeout=300), stderr) == (141, "")


def wait_until(condition, timeout_s=120):
    """Poll until `condition()` holds. The bound only keeps a hung run from hanging the
    suite, as subprocess's timeout= does: it asserts nothing about this machine's speed."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"still waiting after {timeout_s} s: the run hung")
        time.sleep(0.1)


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGHUP, 129),
                                            (signal.SIGTERM, 143)])
def test_a_signal_stops_the_checker_and_everything_its_exercise_started(scaffolds, signum,
                                                                         status):
    mark = f"{MARK}{signum}"
    fill(scaffolds, SCAFFOLDS, "make_it_yours", f"""
def make_it_yours(mesh, programs, problem):
    import subprocess
    subprocess.Popen(["sleep", "{mark}"], start_new_session=True)
    while True:
        pass
""")
    scratch = scaffolds.parent / f"tmp-{signum}"
    scratch.mkdir()
    checker = subprocess.Popen([sys.executable, str(scaffolds / "scripts" / "exercises.py"),
                                "--lesson", ID], cwd=scaffolds,
                               env=clean_env(PYTHONDONTWRITEBYTECODE="1", TMPDIR=str(scratch)),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: processes_running(mark))
    checker.send_signal(signum)
    stdout, stderr = checker.communicate(timeout=60)
    name = signal.Signals(signum).name
    assert (checker.returncode, stdout) == (status, ""), stderr
    assert stderr == f"error: interrupted by {name}; no exercise is left running\n"
    assert left_running(mark) == []
    assert list(scratch.iterdir()) == []  # the copies of lesson_code/ went with them


def children_of(pid):
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []


def command_of(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


# When a Ctrl-C lands: as the checker starts (the scaffold has just handed over, and the
# checker imports the checks and JAX), or while an exercise runs.
PHASES = {"starting": lambda pid: str(ROOT / "scripts" / "exercises.py").encode()
          in command_of(pid),
          "checking": lambda pid: children_of(pid)}


@pytest.mark.slow
@pytest.mark.parametrize("scaffold", [SCAFFOLDS, RING_SCAFFOLD])
@pytest.mark.parametrize("phase", PHASES)
def test_ctrl_c_to_a_scaffolds_reference_is_one_line_and_130(scaffold, phase):
    module = scaffold.removesuffix(".py").replace("/", ".")
    run = subprocess.Popen([sys.executable, "-m", module, "--reference"], cwd=ROOT,
                           env=clean_env(PYTHONDONTWRITEBYTECODE="1"),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: PHASES[phase](run.pid))
    run.send_signal(signal.SIGINT)
    stdout, stderr = run.communicate(timeout=60)
    assert (run.returncode, stderr) == (
        130, "error: interrupted by SIGINT; no exercise is left running\n"), stdout + stderr

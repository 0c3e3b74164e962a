"""The exercise checker as a learner meets it: scaffolds edited as a learner might (a slip a
page names, a shortcut, a process that misbehaves), one line per exercise."""
import os
import re
from dataclasses import replace

import pytest

from conftest import FIXTURES, ROOT, SEED, each_lesson_with
import harness
from harness import snippet_sections
from lesson_code.exercise import Exercise
from scripts import exercises
from scripts.exercises import load_exercises, solution_called

ID = SEED.id
SCAFFOLDS = f"lesson_code/{SEED.module.rsplit('.', 1)[1]}_exercises.py"
RING_SCAFFOLD = "lesson_code/ring_exercises.py"
NAMES = ["make_it_yours", "communication_budget", "zero_accounting", "clip_by_global_norm",
         "ring_all_gather"]
CHECKER_PARTS = ("scripts", "lesson_code", "recordings")


def check(root, *args):
    return harness.run("scripts/exercises.py", *args, cwd=root, timeout=600)


def slip(solution, right, wrong):
    """A reference solution with one line the learner got wrong."""
    assert right in solution, right
    return solution.replace(right, wrong)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return harness.project(tmp_path_factory.mktemp("exercises"), CHECKER_PARTS)


@pytest.fixture
def scaffolds(project):
    for path in (SCAFFOLDS, RING_SCAFFOLD):
        (project / path).write_text((ROOT / path).read_text())
    return project


def fill(project, name, body):
    """The scaffold's function `name` replaced by `body` (a whole def), as a learner fills it in."""
    path = project / (RING_SCAFFOLD if name == "ring_all_gather" else SCAFFOLDS)
    source = path.read_text()
    start = source.index(f"def {name}(")
    end = source.index("# --8<-- [end:", start)
    path.write_text(source[:start] + body.strip() + "\n" + source[end:])


@pytest.mark.parametrize("field, value, message", [
    ("scaffold", "os:path", "exercise count_devices: scaffold is \"module:function\" under "
                            "lesson_code/"),
    ("attempt", lambda run: run, "exercise count_devices: attempt must be a function "
                                 "defined with `def` at the top of its module")])
def test_an_exercise_says_which_field_is_wrong(field, value, message):
    fields = dict(name="count_devices", scaffold="lesson_code.x_exercises:count_devices",
                  reference=slip, answer=slip, attempt=slip, compare=slip)
    with pytest.raises(TypeError, match=f"^{re.escape(message)}"):
        Exercise(**{**fields, field: value})


# Does the scaffold's function call the lesson's own solution? (Imported under another
# name: the round "the lesson's own ring called".)
SHORTCUTS = {
    "through its module": (True, "def ring_all_gather(c):\n    import lesson_code."
                           "ring_collectives as ring\n    return ring.ring_all_gather(c)\n"),
    "a helper of the lesson's": (False, "from lesson_code.ring_collectives import pass_right\n"
                                 "def ring_all_gather(c):\n    return pass_right(c, 4)\n"),
    "not parsed (the child's line)": (False, "def ring_all_gather(c):\n    return (\n"),
    "no such function (the child's line)": (False, "def ring_all(c):\n    return c\n")}


@pytest.mark.parametrize("shortcut", SHORTCUTS)
def test_calling_the_lessons_own_solution_is_read_from_the_scaffold(tmp_path, shortcut):
    called, source = SHORTCUTS[shortcut]
    (tmp_path / RING_SCAFFOLD).parent.mkdir()
    (tmp_path / RING_SCAFFOLD).write_text(source)
    [ring] = [each for each in load_exercises(SEED) if each.name == "ring_all_gather"]
    assert solution_called(ring, replace(SEED, root=tmp_path)) == \
        ("lesson_code.ring_collectives.ring_all_gather" if called else None)


@pytest.mark.slow
@pytest.mark.parametrize("args, status, line", [
    ((), 1, "unfinished ring_all_gather: TODO: f32[p, F/p] zeros with this device's chunk in "
            "row r (lesson_code/ring_exercises.py:"),
    (("--reference", "--devices", "8"), 0, "ok ring_all_gather\n"),
], ids=["scaffold", "solution on 8"])
def test_the_ring_command_is_one_line_on_any_ring_size(args, status, line):
    done = harness.run("-m", "lesson_code.ring_exercises", *args)  # as the ring's page says
    assert (done.returncode, done.stderr) == (status, ""), done.stderr
    assert done.stdout.startswith(line) and len(done.stdout.splitlines()) == 1, done.stdout


@pytest.mark.slow
@each_lesson_with("exercises")
def test_each_lesson_s_solutions_pass_its_own_checks(lesson):
    """What a learner is told is right is right: `--reference` runs the lesson's solutions."""
    done = harness.passed(harness.run("scripts/exercises.py", "--reference", "--lesson", lesson.id))
    assert done.stdout.splitlines() == [f"ok {each.name}" for each in load_exercises(lesson)]


# The reference solutions, as the pages show them.
LESSON, GOING_FURTHER = (snippet_sections(SEED.path(m)) for m in (None, SEED.going_further))
CLIPPING, ZERO = GOING_FURTHER["clipping"], GOING_FURTHER["zero_accounting"]
PSUM_OF_SQUARES = 'squares = jax.lax.psum(jnp.sum(g_slice * g_slice), "data")'
RING = snippet_sections(ROOT / "lesson_code" / "ring_collectives.py")["ring_all_gather"] \
    .replace("def ring_all_gather(chunk, steps=None):", "def ring_all_gather(chunk):")
MAKE_IT_YOURS = LESSON["make_it_yours"]

# (exercise, the learner's function, the start of the checker's line): each the lesson's
# solution with the one slip a page says the checker catches.
MISTAKES = {
    # autodiff.md, "Clipping a sharded gradient": the two tempting mistakes...
    "each slice clipped by its own norm": ("clip_by_global_norm", slip(
        CLIPPING, PSUM_OF_SQUARES, "squares = jnp.sum(g_slice * g_slice)"),
        "wrong clip_by_global_norm: no collective: each device scaled its slice by its own "
        "slice's norm; psum the sum of squares"),
    "the gradient gathered to take its norm": ("clip_by_global_norm", slip(
        CLIPPING, PSUM_OF_SQUARES,
        'squares = jnp.sum(jax.lax.all_gather(g_slice, "data", tiled=True) ** 2)'),
        "wrong clip_by_global_norm: the program gathers the gradient to take its norm, which "
        "sends (p-1)/p of it per rank"),
    # ...and "exactly one all-reduce, of one scalar", with the values compared with NumPy.
    "the squares summed across devices before within": ("clip_by_global_norm", slip(
        CLIPPING, PSUM_OF_SQUARES, 'squares = jnp.sum(jax.lax.psum(g_slice * g_slice, "data"))'),
        "wrong clip_by_global_norm: expected exactly one psum, of one scalar (4 bytes); this "
        "program asks for all_reduce of tensor<2xf32>"),
    "the slices' norms summed": ("clip_by_global_norm", slip(
        CLIPPING, PSUM_OF_SQUARES,
        'squares = jax.lax.psum(jnp.sqrt(jnp.sum(g_slice * g_slice)), "data") ** 2'),
        "wrong clip_by_global_norm: one scalar psum, but the clipped gradient is wrong"),
    # build-the-ring.md: the whole vector on every device, p - 1 ppermutes and nothing else,
    # and the lesson's own ring is not an answer (read from the scaffold).
    "jax.lax.all_gather for the ring": (
        "ring_all_gather", "def ring_all_gather(chunk):\n"
                           "    return jax.lax.all_gather(chunk, AXIS, tiled=True)",
        "wrong ring_all_gather: uses {'all_gather': 1}: a ring all-gather needs only ppermute"),
    "a ring one step short": ("ring_all_gather", slip(
        RING, "range(p - 1 if steps is None else steps)", "range(p - 2)"),
        "wrong ring_all_gather: device 0 holds wrong values in chunk(s) [1] of 4"),
    "the lesson's own ring called": (
        "ring_all_gather", "def ring_all_gather(chunk):\n    from lesson_code.ring_collectives "
                           "import ring_all_gather as theirs\n    return theirs(chunk)",
        "wrong ring_all_gather: calls the lesson's own solution lesson_code.ring_collectives."
        "ring_all_gather; write the answer in the scaffold instead"),
    # The lesson page, "Account for the complete communication cycle".
    "the all-gather forgotten": ("communication_budget", slip(
        LESSON["transfer_budget"],
        "scatter_then_gather = scatter + scatter", "scatter_then_gather = scatter"),
        "wrong communication_budget: B_AR != B_RS + B_AG: count the gather"),
    # autodiff.md, ZeRO-3: "gathered for the forward pass and ... again for the backward".
    "ZeRO-3 gathering once": ("zero_accounting", slip(
        ZERO, '"zero_3": ("all_gather", "all_gather", "reduce_scatter")',
        '"zero_3": ("all_gather", "reduce_scatter")'),
        "wrong zero_accounting: zero_3 sends as much as data parallel: ZeRO-3 gathers the "
        "weights for the forward pass AND again for the backward pass"),
    # The lesson page, "Make it yours": check the all-reduce and every rebuilt replica.
    "the devices never asked": ("make_it_yours", "\n".join(
        line for line in MAKE_IT_YOURS.splitlines() if "assert_matches" not in line),
        "wrong make_it_yours: the devices never saw the reversed rows")}
# What stops one exercise's process: that exercise's whole line, the others still run.
STOPS = {
    "sys.exit": ("communication_budget", "def communication_budget(gradient_bytes=2**20, "
                 "ranks=(2, 4, 8)):\n    import sys\n    sys.exit(0)",
                 "wrong communication_budget: the exercise's process exited with status 0 "
                 "before its check finished; remove the sys.exit / os._exit call"),
    "a crash": ("zero_accounting", "def zero_accounting(traffic, gradient_bytes=2**20, ranks=4, "
                "state_per_weight=1):\n    import os, signal\n"
                "    os.kill(os.getpid(), signal.SIGSEGV)",
                "wrong zero_accounting: the exercise's process was killed by SIGSEGV before "
                "its check finished..."),
    "a syntax error": ("ring_all_gather", "def ring_all_gather(chunk):\n    passing = [\n",
                       f"wrong ring_all_gather: syntax error ('[' was never closed) at "
                       f"{RING_SCAFFOLD}:..."),
    "a learner's own solution": ("make_it_yours", MAKE_IT_YOURS, "ok make_it_yours"),
    # Alone, under a limit of 3 s: a blocking call holds no core while it runs out.
    "an endless loop": ("make_it_yours", "def make_it_yours(mesh, programs, problem):\n"
                        "    import time\n    time.sleep(3600)",
                        "wrong make_it_yours: still running after 3 s, stopped (an endless "
                        "loop? a blocking call?)")}
# A mistake's message is the start of its line; what follows may show the numbers.
CASES = {**{mistake: (name, body, f"{line}...") for mistake, (name, body, line)
            in MISTAKES.items()}, **STOPS}

# One checker run a round, each exercise at most once in it (one alone: --exercise). An
# exercise a round leaves as it ships is "unfinished", naming its TODO's line.
ROUNDS = {
    "the scaffolds as they ship": [],
    "a slip in each exercise": ["the devices never asked", "the all-gather forgotten",
                                "ZeRO-3 gathering once", "each slice clipped by its own norm",
                                "jax.lax.all_gather for the ring"],
    "what stops one exercise, the others still run": [
        "a learner's own solution", "sys.exit", "a crash",
        "the gradient gathered to take its norm", "a syntax error"],
    **{mistake: [mistake] for mistake in ("the squares summed across devices before within",
                                          "the slices' norms summed", "a ring one step short",
                                          "the lesson's own ring called", "an endless loop")}}


@pytest.mark.parametrize("round", ROUNDS)
def test_each_mistake_a_page_names_and_each_stop_is_that_exercise_s_line(scaffolds, round):
    expected = {name: line for name, _, line in map(CASES.get, ROUNDS[round])}
    for name, body, _ in map(CASES.get, ROUNDS[round]):
        fill(scaffolds, name, body)
    one = ["--exercise", *expected] if len(expected) == 1 else []
    limit = ["--time-limit", "3"] if ROUNDS[round] == ["an endless loop"] else []
    done = check(scaffolds, "--lesson", ID, *one, *limit)  # one process per exercise
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr, done.stderr[-2000:]
    lines, names = done.stdout.splitlines(), list(expected) if one else NAMES
    assert [line.split(":")[0].split()[-1] for line in lines] == names, lines
    for name, line in zip(names, lines):
        if name not in expected:
            what, path, number = re.fullmatch(
                rf"unfinished {name}: TODO: (.*) \((.*):(\d+)\)", line).groups()
            assert f'todo("{what}"' in (ROOT / path).read_text().splitlines()[int(number) - 1]
        elif expected[name].endswith("..."):
            assert line.startswith(expected[name][:-3]), (line, expected[name])
        else:
            assert line == expected[name]


@pytest.mark.parametrize("args, message", [  # the start of the one line
    (["--devices", "8"], "error: --devices needs --exercise NAME: a lesson's exercises run on its "
                         "own device count"),
    (["--lesson", ID, "--exercise", "ring_all_gather", "--devices=0"],
     "error: --devices 0 must be between 1 and 256"),
    (["--exercise", "ring_all_gather"], "error: --exercise ring_all_gather needs --lesson ID"),
    (["--lesson", ID, "--exercise", "nope"],
     f"error: no exercise 'nope' in {SEED.exercises}; try --exercise make_it_yours"),
    (["--lesson", "nope"], "error: --lesson nope: no such lesson in lesson_code/lessons.toml"),
    (["--time-limit", "0"], "error: --time-limit 0 must be between 0 and 3600")])
def test_a_request_that_cannot_work_is_refused_in_one_line(args, message, capsys, monkeypatch):
    for name in ("JAX_PLATFORMS", "JAX_NUM_CPU_DEVICES"):  # the checker drops JAX_*: put
        monkeypatch.setenv(name, os.environ[name])  # the suite's back afterwards
    assert harness.refused(exercises.main, args, capsys).startswith(message)


def test_the_help_says_the_checker_is_no_sandbox(capsys):
    with pytest.raises(SystemExit):
        exercises.parse_args(["--help"])
    assert "It runs your code as you, with your rights: it is no sandbox." in \
        " ".join(capsys.readouterr().out.split())


@pytest.fixture(scope="module")
def eight_devices(tmp_path_factory):
    """A project of the seed and the 8-device fixture lesson, its registry entry naming it."""
    root = harness.project(tmp_path_factory.mktemp("eight"), CHECKER_PARTS, keep=[SEED.id])
    (root / "lesson_code" / "psum_08_exercises.py").write_text(
        (FIXTURES / "exercises_lesson" / "psum_08_exercises.py").read_text())
    registry = root / "lesson_code" / "lessons.toml"
    registry.write_text(registry.read_text() + '\n[[lesson]]\nid = "psum-08"\n'
                        f'module = "{SEED.module}"\ndevices = 8\n'
                        'exercises = "lesson_code.psum_08_checks"\n')
    return root


def with_checks(project, checks):
    """`project` with `checks` (text or bytes) as the fixture lesson's checks module."""
    (project / "lesson_code" / "psum_08_checks.py").write_bytes(
        checks if isinstance(checks, bytes) else checks.encode())
    return project


@pytest.mark.slow
def test_another_lessons_exercises_run_on_its_own_device_count(eight_devices):
    """Each exercise of an 8-device lesson sees 8 devices, not the seed lesson's 4."""
    project = with_checks(eight_devices, CHECKS)
    done = check(project, "--lesson", "psum-08")
    assert done.returncode == 1 and done.stdout.startswith(
        "unfinished count_devices: TODO: the sum of `one`"), done.stdout + done.stderr
    # Every lesson's own solutions at once: one line per exercise, each named by its lesson.
    done = harness.passed(check(project, "--reference"))
    assert done.stdout.splitlines() == [
        f"{SEED.id}: ok {exercise.name}" for exercise in load_exercises(SEED)] + \
        ["psum-08: ok count_devices"]


CHECKS = (FIXTURES / "exercises_lesson" / "psum_08_checks.py").read_text()
FIX = "fix the checks module (lesson_code/CONTRACT.md, \"Exercises\")"


@pytest.mark.slow
@pytest.mark.parametrize("checks, message", [
    (CHECKS.replace("def answer(devices):", "def answer(devices)"),
     f"error: lesson_code/psum_08_checks.py:13: expected ':'; {FIX}"),
    (CHECKS.replace('Exercise("count_devices"', "Exercise(5"),
     "error: lesson_code/psum_08_checks.py:32: TypeError: an exercise's name is an "
     f"identifier in quotes, such as Exercise(\"clip_by_global_norm\", ...), not 5; {FIX}"),
    (CHECKS.replace("EXERCISES = [", "EXERCISES = tuple([").replace("compare)]", "compare)])"),
     "error: lesson_code/psum_08_checks.py: EXERCISES must be a list of "
     f"lesson_code.exercise.Exercise(...); {FIX}"),
    # Python imports it (the odd byte is in a comment); the checker still refuses it.
    (CHECKS.encode().replace(b"import jax\n", b"import jax  # caf\xe9\n", 1),
     "error: lesson_code/psum_08_checks.py:2: byte 0xe9 is not UTF-8; save the checks "
     "module as UTF-8 (lesson_code/CONTRACT.md, \"Exercises\")"),
], ids=["does not parse", "named by a number", "not a list", "not UTF-8"])
def test_a_checks_module_that_cannot_be_used_is_one_line_naming_the_fix(eight_devices,
                                                                        checks, message):
    done = check(with_checks(eight_devices, checks), "--lesson", "psum-08")
    assert (done.returncode, done.stdout) == (2, ""), done.stdout + done.stderr
    assert done.stderr == message + "\n", done.stderr

"""What one `record.py` run does, decided once, before anything runs (as jupyter-cache
decides which notebooks to execute before it executes any).

A lesson runs only when its recording is stale or missing, or its notebook can only be
remade by a run; a comment edit re-renders the notebook from the executed cells, and a
simulation is re-recorded only when its own inputs changed.
"""
from dataclasses import dataclass, field
from pathlib import Path

from scripts.store.freshness import derived_problems, recording_state
from scripts.store.hashes import changed_files, digest
from scripts.store.outputs import (LockError, for_lesson, notebook_output, read_lock,
                                   recording_outputs)
from scripts.runners.notebook import notebook_text, rerender

RUN, RERENDER, SIMULATE = "run", "rerender", "simulate"


@dataclass(frozen=True)
class Step:
    """One output the run remakes: its path, why (as --check words it), and how (`fix`)."""
    output: str
    state: str
    fix: str
    text: str | None = None  # RERENDER: the notebook, re-rendered already
    # RUN, SIMULATE: the recording's contentFiles, read once, here (None: the run reads them).
    inputs: dict | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class LessonPlan:
    lesson: object
    steps: tuple = ()
    note: str | None = None  # a progress line: what is current, or why it is skipped
    skipped: bool = False  # not this run's: nothing of it is run or drawn

    def step(self, fix):
        return next((step for step in self.steps if step.fix == fix), None)


@dataclass(frozen=True)
class Plan:
    root: Path  # the checkout every lesson is written into
    lock: dict  # outputs.lock.json's well-formed entries ({} when it cannot be read)
    lessons: tuple  # a LessonPlan per lesson, in registry order
    lock_note: str | None = None  # a progress line: the lock's entries this run drops


def make_plan(lessons, platform="cpu", processes=None, render_only=False, every=False,
              chosen=False):
    """`every`: --all; `chosen`: by --lesson, so a lesson without ranks is refused, not skipped."""
    root = next(iter(lessons.values())).root
    try:
        lock, note = read_lock(root), None
    except LockError as error:
        lock = error.valid
        note = f"{error.what}: what it locked is remade; the lock's {len(lock)} other " \
               f"entries are kept"
    return Plan(root, lock, tuple(
        plan_lesson(lesson, lock, platform, processes, render_only, every, chosen)
        for lesson in lessons.values()), note)


def plan_lesson(lesson, lock, platform, processes, render_only, every, chosen):
    if processes and not lesson.rank_module and not chosen:
        return LessonPlan(lesson, note=f"skipping {lesson.id}: it has no rank_module in "
                                       f"lesson_code/lessons.toml", skipped=True)
    if render_only:
        return LessonPlan(lesson)
    files = for_lesson(lesson)
    if platform != "cpu":  # a hardware run is asked for by name: always run
        path = files.recording(platform)
        return LessonPlan(lesson, (Step(path, f"{path}: --platform {platform} runs it", RUN),))
    outputs = {output.path: output for output in recording_outputs(lesson, lesson.root)}
    path = files.recording("cpu-processes" if processes else "cpu")
    inputs = outputs[path].current_inputs(lesson.root) if path in outputs else None
    problems = recording_state(outputs[path], lesson.root, inputs)[1] if path in outputs \
        else [f"{path}: {lesson.id} has no rank module"]  # record.py refuses it, in one line
    steps = []
    notebook = None if processes else notebook_step(lesson, lock)
    if every or problems or (notebook and notebook.fix == RUN):
        state = f"{path}: --all re-runs it" if every else \
            problems[0] if problems else notebook.state
        steps.append(Step(path, state, RUN, inputs=inputs))
    elif notebook:
        steps.append(notebook)
    simulation = files.recording("simulation")
    if not processes and simulation in outputs:
        inputs = outputs[simulation].current_inputs(lesson.root)
        if state := next(iter(recording_state(outputs[simulation], lesson.root, inputs)[1]), None):
            steps.append(Step(simulation, state, SIMULATE, inputs=inputs))
    note = None if steps and steps[0].output == path else \
        f"{lesson.id}: {path} is current, not re-run (--all re-runs it)"
    return LessonPlan(lesson, tuple(steps), note)


def notebook_step(lesson, lock):
    """The notebook's Step: None while current; RERENDER when only the text it shows
    changed and its cells still line up with the executed ones; otherwise RUN."""
    output = notebook_output(lesson)
    if not (problems := derived_problems(output, lock, lesson.root)):
        return None
    entry = lock.get(output.path)
    path = lesson.root / output.path
    if entry is None or digest(path) != entry.get("sha256"):
        return Step(output.path, problems[0], RUN)  # nothing trustworthy to re-render from
    changed = changed_files(entry.get("inputs", {}), output.current_inputs(lesson.root))
    notebook = rerender(path.read_text(encoding="utf-8"), lesson, "cpu", lesson.devices) \
        if set(changed) <= set(output.text_inputs(lesson.root)) else None
    if notebook is None:
        return Step(output.path, problems[0], RUN)
    return Step(output.path, problems[0], RERENDER, notebook_text(notebook))

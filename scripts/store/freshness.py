"""Is every derived file still what the current code would make? One rule, one format.

An output is current while the digests of its inputs, stored when it was made, equal
today's. Every problem is one line: the file, what changed, and the command that fixes it.
"""
from dataclasses import dataclass

from scripts import ROOT, display
from scripts.figures.data import FORMATS
from scripts.store.hashes import changed_files, digest
from scripts.store.outputs import (LockError, analysis_outputs, derived_outputs, for_lesson,
                                   notebook_output, read_lock, recording_outputs)
from scripts.store.recordings import RecordingError, load_recording, read_json


@dataclass(frozen=True)
class Loaded:
    """A validated recording or analysis as the pages use it; `stale`: its changed inputs."""
    recording: dict
    stem: str
    path: str
    stale: tuple = ()


def problem(path, what, fix):
    return f"{path}: {what}; run `{fix}`"


def changed(names):
    return f"stale, {', '.join(names)} changed"


def recording_state(output, root=ROOT, current=None):
    """(Loaded or None, [problem lines]) for one recording; `current`: its inputs' digests."""
    path = root / output.path
    if not path.exists() and not output.required:
        return None, []
    try:
        recording = load_recording(path, output.fix, output.lesson)
    except RecordingError as error:
        return None, [str(error)]
    if "contentFiles" in recording:
        names = changed_files(recording["contentFiles"], current or output.current_inputs(root))
    else:  # older than contentFiles (the schema allows it): it cannot say what made it
        names = ["its inputs (it records no contentFiles)"]
    loaded = Loaded(recording, for_lesson(output.lesson).stem(output.variant), output.path,
                    tuple(names))
    if names and output.required:
        return loaded, [problem(output.path, changed(names), output.fix)]
    return loaded, []


def derived_problems(output, lock, root=ROOT):
    """Why a figure or notebook is not what record.py would make now (empty: current)."""
    path = root / output.path
    if not (root / output.code).is_file():
        return [problem(output.path, f"its code {output.code} is missing; restore it, or drop "
                        f"the figure from lesson_code/lessons.toml, then", output.fix)]
    if not path.is_file():
        return [problem(output.path, "missing", output.fix)]
    entry = lock.get(output.path)
    if entry is None:
        return [problem(output.path, "not in recordings/outputs.lock.json", output.fix)]
    if digest(path) != entry.get("sha256"):
        return [problem(output.path, "edited by hand since it was made", output.fix)]
    names = changed_files(entry.get("inputs", {}), output.current_inputs(root))
    return [problem(output.path, changed(names), output.fix)] if names else []


def notebook_problems(lesson, root=ROOT):
    """The lesson's notebook's line when the module text it shows changed (a comment, a
    page's heading); an unreadable lock is load_all's to say."""
    notebook = notebook_output(lesson)
    try:
        recorded = read_lock(root).get(notebook.path, {}).get("inputs", {}).get(notebook.shows)
    except LockError:
        return []
    if recorded is not None and recorded != digest(root / notebook.shows):
        return [problem(notebook.path, changed([notebook.shows]), notebook.fix)]
    return []


# The two files in recordings/ that are not recordings.
NOT_RECORDINGS = ("recordings/schema.json", "recordings/outputs.lock.json")
# What is read in each folder, and the words for a file nothing claims there: a recording
# no lesson reads would go unread, a figure no lesson draws would be served unchecked.
CLAIMED = {"recordings": ((".json",), "belongs to no lesson in lesson_code/lessons.toml (a "
                          "recording is named <lesson id>.<variant>.json)"),
           "figures": ((".svg", *FORMATS), "belongs to no figure of a lesson in lesson_code/"
                       "lessons.toml (scripts/figures/__init__.py names each kind's files)")}


def unclaimed(lessons, root=ROOT):
    """A line for each file of recordings/ and figures/ that no lesson's outputs name."""
    claimed = set(NOT_RECORDINGS) | {output.path for lesson in lessons.values() for output in
                                     [*recording_outputs(lesson, root), *derived_outputs(lesson)]}
    lines = []
    for folder, (suffixes, what) in CLAIMED.items():
        paths = sorted((root / folder).iterdir()) if (root / folder).is_dir() else []
        names = [display(path, root) for path in paths if path.suffix.lower() in suffixes]
        lines += [problem(name, what, f"git rm {name}") for name in names if name not in claimed]
    return lines


def lock_and_unclaimed(lessons, root):
    """(the lock, or {}; a line for each unclaimed file and for an unreadable lock)."""
    lines = unclaimed(lessons, root)
    try:
        return read_lock(root), lines
    except LockError as error:
        return {}, lines + [str(error)]


def check(lessons, root=ROOT, only=None):
    """One line per missing, invalid or stale file, of every lesson or of lesson `only`."""
    lock, lines = lock_and_unclaimed(lessons, root)
    for lesson in [lesson for lesson in lessons.values() if only in (None, lesson.id)]:
        recordings = recording_outputs(lesson, root)
        lines += [line for output in recordings for line in recording_state(output, root)[1]]
        for output in [*derived_outputs(lesson), notebook_output(lesson)]:
            if (root / output.source).exists() or output.source in lock:
                lines += derived_problems(output, lock, root)
            elif not from_absent_hardware_run(output, recordings, root):
                lines.append(problem(output.path, f"its input {output.source} is missing",
                                     output.fix))
    return lines


def from_absent_hardware_run(output, recordings, root=ROOT):
    """Whether `output` is made from a hardware recording not here: nothing to make or miss."""
    required = {recording.path for recording in recordings if recording.required}
    return output.source.startswith("recordings/") and output.source not in required \
        and not (root / output.source).exists()


def load_all(lessons, root=ROOT):
    """For the site build: ({stem: Loaded} of every recording and current analysis, a line
    for each problem). A notebook whose shown text changed is its page's to say
    (`notebook_problems`): the other pages build, and `mkdocs serve` keeps serving them."""
    loaded = {}
    lock, lines = lock_and_unclaimed(lessons, root)
    for lesson in lessons.values():
        recordings = recording_outputs(lesson, root)
        for output in analysis_outputs(lesson):
            if from_absent_hardware_run(output, recordings, root):
                continue
            if problems := derived_problems(output, lock, root):
                lines += problems
                continue
            try:
                analysis = read_json(root / output.path)
            except RecordingError as error:
                lines.append(problem(output.path, error.what.removeprefix(
                    f"{display(root / output.path)}: "), output.fix))
                continue
            if not isinstance(analysis, dict):
                lines.append(problem(output.path, "not a JSON object", output.fix))
                continue
            stem = for_lesson(lesson).stem(output.kind.variant, analysis=True)
            loaded[stem] = Loaded(analysis, stem, output.path)
        for output in recordings:
            recording, problems = recording_state(output, root)
            lines += problems
            if recording is not None:
                loaded[recording.stem] = recording
    return loaded, lines

"""Is each recording, notebook and figure still what the current code would produce?

Shared by `record.py --check` and the site build; imports neither JAX nor matplotlib.
"""
import json

from figure_specs import available_specs, figure_problems, read_lock
from lesson_hashes import ROOT, changed_files, content_files, content_hash
from recordings import RECORDINGS, RecordingError, display, lesson_recordings, load_recording

FIX = "python scripts/record.py"


def rank_module(lesson_module):
    """The per-process runner of a lesson, used for multi-process recordings."""
    return lesson_module.with_name(lesson_module.stem + "_rank.py")


def producing_module(recording, lesson_module):
    processes = recording["environment"].get("processCount", 1)
    return rank_module(lesson_module) if processes > 1 else lesson_module


def refreshable_here(recording):
    """CPU recordings are remade by CI; hardware ones can only be shown as stale."""
    return recording["environment"]["backend"] == "cpu"


def refresh_command(recording):
    processes = recording["environment"].get("processCount", 1)
    return f"{FIX} --processes {processes}" if processes > 1 else FIX


def stale_files(recording, lesson_module, root=ROOT):
    """Files changed since the recording was made; empty while it is current."""
    module = producing_module(recording, lesson_module)
    if recording["contentHash"] == content_hash(module, root):
        return []
    return changed_files(recording.get("contentFiles", {}), content_files(module, root)) \
        or ["the lesson code or its pins"]


def notebook_path(lesson_id, root=ROOT):
    return root / "docs" / "notebooks" / f"{lesson_id}.ipynb"


def notebook_content_hash(path):
    """The lesson hash stored in a notebook's metadata, read without nbformat."""
    try:
        return json.loads(path.read_text())["metadata"]["lesson"]["contentHash"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def recording_problems(path, lesson_module):
    try:
        recording = load_recording(path)
    except RecordingError as error:
        return [str(error)]
    changed = stale_files(recording, lesson_module)
    if not changed or not refreshable_here(recording):
        return []  # a stale hardware recording stays on the site, marked stale
    return [f"{display(path)}: stale, the lesson code or pins changed "
            f"({', '.join(changed)} changed); run `{refresh_command(recording)}`"]


def stale_reasons(lessons):
    """One line per recording, notebook or figure that is missing, invalid or stale."""
    reasons = []
    for lesson_id, lesson_module in lessons.items():
        cpu = RECORDINGS / f"{lesson_id}.cpu.json"
        if not cpu.exists():
            reasons.append(f"{display(cpu)}: missing; run `{FIX}`")
        for path in lesson_recordings(lesson_id):
            reasons.extend(recording_problems(path, lesson_module))
        notebook = notebook_path(lesson_id)
        if notebook_content_hash(notebook) != content_hash(lesson_module):
            reasons.append(f"{display(notebook)}: missing or executed from older code; "
                           f"run `{FIX}`")
        lock = read_lock()
        for spec in available_specs(lesson_id):
            for problem in figure_problems(spec, lock):
                reasons.append(f"{spec.path}: {problem}; run `{FIX} --render-only`")
    return reasons + benchmark_reasons()


def benchmark_reasons():
    """The benchmark sweep keeps its own hash and stamp; ask its checker."""
    import sweep_freshness  # standard library only, like this module

    return [f"{reason}; run `{sweep_freshness.FIX}`"
            for reason in sweep_freshness.stale_reasons()]

"""Accept a recording fetched from a TPU VM, or refuse it before it touches recordings/.

The VM's record.py already validated what it wrote; this checks it again here, because
the file crossed a network and the site will present it as a measurement on TPU chips.
"""
from pathlib import Path

from scripts import ROOT
from scripts.store.freshness import stale_inputs
from scripts.store.hashes import content_files
from scripts.store.recordings import (RecordingError, load_recording, read_bytes, read_json,
                                registered_lesson)
from scripts.store.staging import write_atomically

DEVICES = 4  # the lesson's registered count (lessons.toml `devices`) unless told


class RefusedRecording(Exception):
    """The fetched file is not a current TPU recording on the lesson's chips; str() is the
    one line."""


def check_tpu_recording(path, lesson_id, module_path, root=ROOT, devices=DEVICES,
                        processes=1, backend="tpu"):
    """Return the recording at `path` if it is a current TPU run of the lesson on
    `devices` chips in `processes` processes (a slice's workers). `backend` is "tpu"
    but in the tests, whose fake slice runs its workers on this machine's CPU."""
    try:
        # Held to the lesson's data schema as this checkout registers it.
        lesson = registered_lesson(lesson_id, root)
        recording = load_recording(path, lesson=lesson)
    except RecordingError as error:
        # Without its fix: rerunning record.py here would record the CPU, not the TPU.
        raise RefusedRecording(error.what) from None
    environment = recording["environment"]
    lines = recording["stdout"].splitlines()
    problems = [
        (recording["lessonId"] == lesson_id, f"it records {recording['lessonId']!r}"),
        (environment["backend"] == backend, f"its backend is {environment['backend']!r}"),
        (environment["deviceCount"] == devices,
         f"it ran on {environment['deviceCount']} devices, not {devices}"),
        (environment.get("processCount", 1) == processes,
         f"it ran in {environment.get('processCount', 1)} processes, not {processes}"),
        (backend != "tpu" or "TPU" in environment.get("deviceKind", ""),
         f"its deviceKind {environment.get('deviceKind')!r} names no TPU"),
        (bool(lines) and lines[-1] == f"PASS: {lesson_id}",
         f"its stdout does not end with 'PASS: {lesson_id}'"),
    ]
    for ok, why in problems:
        if not ok:
            raise RefusedRecording(f"the fetched recording is not a {devices}-chip "
                                   f"{backend.upper()} run of {lesson_id}: {why}")
    # A run of the lesson module stores its going-further module's results too.
    extra = lesson.also_run_with() if lesson and Path(module_path) == lesson.path() else ()
    changed = stale_inputs(recording, content_files(module_path, root, extra))
    if changed:
        raise RefusedRecording(f"the fetched recording was made from other code than this "
                               f"checkout ({', '.join(changed)} differ); commit your changes "
                               f"and rerun the job")
    return recording


def check_tpu_sweep(path, lesson, root=ROOT, chips=DEVICES, backend="tpu"):
    """Return the sweep at `path` if it is a current TPU sweep of the lesson's `sweep`
    module (scripts/bench.py --platform tpu) on at most `chips` chips."""
    try:
        recording = load_recording(path, lesson=registered_lesson(lesson.id, root))
    except RecordingError as error:
        raise RefusedRecording(error.what) from None  # its fix would sweep this machine
    environment = recording["environment"]
    most = max((row["ranks"] for row in recording.get("rows", [])), default=0)
    problems = [
        (recording["lessonId"] == lesson.id, f"it records {recording['lessonId']!r}"),
        (recording["kind"] == "sweep", f"it is a {recording['kind']!r} recording"),
        (environment["backend"] == backend, f"its backend is {environment['backend']!r}"),
        (backend != "tpu" or "TPU" in environment.get("deviceKind", ""),
         f"its deviceKind {environment.get('deviceKind')!r} names no TPU"),
        (most <= chips, f"it measured p = {most}, more than the VM's {chips} chips"),
        # The predictions are of each collective's own cost: a looped call less a single one.
        (any(row["collectivesPerCall"] > 1 for row in recording.get("rows", [])),
         "it has no looped rows (collectivesPerCall > 1) to take each collective's own "
         "cost from"),
    ]
    for ok, why in problems:
        if not ok:
            raise RefusedRecording(f"the fetched sweep is not a {backend.upper()} sweep of "
                                   f"{lesson.id} on {chips} chips: {why}")
    changed = stale_inputs(recording, content_files(lesson.path(lesson.sweep), root))
    if changed:
        raise RefusedRecording(f"the fetched sweep was made from other code than this "
                               f"checkout ({', '.join(changed)} differ); commit your changes "
                               f"and rerun the job")
    return recording


def install_recording(source, target):
    """Copy `source` over `target` atomically: a reader sees the old file or the new one.

    Staged beside `target` first, because os.replace is atomic only within one file
    system and the fetched file sits in a temporary directory that may be elsewhere.
    """
    write_atomically(Path(target), read_bytes(source))  # a regular file, of bounded size


def slice_recording(data_path, stdout_path, lesson, command, duration_s, root=ROOT):
    """The recording of a slice's run, made here from what rank 0 left on worker 0 (its
    data JSON and stdout), as record.py makes one from a process run: one header, the
    lesson's environment, validated against the schema (by the check that follows). Its
    jaxlib and matplotlib versions are this checkout's: the workers installed the same
    pins. Raises RefusedRecording."""
    from scripts.record import RecordError, check_stdout, executed_recording

    try:
        data = read_json(data_path)
        stdout = read_bytes(stdout_path).decode("utf-8")
        check_stdout(lesson.id, stdout)
        recording = executed_recording(lesson, lesson.rank_module, stdout,
                                       data, duration_s, command)
    except (RecordingError, ValueError, RecordError) as error:
        raise RefusedRecording(f"rank 0's output from worker 0 does not make a recording "
                               f"({error})") from None
    return recording

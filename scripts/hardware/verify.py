"""Accept a recording fetched from a TPU VM, or refuse it before it touches recordings/.

It crossed a network and the site will present it as a measurement on the lesson's chips,
so it is read again through the store's one reader and freshness rule, then checked as a
TPU run.
"""
from pathlib import Path

from scripts import ROOT
from scripts.store.freshness import recording_state
from scripts.store.outputs import HARDWARE_FIXES, hardware_module, recording_output


class RefusedRecording(Exception):
    """The fetched file is not a current TPU recording of the lesson; str() is one line."""


def fetched_recording(path, lesson, variant, root=ROOT):
    """The recording at `path`, valid and current as recordings/<id>.<variant>.json."""
    output = recording_output(lesson, variant, hardware_module(lesson, variant),
                              HARDWARE_FIXES[variant], path=str(Path(path).resolve()))
    loaded, problems = recording_state(output, root)
    if problems:
        raise RefusedRecording(f"the fetched {variant} recording is refused: {problems[0]}")
    return loaded.recording


def refuse_unless(checks, what):
    for ok, why in checks:
        if not ok:
            raise RefusedRecording(f"{what}: {why}")


def check_tpu_recording(path, lesson, root=ROOT):
    """The recording at `path` if it is a current TPU run on the lesson's chips that passed."""
    recording = fetched_recording(path, lesson, "tpu", root)
    environment, lines = recording["environment"], recording["stdout"].splitlines()
    refuse_unless([
        (environment["backend"] == "tpu", f"its backend is {environment['backend']!r}"),
        (environment["deviceCount"] == lesson.devices,
         f"it ran on {environment['deviceCount']} devices, not {lesson.devices}"),
        ("TPU" in environment.get("deviceKind", ""),
         f"its deviceKind {environment.get('deviceKind')!r} names no TPU"),
        (bool(lines) and lines[-1] == f"PASS: {lesson.id}",
         f"its stdout does not end with 'PASS: {lesson.id}'"),
    ], f"the fetched recording is not a {lesson.devices}-chip TPU run of {lesson.id}")
    return recording


def check_tpu_sweep(path, lesson, root=ROOT):
    """The sweep at `path` if it is a current TPU sweep on the lesson's chips, with loops."""
    recording = fetched_recording(path, lesson, "tpu-sweep", root)
    environment, rows = recording["environment"], recording.get("rows", [])
    most = max((row["ranks"] for row in rows), default=0)
    refuse_unless([
        (recording["kind"] == "sweep", f"it is a {recording['kind']!r} recording"),
        (environment["backend"] == "tpu", f"its backend is {environment['backend']!r}"),
        ("TPU" in environment.get("deviceKind", ""),
         f"its deviceKind {environment.get('deviceKind')!r} names no TPU"),
        (most <= lesson.devices, f"it measured p = {most}, more than the VM's "
                                 f"{lesson.devices} chips"),
        # The predictions are of each collective's own cost: a looped call less a single one.
        (any(row["collectivesPerCall"] > 1 for row in rows),
         "it has no looped rows (collectivesPerCall > 1) to take each collective's own "
         "cost from"),
    ], f"the fetched sweep is not a TPU sweep of {lesson.id} on {lesson.devices} chips")
    return recording


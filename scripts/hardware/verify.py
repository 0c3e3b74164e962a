"""Accept a recording fetched from a TPU VM, or refuse it before it touches recordings/.

The VM's record.py already validated what it wrote; this checks it again here, because
the file crossed a network and the site will present it as a measurement on TPU chips.
"""
from pathlib import Path

from scripts import ROOT
from scripts.freshness import stale_inputs
from scripts.hashes import content_files
from scripts.recordings import RecordingError, load_recording, write_atomically

DEVICES = 4  # the lesson's registered count (lessons.toml `devices`) unless told


class RefusedRecording(Exception):
    """The fetched file is not a current TPU recording on the lesson's chips; str() is the
    one line."""


def check_tpu_recording(path, lesson_id, module_path, root=ROOT, devices=DEVICES):
    """Return the recording at `path` if it is a current TPU run of the lesson on
    `devices` chips."""
    try:
        recording = load_recording(path)
    except RecordingError as error:
        # Without its fix: rerunning record.py here would record the CPU, not the TPU.
        raise RefusedRecording(error.what) from None
    environment = recording["environment"]
    lines = recording["stdout"].splitlines()
    problems = [
        (recording["lessonId"] == lesson_id, f"it records {recording['lessonId']!r}"),
        (environment["backend"] == "tpu", f"its backend is {environment['backend']!r}"),
        (environment["deviceCount"] == devices,
         f"it ran on {environment['deviceCount']} devices, not {devices}"),
        ("TPU" in environment.get("deviceKind", ""),
         f"its deviceKind {environment.get('deviceKind')!r} names no TPU"),
        (bool(lines) and lines[-1] == f"PASS: {lesson_id}",
         f"its stdout does not end with 'PASS: {lesson_id}'"),
    ]
    for ok, why in problems:
        if not ok:
            raise RefusedRecording(f"the fetched recording is not a {devices}-chip TPU run "
                                   f"of {lesson_id}: {why}")
    changed = stale_inputs(recording, content_files(module_path, root))
    if changed:
        raise RefusedRecording(f"the fetched recording was made from other code than this "
                               f"checkout ({', '.join(changed)} differ); commit your changes "
                               f"and rerun the job")
    return recording


def install_recording(source, target):
    """Copy `source` over `target` atomically: a reader sees the old file or the new one.

    Staged beside `target` first, because os.replace is atomic only within one file
    system and the fetched file sits in a temporary directory that may be elsewhere.
    """
    write_atomically(Path(target), Path(source).read_bytes())

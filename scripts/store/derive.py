"""Every derived file of a lesson made from its recordings: analyses, then figures and
their data, for record.py and bench.py alike. A recording about to land comes in
`arriving`, so what derives from it is drawn from the new bytes and staged with them.
"""
import json

from scripts.store.hashes import digest_bytes
from scripts.store.outputs import derived_outputs, lock_entry, recording_outputs
from scripts.store.recordings import RecordingError, load_recording, read_json


class DeriveError(Exception):
    """An analysis or a figure could not be made; str() is one line."""
    exit_status = 1


def stage_derived(lesson, staging, arriving, lock, place=None, only_from=None):
    """Stage each analysis and figure of `lesson` that is not current; return their lock
    entries. `arriving` ({path: text}) grows with each output staged. `place(path)`: where
    a file goes instead (then unlocked); `only_from`: only what derives from that recording."""
    from scripts.store.freshness import derived_problems
    entries, chain = {}, {only_from}
    fixes = {output.path: output.fix for output in recording_outputs(lesson, lesson.root)}
    for output in derived_outputs(lesson):
        if only_from is not None:
            if output.source not in chain:
                continue
            chain.add(output.path)
        text = arriving.get(output.source)
        if text is None and not (lesson.root / output.source).exists():
            continue  # `--check` names the missing input and the command that makes it
        if text is None and not derived_problems(output, lock, lesson.root):
            continue
        data = json.loads(text) if text else load_source(lesson, output.source, fixes)
        overlay = arriving.get(output.overlay) if output.overlay else None
        if overlay is not None:
            overlay = json.loads(overlay)
        elif output.overlay and (lesson.root / output.overlay).exists():
            overlay = load_source(lesson, output.overlay, fixes)
        made = arriving[output.path] = render(output, data, overlay)
        staging.add(place(output.path) if place else lesson.root / output.path, made)
        if place is None:
            entries[output.path] = lock_entry(output, made, lesson.root,
                                              digest_bytes(text) if text else None)
    return entries


def load_source(lesson, source, fixes):
    """A derived file's input: a recording validated, or a lesson's data file."""
    path = lesson.root / source
    if source in fixes:
        return load_recording(path, fixes[source], lesson)
    try:
        return read_json(path)
    except RecordingError as error:
        raise DeriveError(f"{error.what}; fix the file") from None


def render(output, data, overlay=None):
    """The output's bytes; `overlay` (a hardware run over a prediction) only where taken."""
    kind = output.kind
    try:
        if output.variant is not None:  # a figure, in one of its drawings
            return kind.render(data, overlay, output.variant)
        return kind.render(data, overlay)  # a figure's data, or an analysis (over nothing)
    except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError) as error:
        raise DeriveError(f"{output.path}: {kind.renderer} renderer failed on "
                          f"{output.source} ({type(error).__name__}: {error}); fix "
                          f"{output.code}") from None

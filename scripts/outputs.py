"""Every derived file of a lesson, what it is made from, and the command that remakes it.

Recordings carry their own inputs (`contentFiles`: the producing module's import closure
and the pins), so a recording fetched from a TPU VM still says what it was made from.
Analyses, figures and the notebook keep theirs in recordings/outputs.lock.json: an
analysis is made from one recording, a figure from a recording or an analysis. Imports
no JAX and no matplotlib.
"""
import importlib
import json
from dataclasses import dataclass, field
from functools import lru_cache

from scripts import LOCK, REGISTRY, ROOT, display
from scripts.figures import KINDS
from scripts.hashes import content_files, digest_bytes, file_digests, import_closure
from scripts.recordings import RECORD

RENDER = "python scripts/record.py --render-only"
BENCH = "make bench"
NOTEBOOK_BUILDER = "scripts/runners/kernel.py"
ANALYSES = "recordings/analysis"


class LockError(Exception):
    """outputs.lock.json cannot be read; str() is one line with the fix."""


@dataclass(frozen=True)
class RecordingOutput:
    path: str  # relative to the repository root
    module: str  # the file whose import closure (plus the pins) makes it
    fix: str
    required: bool  # False for hardware runs: shown marked stale, never demanded

    def current_inputs(self, root=ROOT):
        return content_files(root / self.module, root)


@dataclass(frozen=True)
class DerivedOutput:
    """A figure or the notebook: its input JSON plus the code closure that turns it into bytes."""
    path: str
    source: str  # the recording or data file it is made from
    code: str  # the renderer (or builder) module
    fix: str
    kind: object = field(default=None, compare=False)  # a figure's FigureKind: its render()
    overlay: str | None = None  # a recording drawn over the source, an input when present
    variant: object = None  # a figure's drawing (scripts/figures/variants.py): its palette, width

    def current_inputs(self, root=ROOT):
        overlay = [root / self.overlay] if self.overlay and (root / self.overlay).exists() \
            else []
        return file_digests([root / self.source, *overlay,
                             *import_closure(root / self.code, root)], root)


@dataclass(frozen=True)
class NotebookOutput(DerivedOutput):
    """The notebook companion: its cells are the lesson module's text, so that text is an
    input too, by its bytes (the recording is keyed on the code alone: a comment edit
    re-renders the notebook and re-runs nothing)."""
    shows: str = ""  # the lesson module, relative to the repository root

    def current_inputs(self, root=ROOT):
        return {**super().current_inputs(root), **file_digests([root / self.shows], root)}


@lru_cache(maxsize=16)
def _lesson_count(text):
    import tomllib

    try:
        return len(tomllib.loads(text).get("lesson", []))
    except (tomllib.TOMLDecodeError, AttributeError):
        return 1


def lesson_command(lesson, command=RECORD):
    """`command` as the fix for one lesson's file: with `--lesson <id>` when the registry
    lists more than one lesson, so the line names exactly the run that remakes it."""
    try:
        text = (lesson.root / REGISTRY.relative_to(ROOT)).read_text(encoding="utf-8")
    except OSError:
        return command
    return f"{command} --lesson {lesson.id}" if _lesson_count(text) > 1 else command


def recording_outputs(lesson, root=ROOT):
    """The recordings a lesson must have, then any others found (a TPU run, say)."""
    def module_file(module):
        return lesson.path(module).relative_to(lesson.root).as_posix()

    record = lesson_command(lesson)
    wanted = [RecordingOutput(f"recordings/{lesson.id}.cpu.json", module_file(lesson.module),
                              record, True)]
    if lesson.simulation:
        wanted.append(RecordingOutput(f"recordings/{lesson.id}.simulation.json",
                                      module_file(lesson.simulation), record, True))
    if lesson.rank_module:
        wanted.append(RecordingOutput(f"recordings/{lesson.id}.cpu-processes.json",
                                      module_file(lesson.rank_module),
                                      lesson_command(lesson, f"{RECORD} --processes 4"), True))
    if lesson.sweep:
        wanted.append(RecordingOutput(f"recordings/{lesson.id}.sweep.json",
                                      module_file(lesson.sweep), BENCH, True))
    known = {output.path for output in wanted}
    for path in sorted((root / "recordings").glob(f"{lesson.id}.*.json")):
        name = f"recordings/{path.name}"
        if name not in known:  # a hardware run: of the lesson module (tpu, gpu), or of
            # its rank module on a multi-host slice (tpu-processes)
            module = lesson.rank_module if path.name.endswith("-processes.json") and \
                lesson.rank_module else lesson.module
            wanted.append(RecordingOutput(name, module_file(module),
                                          hardware_fix(name, lesson.id), False))
    return wanted


@dataclass(frozen=True)
class AnalysisKind:
    """How an analysis is made: the lesson's analysis module applied to one recording."""
    module: str  # dotted, lessons.toml `analysis`
    variant: str  # which recording: "cpu", "cpu-processes", "sweep"
    renderer = "analysis"

    def render(self, recording):
        analysis = importlib.import_module(self.module).analyse(self.variant, recording)
        # allow_nan=False: an interval of NaN is a bug to stop at, never a page value.
        return json.dumps(analysis, indent=1, sort_keys=True, allow_nan=False) + "\n"


def analysis_path(lesson_id, variant):
    return f"{ANALYSES}/{lesson_id}.{variant}.json"


def analysis_outputs(lesson):
    """recordings/analysis/<id>.<variant>.json for each variant lessons.toml names."""
    if not lesson.analysis:
        return []
    code = lesson.path(lesson.analysis).relative_to(lesson.root).as_posix()
    return [DerivedOutput(analysis_path(lesson.id, variant),
                          f"recordings/{lesson.id}.{variant}.json", code, RENDER,
                          kind=AnalysisKind(lesson.analysis, variant))
            for variant in lesson.analyses]


def derived_outputs(lesson):
    """Analyses first, then figures: a figure may be drawn from an analysis."""
    return [*analysis_outputs(lesson), *figure_outputs(lesson)]


# The command that remakes a hardware recording, by the variant its name carries.
HARDWARE_FIXES = {
    "tpu": "python scripts/tpu_job.py --name NAME --zone ZONE --accelerator v6e-4 --create "
           "--delete",
    "tpu-processes": "python scripts/tpu_job.py --name NAME --zone ZONE --accelerator v6e-16 "
                     "--create --delete",
    "gpu": "python scripts/record.py --platform gpu",
}


def hardware_fix(name, lesson_id):
    """`recordings/<id>.tpu.json` -> the TPU job; a name no command writes cannot be
    remade, so its fix is to remove it."""
    variant = name.removeprefix(f"recordings/{lesson_id}.").removesuffix(".json")
    return HARDWARE_FIXES.get(variant, f"git rm {name}")


def recording_fix(lessons, name, root=ROOT):
    """The command that makes `recordings/<stem>.json`, present or not; None when the
    name belongs to no registered lesson."""
    for lesson in lessons.values():
        if name.startswith(f"recordings/{lesson.id}."):
            fixes = {output.path: output.fix for output in recording_outputs(lesson, root)}
            return fixes.get(name) or hardware_fix(name, lesson.id)
    return None


def figure_outputs(lesson):
    """Each figure the registry asks for, in each of its drawings (light and dark, wide and
    narrow: scripts/figures/variants.py), each its own locked output."""
    outputs = []
    for kind in lesson.figures:
        if kind not in KINDS:
            raise ValueError(f"lesson_code/lessons.toml: lesson {lesson.id} asks for a figure "
                           f"of kind {kind!r}; known kinds: {', '.join(KINDS)}")
        spec = KINDS[kind]
        overlay = spec.overlay.format(id=lesson.id) if spec.overlay else None
        path = spec.path.format(id=lesson.id)
        outputs += [DerivedOutput(variant.path(path), spec.input.format(id=lesson.id),
                                  spec.module_path(), RENDER, kind=spec, overlay=overlay,
                                  variant=variant) for variant in spec.variants(lesson.root)]
    paths = [output.path for output in outputs]
    twice = sorted({path for path in paths if paths.count(path) > 1})
    if twice:  # a lesson renderer named `..._dark` would draw over a figure's dark drawing
        raise ValueError(f"lesson_code/lessons.toml: lesson {lesson.id}'s figures would write "
                         f"{', '.join(twice)} twice; rename the lesson's renderer module")
    return outputs


def notebook_output(lesson):
    """The executed companion: made in the same run as the CPU recording; when only the
    module's text changed (a comment, a docstring), record.py re-renders it from the
    executed cells instead."""
    return NotebookOutput(f"docs/notebooks/{lesson.id}.ipynb",
                          f"recordings/{lesson.id}.cpu.json", NOTEBOOK_BUILDER,
                          lesson_command(lesson),
                          shows=lesson.path().relative_to(lesson.root).as_posix())


def lock_path(root=ROOT):
    """outputs.lock.json of the project at `root`."""
    return root / LOCK.relative_to(ROOT)


def read_lock(root=ROOT):
    """{output path: {"sha256", "inputs"}}; {} when absent; LockError when unreadable."""
    path = lock_path(root)
    try:
        lock = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        raise LockError(f"{display(path, root)}: unreadable ({error}); run "
                        f"`{RECORD}`") from None
    if not isinstance(lock, dict) or not all(isinstance(v, dict) for v in lock.values()):
        raise LockError(f"{display(path, root)}: not a map of outputs; run "
                        f"`{RECORD}`")
    for name, entry in lock.items():
        inputs = entry.get("inputs")
        if not isinstance(entry.get("sha256"), str) or not isinstance(inputs, dict) \
                or not all(isinstance(v, str) for v in inputs.values()):
            raise LockError(f"{display(path, root)}: the entry for {name[:80]!r} needs a "
                            f"`sha256` and `inputs` mapping each file to its digest; run "
                            f"`{RECORD}`")
    return lock


def lock_entry(output, data, root=ROOT, source_digest=None):
    """What the lock keeps for an output just made: its bytes' digest and its inputs'.

    `source_digest` stands in for a source still in a temporary file (a recording about
    to land), since its final path still holds the old bytes.
    """
    inputs = output.current_inputs(root)
    if source_digest is not None:
        inputs[output.source] = source_digest
    return {"sha256": digest_bytes(data), "inputs": inputs}


def lock_text(lock):
    return json.dumps(lock, indent=2, sort_keys=True) + "\n"

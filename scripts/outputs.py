"""Every derived file of a lesson, what it is made from, and the command that remakes it.

Recordings carry their own inputs (`contentFiles`: the producing module's import closure,
any code whose results are baked into it, and the pins), so a recording fetched from a
TPU VM still says what it was made from. Figures and the notebook keep theirs in
recordings/outputs.lock.json. Imports no JAX and no matplotlib.
"""
import json
from dataclasses import dataclass, field

from scripts import LOCK, ROOT, display
from scripts.figures import KINDS
from scripts.hashes import content_files, digest_bytes, file_digests, import_closure
from scripts.recordings import RECORD

RENDER = "python scripts/record.py --render-only"
BENCH = "make bench"
NOTEBOOK_BUILDER = "scripts/runners/kernel.py"
# The sweep's fits, ratios and their words are computed when it is recorded and stored in
# it, so this analysis is an input of the sweep recording, beside the measured programs.
SWEEP_ANALYSIS = "scripts/sweep/analysis.py"


class LockError(Exception):
    """outputs.lock.json cannot be read; str() is one line with the fix."""


@dataclass(frozen=True)
class RecordingOutput:
    path: str  # relative to the repository root
    module: str  # the file whose import closure (plus the pins) makes it
    fix: str
    required: bool  # False for hardware runs: shown marked stale, never demanded
    extra: tuple = ()  # more code whose results the recording stores (the sweep's analysis)

    def current_inputs(self, root=ROOT):
        return content_files(root / self.module, root, [root / path for path in self.extra])


@dataclass(frozen=True)
class DerivedOutput:
    """A figure or the notebook: its input JSON plus the code closure that turns it into bytes."""
    path: str
    source: str  # the recording or data file it is made from
    code: str  # the renderer (or builder) module
    fix: str
    kind: object = field(default=None, compare=False)  # a figure's FigureKind: its render()

    def current_inputs(self, root=ROOT):
        return file_digests([root / self.source, *import_closure(root / self.code, root)],
                            root)


def recording_outputs(lesson, root=ROOT):
    """The recordings a lesson must have, then any others found (a TPU run, say)."""
    def module_file(module):
        return lesson.path(module).relative_to(lesson.root).as_posix()

    wanted = [RecordingOutput(f"recordings/{lesson.id}.cpu.json", module_file(lesson.module),
                              RECORD, True)]
    if lesson.simulation:
        wanted.append(RecordingOutput(f"recordings/{lesson.id}.simulation.json",
                                      module_file(lesson.simulation), RECORD, True))
    if lesson.rank_module:
        wanted.append(RecordingOutput(f"recordings/{lesson.id}.cpu-processes.json",
                                      module_file(lesson.rank_module),
                                      f"{RECORD} --processes 4", True))
    if lesson.sweep:
        wanted.append(RecordingOutput(f"recordings/{lesson.id}.sweep.json",
                                      module_file(lesson.sweep), BENCH, True,
                                      extra=(SWEEP_ANALYSIS,)))
    known = {output.path for output in wanted}
    for path in sorted((root / "recordings").glob(f"{lesson.id}.*.json")):
        name = f"recordings/{path.name}"
        if name not in known:  # a hardware run of the lesson module: tpu, gpu
            wanted.append(RecordingOutput(name, module_file(lesson.module),
                                          hardware_fix(name, lesson.id), False))
    return wanted


# The command that remakes a hardware recording, by the variant its name carries.
HARDWARE_FIXES = {
    "tpu": "python scripts/tpu_job.py --name NAME --zone ZONE --accelerator v6e-4 --create "
           "--delete",
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
    outputs = []
    for kind in lesson.figures:
        if kind not in KINDS:
            raise ValueError(f"lesson_code/lessons.toml: lesson {lesson.id} asks for a figure "
                           f"of kind {kind!r}; known kinds: {', '.join(KINDS)}")
        spec = KINDS[kind]
        outputs.append(DerivedOutput(spec.path.format(id=lesson.id),
                                     spec.input.format(id=lesson.id), spec.module_path(),
                                     RENDER, kind=spec))
    return outputs


def notebook_output(lesson):
    """The executed companion: made in the same run as the CPU recording, so only a
    re-record remakes it."""
    return DerivedOutput(f"docs/notebooks/{lesson.id}.ipynb",
                         f"recordings/{lesson.id}.cpu.json", NOTEBOOK_BUILDER, RECORD)


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

"""Every derived file of a lesson, what it is made from, and the command that remakes it.

Recordings carry their inputs (`contentFiles`), so one fetched from a TPU VM still says what
it was made from; every other output keeps them in recordings/outputs.lock.json.
"""
import importlib
import json
import posixpath
from dataclasses import dataclass, field
from functools import partial

from scripts import LOCK, ROOT, display
from scripts.analysis_text import analysis_text
from scripts.figures import KINDS
from scripts.figures.data import FORMATS, FigureDataKind, data_path
from scripts.store.hashes import (content_files, digest_bytes, file_digests, import_closure,
                                  pin_digests)
from scripts.store.recordings import RECORD, RecordingError, read_json

RENDER = "python scripts/record.py --render-only"
BENCH = "make bench"
NOTEBOOK_BUILDER = "scripts/runners/notebook.py"
ANALYSIS_TEXT = "scripts/analysis_text.py"
RECORDINGS_DIR = "recordings"
ANALYSES = "recordings/analysis"
ANALYSIS_STEM = ".analysis"  # a directive's stem for an analysis: `<id>.<variant>.analysis`


@dataclass(frozen=True)
class LessonFiles:
    """Where each file of one lesson lives, relative to the root: the one place a path is spelt."""
    id: str  # the lesson id

    def recording(self, variant):
        return f"{RECORDINGS_DIR}/{self.recording_name(variant)}"

    def recording_name(self, variant):
        return f"{self.id}.{variant}.json"

    def analysis(self, variant):
        return f"{ANALYSES}/{self.id}.{variant}.json"

    def figure(self, kind):
        return kind.path.format(id=self.id)

    def figure_input(self, kind, root):
        return kind.source(root).format(id=self.id)

    def figure_overlay(self, kind):
        return kind.overlay.format(id=self.id) if kind.overlay else None

    @property
    def notebook_page(self):
        """Its page, relative to docs/ (scripts/pages/site_files.py writes it)."""
        return f"notebooks/{self.id}.md"

    @property
    def notebook(self):
        return f"docs/notebooks/{self.id}.ipynb"

    def stem(self, variant, analysis=False):
        """A directive's name for a recording, `<id>.<variant>`, or its analysis."""
        return f"{self.id}.{variant}" + (ANALYSIS_STEM if analysis else "")


def for_lesson(lesson):
    """The paths of one lesson's files (a registry Lesson, or its id)."""
    return LessonFiles(lesson if isinstance(lesson, str) else lesson.id)


def stem_parts(stem):
    """(lesson id, variant, whether it is the analysis) of a page's stem."""
    lesson_id, _, variant = stem.partition(".")
    analysis = variant.endswith(ANALYSIS_STEM)
    return lesson_id, variant.removesuffix(ANALYSIS_STEM) if analysis else variant, analysis


def stem_source(stem):
    """The file a directive's stem is read from, for any lesson id, registered or not."""
    lesson_id, variant, analysis = stem_parts(stem)
    files = for_lesson(lesson_id)
    return files.analysis(variant) if analysis else files.recording(variant)


class LockError(Exception):
    """outputs.lock.json cannot be read, or holds a bad entry; `valid`: the usable ones."""

    def __init__(self, what, valid=None):
        super().__init__(f"{what}; run `{RECORD}`")
        self.what, self.valid = what, valid or {}


@dataclass(frozen=True)
class RecordingOutput:
    path: str  # relative to the repository root
    variant: str  # "cpu", "sweep", "tpu", ...: what its name says it is a run of
    module: str  # the file whose import closure (plus the pins) makes it
    fix: str
    required: bool  # False for hardware runs: shown marked stale, never demanded
    # The lesson it belongs to: the recording must name it and fit its data schema.
    lesson: object = field(default=None, compare=False, repr=False)
    extra: tuple = ()  # more code whose results it stores (Lesson.also_run_with)

    def current_inputs(self, root=ROOT):
        return content_files(root / self.module, root, [root / path for path in self.extra])


@dataclass(frozen=True)
class DerivedOutput:
    """A figure, an analysis or the notebook: its input JSON and the code that makes it."""
    path: str
    source: str  # the recording or data file it is made from
    code: str  # the renderer (or builder) module
    fix: str
    kind: object = field(default=None, compare=False)  # a figure's FigureKind: its render()
    overlay: str | None = None  # a recording drawn over the source, an input when present
    variant: object = None  # a figure's drawing (scripts/figures/variants.py): its palette, width
    also: tuple = ()  # more code that shapes its bytes (a figure's data: data.py)
    pins: bool = False  # an analysis: SciPy's bootstrap makes its intervals

    def current_inputs(self, root=ROOT):
        overlay = [root / self.overlay] if self.overlay and (root / self.overlay).exists() else []
        code = [path for module in (self.code, *self.also)
                for path in import_closure(root / module, root)]
        return {**file_digests([root / self.source, *overlay, *code], root),
                **(pin_digests(root) if self.pins else {})}


@dataclass(frozen=True)
class NotebookOutput(DerivedOutput):
    """The notebook companion: its cells are the modules' text, so that text is an input
    too, by its bytes (a comment edit re-renders the notebook and re-runs nothing)."""
    shows: str = ""  # the lesson module, relative to the repository root
    also_shows: tuple = ()  # its going-further module, whose sections are cells too

    def text_inputs(self, root=ROOT):
        """The modules' text and the pages whose headings title the cells: re-render only."""
        shown = [self.shows, *self.also_shows]
        includes = tuple(f'--8<-- "{path}:' for path in shown)
        pages = [page.relative_to(root).as_posix() for page in sorted((root / "docs").rglob("*.md"))
                 if page.is_file() and any(include in page.read_text(encoding="utf-8")
                                           for include in includes)]
        return [*shown, *pages]

    def current_inputs(self, root=ROOT):
        return {**super().current_inputs(root),
                **file_digests([root / path for path in self.text_inputs(root)], root)}


def lesson_command(lesson, command=RECORD):
    """`command` as one lesson's fix: with `--lesson <id>` when the registry lists more."""
    return f"{command} --lesson {lesson.id}" if lesson.registered > 1 else command


def recording_outputs(lesson, root=ROOT):
    """The recordings a lesson must have, then any others found (a TPU run, say)."""
    output = partial(recording_output, lesson)
    files, record = for_lesson(lesson), lesson_command(lesson)
    wanted = [output("cpu", lesson.module, record)]
    if lesson.simulation:
        wanted.append(output("simulation", lesson.simulation, record))
    if lesson.rank_module:
        wanted.append(output("cpu-processes", lesson.rank_module,
                             lesson_command(lesson, f"{RECORD} --processes 4")))
    if lesson.sweep:
        wanted.append(output("sweep", lesson.sweep, BENCH))
    known = {output.variant for output in wanted}
    prefix = f"{lesson.id}."
    for path in sorted((root / RECORDINGS_DIR).glob(f"{prefix}*.json")):
        variant = path.name.removeprefix(prefix).removesuffix(".json")
        if variant not in known:  # a hardware run
            wanted.append(output(variant, hardware_module(lesson, variant), HARDWARE_FIXES.get(
                variant, f"git rm {files.recording(variant)}"), required=False))
    return wanted


def recording_output(lesson, variant, module, fix, required=True, path=None):
    """The recording of `variant`, a run of `module` (at `path`, default its own); a
    compiled one (scripts/hardware/compile.py) is of the TPU sweep's programs too."""
    compiled = (lesson.path(lesson.sweep_on("tpu")),) \
        if variant.endswith("-compiled") and lesson.sweep else ()
    module, *extra = [file.relative_to(lesson.root).as_posix()
                      for file in (lesson.path(module), *lesson.also_run_with(module), *compiled)]
    return RecordingOutput(path or for_lesson(lesson).recording(variant), variant, module, fix,
                           required, lesson, tuple(extra))


def hardware_module(lesson, variant):
    """The module a hardware recording is a run of, by its variant's ending."""
    if variant.endswith("-processes") and lesson.rank_module:
        return lesson.rank_module
    if variant.endswith("-sweep") and lesson.sweep:
        return lesson.sweep_on(variant.removesuffix("-sweep"))
    return lesson.module


@dataclass(frozen=True)
class AnalysisKind:
    """How an analysis is made: the lesson's analysis module applied to one recording."""
    module: str  # dotted, lessons.toml `analysis`
    variant: str  # which recording: "cpu", "cpu-processes", "sweep"
    renderer = "analysis"

    def render(self, recording, overlay=None):  # overlay: what a hardware sweep compiled to
        given = (recording,) if overlay is None else (recording, overlay)
        return analysis_text(importlib.import_module(self.module).analyse(self.variant, *given))


def analysis_outputs(lesson):
    """A SciPy bump (the pins) re-derives every analysis, even of a recording it does not stale."""
    if not lesson.analysis:
        return []
    code = lesson.path(lesson.analysis).relative_to(lesson.root).as_posix()
    files = for_lesson(lesson)
    return [DerivedOutput(files.analysis(variant), files.recording(variant), code, RENDER,
                          kind=AnalysisKind(lesson.analysis, variant), also=(ANALYSIS_TEXT,),
                          pins=True, overlay=files.recording(variant.replace("-sweep", "-compiled"))
                          if variant.endswith("-sweep") and variant != "sweep" else None)
            for variant in lesson.analyses]


def derived_outputs(lesson):
    """Analyses first, then figures and their data: a figure may be drawn from an analysis."""
    return [*analysis_outputs(lesson), *figure_outputs(lesson), *figure_data_outputs(lesson)]


# The command that remakes a hardware recording, by its variant; any other is removed.
TPU_JOB = ("python scripts/tpu_job.py --name NAME --zone ZONE --accelerator v6e-4 --create "
           "--delete")
HARDWARE_FIXES = {"tpu": TPU_JOB, "tpu-sweep": TPU_JOB,
                  "tpu-compiled": "python scripts/tpu_job.py --write-compiled",
                  "gpu": "python scripts/record.py --platform gpu"}


def recording_fix(lessons, stem, root=ROOT):
    """The command that makes the recording a page's stem names; None for no lesson's."""
    lesson_id, variant, _ = stem_parts(stem)
    if lesson_id not in lessons:
        return None
    return next((output.fix for output in recording_outputs(lessons[lesson_id], root)
                 if output.variant == variant), None) or HARDWARE_FIXES.get(
        variant, f"git rm {for_lesson(lesson_id).recording(variant)}")


def figure_outputs(lesson):
    """Each figure the registry asks for, in each of its drawings (figures/variants.py)."""
    files, root = for_lesson(lesson), lesson.root
    outputs = [DerivedOutput(variant.path(files.figure(spec)), files.figure_input(spec, root),
                             spec.module_path(), RENDER, kind=spec,
                             overlay=files.figure_overlay(spec), variant=variant)
               for spec in [KINDS[kind] for kind in lesson.figures]  # the registry knows each
               for variant in spec.variants(root)]
    paths = [output.path for output in outputs]
    # A lesson renderer named `..._dark` would draw over a figure's dark drawing.
    if twice := sorted({path for path in paths if paths.count(path) > 1}):
        raise ValueError(f"lesson_code/lessons.toml: lesson {lesson.id}'s figures would write "
                         f"{', '.join(twice)} twice; rename the lesson's renderer module")
    return outputs


@dataclass(frozen=True)
class FigureDataOutput(DerivedOutput):
    """A figure's data, as CSV or JSON: its renderer's rows, from the figure's own input."""
    figure: str = ""  # the static light SVG it is the data of
    recording: str | None = None  # the raw recording behind it; None: modelled, not measured


def figure_data_outputs(lesson):
    """`figures/<name>.csv` and `.json` beside each figure's SVG, whatever its variants."""
    files = for_lesson(lesson)
    behind = {output.path: output.source for output in analysis_outputs(lesson)}
    outputs = []
    for kind in lesson.figures:
        spec = KINDS[kind]
        figure, source = files.figure(spec), files.figure_input(spec, lesson.root)
        overlay = files.figure_overlay(spec)
        # A lesson's data file (lesson_code/figures/) comes from no recording at all.
        recording = behind.get(source, source if posixpath.dirname(source) == RECORDINGS_DIR
                               else None)
        about = (("figure", figure), ("drawnFrom", source), ("recording", recording),
                 ("overlay", overlay))
        outputs += [FigureDataOutput(data_path(figure, ending), source, spec.module_path(),
                                     RENDER, kind=FigureDataKind(spec, ending, about),
                                     overlay=overlay, also=("scripts/figures/data.py",),
                                     figure=figure, recording=recording) for ending in FORMATS]
    return outputs


def notebook_output(lesson):
    """The executed companion, made in the same run as the CPU recording."""
    files = for_lesson(lesson)
    shown = [path.relative_to(lesson.root).as_posix()
             for path in (lesson.path(), *lesson.also_run_with())]  # the going-further module
    return NotebookOutput(files.notebook, files.recording("cpu"), NOTEBOOK_BUILDER,
                          lesson_command(lesson), shows=shown[0], also_shows=tuple(shown[1:]))


def lock_path(root=ROOT):
    return root / LOCK.relative_to(ROOT)


def read_lock(root=ROOT):
    """{output path: {"sha256", "inputs"}}; {} when absent; LockError when unreadable."""
    path = lock_path(root)
    if not path.exists() and not path.is_symlink():
        return {}
    try:
        lock = read_json(path)
    except RecordingError as error:
        why = error.what.removeprefix(f"{display(path)}: ")
        raise LockError(f"{display(path, root)}: unreadable: {why}") from None
    if not isinstance(lock, dict):
        raise LockError(f"{display(path, root)}: not a map of outputs")
    valid = {name: entry for name, entry in lock.items() if isinstance(entry, dict)
             and isinstance(entry.get("sha256"), str) and isinstance(entry.get("inputs"), dict)
             and all(isinstance(digest, str) for digest in entry["inputs"].values())}
    if malformed := [name for name in lock if name not in valid]:
        raise LockError(f"{display(path, root)}: the entry for {malformed[0][:80]!r} needs a "
                        f"`sha256` and `inputs` mapping each file to its digest", valid)
    return lock


def lock_entry(output, data, root=ROOT, source_digest=None):
    """What the lock keeps for an output just made; `source_digest`: a staged source's."""
    inputs = output.current_inputs(root)
    if source_digest is not None:
        inputs[output.source] = source_digest
    return {"sha256": digest_bytes(data), "inputs": inputs}


def lock_text(lock):
    return json.dumps(lock, indent=2, sort_keys=True) + "\n"

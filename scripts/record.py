"""Run each lesson, record what it printed, and draw the figures from that recording.

    python scripts/record.py                    # 4 logical CPU devices -> <lesson>.cpu.json
    python scripts/record.py --platform tpu     # the physical chips  -> <lesson>.tpu.json
    python scripts/record.py --processes 4      # 4 JAX processes     -> <lesson>.cpu-processes.json
    python scripts/record.py --render-only      # redraw figures from the existing recordings
    python scripts/record.py --check            # is every recording and figure current?

Nothing is moved into place until the lesson printed PASS and the recording validated:
a failure or Ctrl-C leaves every earlier file as it was.
"""
import argparse
import hashlib
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from figure_specs import (LOCK, available_specs, figure_specs,  # noqa: E402
                          lock_entry, read_lock)
from lesson_hashes import ROOT, content_files, content_hash, discover_lessons  # noqa: E402
from recordings import (RECORDINGS, RecordingError, display, dumps, load_recording,  # noqa: E402
                        staged_write, validate)
from staleness import notebook_path, rank_module, stale_reasons  # noqa: E402

LESSON_TIMEOUT_S = 600


class RecordError(Exception):
    """Recording stopped; str() is the one line to show, the earlier files are intact."""

    exit_status = 1


class SetupFailure(RecordError):
    """This machine cannot give the platform or device count asked for."""

    exit_status = 2


def progress(message):
    print(f"record: {message}", file=sys.stderr, flush=True)


def run_lesson_process(module_path, platform, devices):
    """Run the lesson in a fresh interpreter, so its device set-up happens first."""
    module = f"{module_path.parent.name}.{module_path.stem}"
    with tempfile.TemporaryDirectory() as scratch:
        data_path = Path(scratch) / "data.json"
        command = [sys.executable, "-m", module, "--platform", platform,
                   "--devices", str(devices), "--data-out", str(data_path)]
        env = {k: v for k, v in os.environ.items()
               if k not in ("JAX_PLATFORMS", "JAX_NUM_CPU_DEVICES")}
        started = time.perf_counter()
        try:
            run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True,
                                 text=True, timeout=LESSON_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise RecordError(f"{module} ran past {LESSON_TIMEOUT_S} s and was stopped; "
                              f"nothing was written") from None
        duration = time.perf_counter() - started
        if run.returncode != 0 or not data_path.exists():
            tail = "\n".join(run.stderr.strip().splitlines()[-15:])
            if run.returncode == 2 and tail.startswith("error:"):
                raise SetupFailure(tail.removeprefix("error: "))
            raise RecordError(f"{module} failed (exit {run.returncode}); nothing was "
                              f"written. Its stderr ends with:\n{tail}")
        data = json.loads(data_path.read_text())
    shown = ["python", "-m", module, "--platform", platform, "--devices", str(devices)]
    return run.stdout, data, duration, shown


def check_stdout(lesson_id, stdout):
    lines = stdout.splitlines()
    if not lines or lines[-1] != f"PASS: {lesson_id}":
        raise RecordError(f"the lesson did not end with 'PASS: {lesson_id}'; "
                          f"nothing was written")
    repeated = sorted({line for line in lines if lines.count(line) > 1})
    if repeated:
        raise RecordError(f"the lesson printed {repeated[0]!r} more than once; "
                          f"nothing was written")


def provenance(environment):
    multiprocess = environment.get("processCount", 1) > 1
    return f"recorded_{environment['backend']}{'_multiprocess' if multiprocess else ''}" \
           f"_computation"


def recording_name(lesson_id, environment):
    suffix = "-processes" if environment.get("processCount", 1) > 1 else ""
    return f"{lesson_id}.{environment['backend']}{suffix}.json"


def build_recording(lesson_id, module_path, stdout, data, duration, command):
    environment = dict(data.pop("environment"))
    environment["matplotlib"] = version("matplotlib")
    environment["jaxlib"] = version("jaxlib")
    diagram = data.pop("diagram", None)
    name = f"recordings/{recording_name(lesson_id, environment)}"
    renderers = {spec.renderer_hash() for spec in available_specs(lesson_id, arriving=[name])
                 if spec.recording == name}
    # A recording no figure is drawn from (a TPU run, say) could still be drawn by the
    # lesson's bar-panel renderer, so that is the code its figures would depend on.
    renderers = renderers or {spec.renderer_hash() for spec in figure_specs(lesson_id)
                              if spec.renderer.startswith("render_figures:")}
    recording = {
        "schemaVersion": 1,
        "lessonId": lesson_id,
        "contentHash": content_hash(module_path),
        # One renderer hash per recording: the figures drawn from it share their code.
        "rendererHash": hashlib.sha256("".join(sorted(renderers)).encode()).hexdigest(),
        "kind": "executed",
        "generatedAt": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "provenance": provenance(environment),
        "environment": environment,
        "stdout": stdout,
        "data": data,
        "contentFiles": content_files(module_path),
        "durationS": round(duration, 2),
        "command": command,
    }
    if diagram is not None:
        recording["diagram"] = diagram
    return validate(recording, f"new recording of {lesson_id}")


def call_renderer(spec, recording):
    module_name, function = spec.renderer.split(":")
    render = getattr(importlib.import_module(module_name), function)
    return render(recording) if spec.recording else render()


def stage_figures(lesson_id, staged, new_recordings):
    """Draw every available figure of a lesson into temporary files; return lock entries.

    `new_recordings` maps a recording path to content not yet moved into place, so the
    figures are drawn from the recording that is about to land.
    """
    lock = {}
    for spec in available_specs(lesson_id, arriving=new_recordings):
        recording = None
        if spec.recording:
            text = new_recordings.get(spec.recording)
            # An existing recording may be corrupt: load_recording says so in one line.
            recording = json.loads(text) if text else load_recording(ROOT / spec.recording)
        svg = call_renderer(spec, recording)
        staged.append((staged_write(ROOT / spec.path, svg), ROOT / spec.path))
        lock[spec.path] = lock_entry_for(spec, svg, new_recordings)
    return lock


def lock_entry_for(spec, svg, new_recordings):
    """The lock entry; a recording still in a temporary file is hashed from its text."""
    if spec.recording in new_recordings:
        arriving = hashlib.sha256(new_recordings[spec.recording].encode()).hexdigest()
        return lock_entry(spec, svg, arriving)
    return lock_entry(spec, svg, spec.input_hash())


def commit(staged):
    """Move every staged file into place; only reached when everything succeeded."""
    for temp, final in staged:
        os.replace(temp, final)
        progress(f"wrote {display(final)}")


def discard(staged):
    for temp, _ in staged:
        temp.unlink(missing_ok=True)


def record(lessons, platform="cpu", devices=4, processes=None, render_only=False):
    staged = []
    try:
        lock = read_lock()
        for lesson_id, module_path in lessons.items():
            new_recordings = {}
            if not render_only:
                new_recordings.update(
                    record_one(lesson_id, module_path, platform, devices, processes, staged))
            progress(f"drawing the figures of {lesson_id}")
            lock.update(stage_figures(lesson_id, staged, new_recordings))
        staged.append((staged_write(LOCK, json.dumps(lock, indent=2, sort_keys=True) + "\n"),
                       LOCK))
        commit(staged)
    except BaseException:
        discard(staged)
        raise


def record_one(lesson_id, module_path, platform, devices, processes, staged):
    if processes:
        from multiprocess import ProcessRunError, run_processes  # only this path needs it
        progress(f"running {lesson_id} as {processes} JAX processes")
        try:
            run = run_processes(ranks=processes)
        except ProcessRunError as error:
            raise RecordError(f"{error}; nothing was written") from None
        stdout, data, duration = run.stdout, run.data, run.duration_s
        command = ["python", "scripts/record.py", "--processes", str(processes)]
        module_path = rank_module(module_path)
    else:
        progress(f"running {lesson_id} on {devices} {platform.upper()} device(s)")
        stdout, data, duration, command = run_lesson_process(module_path, platform, devices)
    check_stdout(lesson_id, stdout)
    progress(f"{lesson_id} printed PASS in {duration:.1f} s; validating the recording")
    recording = build_recording(lesson_id, module_path, stdout, data, duration, command)
    path = RECORDINGS / recording_name(lesson_id, recording["environment"])
    text = dumps(recording)
    staged.append((staged_write(path, text), path))
    if recording["provenance"] == "recorded_cpu_computation":
        stage_notebook(lesson_id, module_path, recording["contentHash"], staged)
    return {display(path): text}


def stage_notebook(lesson_id, module_path, lesson_hash, staged):
    import notebook  # nbclient and a kernel: only needed when recording
    progress(f"executing the notebook companion of {lesson_id}")
    executed = notebook.build_notebook(module_path, lesson_id, lesson_hash)
    with tempfile.TemporaryDirectory() as scratch:
        try:
            notebook.execute(executed, scratch)
        except Exception as error:  # nbclient's CellExecutionError carries the cell
            raise RecordError(f"the notebook companion failed: "
                              f"{str(error).strip().splitlines()[-1]}") from None
    path = notebook_path(lesson_id)
    staged.append((staged_write(path, notebook.notebook_text(executed)), path))


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="exit 1 listing every stale, invalid or missing output")
    mode.add_argument("--render-only", action="store_true",
                      help="redraw the figures from the existing recordings, without JAX")
    parser.add_argument("--platform", choices=("cpu", "tpu", "gpu"), default="cpu")
    parser.add_argument("--devices", type=int, default=4)
    parser.add_argument("--processes", type=int, metavar="N",
                        help="run as N JAX processes with one CPU device each")
    parser.add_argument("--lesson", help="one lesson id (default: every lesson)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    lessons = discover_lessons()
    if args.lesson:
        if args.lesson not in lessons:
            print(f"error: no lesson {args.lesson!r}; known: {', '.join(lessons)}",
                  file=sys.stderr)
            return 2
        lessons = {args.lesson: lessons[args.lesson]}
    if args.check:
        reasons = stale_reasons(lessons)
        for line in reasons:
            print(line)
        return 1 if reasons else 0
    try:
        record(lessons, args.platform, args.devices, args.processes, args.render_only)
    except (RecordError, RecordingError) as error:
        print(f"error: {error}", file=sys.stderr)
        return getattr(error, "exit_status", 1)
    except KeyboardInterrupt:
        print("error: interrupted; every earlier file is as it was", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())

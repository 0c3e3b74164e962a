"""What XLA:TPU will run for each program of a lesson, compiled before any TPU VM exists.

libtpu compiles for a slice named as get_topology_desc knows it, on a host without a chip:
per program of the lesson and of its TPU sweep (`programs_to_compile`), the collectives of
the compiled HLO, read by the lesson's `compiled_collectives`. libtpu is a TPU VM's runtime,
not a pin: without it `tpu_job.py --dry-run` says in one line how to install it.
"""
import importlib
import importlib.metadata
import os
from concurrent.futures import ThreadPoolExecutor
from itertools import groupby

from scripts import ROOT, display
from scripts.chips import CHIPS, accelerators_for
from scripts.cli import CommandError, progress
from scripts.hardware.tpu import choose_accelerator, tpu_lesson
from scripts.store.outputs import HARDWARE_FIXES, for_lesson, recording_output
from scripts.store.recordings import dumps, header, validate
from scripts.store.staging import refuse_unsafe_target, write_atomically
from scripts.units import format_bytes

VARIANT = "tpu-compiled"
SLICES = {1: (1, 1), 4: (2, 2), 8: (2, 4)}  # a single-host VM's chips, as a slice's shape


def topology(accelerator):
    """'v5litepod-4' -> 'v5e:2x2', the name libtpu knows the VM's slice by."""
    x, y = SLICES[CHIPS[accelerator]]
    return f"{'v6e' if accelerator.startswith('v6e') else 'v5e'}:{x}x{y}"


def missing_libtpu():
    """None where libtpu is installed, else the line that says how to get it."""
    try:
        return importlib.metadata.version("libtpu") and None
    except importlib.metadata.PackageNotFoundError:
        pin = next((need.split(";")[0].strip() for need in importlib.metadata.requires("jax")
                    if need.startswith("libtpu") and 'extra == "tpu"' in need), "libtpu")
        return (f"libtpu is not installed, so nothing was compiled for the TPU: "
                f"`.venv/bin/uv pip install --python .venv/bin/python '{pin}'` (the TPU "
                f"runtime the pinned jax[tpu] asks for) lets this dry-run say what XLA:TPU "
                f"makes of each program")


def compiled_programs(lesson, devices):
    """[{of, program, ranks, sizes, runs}] on `devices`, chips or compile-only: the lesson's
    programs, then its TPU sweep's at each size and each p they hold; sizes, then p, with
    the same collectives in one row. XLA compiles one program per core."""
    from scripts.bench import FULL, tpu_ranks

    module = importlib.import_module(lesson.module)
    if not hasattr(module, "programs_to_compile"):
        return []

    def runs(compiled):
        program, args = compiled
        return " + ".join(sorted(op.replace("_", "-") for op in module.compiled_collectives(
            program, *args))) or "no collective"
    sweep = importlib.import_module(lesson.sweep_on("tpu")) if lesson.sweep else None
    tasks = [(("lesson", name, len(devices)), None, compiled)
             for name, compiled in module.programs_to_compile(devices).items()]
    for ranks in tpu_ranks(FULL, lesson) if hasattr(sweep, "programs_to_compile") else ():
        for requested, nbytes in sweep.sizes_for(sweep.SIZES, ranks):
            tasks += [(("sweep", name, ranks), requested, compiled) for name, compiled
                      in sweep.programs_to_compile(devices[:ranks], nbytes).items()]
    with ThreadPoolExecutor() as pool:
        found = pool.map(runs, (compiled for *_, compiled in tasks))
        sized = {}  # (of, program, p): [(size, what runs)], sizes in order
        for (key, size, _), ran in zip(tasks, found):
            sized.setdefault(key, []).append((size, ran))
    rows = {}  # (of, program): {(sizes, what runs): [p]}
    for (of, name, ranks), spans in sized.items():
        for ran, span in groupby(spans, key=lambda entry: entry[1]):
            sizes = [format_bytes(size) for size, _ in span if size] or ["the lesson's"]
            words = "–".join(dict.fromkeys([sizes[0], sizes[-1]]))  # "8 B–2 KiB", or "8 B"
            rows.setdefault((of, name), {}).setdefault((words, ran), []).append(ranks)
    return [{"of": of, "program": name, "ranks": ", ".join(map(str, ranks)), "sizes": sizes,
             "runs": ran} for (of, name), spans in rows.items()
            for (sizes, ran), ranks in spans.items()]


def compile_slice(lesson, accelerator):
    """One VM's entry of the recording: its slice, libtpu's version, what each program runs."""
    import jax

    jax.config.update("jax_platforms", "cpu")  # nothing runs, on no chip: a TPU's backend waits
    from jax.experimental import topologies

    progress("tpu_job", f"compiling {lesson.id}'s programs for a {accelerator} "
             f"({topology(accelerator)}) with libtpu: a few minutes on two cores")
    # Not a TPU VM: say what its metadata would (else libtpu warns it cannot find it), and
    # take no lock on chips there are none of (another compile may run).
    for name, value in (("TPU_ACCELERATOR_TYPE", accelerator), ("TPU_WORKER_HOSTNAMES",
                        "localhost"), ("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")):
        os.environ.setdefault(name, value)
    # One host holds the whole slice (libtpu assumes 2x2 chips a host otherwise).
    devices = topologies.get_topology_desc(topology(accelerator), "tpu", chips_per_host_bounds=(
        *SLICES[CHIPS[accelerator]], 1)).devices
    return {"accelerator": accelerator, "topology": topology(accelerator),
            "deviceKind": devices[0].device_kind, "libtpu": importlib.metadata.version("libtpu"),
            "programs": compiled_programs(lesson, devices)}


def dry_run_compile(lesson_id, accelerator, root=ROOT):
    """The dry-run's last lines: per program, what XLA:TPU will run; or how to know."""
    if missing_libtpu():
        return f"# {missing_libtpu()}\n"
    lesson = tpu_lesson(root, lesson_id)
    compiled = compile_slice(lesson, choose_accelerator(lesson, accelerator))
    return "".join([f"# XLA:TPU compiled each program for a {compiled['accelerator']} "
                    f"({compiled['topology']}, libtpu {compiled['libtpu']}); each runs:\n"] +
                   [f"#   {row['of']:<6} {row['program']:<26} p = {row['ranks']:<5} "
                    f"{row['sizes']:<16} {row['runs']}\n" for row in compiled["programs"]])


def write_compiled(lesson_id, root=ROOT):
    """recordings/<id>.tpu-compiled.json: every VM with the lesson's chips, compiled."""
    import jax
    import numpy

    if missing_libtpu():
        raise CommandError(missing_libtpu().replace("this dry-run", "--write-compiled"))
    lesson = tpu_lesson(root, lesson_id)
    name, fix = for_lesson(lesson).recording(VARIANT), HARDWARE_FIXES[VARIANT]
    refuse_unsafe_target(root / name, root)  # before minutes of compiling
    inputs = recording_output(lesson, VARIANT, lesson.module, fix).current_inputs(root)
    recording = header(lesson.id, "compiled", lesson.path(), {
        "backend": "tpu", "jax": jax.__version__, "numpy": numpy.__version__,
        "libtpu": importlib.metadata.version("libtpu")}, root, files=inputs)
    recording.update(provenance="compiled_tpu_ahead_of_time", command=fix.split(), slices=[
        compile_slice(lesson, accelerator) for accelerator in accelerators_for(lesson.devices)])
    validate(recording, f"new recording {name}", fix, lesson)
    write_atomically(root / name, dumps(recording), root)
    return display(root / name, root)


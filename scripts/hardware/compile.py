"""What each program of a lesson compiles to, before any TPU VM exists: libtpu compiles for
a slice as get_topology_desc describes it, on a host without a chip; XLA:CPU for the logical
devices the lesson and its sweep are recorded on. The programs are each module's
`programs_to_compile`, read by the lesson's `compiled_collectives`. libtpu is a TPU VM's
runtime, not a pin: without it `tpu_job.py --dry-run` says in one line how to install it.
"""
import importlib
import importlib.metadata
import os
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from itertools import groupby

from scripts import ROOT, display
from scripts.chips import CHIPS, accelerators_for
from scripts.cli import CommandError, UsageError, progress
from scripts.hardware.tpu import choose_accelerator, tpu_lesson
from scripts.store.outputs import HARDWARE_FIXES, for_lesson, recording_output
from scripts.store.recordings import dumps, header, validate
from scripts.store.staging import refuse_unsafe_target, write_atomically
from scripts.sweep.measure import FULL, tpu_ranks
from scripts.units import format_bytes

VARIANT = "tpu-compiled"
SLICES = {1: (1, 1), 4: (2, 2), 8: (2, 4)}  # a single-host VM's chips, as a slice's shape
GRADIENTS = (None, 2**20)  # the lesson's own gradient, and 1 MiB, nearer a real model's


def topology(accelerator):
    """'v5litepod-4' -> 'v5e:2x2', the name libtpu knows the VM's slice by."""
    x, y = SLICES[CHIPS[accelerator]]
    return f"{'v6e' if accelerator.startswith('v6e') else 'v5e'}:{x}x{y}"


def install_libtpu(reinstall=""):
    """The command that installs the libtpu the pinned jax[tpu] asks for."""
    pin = next((need.split(";")[0].strip() for need in importlib.metadata.requires("jax")
                if need.startswith("libtpu") and 'extra == "tpu"' in need), "libtpu")
    return f"`.venv/bin/uv pip install --python .venv/bin/python {reinstall}'{pin}'`"


def missing_libtpu():
    """None where libtpu is installed, else the line that says how to get it."""
    try:
        return importlib.metadata.version("libtpu") and None
    except importlib.metadata.PackageNotFoundError:
        return (f"libtpu is not installed, so nothing was compiled for the TPU: "
                f"{install_libtpu()} (the TPU runtime the pinned jax[tpu] asks for) lets this "
                f"dry-run say what XLA:TPU makes of each program")


def targets(lesson, sweep):
    """(accelerator, the lesson's p, the sweep's p) of each target: the CPU as the lesson and
    its sweep are recorded, each VM with the lesson's chips, and one slice up, where p
    doubles (the v5e: the cheaper chip), at the p only it holds."""
    every = FULL["ranks"] if sweep else []
    wider = [name for name in accelerators_for(2 * lesson.devices) if name.startswith("v5")]
    return [("cpu", lesson.devices, every),
            *((name, lesson.devices, tpu_ranks(FULL, lesson) if sweep else [])
              for name in accelerators_for(lesson.devices)),
            *((name, 2 * lesson.devices, [p for p in every if p > lesson.devices])
              for name in wider[:1])]


def compiled_programs(lesson, devices, ranks, sweep_ranks, looping):
    """[{of, program, ranks, bytes, collectivesPerCall, compilesTo}] on `devices`, chips or
    compile-only: the lesson's programs and its gradients on `ranks` devices, then its TPU
    sweep's at each p of `sweep_ranks`, one and `looping` collectives a call. A row is a span
    of sizes ([first, last]; None: the lesson's own) with the same collectives, merged over
    the calls, then over p. XLA compiles one program per core."""
    module = importlib.import_module(lesson.module)
    if not hasattr(module, "programs_to_compile"):
        return []
    further = importlib.import_module(lesson.going_further) if lesson.going_further else None
    sweep = importlib.import_module(lesson.sweep_on("tpu")) if lesson.sweep else None
    tasks = [((of, name, ranks, 1), size, compiled) for of, owner in (("lesson", module),
                                                                      ("gradient", further))
             if hasattr(owner, "programs_to_compile") for size in GRADIENTS
             for name, compiled in owner.programs_to_compile(devices[:ranks], size).items()]
    for p in sweep_ranks if hasattr(sweep, "programs_to_compile") else ():
        for calls in (1, looping):
            for requested, nbytes in sweep.sizes_for(sweep.SIZES, p):
                tasks += [(("sweep", name, p, calls), requested, compiled) for name, compiled
                          in sweep.programs_to_compile(devices[:p], nbytes, calls).items()]

    def compiles_to(compiled):
        program, args = compiled
        return " + ".join(sorted(op.replace("_", "-") for op in module.compiled_collectives(
            program, *args))) or "no collective"
    with ThreadPoolExecutor() as pool:
        found = pool.map(compiles_to, (compiled for *_, compiled in tasks))
        sized = {}  # (of, program, p, calls): [(size, what it compiles to)], sizes in order
        for (key, size, _), ops in zip(tasks, found):
            sized.setdefault(key, []).append((size, ops))
    by_calls = {}  # (of, program, p, sizes, compiles to): [calls]
    for (of, name, p, calls), spans in sized.items():
        # The lesson's own size is a span of its own, never merged with a number.
        for (ops, _), span in groupby(spans, key=lambda entry: (entry[1], entry[0] is None)):
            sizes = [size for size, _ in span]
            by_calls.setdefault((of, name, p, sizes[0], sizes[-1], ops), []).append(calls)
    by_ranks = {}  # (of, program, calls, sizes, compiles to): [p]
    for (of, name, p, first, last, ops), calls in by_calls.items():
        by_ranks.setdefault((of, name, tuple(calls), first, last, ops), []).append(p)
    return [{"of": of, "program": name, "ranks": p, "bytes": None if first is None else
             [first, last], "collectivesPerCall": list(calls), "compilesTo": ops}
            for (of, name, calls, first, last, ops), p in by_ranks.items()]


def target_devices(accelerator):
    """The target's devices: the CPU's logical ones, or a slice's compile-only ones from
    libtpu; a libtpu that cannot describe the slice is one line, naming the reinstall."""
    import jax

    jax.config.update("jax_platforms", "cpu")  # nothing runs, on no chip: a TPU's backend waits
    from jax.experimental import topologies

    if accelerator == "cpu":
        return jax.devices()
    # Not a TPU VM: say what its metadata would (else libtpu warns it cannot find it), and
    # take no lock on chips there are none of (another compile may run).
    for name, value in (("TPU_ACCELERATOR_TYPE", accelerator), ("TPU_WORKER_HOSTNAMES",
                        "localhost"), ("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")):
        os.environ.setdefault(name, value)
    with broken_libtpu(accelerator):
        # One host holds the whole slice (libtpu assumes 2x2 chips a host otherwise).
        return topologies.get_topology_desc(topology(accelerator), "tpu", chips_per_host_bounds=(
            *SLICES[CHIPS[accelerator]], 1)).devices


@contextmanager
def broken_libtpu(accelerator):
    try:
        yield
    except RuntimeError as error:  # JAX's own errors included: its TPU support missing, say
        said = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise CommandError(
            f"libtpu {importlib.metadata.version('libtpu')} could not compile for a "
            f"{accelerator} ({said}); reinstall the version jax[tpu] pins: "
            f"{install_libtpu('--reinstall ')}") from None


def compile_target(lesson, accelerator, ranks, sweep_ranks, devices):
    """One target's entry of the recording: the chip or CPU, libtpu's version and what each
    program compiles to."""
    sweep = importlib.import_module(lesson.sweep_on("tpu")) if lesson.sweep else None
    looping = getattr(sweep, "LOOP_COLLECTIVES", {}).get("cpu" if accelerator == "cpu" else "tpu")
    if accelerator == "cpu":
        return {"accelerator": "cpu", "deviceKind": devices[0].device_kind, "programs":
                compiled_programs(lesson, devices, ranks, sweep_ranks, looping)}
    progress("tpu_job", f"compiling {lesson.id}'s programs for a {accelerator} "
             f"({topology(accelerator)}) with libtpu: minutes on two cores")
    with broken_libtpu(accelerator):
        programs = compiled_programs(lesson, devices, ranks, sweep_ranks, looping)
    return {"accelerator": accelerator, "topology": topology(accelerator),
            "deviceKind": devices[0].device_kind, "libtpu": importlib.metadata.version("libtpu"),
            "programs": programs}


def dry_run_compile(lesson_id, accelerator, root=ROOT):
    """The dry-run's last lines: per program, what XLA:TPU compiles it to; or how to know."""
    if missing := missing_libtpu():
        return f"# {missing}\n"
    lesson = tpu_lesson(root, lesson_id)
    accelerator = choose_accelerator(lesson, accelerator)
    target = next(target for target in targets(lesson, lesson.sweep) if target[0] == accelerator)
    compiled = compile_target(lesson, *target, target_devices(accelerator))

    def words(row):
        return ("the lesson's" if row["bytes"] is None else "–".join(dict.fromkeys(
            map(format_bytes, row["bytes"]))))
    return "".join([f"# XLA:TPU compiled each program for a {compiled['accelerator']} "
                    f"({compiled['topology']}, libtpu {compiled['libtpu']}); each compiles to:\n"] +
                   [f"#   {row['of']:<8} {row['program']:<26} p = "
                    f"{', '.join(map(str, row['ranks'])):<5} {words(row):<16} "
                    f"x{', '.join(map(str, row['collectivesPerCall'])):<6} {row['compilesTo']}\n"
                    for row in compiled["programs"]])


def write_compiled(lesson_id, root=ROOT):
    """recordings/<id>.tpu-compiled.json: the CPU as recorded, every VM with the lesson's
    chips and one slice up, compiled; refused (exit 2) without libtpu."""
    import jax
    import numpy

    if missing := missing_libtpu():
        raise UsageError(missing.replace("this dry-run", "--write-compiled"))
    lesson = tpu_lesson(root, lesson_id)
    name, fix = for_lesson(lesson).recording(VARIANT), HARDWARE_FIXES[VARIANT]
    refuse_unsafe_target(root / name, root)  # before minutes of compiling
    inputs = recording_output(lesson, VARIANT, lesson.module, fix).current_inputs(root)
    chosen = targets(lesson, lesson.sweep)
    # Before any backend starts: the CPU's logical devices, as many as its largest p.
    jax.config.update("jax_num_cpu_devices", max(max([p, *ranks]) for _, p, ranks in chosen))
    started = time.monotonic()
    # Every slice described first: a broken libtpu stops here, before minutes of compiling.
    devices = [target_devices(accelerator) for accelerator, *_ in chosen]
    compiled = [compile_target(lesson, *target, found) for target, found in zip(chosen, devices)]
    recording = header(lesson.id, "compiled", lesson.path(), {
        "backend": "tpu", "jax": jax.__version__, "numpy": numpy.__version__,
        "libtpu": importlib.metadata.version("libtpu")}, root, files=inputs)
    recording.update(provenance="compiled_tpu_ahead_of_time", command=fix.split(),
                     durationS=round(time.monotonic() - started, 1), targets=compiled)
    validate(recording, f"new recording {name}", fix, lesson)
    write_atomically(root / name, dumps(recording), root)
    return display(root / name, root)

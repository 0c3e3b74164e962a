"""Message-size and rank sweep of a lesson's collectives, nccl-tests style (`make bench`).

Measures the lesson's `sweep` module (`tpu_sweep` on chips), each p in its own interpreter,
then checks, analyses and draws, and moves the recording and all it feeds in together.
"""
import sys
from pathlib import Path

# `python scripts/bench.py` puts scripts/ on sys.path; the package lives one level up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contextlib import nullcontext
import resource
import time

from scripts import display
from scripts.cli import CommandError, OneLineParser, UsageError, command, progress, run
from scripts.plumbing.checkout import LinkInCheckout, refuse_links
from scripts.store.derive import DeriveError, stage_derived
from scripts.store.hashes import ClosureError
from scripts.store.lessons import RegistryError, chosen_lessons, load_lessons
from scripts.store.outputs import LockError, for_lesson, lock_path, lock_text, read_lock
from scripts.store.recordings import RecordingError, dumps, header, validate
from scripts.store.staging import Staging, StagingError, refuse_unsafe_target
from scripts.host import host_at_start, warn_if_busy
from scripts.plumbing.run_lock import RunLocked, exclusive_run
from scripts.sweep.measure import (FULL, MEMCPY_BYTES, MEMCPY_REPEATS, TIMING_KEYS,
                                   WorkerFailed, l2_cache_bytes, measure_in_subprocess,
                                   measure_memcpy_gbps, tpu_ranks)


class WrongResults(RuntimeError):
    """A collective returned values that differ from NumPy: nothing may be recorded."""


def measure_blocks(measure, ranks, sizes, plan, blocks):
    """Every p, `blocks` times, in turns: the rows, order, hosts, programs and backend, and
    the donation (block 0's) and allocator probes."""
    rows, order, hosts, programs, backend, probes = [], [], [], {}, None, ([], [])
    for block in range(blocks):
        for p in ranks:
            measured = measure(p, sizes, plan, block)
            rows += measured["rows"]
            backend = measured["backend"]
            programs[str(p)] = measured["programs"]
            hosts.append({"block": block, "ranks": p, **measured["host"]})
            order.append({"block": block, "ranks": p})
            for found, name in zip(probes, ("donation", "allocator")):
                found += [measured[name]] if measured.get(name) else []
    return rows, order, hosts, programs, backend, probes


def record_sweep(lesson, out, ranks, sizes, plan, measure=None, blocks=FULL["blocks"],
                 platform="cpu"):
    """Measure, check, derive; then move the recording, what it feeds and the lock entries
    into place together, or nothing. `measure(p, sizes, plan, block)`: one p's
    {"backend", "rows", "programs", "host"}. `out` None: the committed files and the lock."""
    import numpy

    # On CPU the worker is called as it always was; on chips it is told the platform.
    on_chips = {} if platform == "cpu" else {"platform": platform}
    measure = measure or (lambda *args: measure_in_subprocess(
        lesson.sweep_on(platform), *args, root=lesson.root, **on_chips))
    start = time.perf_counter()
    at_start = host_at_start()  # before anything of ours runs
    memcpy = measure_memcpy_gbps()  # before any worker, so nothing competes for memory
    rows, order, hosts, programs, backend, (donation, allocator) = measure_blocks(
        measure, ranks, sizes, plan, blocks)
    # The probes' results are checked too: a wrong value in any row stops before any write.
    checked = rows + [{"collective": f"{name} all_reduce (donation probe)", **probe[name],
                       "ranks": probe["ranks"], "bytes": probe["bytes"]}
                      for probe in donation for name in ("kept", "donated")]
    if bad := [r for r in checked + [row for probe in allocator for row in probe["rows"]]
               if r["wrong"]]:
        where = ", ".join(f"{r['collective']} p={r['ranks']} {r['bytes']} B: {r['wrong']} wrong"
                          for r in bad)
        raise WrongResults(f"results differ from the NumPy reference ({where}); "
                           "nothing was written")
    # header() adds what every recording says about the host (python, platform, cpus).
    environment = {**backend, "numpy": numpy.__version__,
                   "loadAverage1m": at_start["loadAverage1m"],
                   "busyCoresAtStart": at_start["busyCores"]}
    command = ["make", "bench"] if platform == "cpu" else \
        ["python", "scripts/bench.py", "--platform", platform]
    # The sweep as measured, and only that: every sample of every block, in the order they
    # ran, with the host's load around each block. The analysis is derived below.
    recording = header(lesson.id, "sweep", lesson.path(lesson.sweep_on(platform)), environment,
                       lesson.root)
    method = {"warmupCalls": 1, "blocks": blocks, **plan,
              "timing": "jit(shard_map(...)) lowered and compiled, inputs placed, before "
                        "timing; in each block, calls per sample doubled until one sample "
                        "lasts minSampleMs, then `samples` samples; block_until_ready on every "
                        "call; per-call us = sample time / calls; every program twice, with "
                        "one collective per call and with collectivesPerCall of them in one "
                        "fori_loop; minorFaults: getrusage(RUSAGE_SELF).ru_minflt around "
                        "each sample's calls",
              "check": "inputs are small integers, so float32 sums are exact: wrong counts "
                       "values != NumPy on every device's copy, for the warm-up and the last "
                       "timed call"}
    recording.update(method=method, rows=rows, order=order, hosts=hosts,
                     programs=programs, donation=donation, allocator=allocator,
                     memcpyGBps=memcpy, memcpyBytes=MEMCPY_BYTES, memcpyRepeats=MEMCPY_REPEATS,
                     l2CacheBytes=l2_cache_bytes(), pageBytes=resource.getpagesize(),
                     durationS=time.perf_counter() - start, command=command)
    files, variant = for_lesson(lesson), sweep_variant(platform)
    name = files.recording(variant)
    validate(recording, f"new recording {name}", " ".join(command), lesson)
    text = dumps(recording)
    with Staging() as staging:
        arriving = {name: text}
        if out is None:
            staging.add(lesson.root / name, text)
            lock = read_lock(lesson.root)
            lock.update(stage_derived(lesson, staging, arriving, lock, only_from=name))
            staging.add(lock_path(lesson.root), lock_text(lock))
        else:
            staging.add(out, text)
            beside = {files.analysis(variant): ".analysis.json"}

            def place(path):
                """Beside `out` (sweep.json): sweep.analysis.json, and each figure's files
                as out's stem and their own name (sweep.<id>-sweep.csv), never colliding."""
                stem = Path(out).with_suffix("").name
                name = stem + beside[path] if path in beside else f"{stem}.{Path(path).name}"
                return Path(out).with_name(name)

            stage_derived(lesson, staging, arriving, {}, only_from=name, place=place)
        staging.commit(lambda path: progress("bench", f"wrote {display(path)}"))
    return recording


def parse_args(argv):
    parser = OneLineParser(prog="scripts/bench.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path,
                        help="write the recording here, and its analysis and figures beside "
                             "it, instead of the committed files")
    parser.add_argument("--ranks", type=int, nargs="+", help="device counts, one process each")
    parser.add_argument("--blocks", type=int, default=None,
                        help=f"times each p is measured, in turns (default {FULL['blocks']})")
    parser.add_argument("--lesson", help="the lesson whose sweep to measure (default: the "
                                         "first with a sweep in lesson_code/lessons.toml)")
    parser.add_argument("--platform", choices=PLATFORMS, default="cpu",
                        help="cpu: p logical devices (default); tpu: p of a TPU VM's chips, "
                             "recorded as <lesson>.tpu-sweep.json (scripts/tpu_job.py runs it)")
    return parser.parse_args(argv)


# Where a sweep can run: logical CPU devices, or a TPU VM's chips. A GPU would need a
# target that records one (a gpu-sweep the pages read); none does yet.
PLATFORMS = ("cpu", "tpu")


def sweep_variant(platform):
    """The recording a sweep on `platform` writes: <lesson>.sweep.json on CPU (the
    committed benchmark), <lesson>.<platform>-sweep.json on hardware."""
    return "sweep" if platform == "cpu" else f"{platform}-sweep"


# Device counts one sweep worker can simulate (each is one process with p logical CPU
# devices); past 16 the host's cores, not the collectives, are what would be measured.
MAX_RANKS = 16


def refuse_what_cannot_work(args, plan, lesson=None):
    """The device counts to measure; UsageError (one line) for a request that cannot
    work. On TPU they are the plan's that the lesson's `devices` chips hold: the TPU job
    runs this on a VM with exactly that many (`lesson` is needed then)."""
    full = plan["ranks"] if args.platform == "cpu" else tpu_ranks(plan, lesson)
    ranks = args.ranks or full
    asked = f"--ranks {' '.join(map(str, ranks))}"
    if any(not 2 <= p <= MAX_RANKS for p in ranks) or len(set(ranks)) != len(ranks):
        raise UsageError(f"{asked}: each device count must be 2 to {MAX_RANKS}, each once; "
                         f"run `python scripts/bench.py`")
    platform = "" if args.platform == "cpu" else f" --platform {args.platform}"
    if too_many := [p for p in ranks if args.platform != "cpu" and p > lesson.devices]:
        raise UsageError(f"{asked}: p = {too_many[0]} needs {too_many[0]} chips, and "
                         f"{lesson.id}'s TPU VM has {lesson.devices} (`devices` in "
                         f"lesson_code/lessons.toml); run `python scripts/bench.py{platform}`")
    if args.out is None and sorted(ranks) != sorted(full):
        # The committed sweep, its figures and the page describe every p of the full plan.
        raise UsageError(f"{asked} measures part of the sweep, which would replace the "
                         f"committed one (p = {', '.join(map(str, full))}); run "
                         f"`python scripts/bench.py{platform} {asked} --out build/sweep.json` "
                         f"to write it elsewhere")
    return ranks


def bench_command(argv, plan):
    args = parse_args(argv)
    try:
        refuse_links()  # before any file of the checkout is read or written
        lesson = chosen_lessons(load_lessons(), args.lesson, "sweep")[0]
        ranks = refuse_what_cannot_work(args, plan, lesson)
        if args.out is not None:
            try:  # before minutes of measuring
                refuse_unsafe_target(args.out)
            except StagingError as error:
                raise UsageError(str(error)) from None
        warn_if_busy("bench.py")
        # The lock guards the checkout's recordings and figures; `--out` writes neither.
        with (exclusive_run(" ".join(["python scripts/bench.py", *argv]), lesson.root)
              if args.out is None else nullcontext()):
            recording = record_sweep(lesson, args.out, ranks,
                                     plan["sizes"], {key: plan[key] for key in TIMING_KEYS},
                                     blocks=args.blocks or plan["blocks"], platform=args.platform)
    except OSError as error:  # the figure or the lock could not be read
        raise CommandError(f"{error.filename or 'a file'}: {error.strerror or error}; "
                           f"nothing was written") from None
    progress("bench", f"measured in {recording['durationS']:.0f} s (single-thread memcpy "
             f"{recording['memcpyGBps']:.1f} GB/s)")


FAILURES = (WrongResults, WorkerFailed, RegistryError, RecordingError, StagingError, LockError,
            DeriveError, RunLocked, ClosureError, LinkInCheckout)


def main(argv=None, plan=FULL):
    """`plan`: ranks, sizes (None: every size) and the timing keys; tests pass a small one.
    Ctrl-C and SIGTERM kill the worker and move nothing (scripts/cli.py)."""
    return command(lambda args: bench_command(args, plan), FAILURES, prefix="bench.py")(argv)


if __name__ == "__main__":
    sys.exit(run(main))

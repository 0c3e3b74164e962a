"""Message-size and rank sweep of a lesson's collectives, nccl-tests style (`make bench`).

    python scripts/bench.py                 # full sweep: p = 2, 4, 8 x 12 sizes, ~2 minutes

The measured programs are the lesson's `sweep` module (lesson_code/lessons.toml); each p
runs in its own interpreter (scripts/sweep/measure.py). This file is the command line and
the order of events: measure, check, analyse (scripts/sweep/analysis.py), validate, draw,
and only then move the recording, the figure and the lock entry into place together.
`python scripts/record.py --check` says when the sweep is stale; a change to the figure's
renderer needs only `python scripts/record.py --render-only`.
"""
import sys
from pathlib import Path

# `python scripts/bench.py` puts scripts/ on sys.path; the package lives one level up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import os
import time

from scripts import display
from scripts.hashes import ClosureError
from scripts.interrupts import Interrupted, stop_on_signals
from scripts.lessons import RegistryError, load_lessons
from scripts.outputs import SWEEP_ANALYSIS, LockError
from scripts.recordings import RecordingError, Staging, dumps, header, validate
from scripts.run_lock import RunLocked, exclusive_run
from scripts.sizes import SIZES
from scripts.sweep.analysis import analyse, method_summary
from scripts.sweep.measure import (MEMCPY_BYTES, MEMCPY_REPEATS, WorkerFailed,
                                   last_level_cache_bytes, measure_in_subprocess,
                                   measure_memcpy_gbps)

# samples: at most, per row; a row gets fewer (never under minSamples) when that many
# would take longer than rowBudgetS, which keeps the 32 MiB rows from dominating the run.
FULL = {"ranks": [2, 4, 8], "sizes": None, "samples": 15, "minSamples": 5, "rowBudgetS": 0.6,
        "minSampleMs": 1.0}
TIMING_KEYS = ("samples", "minSamples", "rowBudgetS", "minSampleMs")


class WrongResults(RuntimeError):
    """A collective returned values that differ from NumPy: nothing may be recorded."""


def check_rows(rows):
    bad = [r for r in rows if r["wrong"]]
    if bad:
        where = ", ".join(f"{r['collective']} p={r['ranks']} {r['bytes']} B: {r['wrong']} wrong"
                          for r in bad)
        raise WrongResults(f"results differ from the NumPy reference ({where}); "
                           "nothing was written")


def warmup_calls(rows):
    """The warm-up calls the worker made before each row's samples, as the rows report."""
    counts = {row["warmupCalls"] for row in rows}
    if len(counts) != 1:
        raise WorkerFailed(f"rows report different warm-up counts {sorted(counts)}; "
                           "rerun make bench")
    return counts.pop()


def build_recording(lesson, rows, environment, method, memcpy_gbps, duration_s,
                    cache_bytes=None, load_after=None):
    check_rows(rows)
    recording = header(lesson.id, "sweep", lesson.path(lesson.sweep), environment, lesson.root,
                       extra=[lesson.root / SWEEP_ANALYSIS])
    recording.update(method=method, **analyse(rows, cache_bytes, MEMCPY_BYTES),
                     memcpyGBps=memcpy_gbps, memcpyBytes=MEMCPY_BYTES,
                     memcpyRepeats=MEMCPY_REPEATS, lastLevelCacheBytes=cache_bytes,
                     durationS=duration_s, loadAverage1mAfter=load_after,
                     command=["make", "bench"])
    return recording


def record_sweep(lesson, out, ranks, sizes, plan, measure=None):
    """Measure, check, fit, validate, draw; then move recording, figure and lock entry
    into place together, or nothing.

    `measure(p, sizes, plan)` returns {"backend", "rows"} for one p; tests substitute an
    in-process one. `out` None: the committed files and the lock.
    """
    import numpy

    from scripts.hashes import digest_bytes
    from scripts.outputs import figure_outputs, lock_entry, lock_path, lock_text, read_lock

    measure = measure or (lambda *args: measure_in_subprocess(lesson.sweep, *args,
                                                              root=lesson.root))
    start = time.perf_counter()
    # Other work on this host slows the collectives; the load says how quiet the run was.
    load = os.getloadavg()[0]
    sizes = sizes or list(SIZES)
    memcpy = measure_memcpy_gbps()  # before any worker, so nothing competes for memory
    rows, backend = [], None
    for p in ranks:
        measured = measure(p, sizes, plan)
        rows += measured["rows"]
        backend = measured["backend"]
    # header() adds what every recording says about the host (python, platform, cpus).
    environment = {**backend, "numpy": numpy.__version__, "loadAverage1m": load}
    recording = build_recording(lesson, rows, environment,
                                method_summary(plan, warmup_calls(rows)), memcpy,
                                time.perf_counter() - start, last_level_cache_bytes(),
                                os.getloadavg()[0])
    name = f"recordings/{lesson.id}.sweep.json"
    validate(recording, f"new recording {name}", "make bench")
    text = dumps(recording)
    # The figures drawn from this recording (lessons.toml `figures`), with its renderer.
    figures = [(figure, figure.kind.render(recording)) for figure in figure_outputs(lesson)
               if figure.source == name]
    with Staging() as staging:
        if out is None:
            staging.add(lesson.root / name, text)
            lock = read_lock(lesson.root)
            for figure, svg in figures:
                staging.add(lesson.root / figure.path, svg)
                lock[figure.path] = lock_entry(figure, svg, lesson.root, digest_bytes(text))
            staging.add(lock_path(lesson.root), lock_text(lock))
        else:
            staging.add(out, text)
            for _, svg in figures:
                staging.add(Path(out).with_suffix(".svg"), svg)
        staging.commit(lambda path: print(f"bench: wrote {display(path)}", file=sys.stderr))
    return recording


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path,
                        help="write the recording here and its figure beside it (.svg), "
                             "instead of the committed files")
    parser.add_argument("--ranks", type=int, nargs="+", help="device counts, one process each")
    parser.add_argument("--lesson", help="the lesson whose sweep to measure (default: the "
                                         "first with a sweep in lesson_code/lessons.toml)")
    return parser.parse_args(argv)


# Device counts one sweep worker can simulate (each is one process with p logical CPU
# devices); past 16 the host's cores, not the collectives, are what would be measured.
MAX_RANKS = 16


class UsageError(ValueError):
    """A request bench.py refuses before it measures anything (exit 2)."""


def refuse_what_cannot_work(args, plan):
    ranks = args.ranks or plan["ranks"]
    bad = [p for p in ranks if not 2 <= p <= MAX_RANKS]
    if bad or len(set(ranks)) != len(ranks):
        raise UsageError(f"--ranks {' '.join(map(str, ranks))}: each device count must be "
                         f"2 to {MAX_RANKS}, each once; run `python scripts/bench.py`")
    if args.out is None and sorted(ranks) != sorted(plan["ranks"]):
        # The committed sweep, its figure and the page describe every p of the full plan.
        raise UsageError(f"--ranks {' '.join(map(str, ranks))} measures part of the sweep, "
                         f"which would replace the committed one (p = "
                         f"{', '.join(map(str, plan['ranks']))}); run "
                         f"`python scripts/bench.py --ranks {' '.join(map(str, ranks))} "
                         f"--out build/sweep.json` to write it elsewhere")


def sweep_lesson(lesson_id):
    lessons = [lesson for lesson in load_lessons().values() if lesson.sweep]
    chosen = [lesson for lesson in lessons if lesson_id in (None, lesson.id)]
    if not chosen:
        raise RegistryError(f"no lesson {'with a sweep' if lesson_id is None else lesson_id!r}"
                            f" in lesson_code/lessons.toml has a `sweep` module")
    return chosen[0]


def main(argv=None, plan=FULL):
    """`plan`: ranks, sizes (None: every size) and the timing keys; tests pass a small one."""
    args = parse_args(argv)
    stop_on_signals()  # Ctrl-C and SIGTERM: the worker is killed, nothing is moved
    try:
        refuse_what_cannot_work(args, plan)
    except UsageError as error:
        print(f"bench.py: {error}", file=sys.stderr)
        return 2
    try:
        lesson = sweep_lesson(args.lesson)
        with exclusive_run(" ".join(["python scripts/bench.py", *(argv or sys.argv[1:])])):
            recording = record_sweep(lesson, args.out, args.ranks or plan["ranks"],
                                     plan["sizes"], {key: plan[key] for key in TIMING_KEYS})
    except (WrongResults, WorkerFailed, RegistryError, RecordingError, LockError,
            RunLocked, ClosureError) as error:
        print(f"bench.py: {error}", file=sys.stderr)
        return 1
    except Interrupted as signal_:
        print(f"bench.py: {signal_}; {signal_.outcome}", file=sys.stderr)
        return signal_.exit_status
    except ValueError as error:  # the fit: times that do not grow with size
        print(f"bench.py: the sweep cannot be fitted ({error}); nothing was written",
              file=sys.stderr)
        return 1
    except OSError as error:  # the figure or the lock could not be read
        print(f"bench.py: {error.filename or 'a file'}: {error.strerror or error}; nothing "
              f"was written", file=sys.stderr)
        return 1
    print(f"bench: measured in {recording['durationS']:.0f} s (single-thread memcpy "
          f"{recording['memcpyGBps']:.1f} GB/s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Message-size and rank sweep of a lesson's collectives, nccl-tests style (`make bench`).

    python scripts/bench.py                 # full sweep: p = 2, 4, 8 x 12 sizes, ~2 minutes
    python scripts/bench.py --quick --out /tmp/sweep.json   # p = 4, 3 sizes (tests)

The measured programs are the lesson's `sweep` module (lesson_code/lessons.toml). Each p
runs in a fresh interpreter (`--worker`), because JAX fixes the number of logical devices
at start-up. The parent measures a memcpy for scale, fits, validates, draws the figure,
and only then moves the recording, the figure and the lock entry into place together.
`python scripts/record.py --check` says when the sweep is stale; a change to the figure's
renderer needs only `python scripts/record.py --render-only`.
"""
import sys
from pathlib import Path

# `python scripts/bench.py` puts scripts/ on sys.path; the package lives one level up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import importlib
import json
import math
import os
import platform
import signal
import subprocess
import time

import numpy as np

from scripts import display
from scripts.interrupts import Interrupted, stop_on_signals
from scripts.lessons import RegistryError, load_lessons
from scripts.recordings import RecordingError, Staging, dumps, header, validate
from scripts.sweep_model import (COLLECTIVES, RING_COLLECTIVES, SIZES, XLA_COLLECTIVES,
                                 MEMCPY_BYTES, MEMCPY_REPEATS, algbw_gbps, busbw_gbps,
                                 fit_below_cache, fit_steps, format_bytes,
                                 measure_memcpy_gbps)

# samples: at most, per row; a row gets fewer (never under minSamples) when that many
# would take longer than rowBudgetS, which keeps the 32 MiB rows from dominating the run.
FULL = {"ranks": [2, 4, 8], "sizes": None, "samples": 15, "minSamples": 5, "rowBudgetS": 0.6,
        "minSampleMs": 1.0}
QUICK = {"ranks": [4], "sizes": [8, 8192, 2**20], "samples": 5, "minSamples": 3,
         "rowBudgetS": 0.2, "minSampleMs": 0.5}
TIMING_KEYS = ("samples", "minSamples", "rowBudgetS", "minSampleMs")


class WorkerFailed(RuntimeError):
    pass


class ProgressBar:
    """One self-overwriting line per worker, on stderr because stdout carries the rows."""

    def __init__(self, total, label, width=30):
        self.total, self.label, self.width, self.done = total, label, width, 0

    def step(self, text):
        self.done += 1
        filled = self.width * self.done // self.total
        bar = "#" * filled + "." * (self.width - filled)
        end = "\n" if self.done == self.total else ""
        print(f"\r{self.label} [{bar}] {self.done}/{self.total} {text:<40}", end=end,
              file=sys.stderr, flush=True)


class WrongResults(RuntimeError):
    """A collective returned values that differ from NumPy: nothing may be recorded."""


def run_worker(config):
    """Inside a fresh interpreter: measure one p and print the rows as JSON on stdout."""
    # Ctrl-C reaches every process of the terminal's group: the parent answers it in one
    # line and kills this worker, which would otherwise print a traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sweep_measure = importlib.import_module(config["module"])
    sweep_measure.configure_devices(config["ranks"])
    import jax

    if len(jax.devices()) != config["ranks"]:
        raise SystemExit(f"bench.py --worker: asked for {config['ranks']} devices, JAX has "
                         f"{len(jax.devices())}; was a device touched before configure_devices?")
    sizes = sweep_measure.sizes_for(config["sizes"], config["ranks"])
    progress = ProgressBar(len(sizes) * len(sweep_measure.PROGRAMS), f"p={config['ranks']}")
    rows = sweep_measure.measure_ranks(jax.devices(), config["sizes"], config["plan"],
                                       progress.step)
    print(json.dumps({"backend": sweep_measure.describe_backend(), "rows": rows}))


def measure_in_subprocess(module, ranks, sizes, plan):
    config = {"module": module, "ranks": ranks, "sizes": sizes, "plan": plan}
    try:
        done = subprocess.run([sys.executable, __file__, "--worker", json.dumps(config)],
                              stdout=subprocess.PIPE, text=True)
    except BaseException:  # Ctrl-C, SIGTERM: the worker is killed mid-way through its bar
        print(file=sys.stderr)  # so the one error line starts a line of its own
        raise
    if done.returncode:
        raise WorkerFailed(f"the p={ranks} worker exited with {done.returncode} (its error is "
                           "above); nothing was written")
    return json.loads(done.stdout.splitlines()[-1])


def warmup_calls(rows):
    """The warm-up calls the worker made before each row's samples, as the rows report."""
    counts = {row["warmupCalls"] for row in rows}
    if len(counts) != 1:
        raise WorkerFailed(f"rows report different warm-up counts {sorted(counts)}; "
                           "rerun make bench")
    return counts.pop()


def method_summary(plan, warmups):
    return {
        "warmupCalls": warmups,
        **{key: plan[key] for key in TIMING_KEYS},
        "timing": "jit(shard_map(...)) lowered and compiled, inputs placed, before timing; "
                  "calls per sample doubled until a trial, then the median sample, lasts "
                  "minSampleMs; samples per row: as many as fit in rowBudgetS, between "
                  "minSamples and samples; "
                  "block_until_ready on every call; per-call us = sample time / calls",
        "check": "inputs are small integers, so float32 sums are exact: wrong counts values "
                 "!= NumPy on every device's copy, for the warm-up and the last timed call",
        "bandwidth": "nccl-tests: algbw = S / median time; busbw = algbw * 2(p-1)/p for "
                     "all_reduce, reduce_scatter_all_gather and ring_all_reduce, "
                     "* (p-1)/p otherwise",
        "fit": "t = alpha + S / beta on the medians of the sizes below lastLevelCacheBytes, "
               "least squares in relative error",
        "steps": "per p: alpha = dispatch + steps * per-step through every algorithm's "
                 "alpha; steps 1 for XLA's collectives, 2 for rs+ag, and for the ring "
                 "p - 1 (or log2 p, the alternative) per phase",
    }


def last_level_cache_bytes():
    """The largest CPU cache Linux reports for cpu0, in bytes; None where it reports none."""
    sizes = []
    for entry in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = entry.read_text().strip()
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
        sizes.append(int(text.rstrip("KMG")) * scale)
    return max(sizes, default=None)


def describe_host(backend, load):
    import numpy

    return {**backend, "numpy": numpy.__version__, "python": platform.python_version(),
            "platform": platform.platform(), "cpuCount": os.cpu_count(), "loadAverage1m": load}


def check_rows(rows):
    bad = [r for r in rows if r["wrong"]]
    if bad:
        where = ", ".join(f"{r['collective']} p={r['ranks']} {r['bytes']} B: {r['wrong']} wrong"
                          for r in bad)
        raise WrongResults(f"results differ from the NumPy reference ({where}); "
                           "nothing was written")


def with_bandwidths(row):
    seconds = row["medianUs"] * 1e-6
    return {**row,
            "algbwGBps": algbw_gbps(row["bytes"], seconds),
            "busbwGBps": busbw_gbps(row["collective"], row["ranks"], row["bytes"], seconds)}


def by_series(rows, key="medianUs"):
    """{(collective, ranks): {bytes: row[key]}}."""
    series = {}
    for row in rows:
        series.setdefault((row["collective"], row["ranks"]), {})[row["bytes"]] = row[key]
    return series


def fit_rows(rows, cache_bytes):
    """fits[collective][str(ranks)], string keys so a page can address fits.all_reduce.4."""
    fits = {}
    for (collective, ranks), points in sorted(by_series(rows).items()):
        nbytes = sorted(points)
        seconds = [points[b] * 1e-6 for b in nbytes]
        fits.setdefault(collective, {})[str(ranks)] = fit_below_cache(nbytes, seconds,
                                                                      cache_bytes)
    return {c: fits[c] for c in COLLECTIVES if c in fits}


RATIOS = {  # name: (numerator, denominator, what the ring model predicts)
    "arOverRs": ("all_reduce", "reduce_scatter", 2.0),
    "agOverRs": ("all_gather", "reduce_scatter", 1.0),
    "ringArOverRingRs": ("ring_all_reduce", "ring_reduce_scatter", 2.0),
}


def time_ratios(rows, fits):
    """Per p and size, time of one collective over another's, against the ring model's
    2 (all-reduce moves twice a reduce-scatter's bytes) and 1 (all-gather the same); and
    the median ratio over the sizes where both fits put latency ahead (S < n1/2)."""
    series = by_series(rows)
    ranks = sorted({row["ranks"] for row in rows})
    by_ranks = {}
    for p in ranks:
        sizes = sorted(series.get(("reduce_scatter", p), {}))
        entry = {"bytes": sizes}
        for name, (top, bottom, _) in RATIOS.items():
            if (top, p) in series and (bottom, p) in series:
                entry[name] = [series[top, p][b] / series[bottom, p][b] for b in sizes]
                n_half = min(fits[c][str(p)]["nHalfBytes"] for c in (top, bottom))
                small = [r for b, r in zip(sizes, entry[name]) if b < n_half]
                entry[name + "BelowNHalf"] = float(np.median(small)) if small else None
        by_ranks[str(p)] = entry
    at_largest = {}
    for name, (_, _, model) in RATIOS.items():
        values = [entry[name][-1] for entry in by_ranks.values() if name in entry]
        if values:
            at_largest[name] = {"min": min(values), "max": max(values),
                                "versusModel": versus_model(values, model)}
    largest = max(row["bytes"] for row in rows)
    fastest = all(min(XLA_COLLECTIVES, key=lambda c: series[c, p][largest]) == "reduce_scatter"
                  for p in ranks if all((c, p) in series for c in XLA_COLLECTIVES))
    # XLA's collectives are one rendezvous each, so while latency dominates their time
    # ratios should be close to 1 whatever the bytes.
    latency_ratios = [entry[name] for entry in by_ranks.values()
                      for name in ("arOverRsBelowNHalf", "agOverRsBelowNHalf")
                      if entry.get(name) is not None]
    return {"model": {name: model for name, (_, _, model) in RATIOS.items()},
            "largestBytes": largest, "byRanks": by_ranks, "atLargest": at_largest,
            "reduceScatterAtLargest": ("the fastest of XLA's collectives at every p" if fastest
                                       else "not the fastest of XLA's collectives at every p"),
            "xlaBelowNHalfVersusOne": (versus_model(latency_ratios, 1.0) if latency_ratios
                                       else "not measured against")}


def versus_model(values, model, tolerance=1.25):
    """In words, for the page: are the measured ratios within 25 % of the model's?"""
    close = [model / tolerance <= v <= model * tolerance for v in values]
    return "close to" if all(close) else "far from" if not any(close) else "around"


ONE_P = "is measured at one p only"


def trend(values):
    """'falls', 'rises' or 'neither rises nor falls steadily' over values in order of p."""
    steps = [b - a for a, b in zip(values, values[1:])]
    if not steps:
        return ONE_P
    if all(d < 0 for d in steps):
        return "falls"
    if all(d > 0 for d in steps):
        return "rises"
    return "neither rises nor falls steadily"


def largest_against_cache(largest, cache_bytes):
    """Where the largest size stands against the cache, in words: only a size past the
    cache can show what main memory does, and the sizes and the host's cache both vary."""
    if not cache_bytes:
        return "of unknown size against the last-level cache"
    if largest == cache_bytes:
        return "the size of the last-level cache, not past it"
    if largest < cache_bytes:
        return "smaller than the last-level cache"
    return f"{largest / cache_bytes:.3g} times the last-level cache"


def size_labels(rows, cache_bytes):
    """Sizes in words, so the page need not type them: the smallest moved at each p (the
    requested 8 B rounds up to p floats), the largest, the cache the fits stop at, and the
    buffer the memcpy for scale copies."""
    ranks = sorted({row["ranks"] for row in rows})
    largest = max(row["bytes"] for row in rows)
    return {"smallest": {str(p): format_bytes(min(r["bytes"] for r in rows if r["ranks"] == p))
                         for p in ranks},
            "largest": format_bytes(largest),
            "lastLevelCache": format_bytes(cache_bytes) if cache_bytes else "unknown",
            "largestAgainstCache": largest_against_cache(largest, cache_bytes),
            "memcpy": format_bytes(MEMCPY_BYTES)}


def busbw_peaks(rows):
    """peaks[collective][str(ranks)]: the highest busbw over all sizes."""
    peaks = {}
    for (collective, ranks), values in sorted(by_series(rows, "busbwGBps").items()):
        peaks.setdefault(collective, {})[str(ranks)] = max(values.values())
    return {c: {**peaks[c], "withRanks": trend([peaks[c][p] for p in sorted(peaks[c], key=int)])}
            for c in COLLECTIVES if c in peaks}


def verdict(ring_residual, log_residual, ranks, noisy=0.5):
    """Which step count the alphas support, in words a page can print."""
    if ranks - 1 == math.log2(ranks):
        return "either (the counts are equal at this p)"
    if min(ring_residual, log_residual) > noisy:
        return "neither: too noisy to say"
    if ring_residual <= log_residual / 2:
        return "p - 1 steps per phase"
    if log_residual <= ring_residual / 2:
        return "log2 p steps per phase"
    return "no clear winner: too noisy to say"


def step_fits(fits):
    """Per p, alpha against dependent steps, counting the ring's phase as p - 1 steps (what
    it does) and as log2 p (halving-doubling's count), so the page can say which fits."""
    result = {}
    ranks = sorted({int(p) for by_p in fits.values() for p in by_p})
    for p in ranks:
        collectives = [c for c in fits if str(p) in fits[c]]
        if not any(c in RING_COLLECTIVES for c in collectives):
            continue
        alphas = [fits[c][str(p)]["alphaUs"] * 1e-6 for c in collectives]
        entry = {"ringStepsPerPhase": p - 1, "halvingDoublingSteps": math.log2(p)}
        for name, count in (("ringCount", None), ("logCount", math.log2)):
            dispatch, per_step, worst = fit_steps(alphas, collectives, p, count)
            entry[name] = {"dispatchUs": dispatch * 1e6, "perStepUs": per_step * 1e6,
                           "maxRelResidual": worst}
        # What the ring-count line says the ring all-reduce / reduce-scatter time ratio
        # must be while latency dominates: (dispatch + 2(p-1) steps) / (dispatch + p-1).
        line = entry["ringCount"]
        entry["ringArOverRsPredicted"] = ((line["dispatchUs"] + 2 * (p - 1) * line["perStepUs"])
                                          / (line["dispatchUs"] + (p - 1) * line["perStepUs"]))
        entry["ringAlphaOverXla"] = (fits["ring_reduce_scatter"][str(p)]["alphaUs"]
                                     / fits["reduce_scatter"][str(p)]["alphaUs"])
        entry["supports"] = verdict(entry["ringCount"]["maxRelResidual"],
                                    entry["logCount"]["maxRelResidual"], p)
        result[str(p)] = entry
    return result


def step_summary(steps):
    """How the cost of one step moves as p grows, in words for the page."""
    return {"perStepWithRanks": trend([steps[p]["ringCount"]["perStepUs"]
                                       for p in sorted(steps, key=int)])}


def fit_summary(fits, lesson_bytes=32):
    """Ranges over every fit, for sentences that speak of all of them at once."""
    every = [fit for by_p in fits.values() for fit in by_p.values()]
    alpha_trends = {trend([by_p[p]["alphaUs"] for p in sorted(by_p, key=int)])
                    for by_p in fits.values()}

    def span(values):
        return {"min": min(values), "max": max(values)}
    return {"maxRelResidual": span([f["maxRelResidual"] for f in every]),
            "nHalfOrderKiB": span([f["nHalfOrderKiB"] for f in every]),
            "largestOverFit": span([f["largestOverFit"] for f in every]),
            "alphaWithRanks": ("grows with p for every program" if alpha_trends == {"rises"}
                               else "does not grow with p for every program"),
            # The transfer term S / beta of the lesson's 32-byte gradient, as a share of alpha.
            "lessonBytes": lesson_bytes,
            "lessonTransferShare": max(lesson_bytes / (f["betaGBps"] * 1e3) / f["alphaUs"]
                                       for f in every if f["alphaUs"] > 0)}


def build_recording(lesson, rows, environment, method, memcpy_gbps, duration_s,
                    cache_bytes=None, load_after=None):
    check_rows(rows)
    recording = header(lesson.id, "sweep", lesson.path(lesson.sweep), environment, lesson.root)
    fits = fit_rows(rows, cache_bytes)
    steps = step_fits(fits)
    recording.update(method=method, rows=[with_bandwidths(r) for r in rows],
                     memcpyGBps=memcpy_gbps, memcpyBytes=MEMCPY_BYTES,
                     memcpyRepeats=MEMCPY_REPEATS, lastLevelCacheBytes=cache_bytes, fits=fits,
                     fitSummary=fit_summary(fits),
                     steps=steps, stepSummary=step_summary(steps),
                     ratios=time_ratios(rows, fits),
                     busbwPeakGBps=busbw_peaks([with_bandwidths(r) for r in rows]),
                     sizeLabels=size_labels(rows, cache_bytes),
                     durationS=duration_s, loadAverage1mAfter=load_after,
                     command=["make", "bench"])
    return recording


def record_sweep(lesson, out, ranks, sizes, plan, measure=None):
    """Measure, check, fit, validate, draw; then move recording, figure and lock entry
    into place together, or nothing.

    `measure(p, sizes, plan)` returns {"backend", "rows"} for one p; tests substitute an
    in-process one. `out` None: the committed files and the lock.
    """
    from scripts.outputs import figure_outputs, lock_entry, lock_text, read_lock

    measure = measure or (lambda *args: measure_in_subprocess(lesson.sweep, *args))
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
    recording = build_recording(lesson, rows, describe_host(backend, load),
                                method_summary(plan, warmup_calls(rows)), memcpy,
                                time.perf_counter() - start,
                                last_level_cache_bytes(), os.getloadavg()[0])
    name = f"recordings/{lesson.id}.sweep.json"
    validate(recording, f"new recording {name}", "make bench")
    text = dumps(recording)
    figure = next(o for o in figure_outputs(lesson) if o.source == name)
    from scripts.figures.sweep import render

    svg = render(recording)
    with Staging() as staging:
        if out is None:
            import hashlib

            staging.add(lesson.root / name, text)
            staging.add(lesson.root / figure.path, svg)
            lock = read_lock(lesson.root)
            lock[figure.path] = lock_entry(figure, svg, lesson.root,
                                           hashlib.sha256(text.encode()).hexdigest())
            staging.add(lesson.root / "recordings" / "outputs.lock.json", lock_text(lock))
        else:
            staging.add(out, text)
            staging.add(Path(out).with_suffix(".svg"), svg)
        staging.commit(lambda path: print(f"bench: wrote {display(path)}", file=sys.stderr))
    return recording


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="p=4, 3 sizes, 5 samples (tests)")
    parser.add_argument("--out", type=Path,
                        help="write the recording here and its figure beside it (.svg), "
                             "instead of the committed files")
    parser.add_argument("--ranks", type=int, nargs="+", help="device counts, one process each")
    parser.add_argument("--lesson", help="the lesson whose sweep to measure (default: the "
                                         "first with a sweep in lesson_code/lessons.toml)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick and args.out is None:
        parser.error("--quick records a partial sweep; give --out PATH so it cannot replace "
                     "the committed sweep")
    return args


def sweep_lesson(lesson_id):
    lessons = [lesson for lesson in load_lessons().values() if lesson.sweep]
    chosen = [lesson for lesson in lessons if lesson_id in (None, lesson.id)]
    if not chosen:
        raise RegistryError(f"no lesson {'with a sweep' if lesson_id is None else lesson_id!r}"
                            f" in lesson_code/lessons.toml has a `sweep` module")
    return chosen[0]


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        run_worker(json.loads(args.worker))
        return 0
    plan = QUICK if args.quick else FULL
    stop_on_signals()  # Ctrl-C and SIGTERM: the worker is killed, nothing is moved
    try:
        lesson = sweep_lesson(args.lesson)
        recording = record_sweep(lesson, args.out, args.ranks or plan["ranks"],
                                 plan["sizes"], {key: plan[key] for key in TIMING_KEYS})
    except (WrongResults, WorkerFailed, RegistryError, RecordingError) as error:
        print(f"bench.py: {error}", file=sys.stderr)
        return 1
    except Interrupted as signal_:
        print(f"bench.py: {signal_}; every earlier file is as it was", file=sys.stderr)
        return signal_.exit_status
    print(f"bench: measured in {recording['durationS']:.0f} s (single-thread memcpy "
          f"{recording['memcpyGBps']:.1f} GB/s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

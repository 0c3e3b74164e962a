"""Message-size and rank sweep of a lesson's collectives, nccl-tests style (`make bench`).

    python scripts/bench.py                 # full sweep: p = 2, 4, 8 x 12 sizes, ~1 minute
    python scripts/bench.py --quick --out /tmp/sweep.json   # p = 4, 3 sizes (tests)

The measured programs are the lesson's `sweep` module (lesson_code/lessons.toml). Each p
runs in a fresh interpreter (`--worker`), because JAX fixes the number of logical devices
at start-up. The parent measures the memcpy ceiling, fits, validates, draws the figure,
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
import os
import platform
import signal
import subprocess
import time

from scripts import display
from scripts.interrupts import Interrupted, stop_on_signals
from scripts.lessons import RegistryError, load_lessons
from scripts.recordings import RecordingError, Staging, dumps, header, validate
from scripts.sweep_model import (COLLECTIVES, SIZES, algbw_gbps, busbw_gbps, fit_alpha_beta,
                                 max_relative_residual, measure_memcpy_gbps)

FULL = {"ranks": [2, 4, 8], "sizes": None, "samples": 21, "minSampleMs": 1.0}
QUICK = {"ranks": [4], "sizes": [8, 8192, 2**20], "samples": 5, "minSampleMs": 0.5}


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
    steps = len(config["sizes"]) * len(sweep_measure.PROGRAMS)
    progress = ProgressBar(steps, f"p={config['ranks']}")
    rows = sweep_measure.measure_ranks(jax.devices(), config["sizes"], config["samples"],
                                       config["minSampleMs"] / 1e3, progress.step)
    print(json.dumps({"backend": sweep_measure.describe_backend(), "rows": rows}))


def measure_in_subprocess(module, ranks, sizes, samples, min_sample_ms):
    config = {"module": module, "ranks": ranks, "sizes": sizes, "samples": samples,
              "minSampleMs": min_sample_ms}
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


def method_summary(samples, min_sample_ms):
    return {
        "warmupCalls": 1,
        "minSampleMs": min_sample_ms,
        "samples": samples,
        "timing": "jit(shard_map(...)) lowered and compiled, inputs placed, before timing; "
                  "calls per sample doubled until a trial, then the median sample, lasts "
                  "minSampleMs; "
                  "block_until_ready on every call; per-call us = sample time / calls",
        "check": "inputs are small integers, so float32 sums are exact: wrong counts values "
                 "!= NumPy on every device's copy, for the warm-up and the last timed call",
        "bandwidth": "nccl-tests: algbw = S / median time; busbw = algbw * 2(p-1)/p for "
                     "all_reduce and reduce_scatter_all_gather, * (p-1)/p otherwise",
        "fit": "t = alpha + S / beta on the medians, least squares in relative error",
    }


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


def fit_rows(rows):
    """fits[collective][str(ranks)], string keys so a page can address fits.all_reduce.4."""
    series = {}
    for row in rows:
        series.setdefault((row["collective"], row["ranks"]), []).append(
            (row["bytes"], row["medianUs"] * 1e-6))
    fits = {c: {} for c in COLLECTIVES if any(key[0] == c for key in series)}
    for (collective, ranks), points in sorted(series.items()):
        nbytes, seconds = zip(*points)
        alpha, beta = fit_alpha_beta(nbytes, seconds)
        fits[collective][str(ranks)] = {
            "alphaUs": alpha * 1e6,
            "betaGBps": beta / 1e9,
            "nHalfBytes": alpha * beta,  # where S / beta == alpha
            "nHalfKiB": alpha * beta / 1024,
            "maxRelResidual": max_relative_residual(nbytes, seconds, alpha, beta)}
    return fits


def build_recording(lesson, rows, environment, method, memcpy_gbps, duration_s):
    check_rows(rows)
    recording = header(lesson.id, "sweep", lesson.path(lesson.sweep), environment, lesson.root)
    recording.update(method=method, rows=[with_bandwidths(r) for r in rows],
                     memcpyGBps=memcpy_gbps, fits=fit_rows(rows), durationS=duration_s,
                     command=["make", "bench"])
    return recording


def record_sweep(lesson, out, ranks, sizes, samples, min_sample_ms, measure=None):
    """Measure, check, fit, validate, draw; then move recording, figure and lock entry
    into place together, or nothing.

    `measure(p, sizes, samples, min_sample_ms)` returns {"backend", "rows"} for one p;
    tests substitute an in-process one. `out` None: the committed files and the lock.
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
        measured = measure(p, sizes, samples, min_sample_ms)
        rows += measured["rows"]
        backend = measured["backend"]
    recording = build_recording(lesson, rows, describe_host(backend, load),
                                method_summary(samples, min_sample_ms),
                                memcpy, time.perf_counter() - start)
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
                                 plan["sizes"], plan["samples"], plan["minSampleMs"])
    except (WrongResults, WorkerFailed, RegistryError, RecordingError) as error:
        print(f"bench.py: {error}", file=sys.stderr)
        return 1
    except Interrupted as signal_:
        print(f"bench.py: {signal_}; every earlier file is as it was", file=sys.stderr)
        return signal_.exit_status
    print(f"bench: measured in {recording['durationS']:.0f} s (memcpy ceiling "
          f"{recording['memcpyGBps']:.1f} GB/s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

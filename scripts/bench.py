"""Message-size and rank sweep of the lesson's collectives, nccl-tests style.

    python scripts/bench.py                 # full sweep: p = 2, 4, 8 x 12 sizes, ~1 minute
    python scripts/bench.py --check         # exit 1 if the committed sweep or figure is stale
    python scripts/bench.py --render-only   # redraw the figure from the recording
    python scripts/bench.py --quick --out /tmp/sweep.json   # p = 4, 3 sizes (tests)

Each p runs in a fresh interpreter (`--worker`), because JAX fixes the number of logical
devices at start-up. The parent measures the memcpy ceiling, fits, validates and writes.
Only the standard library is imported at the top, so --check starts neither JAX nor
matplotlib.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from sweep_freshness import FIGURE, FIX, RECORDING, stale_reasons

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


def run_worker(config):
    """Inside a fresh interpreter: measure one p and print the rows as JSON on stdout."""
    import sweep_measure

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


def measure_in_subprocess(ranks, sizes, samples, min_sample_ms):
    config = {"ranks": ranks, "sizes": sizes, "samples": samples, "minSampleMs": min_sample_ms}
    done = subprocess.run([sys.executable, __file__, "--worker", json.dumps(config)],
                          stdout=subprocess.PIPE, text=True)
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
                  "calls per sample doubled until a trial, then the median sample, lasts minSampleMs; "
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


def record_sweep(out, figure, ranks, sizes, samples, min_sample_ms, measure=None):
    """Measure, check, fit, validate; then write the figure and the recording, or nothing.

    `measure(p, sizes, samples, min_sample_ms)` returns {"backend", "rows"} for one p;
    tests substitute an in-process one.
    """
    from sweep_figure import render_sweep_svg
    from sweep_model import SIZES, measure_memcpy_gbps
    from recordings import write_atomically
    from sweep_record import build_recording, recording_text, validate

    measure = measure or measure_in_subprocess
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
    recording = build_recording(rows, describe_host(backend, load),
                                method_summary(samples, min_sample_ms),
                                memcpy, time.perf_counter() - start)
    validate(recording)
    svg = render_sweep_svg(recording)
    write_atomically(figure, svg)
    write_atomically(out, recording_text(recording))
    return recording


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="p=4, 3 sizes, 5 samples (tests)")
    parser.add_argument("--out", type=Path, help=f"recording path (default {RECORDING})")
    parser.add_argument("--figure", type=Path,
                        help=f"figure path (default {FIGURE}, or next to --out when given)")
    parser.add_argument("--ranks", type=int, nargs="+", help="device counts, one process each")
    parser.add_argument("--check", action="store_true", help="exit 1 if the sweep is stale")
    parser.add_argument("--render-only", action="store_true", help="redraw the figure only")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick and args.out is None and not (args.check or args.render_only):
        parser.error("--quick records a partial sweep; give --out PATH so it cannot replace "
                     f"the committed {RECORDING.name}")
    args.figure = args.figure or (args.out.parent / FIGURE.name if args.out else FIGURE)
    args.out = args.out or RECORDING
    return args


def fix_command(args):
    """The command that rewrites the files --check looked at."""
    options = [f"--out {args.out}"] if args.out != RECORDING else []
    options += [f"--figure {args.figure}"] if args.figure != FIGURE else []
    return " ".join([FIX, *options])


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        run_worker(json.loads(args.worker))
        return 0
    if args.check:
        reasons = stale_reasons(args.out, args.figure)
        if reasons:
            print(f"{'; '.join(reasons)}; run: {fix_command(args)}", file=sys.stderr)
            return 1
        return 0
    if args.render_only:
        from sweep_figure import render_sweep_svg
        from recordings import write_atomically

        write_atomically(args.figure, render_sweep_svg(json.loads(args.out.read_text())))
        return 0

    from sweep_record import WrongResults

    plan = QUICK if args.quick else FULL
    try:
        recording = record_sweep(args.out, args.figure, args.ranks or plan["ranks"],
                                 plan["sizes"], plan["samples"], plan["minSampleMs"])
    except (WrongResults, WorkerFailed) as error:
        print(f"bench.py: {error}", file=sys.stderr)
        return 1
    print(f"wrote {args.out} and {args.figure} in {recording['durationS']:.0f} s "
          f"(memcpy ceiling {recording['memcpyGBps']:.1f} GB/s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

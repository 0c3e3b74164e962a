"""The sweep's plan (FULL) and measurements: each p in a fresh interpreter (`python -m
scripts.sweep.measure CONFIG`; JAX fixes its device count at start-up), on p logical CPU
devices or the first p chips, printing its rows as one JSON line; and, for scale, a memcpy
and the L2 cache size.
"""
import importlib
import json
import signal
import subprocess
import sys
import timeit
from pathlib import Path

import numpy as np

from scripts import ROOT
from scripts.cli import UsageError
from scripts.host import host_load

# blocks: every p is measured this many times, in turns (p = 2, 4, 8, 2, 4, 8, ...), each
# block in a fresh worker, so drift and a busy spell fall on every p and show as spread
# between blocks; samples: per row and block.
FULL = {"ranks": [2, 4, 8], "sizes": None, "blocks": 5, "samples": 3, "minSampleMs": 1.0}
TIMING_KEYS = ("samples", "minSampleMs")


def tpu_ranks(plan, lesson):
    """The plan's device counts that a VM with the lesson's `devices` chips holds."""
    fitting = [p for p in plan["ranks"] if p <= lesson.devices]
    if not fitting:
        raise UsageError(f"--platform tpu: {lesson.id} records on {lesson.devices} chip(s), "
                         f"and the sweep's smallest p is {min(plan['ranks'])}; a TPU sweep "
                         f"needs a lesson with at least {min(plan['ranks'])} `devices`")
    return fitting


class WorkerFailed(RuntimeError):
    """A worker ended without rows; str() is one line."""


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
    # Ctrl-C reaches every process of the terminal's group: the parent answers it in one
    # line and kills this worker, which would otherwise print a traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sweep_programs = importlib.import_module(config["module"])
    devices = worker_devices(sweep_programs, config["ranks"], config.get("platform", "cpu"))
    requested = config["sizes"] or sweep_programs.SIZES  # None: every size the module sweeps
    sizes = sweep_programs.sizes_for(requested, config["ranks"])
    # Two rows per program and size: one collective per call, and the looped variant.
    progress = ProgressBar(2 * len(sizes) * len(sweep_programs.PROGRAMS),
                           f"block {config['block'] + 1} p={config['ranks']}")
    before = host_load()
    rows = sweep_programs.measure_ranks(devices, requested, config["plan"],
                                        config["block"], progress.step)
    after = host_load()
    # Once per p, after its first block: what donating the input does at the largest size.
    donation = sweep_programs.donation_probe(devices, sizes[-1][1]) \
        if config["block"] == 0 else None
    # Last, since it changes this process's allocator for good: the largest size again.
    allocator = sweep_programs.allocator_probe(devices, sizes[-1][1], config["plan"],
                                               config["block"])
    print(json.dumps({"backend": sweep_programs.describe_backend(), "rows": rows,
                      "programs": sweep_programs.program_facts(config["ranks"]),
                      "host": {"before": before, "after": after}, "donation": donation,
                      "allocator": allocator}))


def worker_devices(sweep_programs, ranks, platform):
    """The p devices this worker measures: p logical CPU devices (the sweep module's
    configure_devices), or the first p chips; SystemExit with one line when the machine
    cannot give them."""
    import jax

    if platform == "cpu":
        sweep_programs.configure_devices(ranks)
    else:  # chips are what the machine has: choose the platform, make no CPU devices
        jax.config.update("jax_platforms", platform)

    try:
        devices = jax.devices()
    except RuntimeError as error:  # no such backend here: "Unable to initialize backend"
        said = str(error).strip().splitlines()[0].split(" (set JAX_PLATFORMS")[0]
        said = said if len(said) <= 200 else said[:197] + "..."
        raise SystemExit(f"sweep worker: no {platform.upper()} backend on this machine "
                         f"({said}); run bench.py without --platform {platform}, or on a "
                         f"{platform.upper()} VM (python scripts/tpu_job.py)") from None
    if platform == "cpu" and len(devices) != ranks:
        raise SystemExit(f"sweep worker: asked for {ranks} devices, JAX has "
                         f"{len(devices)}; was a device touched before configure_devices?")
    if len(devices) < ranks:
        raise SystemExit(f"sweep worker: p={ranks} needs {ranks} {platform.upper()} devices "
                         f"and this machine has {len(devices)}; measure p up to "
                         f"{len(devices)} (--ranks)")
    return devices[:ranks]


def measure_in_subprocess(module, ranks, sizes, plan, block=0, root=ROOT, platform="cpu"):
    config = {"module": module, "ranks": ranks, "sizes": sizes, "plan": plan, "block": block,
              "platform": platform}
    try:
        done = subprocess.run([sys.executable, "-m", "scripts.sweep.measure",
                               json.dumps(config)], cwd=root, stdout=subprocess.PIPE, text=True)
    except BaseException:  # Ctrl-C, SIGTERM: the worker is killed mid-way through its bar
        print(file=sys.stderr)  # so the one error line starts a line of its own
        raise
    if done.returncode:
        raise WorkerFailed(f"the p={ranks} worker exited with {done.returncode} (its error is "
                           "above); nothing was written")
    try:
        return json.loads(done.stdout.splitlines()[-1])
    except (IndexError, ValueError):
        raise WorkerFailed(f"the p={ranks} worker printed no rows (its last stdout line "
                           f"must be their JSON); nothing was written") from None


def l2_cache_bytes():
    """The level-2 cache Linux reports for cpu0, in bytes; None where it reports none. On
    x86 it is a core's own, where the L3 is the whole socket's: a small virtual machine
    reports the socket's L3, which it shares with other tenants."""
    for entry in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        if (entry / "level").read_text(encoding="utf-8").strip() == "2":
            text = (entry / "size").read_text(encoding="utf-8").strip()  # "2048K"
            return int(text.rstrip("KMG")) * {"K": 2**10, "M": 2**20}.get(text[-1:], 1)
    return None


# The memcpy for scale: one buffer this large, copied this many times, the best kept.
MEMCPY_BYTES = 256 * 2**20
MEMCPY_REPEATS = 5


def measure_memcpy_gbps(nbytes=MEMCPY_BYTES, repeats=MEMCPY_REPEATS):
    """Best-of-`repeats` bytes copied per second by one thread, for scale, not a bound:
    buffer size / time, as memcpy benchmarks count, both buffers written first (no faults)."""
    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.zeros_like(src)
    best = min(timeit.repeat(lambda: np.copyto(dst, src), number=1, repeat=repeats))
    return nbytes / best / 1e9


if __name__ == "__main__":
    run_worker(json.loads(sys.argv[1]))

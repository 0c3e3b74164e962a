"""The host a measurement runs on: its cores and load, read once before the run starts,
and the warning before a measurement starts on a host that is already busy.

A timing taken while other work keeps the cores busy also measures that work; the
recording keeps the readings (the analysis then says so on the page), and the commands
that measure say so before they start, so a maintainer can wait for a quieter moment.
"""
import os
import sys

import psutil

# What other work does now: the load average, unlike this, decays over a minute, so a run
# that has just ended would still count. Half a second, before anything of ours runs.
BUSY_WINDOW_S = 0.5


def host_load():
    """{"cores", "loadAverage1m"}: one reading, as recordings store it."""
    return {"cores": os.cpu_count(), "loadAverage1m": round(os.getloadavg()[0], 2)}


def host_at_start():
    """The reading a measurement stores before anything of its own runs: the load, and
    the cores other work keeps busy right now (`busyCores`)."""
    busy = psutil.cpu_percent(interval=BUSY_WINDOW_S) / 100 * os.cpu_count()
    return {**host_load(), "busyCores": round(busy, 2)}


def warn_if_busy(what, reading=None):
    """One line on stderr when the load already exceeds the cores; True if it did."""
    reading = reading or host_load()
    busy = reading["loadAverage1m"] > reading["cores"]
    if busy:
        print(f"{what}: warning: the load average is {reading['loadAverage1m']:.1f} on "
              f"{reading['cores']} cores; the times will include other work, and the page "
              f"will say so (measure on a quiet machine for a cleaner run)", file=sys.stderr)
    return busy

"""The host a measurement runs on, read once before it starts, and a warning when it is
already busy: a timing taken then also measures that other work (the page says so).
"""
import os
import sys

import psutil

# Busy cores now: the load average decays over a minute, so a run just ended would count.
BUSY_WINDOW_S = 0.5


def host_load():
    """{"cores", "loadAverage1m"}, as recordings store it."""
    return {"cores": os.cpu_count(), "loadAverage1m": round(os.getloadavg()[0], 2)}


def host_at_start():
    """host_load() and the cores other work keeps busy right now (`busyCores`)."""
    busy = psutil.cpu_percent(interval=BUSY_WINDOW_S) / 100 * os.cpu_count()
    return {**host_load(), "busyCores": round(busy, 2)}


def warn_if_busy(what, reading=None):
    """One line on stderr when the load already exceeds the cores; True if it did."""
    reading = reading or host_load()
    if busy := reading["loadAverage1m"] > reading["cores"]:
        print(f"{what}: warning: the load average is {reading['loadAverage1m']:.1f} on "
              f"{reading['cores']} cores; the times will include other work, and the page "
              f"will say so (measure on a quiet machine for a cleaner run)", file=sys.stderr)
    return busy

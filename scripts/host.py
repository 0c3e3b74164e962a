"""The host a measurement runs on: its cores and load, and the warning before a
measurement starts on a host that is already busy.

A timing taken while the one-minute load average exceeds the cores also measures the
other work; the recording keeps the readings (the analysis then says so on the page),
and the commands that measure say so before they start, so a maintainer can wait for a
quieter moment.
"""
import os
import sys


def host_load():
    """{"cores", "loadAverage1m"}: one reading, as recordings store it."""
    return {"cores": os.cpu_count(), "loadAverage1m": round(os.getloadavg()[0], 2)}


def warn_if_busy(what, reading=None):
    """One line on stderr when the load already exceeds the cores; True if it did."""
    reading = reading or host_load()
    busy = reading["loadAverage1m"] > reading["cores"]
    if busy:
        print(f"{what}: warning: the load average is {reading['loadAverage1m']:.1f} on "
              f"{reading['cores']} cores; the times will include other work, and the page "
              f"will say so (measure on a quiet machine for a cleaner run)", file=sys.stderr)
    return busy

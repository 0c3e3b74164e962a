"""The host a measurement runs on: its cores and load, and the warning before a
measurement starts on a host that is already busy.

A timing taken while the one-minute load average exceeds the cores also measures the
other work; the recording keeps the readings (the analysis then says so on the page),
and the commands that measure say so before they start, so a maintainer can wait for a
quieter moment.
"""
import os
import sys
import time


def busy_cores(window_s=0.5):
    """How many cores were busy over the last `window_s` seconds, from /proc/stat; None
    where there is no such file. Unlike the load average, which decays over a minute, this
    says what other work is doing now, not what a run that just ended did."""
    def idle_and_total():
        with open("/proc/stat", encoding="utf-8") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
        return fields[3] + fields[4], sum(fields[:8])  # idle + iowait; user .. steal
    try:
        idle_before, total_before = idle_and_total()
        time.sleep(window_s)
        idle_after, total_after = idle_and_total()
    except (OSError, ValueError, IndexError):
        return None
    elapsed = total_after - total_before
    busy = 1 - (idle_after - idle_before) / elapsed if elapsed else 0.0
    return round(busy * os.cpu_count(), 2)


def host_load():
    """{"cores", "loadAverage1m"}: one reading, as recordings store it."""
    return {"cores": os.cpu_count(), "loadAverage1m": round(os.getloadavg()[0], 2)}


def host_at_start():
    """The reading a measurement stores before anything of its own runs: the load, and the
    cores other work keeps busy right now (`busyCores`)."""
    return {**host_load(), "busyCores": busy_cores()}


def warn_if_busy(what, reading=None):
    """One line on stderr when the load already exceeds the cores; True if it did."""
    reading = reading or host_load()
    busy = reading["loadAverage1m"] > reading["cores"]
    if busy:
        print(f"{what}: warning: the load average is {reading['loadAverage1m']:.1f} on "
              f"{reading['cores']} cores; the times will include other work, and the page "
              f"will say so (measure on a quiet machine for a cleaner run)", file=sys.stderr)
    return busy

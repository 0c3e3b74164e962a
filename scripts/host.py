"""The host a measurement runs on: its cores and load, and the warning before a
measurement starts on a host that is already busy.

A timing taken while the one-minute load average exceeds the cores also measures the
other work; the recording keeps the readings (the analysis then says so on the page),
and the commands that measure say so before they start, so a maintainer can wait for a
quieter moment.
"""
import os
import sys
import threading


WINDOW_S = 0.5  # long enough for /proc/stat's 10 ms ticks on every core to say something


def idle_and_total():
    """(idle, total) ticks of every core so far, from /proc/stat's first line."""
    with open("/proc/stat", encoding="utf-8") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    return fields[3] + fields[4], sum(fields[:8])  # idle + iowait; user .. steal


TICK_S = 1 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


def cpu_seconds(pids=()):
    """CPU time this process (every thread, and the children it has reaped) and the live
    processes `pids` (with the children they reaped) have used so far."""
    own = os.times()
    total = own.user + own.system + own.children_user + own.children_system
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # reaped: counted in our children's times above
        total += sum(int(v) for v in fields[11:15]) * TICK_S  # utime stime cutime cstime
    return total


def busy_cores(window_s=WINDOW_S):
    """How many cores were busy over the last `window_s` seconds, from /proc/stat; None
    where there is no such file. Unlike the load average, which decays over a minute, this
    says what other work is doing now, not what a run that just ended did."""
    return OtherWork(window_s).busy_cores  # nothing of ours runs meanwhile


class OtherWork:
    """How many cores other work keeps busy, read over a window of `window_s` seconds that
    starts now, while this run's own work may already be starting: what this process and
    the processes it names (`include`) used meanwhile is taken off, so a lesson importing
    JAX in the window does not read as other work. The window closes on a timer thread of
    its own; `busy_cores` waits for it (None where there is no /proc/stat)."""

    def __init__(self, window_s=WINDOW_S):
        self.pids, self._busy = [], None
        try:
            self._ticks, self._cpu = idle_and_total(), cpu_seconds()
        except (OSError, ValueError, IndexError):
            self._ticks = None
        self._timer = threading.Timer(window_s, self.finish)
        self._timer.daemon = True
        if self._ticks is not None:
            self._timer.start()

    def include(self, pid):
        """A process of this run, started inside the window: its CPU time is ours."""
        self.pids.append(pid)

    def finish(self):
        if self._ticks is None or self._busy is not None:
            return
        try:
            (idle_before, total_before), cpu_before = self._ticks, self._cpu
            (idle_after, total_after), cpu_after = idle_and_total(), cpu_seconds(self.pids)
        except (OSError, ValueError, IndexError):
            self._ticks = None
            return
        elapsed = total_after - total_before  # ticks summed over every core
        if not elapsed:
            self._busy = 0.0
            return
        busy = (elapsed - (idle_after - idle_before)) * TICK_S  # core-seconds
        wall = elapsed * TICK_S / os.cpu_count()
        self._busy = round(max(0.0, busy - (cpu_after - cpu_before)) / wall, 2)

    @property
    def busy_cores(self):
        if self._ticks is not None:
            self._timer.join()  # the window closes on its own time, not the caller's
        return self._busy


def host_load():
    """{"cores", "loadAverage1m"}: one reading, as recordings store it."""
    return {"cores": os.cpu_count(), "loadAverage1m": round(os.getloadavg()[0], 2)}


def host_at_start():
    """The reading a measurement stores before anything of its own runs: the load, and the
    cores other work keeps busy right now (`busyCores`)."""
    return {**host_load(), "busyCores": busy_cores()}


def host_while_starting():
    """host_at_start() for a run whose own start may overlap the reading: the load now, and
    an OtherWork window (`window`) whose `busy_cores` the run reads once it has started its
    processes and named them to it (`include`)."""
    return {**host_load(), "window": OtherWork()}


def warn_if_busy(what, reading=None):
    """One line on stderr when the load already exceeds the cores; True if it did."""
    reading = reading or host_load()
    busy = reading["loadAverage1m"] > reading["cores"]
    if busy:
        print(f"{what}: warning: the load average is {reading['loadAverage1m']:.1f} on "
              f"{reading['cores']} cores; the times will include other work, and the page "
              f"will say so (measure on a quiet machine for a cleaner run)", file=sys.stderr)
    return busy

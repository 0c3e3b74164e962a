"""A lesson module run as its own program (a simulation), and the one-line errors a
recording run ends in."""
import subprocess
import sys
import time
from pathlib import Path

from scripts.store.recordings import RecordingError, read_json

LESSON_TIMEOUT_S = 600


class RecordError(Exception):
    """Recording stopped; str() is the one line to show: it says that nothing was written."""

    exit_status = 1

    def __str__(self):
        return f"{super().__str__()}; nothing was written"


class SetupFailure(RecordError):
    """This machine cannot give the platform or device count asked for."""

    exit_status = 2


def run_module(module, root, scratch):
    """`python -m module --data-out PATH` in a fresh interpreter: (stdout, data, seconds)."""
    data_path = Path(scratch) / f"{module}.json"
    started = time.perf_counter()
    try:
        run = subprocess.run([sys.executable, "-m", module, "--data-out", str(data_path)],
                             cwd=root, capture_output=True, text=True,
                             timeout=LESSON_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise RecordError(f"{module} ran past {LESSON_TIMEOUT_S} s and was stopped") from None
    if run.returncode != 0 or not data_path.exists():
        tail = " | ".join(run.stderr.strip().splitlines()[-3:])
        raise RecordError(f"{module} failed (exit {run.returncode}): {tail}")
    try:
        data = read_json(data_path)  # the module's own output: anything JSON can say
    except RecordingError as error:
        raise RecordError(f"{module} wrote {data_path.name} (--data-out) that cannot be read "
                          f"as JSON ({error})") from None
    return run.stdout, data, time.perf_counter() - started

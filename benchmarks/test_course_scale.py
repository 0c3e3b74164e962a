"""course_scale's own faults: an --out it could not write is refused before anything is
measured, and SIGTERM leaves no step process and no copy behind (issue 57)."""
import signal
import subprocess
import sys
import time

import psutil
import pytest

from benchmarks import course_scale
from conftest import SEED
from harness import PROJECT_PARTS, project


@pytest.mark.parametrize("make, said", [
    (lambda tmp: tmp / "no-such-folder" / "out.json", "no folder"),
    (lambda tmp: tmp, "not a regular file"),
    (lambda tmp: (tmp / "link.json").symlink_to(tmp / "elsewhere.json") or tmp / "link.json",
     "not a regular file")])
def test_an_out_it_cannot_write_is_refused_before_anything_is_measured(tmp_path, make, said,
                                                                        monkeypatch, capsys):
    monkeypatch.setattr(course_scale, "measure", lambda *args: pytest.fail("it measured"))
    out = make(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        course_scale.main(["--lessons", "1", "--out", str(out)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert stopped.value.code == 2 and said in lines[-1] and lines[-1].startswith(
        "benchmarks/course_scale.py: error: --out ")


def recording(step):
    """Whether `step` is record.py; a step that ended (a zombie, or gone) while it was listed
    is not."""
    try:
        return "record.py" in " ".join(step.cmdline())
    except psutil.Error:
        return False


@pytest.mark.slow
def test_sigterm_ends_it_in_one_line_with_no_step_process_or_copy_left(tmp_path):
    """In a copy cut to one lesson, whatever the course: one lesson's recording to stop."""
    root = project(tmp_path / "repo", PROJECT_PARTS + ("benchmarks",), keep=[SEED.id])
    out = tmp_path / "out.json"
    run = subprocess.Popen([sys.executable, "benchmarks/course_scale.py", "--lessons", "1",
                            "--rounds", "1", "--out", str(out)], cwd=root,
                           stderr=subprocess.PIPE, text=True)
    deadline, steps = time.monotonic() + 120, []
    while not any(recording(child) for child in steps):
        assert time.monotonic() < deadline and run.poll() is None, "no recording step began"
        time.sleep(0.2)
        try:
            steps = psutil.Process(run.pid).children(recursive=True)
        except psutil.Error:  # a child that ended while it was listed
            steps = []
    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=60) == 143
    assert run.stderr.read().strip().splitlines()[-1] == \
        "course_scale: terminated; nothing written, the copies removed"
    assert psutil.wait_procs(steps, timeout=10)[1] == []  # none still alive
    assert not (root / "build" / "course-scale").exists() and not out.exists()

"""`mkdocs serve`: watches what pages are made from, and a broken recording neither
hangs the server nor leaves a traceback."""
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from mkdocs.config import load_config

from conftest import LESSONS, ROOT, clean_env
from conftest import project_copy as copy_project
from scripts.runners.processes import free_port
from site_build import NO_JAX_BUILD

# The registry's first lesson: what is checked here holds for any lesson's page.
FIRST_LESSON = next(iter(LESSONS.values())).id
RECORDING = f"recordings/{FIRST_LESSON}.cpu.json"


def test_serve_watches_recordings_figures_and_lesson_code():
    config = load_config(str(ROOT / "mkdocs.yml"))
    watched = {os.path.relpath(path, ROOT) for path in config["watch"]}
    assert {"recordings", "figures", "lesson_code"} <= watched


def serve(project, log):
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", NO_JAX_BUILD, "serve", "--dev-addr", f"127.0.0.1:{port}"],
        cwd=project, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    return process, f"http://127.0.0.1:{port}/lessons/{FIRST_LESSON}/"


def wait_for(log_path, text, after=0, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        output = log_path.read_text()
        if text in output[after:]:
            return output
        time.sleep(0.5)
    pytest.fail(f"no {text!r} from mkdocs serve within {timeout} s:\n{output[-2000:]}")


def stop(process):
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C sends
    try:
        return process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        pytest.fail("mkdocs serve did not stop on Ctrl-C")


@pytest.mark.slow
def test_serve_with_a_corrupt_recording_exits_at_once_with_one_line(tmp_path):
    project = copy_project(tmp_path / "project")
    (project / RECORDING).write_text("{ not json")
    log_path = tmp_path / "serve.log"
    with open(log_path, "w") as log:
        process, _ = serve(project, log)
        try:
            code = process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            stop(process)
            pytest.fail("mkdocs serve kept running on a corrupt recording")
    output = log_path.read_text()
    errors = [line for line in output.splitlines() if line.startswith("ERROR")]
    assert code != 0 and "Traceback" not in output
    assert len(errors) == 1 and RECORDING in errors[0] and "not valid JSON" in errors[0]


@pytest.mark.slow
def test_a_recording_broken_while_serving_is_reported_and_the_server_answers(tmp_path):
    project = copy_project(tmp_path / "project")
    good = (project / RECORDING).read_text()
    log_path = tmp_path / "serve.log"
    with open(log_path, "w") as log:
        process, url = serve(project, log)
        try:
            started = len(wait_for(log_path, "Serving on"))
            assert urllib.request.urlopen(url, timeout=10).status == 200
            (project / RECORDING).write_text("{ not json")
            broken = len(wait_for(log_path, "still serving", after=started))
            assert urllib.request.urlopen(url, timeout=10).status == 200  # not stuck
            (project / RECORDING).write_text(good)
            wait_for(log_path, "Documentation built", after=broken)
            assert urllib.request.urlopen(url, timeout=10).status == 200
        finally:
            code = stop(process)
    output = log_path.read_text()
    errors = [line for line in output.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and RECORDING in errors[0], output[-2000:]
    assert "Traceback" not in output
    assert code == 0


@pytest.mark.slow
def test_a_page_error_while_serving_keeps_every_page_of_the_last_good_site(tmp_path):
    import urllib.request

    project = copy_project(tmp_path / "project")
    page = project / "docs" / "going-further" / "tpu.md"
    good = page.read_text()
    log_path = tmp_path / "serve.log"
    with open(log_path, "w") as log:
        process, url = serve(project, log)
        try:
            started = len(wait_for(log_path, "Serving on"))
            before = urllib.request.urlopen(url, timeout=10).read()
            # A page error, raised while pages are written: after mkdocs emptied the site.
            page.write_text(good + f"\n{{{{ rec:{FIRST_LESSON}.cpu:no.such.value }}}}\n")
            wait_for(log_path, "still serving", after=started)
            for address in (url, url.replace(f"lessons/{FIRST_LESSON}/", "")):
                assert urllib.request.urlopen(address, timeout=10).status == 200
            after = urllib.request.urlopen(url, timeout=10).read()
            # The same page; only the reload script's build counter differs.
            assert re.sub(rb"livereload\([\d, ]+\)", b"", after) == \
                re.sub(rb"livereload\([\d, ]+\)", b"", before)
        finally:
            stop(process)
    output = log_path.read_text()
    assert "Traceback" not in output and any(
        "no.such.value" in line for line in output.splitlines() if line.startswith("ERROR"))


@pytest.mark.slow
def test_the_mkdocs_command_of_an_activated_venv_builds_the_site(tmp_path):
    """What any MkDocs reader types: `mkdocs build --strict` with .venv activated, from
    the root, no PYTHONPATH. The Markdown extension and the hooks import `scripts` from the
    installed project (pyproject.toml), not from the folder mkdocs happens to run in."""
    venv_bin = Path(sys.executable).parent
    env = {key: value for key, value in clean_env().items() if key != "PYTHONPATH"}
    env.update(PATH=f"{venv_bin}{os.pathsep}{env.get('PATH', '')}",
               VIRTUAL_ENV=str(venv_bin.parent))
    run = subprocess.run(["mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert (tmp_path / "site" / "lessons" / FIRST_LESSON / "index.html").is_file()

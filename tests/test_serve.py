"""`mkdocs serve` watches what pages are made from and re-renders the pages an edit touches;
a broken recording or page neither hangs the server nor leaves a traceback; `mkdocs` itself
builds from an activated venv."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from mkdocs.config import load_config

from conftest import FIRST_LESSON, ROOT
from harness import clean_env, rederive_analyses, run
from harness import project as copy_project
from scripts.runners.processes import free_port
from site_build import NO_JAX_BUILD

RECORDING = f"recordings/{FIRST_LESSON.id}.cpu.json"  # any lesson's would do


def test_serve_watches_recordings_figures_and_lesson_code():
    config = load_config(str(ROOT / "mkdocs.yml"))
    watched = {os.path.relpath(path, ROOT) for path in config["watch"]}
    assert {"recordings", "figures", "lesson_code"} <= watched


def serve(project, log, **env):
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", NO_JAX_BUILD, "serve", "--dev-addr", f"127.0.0.1:{port}"],
        cwd=project, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", **env})
    return process, f"http://127.0.0.1:{port}/lessons/{FIRST_LESSON.id}/"


def wait_for(log_path, text, after=0, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        output = log_path.read_text()
        if text in output[after:]:
            return len(output)
        time.sleep(0.2)
    pytest.fail(f"no {text!r} from mkdocs serve within {timeout} s:\n{output[-2000:]}")


def stop(process):
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C sends
    try:
        return process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        pytest.fail("mkdocs serve did not stop on Ctrl-C")


def errors(log_path, after=0):
    output = log_path.read_text()
    assert "Traceback" not in output, output[-2000:]
    return [line for line in output[after:].splitlines() if line.startswith("ERROR")]


@pytest.mark.slow
def test_serve_with_a_corrupt_recording_exits_at_once_with_one_line(tmp_path):
    project = copy_project(tmp_path / "project")
    (project / RECORDING).write_text("{ not json")
    # Still serving after a minute: subprocess.run kills it and raises TimeoutExpired.
    error = mkdocs_error(run("-c", NO_JAX_BUILD, "serve", "--dev-addr",
                             f"127.0.0.1:{free_port()}", cwd=project, timeout=60))
    assert RECORDING in error and "not valid JSON" in error


def get(address):
    with urllib.request.urlopen(address, timeout=60) as answer:  # held while a rebuild runs
        assert answer.status == 200
        return re.sub(rb"livereload\([\d, ]+\)", b"", answer.read()).decode()  # its counter


@pytest.mark.slow
def test_an_edit_while_serving_rebuilds_what_it_touches_and_an_error_keeps_the_last_site(tmp_path):
    """A page edit rewrites that page and the home page (which lists its title), no other; a
    recording changed under the server is on the home page's table at the next rebuild, the
    notebook page (which reads none) untouched. A broken recording or page is one line, and
    the server still answers with the pages last built; a fixed recording builds again."""
    project = copy_project(tmp_path / "project", keep=[FIRST_LESSON.id])
    page, recording = project / "docs" / "lessons" / f"{FIRST_LESSON.id}.md", project / RECORDING
    (tmp_path / "tmp").mkdir()
    log_path = tmp_path / "serve.log"
    with open(log_path, "w") as log:
        process, url = serve(project, log, TMPDIR=str(tmp_path / "tmp"))  # mkdocs' site there
        home = url.replace(f"lessons/{FIRST_LESSON.id}/", "")
        try:
            seen = wait_for(log_path, "Serving on")
            [site] = (tmp_path / "tmp").glob("mkdocs_*")
            written = {path: path.stat().st_mtime_ns for path in site.rglob("index.html")}
            page.write_text(page.read_text() + "\nOne sentence more.\n")
            seen = wait_for(log_path, "Reloading browsers", after=seen)
            assert "One sentence more." in get(url)
            assert {path.relative_to(site).as_posix() for path, mtime in written.items()
                    if path.stat().st_mtime_ns != mtime} == {
                "index.html", f"lessons/{FIRST_LESSON.id}/index.html"}
            good = json.dumps({**json.loads(recording.read_text()),
                               "generatedAt": "2031-02-03T04:05:06+00:00"})
            recording.write_text(good)
            rederive_analyses(project)  # what `record.py --render-only` remakes from it
            seen = clean = wait_for(log_path, "Documentation built", after=seen)  # once they are
            before = get(home)
            notebook = site / "notebooks" / FIRST_LESSON.id / "index.html"
            assert "3 February 2031" in before and notebook.stat().st_mtime_ns == written[notebook]
            recording.write_text("{ not json")
            seen = wait_for(log_path, "still serving", after=seen)
            assert get(home) == before  # not stuck
            recording.write_text(good)
            seen = wait_for(log_path, "Documentation built", after=seen)
            page.write_text(page.read_text() + f"\n{{{{ rec:{FIRST_LESSON.id}.cpu:no.such }}}}\n")
            wait_for(log_path, "still serving", after=seen)
            assert get(home) == before and "One sentence more." in get(url)
        finally:
            assert stop(process) == 0
    # One line for the recording; mkdocs names the page before the page's line.
    found = errors(log_path, after=clean)
    assert len(found) == 3 and RECORDING in found[0] and "no.such" in found[2], found


def activated(venv_bin=Path(sys.executable).parent):
    """The environment of `. .venv/bin/activate`: the tests' own .venv, no PYTHONPATH."""
    env = {key: value for key, value in clean_env().items() if key != "PYTHONPATH"}
    return {**env, "PATH": f"{venv_bin}{os.pathsep}{env.get('PATH', '')}",
            "VIRTUAL_ENV": str(venv_bin.parent)}


def mkdocs_error(run):
    """The one ERROR line of a failed mkdocs run, which printed no traceback."""
    [error] = [line for line in run.stderr.splitlines() if line.startswith("ERROR")]
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr[-2000:]
    return error


@pytest.mark.slow
def test_the_mkdocs_command_of_an_activated_venv_builds_its_checkout_and_no_other(tmp_path):
    """What any MkDocs reader types, with no PYTHONPATH, from outside the checkout (`-f`): the
    extension and the hooks import `scripts` from the installed project (pyproject.toml). A
    second checkout (a worktree, a CI copy, `make fresh`'s) built with that .venv would build
    its pages from the first's recordings, registry and code, and pass: it is refused."""
    installed = subprocess.run(
        [sys.executable, "-c", "import pathlib, scripts; "
                               "print(pathlib.Path(scripts.__file__).parents[1])"],
        cwd="/", env=activated(), capture_output=True, text=True, timeout=60).stdout.strip()
    assert installed, "the .venv cannot import scripts: run make setup"
    (tmp_path / "elsewhere").mkdir()
    built = subprocess.run(["mkdocs", "build", "--strict", "-f", f"{installed}/mkdocs.yml",
                            "--site-dir", str(tmp_path / "site")], cwd=tmp_path / "elsewhere",
                           env=activated(), capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    assert (tmp_path / "site" / "lessons" / FIRST_LESSON.id / "index.html").is_file()
    second = copy_project(tmp_path / "second")
    (second / RECORDING).write_text('{"broken":\n')
    error = mkdocs_error(subprocess.run(["mkdocs", "build", "--strict"], cwd=second,
                                        env=activated(), capture_output=True, text=True,
                                        timeout=120))
    assert f"{second}/mkdocs.yml is being built with another checkout's code" in error
    assert "run `make setup`" in error and not (second / "site").exists()


# A one-page site with one asset and the hooks of scripts/pages/machine_errors.py alone: what
# mkdocs does with the machine's refusals, in a second rather than a whole build.
FULL_DISK = ("import errno, os, shutil\n"
             "def full(source, destination, **options):\n"
             "    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), destination)\n"
             "shutil.copyfile = full\n")


@pytest.mark.slow
def test_a_full_disk_under_build_and_a_port_in_use_under_serve_are_one_line(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# A page\n")
    (tmp_path / "docs" / "asset.js").write_text("//\n")
    (tmp_path / "mkdocs.yml").write_text(
        f"site_name: tiny\nhooks:\n  - {ROOT}/scripts/pages/machine_errors.py\n")
    env = clean_env(PYTHONPATH=str(ROOT))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for script, argv, words in [
                (FULL_DISK + NO_JAX_BUILD, ["build"], "asset.js: No space left on device; "
                                                      "free space on its disk"),
                (NO_JAX_BUILD, ["serve", "--dev-addr", f"127.0.0.1:{port}"],
                 f"cannot serve on 127.0.0.1:{port}: Address already in use; ")]:
            assert words in mkdocs_error(subprocess.run(
                [sys.executable, "-c", script, *argv], cwd=tmp_path, env=env,
                capture_output=True, text=True, timeout=120))

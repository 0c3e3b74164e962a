"""`mkdocs serve` watches what pages are made from, re-renders what an edit touches, and outlives a
broken recording or page without a traceback; an activated venv's `mkdocs` builds."""
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from types import SimpleNamespace

import pytest
from mkdocs.commands import build as mkdocs_build
from mkdocs.config import load_config
from mkdocs.utils import DuplicateFilter

from conftest import ROOT, SEED, module_file
from harness import (comment_in_first_section, edit, in_activated_venv, passed,
                     project as copy_project, rederive_analyses, run)
from scripts.pages import serve as serving, site_files
from scripts.runners.processes import free_port
from site_build import NO_JAX_BUILD

RECORDING = f"recordings/{SEED.id}.cpu.json"  # read by the lesson and going further


def test_serve_watches_recordings_figures_and_lesson_code():
    config = load_config(str(ROOT / "mkdocs.yml"))
    watched = {os.path.relpath(path, ROOT) for path in config["watch"]}
    assert {"recordings", "figures", "lesson_code"} <= watched


SERVED = SimpleNamespace(config_file_path="mkdocs.yml", site_dir="site", strict=True,
                         use_directory_urls=True, site_url="http://127.0.0.1:8000/",
                         docs_dir=str(ROOT / "docs"))  # what on_serve reads of the config


def test_every_rebuild_says_how_it_ended_however_alike_two_are(monkeypatch, caplog):
    """`mkdocs` drops a build message logged once already (its DuplicateFilter): a rebuild
    as quick as one before ended without "Documentation built" (CI waited 90 s for it), an
    error made again went unsaid. Each rebuild logs as the first build did."""
    monkeypatch.setattr(serving, "SERVING", serving.Serving())
    monkeypatch.setattr(serving, "load_config", lambda *path, **options: SimpleNamespace())
    monkeypatch.setattr(serving, "build", lambda config, **options: mkdocs_build.log.info(
        "Documentation built in 0.52 seconds"))
    monkeypatch.setattr(mkdocs_build.log, "filters", [DuplicateFilter()])  # as `mkdocs` adds it
    server = SimpleNamespace(watch=lambda path, recursive=True: None, unwatch=lambda path: None)
    serving.on_serve(server, SERVED, builder=None)
    with caplog.at_level(logging.INFO, logger="mkdocs"):
        server.builder()
        server.builder()
    assert caplog.text.count("Documentation built in 0.52 seconds") == 2


def test_a_refusal_as_mkdocs_yml_is_read_keeps_serving_and_the_copies_start_no_rebuild(
        monkeypatch, caplog):
    """A link committed while serving: site_files.checked_root's line, the last pages still served.
    The copies written into docs/ go unwatched: each would be a second rebuild after every edit."""
    def refused(*path, **options):
        raise SystemExit("error: docs/leak.txt is a symbolic link (to '/etc/hostname'); ...")
    monkeypatch.setattr(serving, "SERVING", serving.Serving())
    monkeypatch.setattr(serving, "load_config", refused)
    calls = []
    server = SimpleNamespace(watch=lambda path, recursive=True: calls.append((path, recursive)),
                             unwatch=lambda path: calls.append((path, "unwatched")))
    serving.on_serve(server, SERVED, builder=None)
    with caplog.at_level(logging.INFO, logger="mkdocs"):
        server.builder()
    assert [record.getMessage() for record in caplog.records][-2:] == [
        "docs/leak.txt is a symbolic link (to '/etc/hostname'); ...",
        "still serving the last pages built; fix the error above to rebuild"]
    docs = ROOT / "docs"
    assert calls[:2] == [(str(docs), "unwatched"), (str(docs), False)]
    watched = {os.path.relpath(path, docs): recursive for path, recursive in calls[2:]}
    assert watched == {folder.name: folder.name != "notebooks" for folder in docs.iterdir()
                       if folder.is_dir() and folder.name not in site_files.FOLDERS}
    assert "notebooks" in watched and "lessons" in watched


def wait_for(log_path, text, after=0):
    """The log's length once `text` is in it after `after`."""
    return wait_until(lambda: text in (log := log_path.read_text())[after:] and len(log),
                      log_path, f"no {text!r} from mkdocs serve")


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
    # Still serving after a minute: subprocess.run kills it and raises TimeoutExpired.
    error = mkdocs_error(run("-c", NO_JAX_BUILD, "serve", "--dev-addr",
                             f"127.0.0.1:{free_port()}", cwd=project, timeout=60))
    assert RECORDING in error and "not valid JSON" in error


def get(address):
    with urllib.request.urlopen(address, timeout=60) as answer:  # held while a rebuild runs
        assert answer.status == 200
        return re.sub(rb"livereload\([\d, ]+\)", b"", answer.read()).decode()  # its counter


def answers(address):
    try:
        return bool(get(address))
    except urllib.error.HTTPError as error:
        assert error.code == 404, error
        return False


def wait_until(served, log_path, what="not served", timeout=90):
    """`served()`'s value once true, however the server grouped file events into rebuilds."""
    deadline = time.monotonic() + timeout
    while not (found := served()):
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {timeout} s:\n{log_path.read_text()[-2000:]}")
        time.sleep(0.2)
    return found


def searched(site):
    """The pages the served search index lists."""
    index = json.loads((site / "search" / "search_index.json").read_text())
    return {entry["location"].partition("#")[0] for entry in index["docs"]}


@pytest.mark.slow
def test_an_edit_while_serving_rebuilds_what_it_touches_and_an_error_keeps_the_last_site(tmp_path):
    """A page edit rewrites that page and the home page (which lists its title), no other, and
    search still finds every page; a recording changed under the server is on every page that reads
    it at the next rebuild (through {{ rec: }} alone too), and on no other. A broken recording or
    page is one line, and the server still answers with the pages last built; mended, it builds
    again and says so, whichever rebuild saw which write. A stale notebook stops its page alone: a
    later edit still shows. A page renamed answers at its new address alone, one deleted at none."""
    project = copy_project(tmp_path / "project", keep=[SEED.id])
    page, recording = project / "docs" / "lessons" / f"{SEED.id}.md", project / RECORDING
    module = project / module_file(SEED)
    (tmp_path / "tmp").mkdir()
    log_path = tmp_path / "serve.log"
    port = free_port()
    home, url = f"http://127.0.0.1:{port}/", f"http://127.0.0.1:{port}/lessons/{SEED.id}/"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", NO_JAX_BUILD, "serve", "--dev-addr", f"127.0.0.1:{port}"],
            cwd=project, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "NO_MKDOCS_2_WARNING": "1",
                 "TMPDIR": str(tmp_path / "tmp")})  # mkdocs' site there
        try:
            seen = wait_for(log_path, "Serving on")
            [site] = (tmp_path / "tmp").glob("mkdocs_*")
            every_page = searched(site)
            written = {path: path.stat().st_mtime_ns for path in site.rglob("index.html")}
            page.write_text(page.read_text() + "\nOne sentence more.\n")
            seen = wait_for(log_path, "Reloading browsers", after=seen)
            assert "One sentence more." in get(url)
            assert {path.relative_to(site).as_posix() for path, mtime in written.items()
                    if path.stat().st_mtime_ns != mtime} == {
                "index.html", f"lessons/{SEED.id}/index.html"}
            assert searched(site) == every_page
            written = {path: path.stat().st_mtime_ns for path in written}
            good = json.dumps({**json.loads(recording.read_text()),
                               "generatedAt": "2031-02-03T04:05:06+00:00"})
            recording.write_text(good)  # its analysis not yet: a rebuild now is an error
            seen = wait_for(log_path, "still serving", after=seen)
            rederive_analyses(project)  # what `record.py --render-only` remakes from it
            seen = clean = wait_for(log_path, "Documentation built", after=seen)
            before = get(home)
            assert "3 February 2031" in before
            # The pages that read it (through {{ rec: }} alone too) or list the recordings,
            # and the notebook page, which reads the lock the analyses' writes changed.
            names = rf"\{{\{{\s*(rec:{re.escape(SEED.id)}\.cpu:|recordings)"
            reading = {"index.html" if path.name == "index.md" and path.parent == project / "docs"
                       else f"{path.relative_to(project / 'docs').with_suffix('')}/index.html"
                       for path in (project / "docs").rglob("*.md")
                       if re.search(names, path.read_text())}
            rewritten = {path.relative_to(site).as_posix() for path, mtime in written.items()
                         if path.stat().st_mtime_ns != mtime}
            assert any(name.startswith("going-further/") for name in reading), reading
            assert rewritten == reading | {f"notebooks/{SEED.id}/index.html"}, rewritten
            recording.write_text("{ not json")
            seen = wait_for(log_path, "still serving", after=seen)
            assert get(home) == before  # not stuck
            recording.write_text(good)
            seen = wait_for(log_path, "Documentation built", after=seen)
            page.write_text(page.read_text() + f"\n{{{{ rec:{SEED.id}.cpu:no.such }}}}\n")
            seen = wait_for(log_path, "still serving", after=seen)
            assert get(home) == before and "One sentence more." in get(url)
            page.write_text(page.read_text().replace(f"{{{{ rec:{SEED.id}.cpu:no.such }}}}", ""))
            # A comment the notebook shows: that page alone stops, the others still build.
            edit(module, comment_in_first_section)
            page.write_text(page.read_text() + "\nA sentence after it.\n")
            wait_until(lambda: "A sentence after it." in get(url), log_path)
            moved_pages(project, home, log_path)
        finally:
            assert stop(process) == 0
    # Each error is one line: the recording's, the page's, the notebook's.
    output = log_path.read_text()
    assert "Traceback" not in output, output[-2000:]
    found = [line for line in output[clean:].splitlines() if line.startswith("ERROR")]
    kinds = [RECORDING, "no.such", f"notebooks/{SEED.id}.ipynb: stale, {module_file(SEED)} changed"]
    assert all(any(kind in line for kind in kinds) for line in found), found
    assert all(any(kind in line for line in found) for kind in kinds), found


def moved_pages(project, home, log_path):
    """Two new pages in the nav; then one renamed, the other deleted (file and nav line)."""
    config = project / "mkdocs.yml"
    listed = config.read_text()
    for name in ("first-extra", "second-extra"):
        (project / "docs" / f"{name}.md").write_text(f"# {name}\n\nA page that moves.\n")
    nav = '  - "First extra": first-extra.md\n  - "Second extra": second-extra.md\n'
    config.write_text(listed.replace("\nnav:\n", f"\nnav:\n{nav}", 1))
    wait_until(lambda: answers(f"{home}first-extra/") and answers(f"{home}second-extra/"), log_path)
    (project / "docs" / "first-extra.md").rename(project / "docs" / "moved-extra.md")
    (project / "docs" / "second-extra.md").unlink()
    config.write_text(listed.replace("\nnav:\n", '\nnav:\n  - "Moved": moved-extra.md\n', 1))
    wait_until(lambda: answers(f"{home}moved-extra/") and not answers(f"{home}first-extra/")
               and not answers(f"{home}second-extra/"), log_path)


def mkdocs_error(run):
    """The one ERROR line of a failed mkdocs run, which printed no traceback."""
    [error] = [line for line in run.stderr.splitlines() if line.startswith(("ERROR", "error: "))]
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr[-2000:]
    return error


@pytest.mark.slow
def test_the_mkdocs_command_of_an_activated_venv_builds_its_checkout_and_no_other(tmp_path):
    """What any MkDocs reader types, with no PYTHONPATH, from outside the checkout (`-f`): the
    extension and the hooks import `scripts` from the installed project (pyproject.toml). A
    second checkout (a worktree, a CI copy, `make fresh`'s) built with that .venv would build
    its pages from the first's recordings, registry and code, and pass: it is refused."""
    installed = in_activated_venv(sys.executable, "-c", "import pathlib, scripts; print(pathlib."
                                  "Path(scripts.__file__).parents[1])", cwd="/").stdout.strip()
    assert installed, "the .venv cannot import scripts: run make setup"
    (tmp_path / "elsewhere").mkdir()
    passed(in_activated_venv("mkdocs", "build", "--strict", "-f", f"{installed}/mkdocs.yml",
                             "--site-dir", tmp_path / "site", cwd=tmp_path / "elsewhere"))
    assert (tmp_path / "site" / "lessons" / SEED.id / "index.html").is_file()
    second = copy_project(tmp_path / "second")
    (second / RECORDING).write_text('{"broken":\n')
    error = mkdocs_error(in_activated_venv("mkdocs", "build", "--strict", cwd=second))
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
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for script, argv, words in [
                (FULL_DISK + NO_JAX_BUILD, ["build"], "asset.js: No space left on device; "
                                                      "free space on its disk"),
                (NO_JAX_BUILD, ["serve", "--dev-addr", f"127.0.0.1:{port}"],
                 f"cannot serve on 127.0.0.1:{port}: Address already in use; ")]:
            assert words in mkdocs_error(run("-c", script, *argv, cwd=tmp_path, timeout=120,
                                             env={"PYTHONPATH": str(ROOT)}))

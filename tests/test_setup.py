"""`make` sets up only the .venv made for its own checkout: another checkout's (VENV=, as
`make fresh` passes its copies) is used as it is, and a moved checkout's is refused."""
import os
import re
import subprocess

from conftest import ROOT
from harness import project

SETUP_FILES = ("Makefile", "requirements.txt", "constraints.txt", "pyproject.toml", "scripts")


def venv_made_at(venv, path):
    """A stand-in .venv, set up in 2001 (every pin file is newer), whose activate names `path`;
    its python leaves a file behind if anything runs it."""
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "activate").write_text(f'VIRTUAL_ENV="{path}"\n')
    (venv / "bin" / "python").write_text(f"#!/bin/sh\ntouch {venv}/ran\nexit 1\n")
    (venv / "bin" / "python").chmod(0o755)
    for stamp in (".installed", ".tested"):
        (venv / stamp).touch()
        os.utime(venv / stamp, (1e9, 1e9))
    return venv


def make_in_a_fresh_clone(root, *argv):
    """`make ARGV` in a fresh clone of what make reads: (its exit status, its stderr's lines)."""
    project(root, parts=SETUP_FILES)
    for name in SETUP_FILES:
        os.utime(root / name)
    done = subprocess.run(["make", "-C", str(root), "--no-print-directory", *argv],
                          capture_output=True, text=True, timeout=60)
    return done.returncode, done.stderr.splitlines()


def test_another_checkout_s_venv_is_never_installed_into_and_a_moved_one_is_refused(tmp_path):
    first = venv_made_at(tmp_path / "first" / ".venv", tmp_path / "first" / ".venv")
    before = {path: path.stat().st_mtime_ns for path in first.rglob("*")}
    assert make_in_a_fresh_clone(tmp_path / "second", f"VENV={first}", f"{first}/.tested") \
        == (0, [])
    assert {path: path.stat().st_mtime_ns for path in first.rglob("*")} == before
    (first / ".tested").unlink()
    status, [line] = make_in_a_fresh_clone(tmp_path / "third", f"VENV={first}", f"{first}/.tested")
    assert status == 2 and f"{first} is another checkout's .venv and is not set up" in line
    venv_made_at(tmp_path / "moved" / ".venv", "/where/it/was/.venv")
    status, [line] = make_in_a_fresh_clone(tmp_path / "moved", "setup")
    assert status == 2 and line.endswith(
        ".venv was made at /where/it/was/.venv, where its programs and its install of this "
        "project point: rm -rf .venv && make setup.  Stop.")
    assert not (first / "ran").exists() and not (tmp_path / "moved" / ".venv" / "ran").exists()


def test_the_readme_promises_a_test_tool_only_after_make_install():
    """`make serve` installs requirements.txt alone: in the README's activated .venv, a line
    that runs a test tool (requirements-test.txt) names the target that installs it."""
    block = (ROOT / "README.md").read_text().split(". .venv/bin/activate\n")[1].split("```")[0]
    tools = [line.split("==")[0] for line in (ROOT / "requirements-test.txt").read_text().split()
             if "==" in line]
    assert [line for line in block.splitlines() if "`make install`" not in line
            and any(re.search(rf"\b{tool}\b", line) for tool in tools)] == []

"""The copy step (scripts/pages/site_files.py) and every writer's one staging path
(scripts/store/staging.py): nothing a commit holds decides what is deleted, nothing is
written through a link or over what is no regular file, and either generator refuses what a
pull request controls before it lists docs/."""
import shutil
import subprocess

import pytest

from conftest import FIRST_LESSON, ROOT, module_file
from harness import (FullDisk, files_under, git, in_activated_venv, one_error, project,
                     raised_in_one_line, run)
from scripts.pages import site_files
from scripts.pages.site_files import stage, wanted
from scripts.store import staging
from scripts.store.lessons import load_lessons
from scripts.store.staging import StagingError, refuse_unsafe_target, write_atomically


@pytest.fixture
def course(tmp_path):
    """A copy of the project cut to one lesson, its docs/ copies made: (root, docs)."""
    root = project(tmp_path / "repo", keep=[FIRST_LESSON.id])
    stage(root)
    return root, root / "docs"


def test_the_copies_are_read_only_and_only_they_are_ever_removed(course, tmp_path):
    root, docs = course
    copies = wanted(root, load_lessons(root))
    assert all(not (docs / path).stat().st_mode & 0o222 for path in copies)
    (docs / "figures" / "by-hand.png").write_bytes(b"kept")  # put there by hand: writable
    gone = docs / "figures" / "gone.svg"  # a copy of a figure no lesson draws any more
    write_atomically(gone, "<svg/>", root)
    gone.chmod(0o444)
    # What a commit could hold to steer the step: it reads no list.
    victim, readme = tmp_path / "victim", root / "README.md"
    victim.write_text("someone's file")
    readme.write_text("# readme")
    (docs / ".site-files").write_text(f"{victim}\n../README.md\n../.git/HEAD\nindex.md\n"
                                      f"figures/by-hand.png\n\udcff\n", errors="surrogateescape")
    before = files_under(docs)
    stage(root)
    assert not gone.exists() and victim.exists() and readme.exists()
    assert files_under(docs) == {path: data for path, data in before.items() if path != gone}


def test_a_committed_file_where_a_copy_goes_is_refused_and_left_as_it_is(course, monkeypatch):
    root, docs = course
    copy = docs / module_file(FIRST_LESSON)
    copy.unlink()
    copy.write_text("print('committed')\n")
    # Read-only under a umask that forbids writing, and no lesson's copy: tracked, so kept.
    kept = docs / "figures" / "kept.svg"
    kept.write_text("<svg/>")
    kept.chmod(0o444)
    for args in (("init", "-q"), ("add", "-f", copy, kept), ("commit", "-qm", "in the way")):
        git(root, *args)
    line = str(raised_in_one_line(StagingError, stage, root))
    assert line.startswith(f"docs/{module_file(FIRST_LESSON)} is committed where the build "
                           f"writes a copy") and "git rm --cached" in line
    assert copy.read_text() == "print('committed')\n"
    git(root, "rm", "-q", "--cached", copy)
    stage(root)
    assert kept.read_text() == "<svg/>" and copy.read_bytes() == (root / copy.relative_to(
        docs)).read_bytes()
    # A file committed in place of a folder of copies: refused the same way, not "File exists".
    shutil.rmtree(docs / "figures")
    (docs / "figures").write_text("a file\n")
    git(root, "add", "-f", docs / "figures")
    git(root, "commit", "-qm", "a file for a folder")
    assert str(raised_in_one_line(StagingError, stage, root)).startswith(
        "docs/figures is committed where the build writes a copy")
    assert (docs / "figures").read_text() == "a file\n"
    git(root, "rm", "-q", "--cached", docs / "figures")
    (docs / "figures").unlink()
    # A repository git cannot read: what it tracks unknown, nothing is copied over anything.
    copy.unlink()
    monkeypatch.setenv("GIT_DIR", str(root / "nowhere"))
    line = str(raised_in_one_line(StagingError, stage, root))
    assert line.startswith("git cannot list what this checkout tracks (git: fatal: not a git "
                           "repository") and not copy.exists()


def test_every_copy_lies_in_a_folder_git_ignores_where_the_step_alone_writes():
    """What the step may remove is what COPIES holds: every copy must be there, and ignored."""
    docs = ROOT / "docs"
    copies = set(wanted(ROOT, load_lessons(ROOT)))
    stage(ROOT)
    assert copies <= {path.relative_to(docs).as_posix() for pattern in site_files.COPIES
                      for path in docs.glob(pattern)}
    ignored = git(ROOT, "check-ignore", "--no-index", *(f"docs/{path}" for path in copies))
    assert set(ignored.split()) == {f"docs/{path}" for path in copies}


def test_a_full_disk_during_the_copies_is_one_line_and_changes_nothing(course, monkeypatch):
    root, docs = course
    for path in (docs / "figures").iterdir():
        path.unlink()  # a fresh checkout: every figure to copy
    before = files_under(docs)
    monkeypatch.setattr(staging.os, "fdopen", FullDisk)
    line = str(raised_in_one_line(StagingError, stage, root))
    assert "cannot be written (No space left on device); nothing was changed" in line
    assert files_under(docs) == before and not list(docs.rglob("*.tmp"))


@pytest.mark.parametrize("way", ["the target", "a folder on the way", "a device"])
def test_no_writer_writes_through_a_link_or_over_what_is_no_regular_file(tmp_path, way):
    root, outside = tmp_path / "repo", tmp_path / "outside"
    (root / "recordings").mkdir(parents=True)
    outside.mkdir()
    target = root / "recordings" / "x.json"
    if way == "the target":
        target.symlink_to(outside / "x.json")
    elif way == "a folder on the way":
        (root / "recordings").rmdir()
        (root / "recordings").symlink_to(outside)
    words = "is not a regular file" if way == "a device" else "is a symbolic link"
    path = "/dev/null" if way == "a device" else target
    line = str(raised_in_one_line(StagingError, write_atomically, path, "{}", root))
    assert words in line and "nothing was changed" in line and list(outside.iterdir()) == []
    refuse_unsafe_target(tmp_path / "new.json", root)  # a new file outside the checkout: fine


@pytest.mark.slow
@pytest.mark.parametrize("generator", ["mkdocs", "zensical"])
def test_either_generator_refuses_a_committed_link_before_it_lists_docs(tmp_path, generator):
    root = project(tmp_path / "repo", keep=[FIRST_LESSON.id])
    (root / "docs" / "leak.txt").symlink_to("/etc/hostname")
    # The checkout reading its mkdocs.yml as `generator` does, with its own code.
    reader = {"mkdocs": "from mkdocs.config import load_config as read",
              "zensical": "from zensical.config import parse_config as read"}[generator]
    read = run("-c", f"{reader}; read('mkdocs.yml')", cwd=root, timeout=120)
    line = one_error(read.stderr, "docs/leak.txt is a symbolic link")
    assert "replace the link with the file itself" in line
    if generator == "zensical":  # Zensical's own command: no site, so nothing published
        built = run("-m", "zensical", "build", "--clean", cwd=root)
        assert built.returncode != 0 and not (root / "site").exists()
        one_error(built.stderr, "docs/leak.txt is a symbolic link")


@pytest.mark.slow
def test_either_generator_refuses_another_checkouts_code_before_it_lists_docs(tmp_path):
    """A worktree built by the generator of another checkout's activated .venv: refused as
    mkdocs.yml is read, so its committed link is not published and the other is not written."""
    second = project(tmp_path / "second", keep=[FIRST_LESSON.id])
    (second / "docs" / "leak.txt").symlink_to("/etc/hostname")
    for folder, named in ((second, ()), (second / "docs", ("-f../mkdocs.yml",))):  # any spelling
        for generator in ("zensical", "mkdocs"):
            built = in_activated_venv(generator, "build", *named, cwd=folder)
            assert built.returncode != 0 and not (second / "site").exists()
            one_error(built.stderr,
                      f"{second}/mkdocs.yml is being built with another checkout's code")


@pytest.mark.slow
def test_a_read_only_checkout_builds_elsewhere_and_says_in_one_line_what_it_cannot_copy(tmp_path):
    root = project(tmp_path / "repo", keep=[FIRST_LESSON.id])
    stage(root)

    def build(site):
        subprocess.run(["chmod", "-R", "a-w", root], check=True)
        try:
            return run("-m", "mkdocs", "build", "--strict", "-d", site, cwd=root, as_a_user=True)
        finally:
            subprocess.run(["chmod", "-R", "u+w", root], check=True)

    assert build(tmp_path / "site").returncode == 0  # the copies are current: nothing to write
    figure = next((root / "docs" / "figures").iterdir())
    figure.unlink()
    done = build(tmp_path / "again")
    assert done.returncode == 1 and not figure.exists()
    one_error(done.stderr, f"docs/figures/{figure.name}: cannot be written (Permission denied)"
                           f"; nothing was changed")

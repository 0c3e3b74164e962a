"""The one step that puts in docs/ what the pages serve from elsewhere, so that MkDocs and
Zensical build the same tree: the figures, each lesson's downloads, what the figures' data
lines link to, each notebook's page and its .ipynb. Either generator runs it as it reads
mkdocs.yml, before it lists docs/ (the snippets' base_path is `checked_root()`'s answer).
Copies, never links, at the paths the pages link them by, in the folders git ignores
(COPIES), written only when they differ.

What the step wrote is known from what no commit can hold: each copy is read-only (as
Bazel's outputs are), a mode git gives a file only under a umask that forbids writing. So it
removes only an untracked read-only file in COPIES that no lesson wants now, and refuses,
rather than overwrite, a file git tracks where a copy goes. No list it reads decides what it
deletes.
"""
import inspect
import os
import re
import stat
import subprocess
from pathlib import Path, PurePosixPath

import click
import yaml

from scripts import ROOT
from scripts.pages.course import downloadable_files
from scripts.pages.figure_data import served_files
from scripts.pages.recorded_text import PageError
from scripts.pages.sources import refuse_another_checkout
from scripts.plumbing.checkout import LinkInCheckout, refuse_links
from scripts.store.lessons import RegistryError, load_lessons
from scripts.store.outputs import for_lesson
from scripts.store.staging import Staging, StagingError

# Below docs/, git-ignored (.gitignore): the only places a copy is written or removed.
FOLDERS = ("figures", "lesson_code", "recordings")  # copies alone
COPIES = (*(f"{folder}/**/*" for folder in FOLDERS), "notebooks/*.md", "notebooks/*/**/*")
READ_ONLY = 0o444
# The theme writes SITE_URL unescaped: an address of these characters cannot end an attribute.
SITE_URL = r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%/-]*)?"


def wanted(root, lessons):
    """{path below docs/: the bytes it must hold}."""
    files = {path: (root / path).read_bytes() for path in sorted(
        {f"figures/{svg.name}" for svg in (root / "figures").glob("*.svg")}
        | {path for lesson in lessons.values() for path in downloadable_files(lesson)}
        | set(served_files(lessons, root)))}
    for lesson in lessons.values():
        notebook = root / for_lesson(lesson).notebook
        if notebook.is_file():  # its `notebook`: the theme's download icon (overrides/main.html)
            files[for_lesson(lesson).notebook_page] = (
                f"---\nnotebook: {notebook.name}\n---\n\n{{{{ notebook:{lesson.id} }}}}\n").encode()
            files[f"notebooks/{lesson.id}/{notebook.name}"] = notebook.read_bytes()
    return files


def tracked(root):
    """The files git tracks below root/docs, as paths below it; none where the checkout is
    no repository. A repository git cannot read (not a safe directory, say) is StagingError."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=root / "docs", capture_output=True)
    except FileNotFoundError:  # no git: only a checkout without .git builds
        listed = None
    if listed is not None and listed.returncode == 0:
        return set(os.fsdecode(listed.stdout).split("\0")) - {""}
    if (root / ".git").exists():
        said = (listed.stderr.decode(errors="replace").strip() if listed else "") or "not found"
        raise StagingError(f"git cannot list what this checkout tracks (git: "
                           f"{said.splitlines()[0]}), so the copies into docs/ cannot tell a "
                           f"committed file from their own: fix git here, then build again; "
                           f"nothing was changed")
    return set()


def written_here(path):
    """Whether `path` is a copy this step wrote: a regular file no one may write."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:  # another build removed it first
        return False
    return stat.S_ISREG(mode) and not mode & 0o222


def stage(root=ROOT):
    """Bring docs/ up to date, first refusing any link in the checkout: LinkInCheckout,
    RegistryError or StagingError is the one line that says what stops it."""
    docs = root / "docs"
    refuse_links(root)
    files, committed = wanted(root, load_lessons(root)), tracked(root)
    below = {str(folder) for path in files for folder in PurePosixPath(path).parents}
    if in_the_way := sorted(committed & (set(files) | below)):  # a copy, or a folder of them
        raise StagingError(f"docs/{in_the_way[0]} is committed where the build writes a copy "
                           f"(docs/figures/, docs/lesson_code/, docs/recordings/ and each "
                           f"notebook's page are the build's, and git ignores them): `git rm "
                           f"--cached docs/{in_the_way[0]}`; nothing was changed")
    with Staging(root) as staging:
        for path, content in files.items():
            target = docs / path
            if not (target.is_file() and written_here(target) and target.read_bytes() == content):
                staging.add(target, content, READ_ONLY)
        staging.commit()
    for pattern in COPIES:  # what it wrote once and no lesson wants now: a figure that is gone
        for path in docs.glob(pattern):
            name = path.relative_to(docs).as_posix()
            if name not in files and name not in committed and written_here(path):
                path.unlink(missing_ok=True)


def config_being_read():
    """The mkdocs.yml either generator is reading, however its command line named it: the
    file PyYAML's loader up the stack reads (MkDocs loads it from the open file), else the
    `config_file` the generator's own click parser took (Zensical reads it to a string
    first), else its default in the working folder. None when called from Python or for a
    stream (`-f -`)."""
    frame = inspect.currentframe()
    while frame is not None:
        loader = frame.f_locals.get("self")
        if isinstance(loader, yaml.reader.Reader) and not loader.name.startswith("<"):
            return Path(loader.name)
        frame = frame.f_back
    if (command := click.get_current_context(silent=True)) is None:
        return None
    named = command.params.get("config_file")  # MkDocs's is an open file
    if named is None:
        return next((Path(name) for name in ("zensical.toml", "mkdocs.yml")
                     if Path(name).is_file()), None)
    named = str(getattr(named, "name", named))
    return None if named.startswith("<") else Path(named)  # <stdin>: no folder to refuse


def checked_root():
    """The snippets' base_path (mkdocs.yml): this checkout's root, once the mkdocs.yml read
    is its own, SITE_URL is an address the theme can write and stage() has run; else one
    line saying why, and exit 1."""
    if (config := config_being_read()) is not None:
        try:  # before anything is read or copied: another checkout's code reads this one's
            refuse_another_checkout(config.resolve().parent)
        except PageError as error:
            raise SystemExit(f"error: {error}") from None
    if (url := os.environ.get("SITE_URL")) and not re.fullmatch(SITE_URL, url):
        raise SystemExit(f"error: SITE_URL (mkdocs.yml's site_url) is {url[:80]!r}: it must be "
                         f"an http(s) address of letters, digits and . - _ ~ % / only; set "
                         f"SITE_URL to one, such as https://user.github.io/lesson/")
    try:
        stage()
    except (LinkInCheckout, RegistryError, StagingError) as error:
        raise SystemExit(f"error: {error}") from None
    return str(ROOT)


if __name__ == "__main__":  # `python -m scripts.pages.site_files`: the copies alone
    checked_root()

"""What the tests of the commands share: a copy of the project, a command run in it as a
user runs it (without the suite's JAX settings), its one error line, the files it writes."""
import errno
import hashlib
import io
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from scripts.store.hashes import TOOL_PINS
from scripts.store.lessons import load_lessons
from scripts.store.outputs import analysis_outputs, lock_entry, lock_path, lock_text, read_lock

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
# What record.py and the docs build read and write; node_modules is linked, not copied.
PROJECT_PARTS = ("mkdocs.yml", "requirements.txt", "constraints.txt",
                 "pyproject.toml", "docs", "scripts", "lesson_code", "recordings", "figures")
# What record.py and bench.py write: a fault must leave these byte for byte as they were.
OUTPUTS = ("recordings", "figures", "docs/notebooks")
# The fixture lesson a course author adds (lesson_code/CONTRACT.md); these files go to lesson_code/.
FIXTURE_LESSON = FIXTURES / "second_lesson"
FIXTURE_FILES = ("psum_01.py", "psum_bars.py", "psum_01.schema.json", "psum_timing.py",
                 "psum_01_analysis.py", "psum_01_exercises.py", "psum_01_checks.py")


def skip_or_fail(reason, what="browser test"):
    """Skip when a tool is missing here; under CI, where it must be there, fail."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} cannot run under CI: {reason}")
    pytest.skip(reason)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "JAX_NUM_CPU_DEVICES")}
    return {**env, "NO_MKDOCS_2_WARNING": "1", **extra}


def project(destination, parts=PROJECT_PARTS, lesson=None, keep=()):
    """A copy of the project's `parts` (with requirements.txt, the tools' pins) under
    `destination`, node_modules linked; with `keep`, its course cut to those lessons
    (keep_lessons); with `lesson`, the fixture lesson added, unrecorded."""
    destination = Path(destination).resolve()
    if "requirements.txt" in parts:
        parts = (*parts, *TOOL_PINS)
    for name in parts:
        source = ROOT / name
        (destination / name).parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, destination / name, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.tmp", "node_modules"))
        else:
            shutil.copy2(source, destination / name)
    if (ROOT / "node_modules").exists():
        (destination / "node_modules").symlink_to(ROOT / "node_modules")
    if keep:
        keep_lessons(destination, *keep)
    if lesson is not None:
        add_fixture_lesson(destination)
    return destination


RECORD = "scripts/record.py"
# Root may write anywhere; without that capability, it meets a folder as a user does.
AS_A_USER = ["setpriv", "--bounding-set", "-dac_override"] if os.geteuid() == 0 else []


def run(*argv, cwd=ROOT, env=None, timeout=300, as_a_user=False, **popen):
    """`python ARGV` in `cwd`, to its end, as a user runs it (`as_a_user`: as root does too);
    its output as text."""
    if not {"stdout", "stderr"} & set(popen):
        popen["capture_output"] = True
    return subprocess.run([*(AS_A_USER if as_a_user else ()), sys.executable, *map(str, argv)],
                          cwd=cwd, text=True, timeout=timeout,
                          env=clean_env(PYTHONDONTWRITEBYTECODE="1", **(env or {})), **popen)


def in_activated_venv(*argv, cwd, timeout=300):
    """`argv` as a shell runs it after `. .venv/bin/activate` (the tests' own .venv): its bin
    first on PATH, VIRTUAL_ENV set, no PYTHONPATH."""
    venv = Path(sys.executable).parent.parent
    env = {key: value for key, value in clean_env().items() if key != "PYTHONPATH"}
    env.update(PATH=f"{venv}/bin{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv))
    return subprocess.run(list(map(str, argv)), cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def passed(done):
    """A finished command `done`, once it exited 0; else the end of what it printed fails."""
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done


ERROR = re.compile(r"(^|: )error: ")


def one_error(output, *words):
    """The one error line that ends `output` (text, or its lines), holding each of `words`:
    no line before it is an error, none is a traceback. Returns it."""
    lines = output.splitlines() if isinstance(output, str) else list(output)
    assert lines and "Traceback" not in "\n".join(lines), lines[-40:]
    *progress, last = lines
    assert [line for line in progress if ERROR.search(line)] == [], lines[-40:]
    for word in words:
        assert word in last, last
    return last


def refused(main, argv, capsys):
    """`main(argv)` in-process, refused before it did anything: exit 2 (its one-line
    argparse's too), nothing on stdout, one error line on stderr, which it returns."""
    try:
        status = main(argv)
    except SystemExit as refusal:
        status = refusal.code
    out, err = capsys.readouterr()
    assert (status, out) == (2, "") and err.count("\n") == 1, err
    return one_error(err)


def raised_in_one_line(error, call, *args, **kwargs):
    """The `error` that `call(*args, **kwargs)` raises, its message one line."""
    with pytest.raises(error) as caught:
        call(*args, **kwargs)
    assert "\n" not in str(caught.value) and "Traceback" not in str(caught.value), caught.value
    return caught.value


class FullDisk(io.FileIO):
    """A file whose first write lands 10 bytes, then finds the disk full: a truncated file."""

    def write(self, data):
        super().write(data[:10])  # unbuffered: on disk at once
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def snippet_sections(path):
    """{name: text} of each `# --8<-- [start:name]` ... `[end:name]` section of `path`."""
    pattern = re.compile(r"^# --8<-- \[start:([\w-]+)\]\n(.*?)^# --8<-- \[end:\1\]$",
                         re.MULTILINE | re.DOTALL)
    return {m.group(1): m.group(2) for m in pattern.finditer(Path(path).read_text())}


def comment_in_first_section(text):
    start = text.index("\n", text.index("# --8<-- [start:")) + 1
    return text[:start] + "# a comment readers see\n" + text[start:]


def edit(path, change):
    path.write_text(change(path.read_text()))


def edited(path, change):
    """edit() of `path` below the root a breakage is handed."""
    return lambda root: edit(root / path, change)


def written(*files):
    """Write each (path, text) below the root; a name may hold bytes that are not UTF-8."""
    def make(root):
        for relative, text in files:
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            (root / relative).write_text(text)
    return make


def files_under(path):
    """{file: its bytes} of `path`, a file or a folder (every file below it)."""
    return {file: file.read_bytes() for file in [path, *path.rglob("*")] if file.is_file()}


def snapshot(root):
    """Every file record.py may write under `root`, hidden ones included, with its bytes."""
    return {path.relative_to(root).as_posix(): path.read_bytes()
            for folder in OUTPUTS for path in sorted((Path(root) / folder).rglob("*"))
            if path.is_file()}


def changed(before, root):
    after = snapshot(root)
    return sorted(name for name in before.keys() | after.keys()
                  if before.get(name) != after.get(name))


def leftover_temp_files(root):
    """Staged files a run left behind (it must move or remove every one)."""
    return [path for folder in OUTPUTS for path in (Path(root) / folder).rglob("*.tmp")]


@contextmanager
def unchanged(root):
    """After the block: each file record.py writes under `root` byte for byte as it was, no .tmp."""
    before = snapshot(root)
    yield before
    assert changed(before, root) == [] and leftover_temp_files(root) == []


def ended_pid():
    """The pid of a process that has ended: its staged files are a killed run's."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


# --- a command left running, and what it leaves --------------------------------------------

def command_line(process):
    try:
        return process.cmdline()
    except psutil.Error:
        return []


class Started:
    """`python ARGV` in a session of its own, its stderr read line by line as it runs, its
    stdout kept in a file. A `with` block kills what is left of it."""

    def __init__(self, *argv, cwd=ROOT, env=None, **popen):
        with tempfile.NamedTemporaryFile(prefix="started-", suffix=".out", delete=False) as out:
            self.out = Path(out.name)
            self.process = subprocess.Popen(
                [sys.executable, *map(str, argv)], cwd=cwd, stdout=out, stderr=subprocess.PIPE,
                env=clean_env(PYTHONDONTWRITEBYTECODE="1", **(env or {})), text=True,
                start_new_session=True, **popen)
        self.pid = self.process.pid
        self.lines, self._queue = [], queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stderr:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for_line(self, prefix, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.1)
            except queue.Empty:
                continue
            if line is None:
                pytest.fail(f"it ended before {prefix!r}: {self.lines}")
            self.lines.append(line)
            if line.startswith(prefix):
                return
        pytest.fail(f"no {prefix!r} within {timeout} s: {self.lines}")

    def wait_until(self, condition, timeout=120):
        """Poll `condition()`; the bound only keeps a hung run from hanging the suite."""
        deadline = time.monotonic() + timeout
        while not (found := condition()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"never ready (exit {self.process.poll()}): {self.lines}")
            time.sleep(0.05)
        return found

    def wait_for_children(self, word, count, timeout=120):
        """Its descendant processes whose command line holds `word`, once `count` run."""
        return self.wait_until(lambda: len(found := [
            child for child in self.descendants()
            if word in " ".join(command_line(child))]) >= count and found, timeout)

    def descendants(self):
        try:
            return psutil.Process(self.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def signal(self, signum, group=False):
        """To the process, or (`group`) to its whole group, as a terminal's Ctrl-C goes."""
        os.killpg(self.pid, signum) if group else self.process.send_signal(signum)

    def finish(self, timeout=60):
        status = self.process.wait(timeout=timeout)
        while (line := self._queue.get(timeout=10)) is not None:
            self.lines.append(line)
        self.printed = self.out.read_text()
        return status, self.lines

    def stdout(self):
        """What it has printed so far; all it printed, once finished."""
        return self.printed if hasattr(self, "printed") else self.out.read_text()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.process.poll() is None:
            os.killpg(self.pid, signal.SIGKILL)
            self.process.wait()
        self.out.unlink(missing_ok=True)


def still_running(processes, timeout=15):
    """The command lines of `processes` still running after `timeout` (a zombie has
    finished), each killed so that a failing test leaves nothing behind either."""
    _, alive = psutil.wait_procs(processes, timeout=timeout)
    alive = [process for process in alive if not finished(process.pid)]
    left = [command_line(process) for process in alive]
    for process in alive:
        process.kill()
    return left


def finished(pid):
    """Gone, or a zombie waiting for its parent to reap it: it runs no more either way."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def scratch_of(pid):
    """The scratch folders (the kernel's files, rank files) of the run with this pid."""
    scratch = Path(tempfile.gettempdir())
    return sorted(scratch.glob(f"record-{pid}-*")) + sorted(scratch.glob(f"ranks-{pid}-*"))


@contextmanager
def stdout_to(where):
    """A command's stdout: "closed", the write end of a pipe whose reader is gone (`| head -1`
    once head has its line); "full", a full disk (/dev/full); otherwise a pipe read back."""
    if where == "full":
        with open("/dev/full", "w") as full:
            yield full
    elif where == "closed":
        read, write = os.pipe()
        os.close(read)
        try:
            yield write
        finally:
            os.close(write)
    else:
        yield subprocess.PIPE


def git(root, *args):
    """`git ARGS` in `root`, as a committer with a name; its stdout."""
    return subprocess.run(["git", "-c", "user.name=tests", "-c", "user.email=tests@localhost",
                           *map(str, args)], cwd=root, check=True, capture_output=True,
                          text=True).stdout


def hanging_ranks(root, lesson):
    """The environment of a run only a signal ends: the copy's registry names a rank that
    hangs once `lesson` ran, its peers waiting in a collective (fixtures/failing_rank.py)."""
    shutil.copy(FIXTURES / "failing_rank.py", root / "lesson_code" / "hanging_rank.py")
    registry = root / "lesson_code" / "lessons.toml"
    registry.write_text(registry.read_text().replace(
        f'rank_module = "{lesson.rank_module}"', 'rank_module = "lesson_code.hanging_rank"'))
    return {"FAILING_RANK": "hang", "WRAPPED_RANK": lesson.rank_module}


# --- the fixture lesson, added to a copy as CONTRACT.md says -------------------------------

# What adding a lesson may change (its outputs) and must not (scripts/, tests/).
DIGESTED = ("scripts", "tests", "recordings", "figures", "docs/notebooks")


def digests(root, folders):
    return {path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for folder in folders for path in sorted((root / folder).rglob("*"))
            if path.is_file() and "__pycache__" not in path.parts}


def fixture_entry():
    """The fixture lesson's [[lesson]] entry, as text, and its id."""
    entry = (FIXTURE_LESSON / "registry_entry.toml").read_text()
    return entry, tomllib.loads(entry)["lesson"][0]["id"]


def add_fixture_lesson(root):
    """Add the fixture lesson to the project at `root` (its module and renderer in
    lesson_code/, a [[lesson]] entry, a page with no nav line); its Lesson. A project that
    has it already (`make test-two-lessons`) loses it first, so it is added unrecorded."""
    entry, lesson_id = fixture_entry()
    keep_lessons(root, *(one for one in load_lessons(root) if one != lesson_id))
    for name in FIXTURE_FILES:
        shutil.copy(FIXTURE_LESSON / name, root / "lesson_code" / name)
    if (root / "docs").is_dir():
        shutil.copy(FIXTURE_LESSON / f"{lesson_id}.md", root / "docs" / "lessons")
    registry = root / "lesson_code" / "lessons.toml"
    registry.write_text(registry.read_text() + entry)
    return load_lessons(root)[lesson_id]


def keep_lessons(root, *ids):
    """`root`'s course cut to the lessons `ids` ([course] kept): every other lesson's entry,
    page, nav line, outputs and lock entries taken out. A test of what the machinery does
    for every lesson then costs those lessons, whatever the size of the course."""
    registry = root / "lesson_code" / "lessons.toml"
    head, *entries = re.split(r"(?m)^(?=\[\[lesson\]\]$)", registry.read_text())
    named = {tomllib.loads(entry)["lesson"][0]["id"]: entry for entry in entries}
    registry.write_text("".join([head, *(named[one] for one in named if one in ids)]))

    def gone(name):  # <id>.cpu.json, <id>-mechanism.svg, <id>/: the longest id it starts with
        owners = [one for one in named if name == one or name.startswith((f"{one}.", f"{one}-"))]
        return bool(owners) and max(owners, key=len) not in ids

    for folder in (*OUTPUTS, "recordings/analysis", "docs/lessons"):
        for path in (root / folder).iterdir() if (root / folder).is_dir() else ():
            if gone(path.name):
                shutil.rmtree(path) if path.is_dir() else path.unlink()
    config, page = root / "mkdocs.yml", re.compile(r"(?:lessons|notebooks)/([^/\s\"']+\.md)")
    if config.exists():  # a nav line naming a page taken out
        config.write_text("".join(line for line in config.read_text().splitlines(True)
                                  if not any(map(gone, page.findall(line)))))
    if lock_path(root).exists():
        lock_path(root).write_text(lock_text({path: inputs for path, inputs in
                                              read_lock(root).items()
                                              if not gone(path.split("/")[-1])}))


def rederive_analyses(root):
    """Remake every lesson's analyses from the recordings in `root`, and their lock entries,
    as `--render-only` would, leaving the figures: a test that plants hostile text in a
    recording checks the pages, not whether a figure can draw it."""
    lock = read_lock(root)
    for lesson in load_lessons(root).values():
        for output in analysis_outputs(lesson):
            if (root / output.source).exists():
                text = output.kind.render(json.loads((root / output.source).read_text()))
                (root / output.path).write_text(text)
                lock[output.path] = lock_entry(output, text, root)
    lock_path(root).write_text(lock_text(lock))

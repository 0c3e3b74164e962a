"""The TPU job, end to end through a fake gcloud (tests/fixtures/fake_gcloud), each flow in
a fresh clone: `git archive HEAD` is real and only the clone's recordings/ can change."""
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from conftest import FIRST_LESSON, FIXTURES, LESSONS, ROOT, SEED, module_file, recording_name
from harness import (FIXTURE_LESSON, PROJECT_PARTS, RECORD, Started, changed, edit, files_under,
                     git, one_error, passed, project, raised_in_one_line, refused, run, snapshot,
                     unchanged)
from fixtures.tpu_recording_fixture import FIXTURE, write_tpu_recording, write_tpu_sweep
from scripts import tpu_job
from scripts.hardware.verify import RefusedRecording, check_tpu_recording, check_tpu_sweep
from scripts.hardware.tpu import RUNTIMES, UV_VERSION, accelerators_for, dry_run_text, job_steps

# The job's default lesson is the registry's first; the canned TPU recording is the seed's.
ID = SEED.id
MODULE = module_file(SEED)
TARGET = f"{ID}.tpu.json"
SWEEP_TARGET = f"{ID}.tpu-sweep.json"  # bench.py --platform tpu, on the same VM
VM = ["--name", "test-tpu", "--zone", "us-east5-b", "--accelerator", "v6e-4"]


@pytest.fixture(autouse=True)
def without_libtpu(monkeypatch):
    """The job as the default install runs it, whatever this one holds: a dry-run compiles
    nothing (tests/test_tpu_output.py runs that step on CPU devices)."""
    installed = importlib.metadata.version

    def version(name):
        if name == "libtpu":
            raise importlib.metadata.PackageNotFoundError(name)
        return installed(name)
    monkeypatch.setattr(importlib.metadata, "version", version)


@pytest.fixture
def clone(tmp_path):
    return clone_into(tmp_path / "repo")


def clone_into(repo):
    """The project as it is now (an uncommitted change to the job is what its tests run),
    committed in a repository of its own: the job archives HEAD."""
    project(repo, (*PROJECT_PARTS, ".gitignore"))
    for args in (("init", "--quiet"), ("add", "--all"), ("commit", "--quiet", "-m", "as it is")):
        git(repo, *args)
    return repo


@pytest.fixture
def gcloud(tmp_path, monkeypatch):
    """Put the fake gcloud first on PATH; returns a reader of the argv it was called with."""
    log = tmp_path / "gcloud-calls.jsonl"
    monkeypatch.setenv("PATH", f"{FIXTURES / 'fake_gcloud'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_GCLOUD_LOG", str(log))
    monkeypatch.setenv("FAKE_GCLOUD_MODE", "success")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where a job keeps its fetches
    for name in ("TPU_NAME", "ZONE", "PROJECT", "FAKE_GCLOUD_RECORDING", "FAKE_GCLOUD_SWEEP",
                 "FAKE_GCLOUD_BLOCK", "FAKE_GCLOUD_READY"):
        monkeypatch.delenv(name, raising=False)
    return lambda: [json.loads(line) for line in log.read_text().splitlines()] \
        if log.exists() else []


def canned(clone, tmp_path, monkeypatch, sweep=True, **changes):
    """The recording the fake VM hands back (fresh, or with `changes`) and, with `sweep`
    (True, or write_tpu_sweep's options), its sweep; their paths."""
    fetched = write_tpu_recording(tmp_path / "fetched.json", clone / MODULE, clone, **changes)
    monkeypatch.setenv("FAKE_GCLOUD_RECORDING", str(fetched))
    if not sweep:
        return fetched, None
    swept = write_tpu_sweep(tmp_path / "sweep.json", clone, **({} if sweep is True else sweep))
    monkeypatch.setenv("FAKE_GCLOUD_SWEEP", str(swept))
    return fetched, swept


def job_commands(*args, **kwargs):  # what the job runs, in order, and the page shows
    return [step.command for step in job_steps(*args, **kwargs) if step.command is not None]


def verbs(calls):  # create, scp, ssh, delete
    return [call[3] for call in calls]


def job_error(err):
    """The one error line among the job's own lines (what the VM prints passes through)."""
    lines = err.splitlines() if isinstance(err, str) else err
    return one_error([line for line in lines if line.startswith("tpu_job: ")])


def failed(clone, capsys, *flags):
    """The job's one error line, after it failed (exit 1)."""
    assert tpu_job.main([*VM, *flags], root=clone) == 1
    return job_error(capsys.readouterr().err)


def test_the_job_lands_checked_recordings_that_turn_the_page_s_predictions_into_verdicts(
        clone, gcloud, monkeypatch, capsys, tmp_path):
    """The job lands the lesson's recording and a TPU sweep whose 32 MiB own costs are 1.5x
    the predictions (inside their band) and 32 B ones 10x; the built page judges them, and
    the lesson page has a TPU tab, in a build that reads UTF-8 in an ASCII locale."""
    from site_build import build
    from test_site import (LESSON_PAGE, NOT_YET, RECORDED_ON_TPU, course_entries,
                           pages_saying, tpu_tab)
    fetched, sweep = canned(clone, tmp_path, monkeypatch, sweep=dict(
        over_predicted=lambda row: 10.0 if row["bytes"] == 32 else 1.5))
    before = snapshot(clone)
    assert tpu_job.main([*VM, "--create", "--delete"], root=clone) == 0
    err = capsys.readouterr().err
    assert "tpu_job: error:" not in err
    assert changed(before, clone) == [f"recordings/{SWEEP_TARGET}", f"recordings/{TARGET}"]
    assert [(clone / "recordings" / name).read_bytes() for name in (TARGET, SWEEP_TARGET)] == \
        [fetched.read_bytes(), sweep.read_bytes()]
    # The job issues exactly what job_commands() lists, in its own temporary directory.
    issued = gcloud()
    assert verbs(issued) == ["create", "scp", "ssh", "ssh", "ssh", "scp", "ssh", "scp", "delete"]
    workdir = Path(issued[1][4]).parent
    listed = job_commands("test-tpu", "us-east5-b", "v6e-4", workdir=workdir, root=clone)
    assert listed[0][:2] == ["git", "archive"]
    assert [["gcloud", *call] for call in issued] == listed[1:]
    assert not workdir.exists()  # the archive and the fetched copy went with it
    assert "scripts/record.py --platform tpu" in issued[4][-1]
    assert issued[6][-1] == (f"cd {ID} && .venv/bin/python scripts/bench.py "
                             f"--platform tpu --lesson {ID}")
    assert issued[7][4] == f"test-tpu:{ID}/recordings/{SWEEP_TARGET}"
    # Each recording lands only after it was checked.
    assert len([line for line in err.splitlines() if line.startswith("tpu_job: [")]) == 12
    assert err.index("] validate") < err.index("tpu_job: wrote")
    assert err.index(f"] validate {SWEEP_TARGET}") < \
        err.index(f"wrote {clone / 'recordings' / SWEEP_TARGET}")
    for argv in ("--render-only", "--check"):
        passed(run(RECORD, argv, cwd=clone))
    assert "Measured on 4 × TPU v6 lite" in (
        clone / "figures" / f"{ID}-tpu-predictions.svg").read_text()
    site = tmp_path / "site"
    built = build(clone, site, environment={"LC_ALL": "C", "LANG": "C",
                                            "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"})
    assert built.returncode == 0 and "codec" not in built.stderr, built.stderr[-3000:]
    page = (site / "going-further" / "tpu" / "index.html").read_text()
    cells = [re.sub(r"<[^>]+>", "", cell).strip()
             for cell in re.findall(r"<td\b[^>]*>(.*?)</td>", page, re.S)]
    # 15 verdicts. The committed compiled record says what each row's program compiles to on a
    # v6e 2×2: every reduce-scatter and the 32 B all-gathers compile to all-reduces, so those 7
    # are not judged; the all-reduces at 32 B (10× the model) are contradicted; the all-gathers
    # and all-reduces at 32 MiB, and their p = 4 over p = 2 ratios (the model's 0.75), supported.
    assert cells.count("compiles to all-reduce: not judged") == 7
    assert cells.count("contradicted") == 2 and cells.count("supported") == 6
    assert "Measured against predicted." in page and "not yet run" not in page
    lesson = (site / LESSON_PAGE).read_text()
    assert "TPU v6 lite" in tpu_tab(lesson) and "1 January 2000" in tpu_tab(lesson)
    assert "Completed TPU median microseconds" in lesson and "Stale recording" not in lesson
    assert pages_saying(site, "Not yet recorded") == []
    entry = course_entries(site)[SEED.id]
    assert RECORDED_ON_TPU in entry and NOT_YET not in entry
    assert "·" in (site / "index.html").read_text()
    assert pages_saying(site, "The lesson was recorded on 4 × TPU v6 lite on 1 January 2000")


@pytest.mark.parametrize("case", ["missing", "stale"])
def test_a_failed_sweep_keeps_the_lesson_s_checked_recording(case, clone, gcloud, monkeypatch,
                                                             capsys, tmp_path):
    fetched, swept = canned(clone, tmp_path, monkeypatch,
                            sweep=case == "stale" and dict(stale=True))
    before = snapshot(clone)
    line = failed(clone, capsys, "--create", "--delete")
    assert changed(before, clone) == [f"recordings/{TARGET}"]
    assert (clone / "recordings" / TARGET).read_bytes() == fetched.read_bytes()
    assert verbs(gcloud())[-1] == "delete"
    assert {"missing": "copy the sweep back failed",
            "stale": "the fetched tpu-sweep recording is refused: "}[case] in line
    # What was fetched and not installed is kept, and named.
    assert [Path(path).read_bytes() for path in re.findall("what the VM made is kept: ([^;]+)",
            line)] == ([swept.read_bytes()] if swept else [])


@pytest.mark.parametrize("changes, reason", [
    (dict(chips=2 * SEED.devices), f"it measured p = {2 * SEED.devices}, more than the VM's "
                                   f"{SEED.devices} chips"),
    (dict(environment={"backend": "cpu"}), "its backend is 'cpu'")])
def test_check_tpu_sweep_refuses_with_the_reason(tmp_path, changes, reason):
    with pytest.raises(RefusedRecording, match=reason):
        check_tpu_sweep(write_tpu_sweep(tmp_path / "sweep.json", ROOT, **changes), SEED, ROOT)
    assert check_tpu_sweep(write_tpu_sweep(tmp_path / "ok.json", ROOT), SEED,
                           ROOT)["kind"] == "sweep"


def test_recordings_dir_option_points_the_job_elsewhere(clone, gcloud, monkeypatch, tmp_path):
    fetched, sweep = canned(clone, tmp_path, monkeypatch)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with unchanged(clone):
        assert tpu_job.main([*VM, "--recordings-dir", str(elsewhere)], root=clone) == 0
    assert {path.name: path.read_bytes() for path in elsewhere.iterdir()} == {
        TARGET: fetched.read_bytes(), SWEEP_TARGET: sweep.read_bytes()}
    assert verbs(gcloud()) == ["scp", "ssh", "ssh", "ssh", "scp", "ssh", "scp"]  # no create


@pytest.mark.parametrize("landing, why", [("a file", "File exists"),
                                          ("a read-only folder", "Permission denied")])
def test_a_recordings_dir_the_job_cannot_write_is_refused_before_any_gcloud_call(
        landing, why, clone, gcloud, tmp_path):
    folder = tmp_path / "landing"
    folder.write_text("") if landing == "a file" else folder.mkdir(mode=0o555)
    done = run("scripts/tpu_job.py", *VM, "--create", "--delete", "--recordings-dir", folder,
               cwd=clone, timeout=120, as_a_user=True)
    assert done.returncode == 2 and gcloud() == []  # refused before anything ran
    assert f"{folder}/{TARGET}: cannot be written ({why}); nothing was changed, and nothing " \
           f"was run: give --recordings-dir a folder" in job_error(done.stderr)


# A commit that points what the job writes elsewhere: refused before any gcloud call or
# compile, the link's target untouched.
LINKED = {
    "recordings/ to a folder outside": ("recordings", [*VM, "--create", "--delete"]),
    "the compiled record to a file outside": (f"recordings/{ID}.tpu-compiled.json",
                                              ["--write-compiled"]),
    "recordings/ under --write-compiled": ("recordings", ["--write-compiled"]),
    "the page's commands to a file outside": (str(tpu_job.DOCS_FILE), ["--write-docs"])}


@pytest.mark.parametrize("case", LINKED)
def test_a_committed_link_is_refused_before_the_job_writes_or_runs_anything(
        case, clone, gcloud, capsys, tmp_path, monkeypatch):
    link, flags = LINKED[case]
    outside = tmp_path / "outside"
    outside.mkdir() if link == "recordings" else outside.write_text("someone's file\n")
    if (clone / link).is_dir():
        shutil.copytree(clone / link, outside, dirs_exist_ok=True)
        shutil.rmtree(clone / link)
    else:
        (clone / link).unlink(missing_ok=True)
    (clone / link).symlink_to(outside)
    before = files_under(outside)
    monkeypatch.setattr("scripts.hardware.compile.missing_libtpu", lambda: None)  # no compile
    assert tpu_job.main(flags, root=clone) == 2 and gcloud() == []  # refused before all
    assert f"{link} is a symbolic link" in job_error(capsys.readouterr().err)
    assert files_under(outside) == before


REFUSED = {
    "stale": (dict(stale=True), f"stale, .*{MODULE}.* changed; run `python scripts/tpu_job.py"),
    "cpu": (dict(environment={"backend": "cpu"}), "its backend is 'cpu'"),
    "8 devices": (dict(environment={"deviceCount": 8}), "ran on 8 devices, not 4"),
    "no TPU kind": (dict(environment={"deviceKind": "cpu"}), "names no TPU"),
    "no PASS": (dict(stdout="Gradient reference: []\n"), "does not end with 'PASS"),
    "invalid": (dict(environment={"deviceCount": "four"}), "invalid at environment/")}


@pytest.mark.parametrize("case", REFUSED)
def test_check_tpu_recording_refuses_with_the_reason(case, tmp_path):
    changes, reason = REFUSED[case]
    fetched = write_tpu_recording(tmp_path / "fetched.json", ROOT / MODULE, ROOT, **changes)
    assert re.search(reason, str(raised_in_one_line(RefusedRecording, check_tpu_recording,
                                                    fetched, SEED)))


# A step failed by the fake gcloud's mode, or (a refused recording) by what it hands back;
# each with words of the one line.
FAILURES = json.loads((FIXTURES / "tpu_job_failures.json").read_text())


@pytest.mark.parametrize("mode", FAILURES)
def test_a_failed_step_is_one_line_and_changes_nothing(mode, clone, gcloud, monkeypatch,
                                                      capsys, tmp_path):
    if mode in REFUSED:
        canned(clone, tmp_path, monkeypatch, sweep=False, **REFUSED[mode][0])
    else:
        monkeypatch.setenv("FAKE_GCLOUD_MODE", mode)
    with unchanged(clone):
        line = failed(clone, capsys, "--create", "--delete")
    assert all(words in line for words in FAILURES[mode])
    assert "exited with return code" not in line and "recordings/ is as it was" in line
    if len(gcloud()) > 1:  # the VM this run made is deleted anyway, and the line says so
        assert verbs(gcloud())[-1] == "delete" and line.endswith("; the VM test-tpu was deleted")
    else:  # a refused create made no VM, and the name may be someone else's
        assert verbs(gcloud()) == ["create"] and line.endswith("; no VM was created")


DELETE_IT = "`gcloud compute tpus tpu-vm delete test-tpu --zone us-east5-b --quiet`"


@pytest.mark.parametrize("mode, flag, ending", [
    # A given VM is deleted after a failure; here its delete failed too (not logged in).
    ("not-logged-in", "--delete", f"so test-tpu may still be running and billing: run {DELETE_IT}"),
    ("remote-fail", "--create", f"; the VM test-tpu is still running: {DELETE_IT} deletes it")])
def test_a_failure_that_leaves_a_vm_says_how_to_delete_it(mode, flag, ending, clone, gcloud,
                                                          monkeypatch, capsys):
    monkeypatch.setenv("FAKE_GCLOUD_MODE", mode)
    line = failed(clone, capsys, flag)
    assert verbs(gcloud())[-1] == ("delete" if flag == "--delete" else "ssh")
    assert line.endswith(ending)


def test_gcloud_missing_or_uncommitted_lesson_code_is_one_line_before_any_command(
        clone, gcloud, monkeypatch, capsys, tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "git").symlink_to(shutil.which("git"))
    with_gcloud = os.environ["PATH"]
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    with unchanged(clone):
        line = failed(clone, capsys, "--create", "--delete")
    assert line.startswith("tpu_job: error: gcloud not found: install the Google Cloud CLI")
    monkeypatch.setenv("PATH", with_gcloud)
    edit(clone / MODULE, lambda text: text + "# an edit the VM would not see\n")
    line = failed(clone, capsys, "--create", "--delete")
    assert f"{MODULE} differ from HEAD" in line and "git add" in line and gcloud() == []


# Values as "--flag=value", so that argparse hands over even one that starts with "-".
NOT_NAMES = [("--name", "x; rm -rf ~"), ("--project", "-p"),
             ("--zone", "us-east5-b\n")]  # `$` alone takes a "\n"
REFUSED_REQUESTS = {
    **{f"accelerator {name}": ([f"--accelerator={name}", "--create"],
                               ("the job runs on single-host TPU VMs only",
                                "use v6e-4 or v5litepod-4"))
       for name in ("v4-8", "v6e-16")},  # another generation; a slice
    "another chip count": (["--accelerator=v5litepod-8"], (
        f"--accelerator v5litepod-8 has 8 chips and {ID} records on {SEED.devices} (`devices` "
        f"in lesson_code/lessons.toml); use v6e-4 or v5litepod-4, or leave --accelerator out",)),
    "an unknown lesson": (["--lesson=distributed-3"], (
        f"--lesson distributed-3: no such lesson in lesson_code/lessons.toml; known: "
        f"{next(iter(LESSONS))}",)),  # the first ids, however long the course
    **{f"{flag} {value!r}": ([f"{flag}={value}"], ("does not look like",))
       for flag, value in NOT_NAMES}}


@pytest.mark.parametrize("request_", REFUSED_REQUESTS)
def test_a_request_that_cannot_work_is_refused_before_anything_runs(request_, gcloud, capsys):
    flags, words = REFUSED_REQUESTS[request_]
    options = {**dict(zip(VM[::2], VM[1::2])), **dict(flag.split("=", 1) for flag in flags
                                                       if "=" in flag)}
    argv = [f"{k}={v}" for k, v in options.items()] + [f for f in flags if "=" not in f]
    line = refused(tpu_job.main, [*argv, "--dry-run"], capsys)
    assert all(word in line for word in words) and gcloud() == []


def test_the_defaults_are_the_environment_s_and_the_accelerator_the_lesson_s(gcloud,
                                                                           monkeypatch, capsys):
    assert FIRST_LESSON == SEED  # the job's default lesson: what the tests naming none rely on
    for name, value in dict(TPU_NAME="env-tpu", ZONE="us-east1-d", PROJECT="env-project").items():
        monkeypatch.setenv(name, value)
    assert tpu_job.main(["--create", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "--accelerator-type v6e-4 --version v2-alpha-tpuv6e" in out
    assert f"record.py --platform tpu --lesson {ID}'" in out
    assert "ssh env-tpu --zone us-east1-d --project env-project" in out
    assert "tpu-vm delete" not in out


@pytest.mark.parametrize("devices", [2, 8])
def test_a_lesson_gets_a_vm_with_its_chip_count_and_is_recorded_alone(tmp_path, gcloud,
                                                                      capsys, devices):
    """On 2 chips, which no single-host VM has, refused in one line; on 8, a v6e-8 for it
    alone (the others' recordings cannot fail with it)."""
    two_lessons = project(tmp_path / "two", ("requirements.txt", "constraints.txt", "scripts",
                                             "lesson_code", "recordings"), lesson=FIXTURE_LESSON)
    registry = two_lessons / "lesson_code" / "lessons.toml"
    registry.write_text(registry.read_text().replace("devices = 2", f"devices = {devices}"))
    status = tpu_job.main(["--lesson", "psum-01", "--name", "t", "--zone", "us-east5-b",
                           "--create", "--dry-run"], root=two_lessons)
    out, err = capsys.readouterr()
    if devices == 2:
        assert (status, out, job_error(err)) == (2, "", (
            "tpu_job: error: psum-01 records on 2 devices and no single-host TPU VM has 2 "
            "chips (1, 4 or 8); change its `devices` in lesson_code/lessons.toml to one of those"))
        return
    assert status == 0 and "--accelerator-type v6e-8 --version v2-alpha-tpuv6e" in out
    assert "scripts/record.py --platform tpu --lesson psum-01'" in out
    assert "psum-01/recordings/psum-01.tpu.json" in out
    assert not [lesson for lesson in LESSONS if lesson != "psum-01" and lesson in out]
    assert "bench.py" not in out and "sweep" not in out  # a lesson without a sweep: none
    assert "# validate psum-01.tpu.json (schema, backend tpu, 8 TPU devices" in out


def test_the_job_gives_the_vm_python_3_11_with_the_uv_make_install_uses_then_the_pins():
    [command] = [step.command for step in job_steps("my-tpu", "us-east5-b", "v6e-4")
                 if step.title.startswith("install uv")]
    setup = command[command.index("--command") + 1].split(" && ")
    assert setup[1] == f"python3 -m pip install --user --quiet uv=={UV_VERSION}"
    assert setup[2] == "python3 -m uv venv --python 3.11 .venv"
    assert setup[3].startswith("python3 -m uv pip install --python .venv/bin/python "
                               "-r requirements.txt -c constraints.txt ")
    assert setup[3].endswith('"jax[tpu]==0.10.2"')
    subprocess.run(["bash", "-n", "-c", " && ".join(setup)], check=True)  # valid shell
    # One uv for the VM and for `make install`: the Makefile reads the job's constant.
    planned = subprocess.run(["make", "-n", "-B", ".venv/.installed"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
    assert f"pip install --quiet --disable-pip-version-check uv=={UV_VERSION}\n" in planned


@pytest.mark.parametrize("accelerator", accelerators_for(FIRST_LESSON.devices))
def test_dry_run_prints_every_command_and_runs_none(accelerator, gcloud, capsys,
                                                    monkeypatch, tmp_path):
    """Then, without libtpu, how to see what XLA:TPU would compile."""
    monkeypatch.chdir(tmp_path)
    argv = ["--name", "my-tpu", "--zone", "us-east5-b", "--accelerator", accelerator,
            "--project", "my-project", "--create", "--delete", "--dry-run"]
    assert tpu_job.main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    commands = job_commands("my-tpu", "us-east5-b", accelerator, "my-project")
    assert [line for line in printed if not line.startswith("#")] == \
           [shlex.join(command) for command in commands]
    assert f"--version {RUNTIMES[accelerator]}" in printed[3]
    assert gcloud() == [] and list(tmp_path.iterdir()) == []  # not even git archive ran
    assert printed[-1].startswith("# libtpu is not installed, so nothing was compiled for the "
                                  "TPU: `.venv/bin/uv pip install --python .venv/bin/python "
                                  "'libtpu==0.0.42.*'` (the TPU runtime the pinned jax[tpu]")


def test_without_libtpu_or_with_a_broken_one_the_compile_step_says_so_in_one_line(
        capsys, monkeypatch):
    """--write-compiled without libtpu is refused (exit 2). With libtpu's metadata but no
    library (this install, told it has one), the dry-run prints its commands, then one line
    naming the reinstall, exit 1; --write-compiled that line before compiling anything."""
    record = (ROOT / recording_name(SEED, "tpu-compiled")).read_bytes()
    assert refused(tpu_job.main, ["--write-compiled"], capsys).startswith(
        "tpu_job: error: libtpu is not installed, so nothing was compiled for the TPU")
    others = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda name: "0.0.42.1" if name == "libtpu" else others(name))
    said = ("tpu_job: error: libtpu 0.0.42.1 could not compile for a v6e-4 (JAX TPU support not "
            "installed; cannot generate TPU topology. See https://github.com/jax-ml/jax#"
            "installation); reinstall the version jax[tpu] pins: `.venv/bin/uv pip install "
            "--python .venv/bin/python --reinstall 'libtpu==0.0.42.*'`")
    assert tpu_job.main([*VM, "--dry-run"]) == 1
    out, err = capsys.readouterr()
    assert "scripts/record.py" in out and job_error(err) == said
    assert tpu_job.main(["--write-compiled"]) == 1 and job_error(capsys.readouterr().err) == said
    assert (ROOT / recording_name(SEED, "tpu-compiled")).read_bytes() == record


def test_the_page_shows_the_commands_the_job_runs_now():
    committed = (ROOT / tpu_job.DOCS_FILE).read_text()
    assert committed == dry_run_text(job_steps(**tpu_job.DOCS_EXAMPLE)), \
        f"{tpu_job.DOCS_FILE} is out of date; run `python scripts/tpu_job.py --write-docs`"
    section = (ROOT / "docs" / "going-further" / "tpu.md").read_text()
    assert section.startswith("# Going further: run it on a TPU VM")
    fences = [block.split("```", 1)[0].strip() for block in section.split("```bash\n")[1:]]
    assert f'--8<-- "{tpu_job.DOCS_FILE.as_posix()}"' in fences  # included, not pasted


def test_the_canned_recording_is_the_cpu_one_s_and_a_valid_tpu_recording(tmp_path):
    cpu = json.loads((ROOT / recording_name(SEED)).read_text())
    canned_recording = json.loads(FIXTURE.read_text())
    drifted = f"{FIXTURE.name} no longer matches the CPU recording; copy its data.gradient, " \
              f"and data.panels into the fixture"
    assert canned_recording["data"]["panels"] == cpu["data"]["panels"], drifted
    # The gradient to float32's scale, not to the bit: it is NumPy's float32 reference,
    # whose matrix products take the BLAS kernel of the processor they ran on, and a
    # recording made with AVX-512 differs from the fixture's in the last bits (2e-9 on 3e-3).
    gradient = np.asarray(cpu["data"]["gradient"])
    np.testing.assert_allclose(canned_recording["data"]["gradient"], gradient, rtol=0,
                               atol=1e-5 * np.abs(gradient).max(), err_msg=drifted)
    fresh = write_tpu_recording(tmp_path / "fresh.json", ROOT / MODULE, ROOT)
    assert check_tpu_recording(fresh, SEED)["provenance"] == "recorded_tpu_computation"
    assert not (ROOT / "recordings" / TARGET).exists() or \
        json.loads((ROOT / "recordings" / TARGET).read_text())["generatedAt"] != \
        canned_recording["generatedAt"]


# --- whatever ends the job ------------------------------------------------------------------
# The job's whole process group signalled, as a CI cancel (SIGTERM), a dropped ssh session
# (SIGHUP) or Ctrl-C would, while the fake gcloud holds one step open.

STEPS = ("create", "copy", "run", "fetch")  # as the fake gcloud names them


@pytest.fixture(scope="module")
def signal_clone(tmp_path_factory):
    """One clone for every signalled job: each stops before anything is installed."""
    return clone_into(tmp_path_factory.mktemp("signals") / "repo")


@pytest.fixture
def job(signal_clone, gcloud, tmp_path):
    """`job(block, *flags)` starts scripts/tpu_job.py, the fake gcloud holding the steps in
    `block` open; whatever the test does, no fake is left waiting and no job running."""
    ready, started = tmp_path / "ready", []
    ready.mkdir()

    def start(block, *flags):
        started.append(Started("scripts/tpu_job.py", *VM, *flags, cwd=signal_clone,
                               env={"FAKE_GCLOUD_BLOCK": block,
                                    "FAKE_GCLOUD_READY": str(ready)}))
        return started[-1]
    start.ready = ready
    yield start
    for step in (*STEPS, "delete"):
        (ready / f"{step}.go").touch()
    for command in started:
        command.__exit__()


def reached(job, command, step):
    """The pid of the fake gcloud once it holds `step` open."""
    command.wait_until((job.ready / step).exists, timeout=60)
    return int((job.ready / step).read_text())


@pytest.mark.slow
@pytest.mark.parametrize("step, signum", [*((step, signum) for step in STEPS
                                            for signum in (signal.SIGTERM, signal.SIGHUP)),
                                          ("run", signal.SIGINT)],
                         ids=lambda value: getattr(value, "name", value))
def test_a_signal_at_any_step_kills_gcloud_and_still_deletes_the_vm(step, signum, job, gcloud):
    running = job(step, "--create", "--delete")
    gcloud_pid = reached(job, running, step)
    running.signal(signum, group=True)
    status, lines = running.finish()
    assert status == 128 + signum
    assert verbs(gcloud())[-1] == "delete" and verbs(gcloud()).count("delete") == 1
    assert (job.ready / "delete.done").exists()
    assert not psutil.pid_exists(gcloud_pid)  # the step's gcloud was killed, not left running
    assert job_error(lines).startswith(f"tpu_job: error: interrupted by "
                                       f"{signal.Signals(signum).name} while it ran: ")
    assert job_error(lines).endswith("; recordings/ is as it was; the VM test-tpu was deleted")


@pytest.mark.slow
def test_a_second_signal_does_not_cut_the_delete_short(job):
    running = job("run,delete", "--create", "--delete")
    reached(job, running, "run")
    running.signal(signal.SIGTERM, group=True)
    delete_pid = reached(job, running, "delete")
    for signum in (signal.SIGINT, signal.SIGINT, signal.SIGHUP):  # Ctrl-C twice, ssh gone
        running.signal(signum, group=True)
    time.sleep(0.2)
    assert psutil.pid_exists(delete_pid) and running.process.poll() is None
    (job.ready / "delete.go").touch()
    status, lines = running.finish()
    assert status == 128 + signal.SIGTERM  # the first signal's, after the delete finished
    assert (job.ready / "delete.done").exists()
    assert job_error(lines).endswith("; the VM test-tpu was deleted")


@pytest.mark.slow
def test_a_signal_without_delete_names_the_command_that_deletes_the_vm(job, gcloud):
    running = job("run", "--create")
    reached(job, running, "run")
    running.signal(signal.SIGHUP, group=True)
    status, lines = running.finish()
    assert status == 128 + signal.SIGHUP and "delete" not in verbs(gcloud())
    assert job_error(lines).endswith(f"; the VM test-tpu is still running: {DELETE_IT} deletes it")

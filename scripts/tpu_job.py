"""Regenerate recordings/<lesson>.tpu.json on a single-host TPU VM with the lesson's chips,
or the rank module's run on every worker of a slice.

    python scripts/tpu_job.py --name my-tpu --zone us-east5-b --accelerator v6e-4 --create --delete
    python scripts/tpu_job.py --lesson ID ...    # another lesson (default: the registry's first)
    python scripts/tpu_job.py ... --accelerator v6e-16   # 4 workers: <lesson>.tpu-processes.json
    python scripts/tpu_job.py ... --dry-run      # print every command, run none
    python scripts/tpu_job.py --write-docs       # regenerate docs/sections/tpu_commands.txt

The VM gets the committed tree (git archive HEAD), a uv-managed Python 3.11 with the
exact pins (stock TPU images ship an older python3), and runs the same record.py as here,
with --platform tpu. The recording it writes is copied back, checked, and only then
moved into recordings/; any failure leaves recordings/ as it was. One lesson per run
(--lesson, default the registry's first in lesson_code/lessons.toml), so one lesson's
failure never takes another's recording with it; --accelerator defaults to the VM with
exactly that lesson's `devices` chips, and a count no single-host VM has is refused in
one line. On a multi-host slice (v5litepod-16, v6e-16) every copy and command goes to all
workers at once (--worker=all), each worker runs the lesson's rank module with no rank
flags (JAX joins them through the Cloud TPU environment), and rank 0's data and stdout
come back from worker 0, to be made into the recording here. TPU_NAME, ZONE and PROJECT
set the defaults of --name, --zone and --project.
"""
import argparse
import codecs
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# `python scripts/tpu_job.py` puts scripts/ on sys.path; the package lives one level up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts import ROOT, display
from scripts.store.hashes import content_files
from scripts.proc.interrupts import run_command
from scripts.store.outputs import for_lesson
from scripts.hardware.verify import (RefusedRecording, check_tpu_recording, check_tpu_sweep,
                                    install_recording, slice_recording)
from scripts.hardware.tpu import (CHIPS_PER_WORKER, RUNTIMES, SLICE_DATA, SLICE_STDOUT,
                                  UsageError, dry_run_text, job_steps, recording_name,
                                  tpu_lesson, workers)
from scripts.proc.run_lock import RunLocked, exclusive_run

DOCS_FILE = Path("docs/sections/tpu_commands.txt")
# What the lesson page shows. us-east5-b: a zone the Cloud TPU docs list for v6e.
DOCS_EXAMPLE = dict(name="my-tpu", zone="us-east5-b", accelerator="v6e-4",
                    create=True, delete=True)
# And the processes page, for a slice of 4 workers.
SLICE_DOCS_FILE = Path("docs/sections/tpu_slice_commands.txt")
SLICE_DOCS_EXAMPLE = dict(DOCS_EXAMPLE, name="my-slice", accelerator="v6e-16")
# What a slice's recording must show. The tests' fake slice runs its workers on this
# machine's CPU, one device each, and says so by changing this.
SLICE_EXPECTS = {"backend": "tpu", "devices_per_worker": CHIPS_PER_WORKER}
INSTALL_GCLOUD = ("gcloud not found: install the Google Cloud CLI "
                  "(https://cloud.google.com/sdk/docs/install), run `gcloud auth login`, "
                  "then rerun")
# gcloud's wording for a missing or expired login, and for a zone without chips or quota.
NOT_LOGGED_IN = re.compile(r"gcloud auth login|active account|Reauthentication|"
                           r"refresh token|UNAUTHENTICATED")
NO_CAPACITY = re.compile(r"RESOURCE_EXHAUSTED|no more capacity|insufficient capacity|"
                         r"quota|stockout", re.IGNORECASE)
# `tpu-vm ssh` ends every failed remote command with this; the remote's last line says more.
SSH_WRAPPER = re.compile(r"\[[^\]]*ssh[^\]]*\] exited with return code")
TAIL_BYTES = 64 * 1024


class JobFailed(Exception):
    """A step failed; str() is the one line to show (step, gcloud's words, what next)."""


def progress(message):
    print(f"tpu_job: {message}", file=sys.stderr, flush=True)


def run_streamed(command, cwd):
    """Run `command`; echo its output as it comes (pip and the lesson take minutes, and
    gcloud may ask a question), and return (exit status, the end of that output)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    tail = ""
    with subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT) as process:
        for chunk in iter(lambda: process.stdout.read1(4096), b""):
            text = decoder.decode(chunk)
            sys.stderr.write(text)
            sys.stderr.flush()
            tail = (tail + text)[-TAIL_BYTES:]
    return process.returncode, tail


def gcloud_message(output):
    """The line of `output` that says what went wrong, shortened to fit one line."""
    lines = [line.strip() for line in output.splitlines()
             if line.strip() and not SSH_WRAPPER.search(line)]
    errors = [line for line in lines if line.startswith("ERROR:")]
    message = (errors or lines or ["(no output)"])[-1]
    return message if len(message) <= 300 else message[:297] + "..."


def explain(step, returncode, output, accelerator, zone):
    said = gcloud_message(output)
    if NOT_LOGGED_IN.search(output):
        return f"{step.title} failed: gcloud is not logged in ({said}); " \
               f"run `gcloud auth login`, then rerun"
    # Only `create` asks for chips; a remote "RESOURCE_EXHAUSTED" is the lesson's own OOM.
    if step.gcloud_verb == "create" and NO_CAPACITY.search(output):
        return f"{step.title} failed: no {accelerator} capacity or quota in {zone} " \
               f"({said}); try a zone that offers {accelerator} (--zone), or ask for quota"
    return f"{step.title} failed (exit {returncode}): {said}; {step.hint}"


def run_step(step, root, accelerator, zone):
    try:
        returncode, output = run_streamed(step.command, root)
    except FileNotFoundError:
        if step.command[0] == "gcloud":
            raise JobFailed(INSTALL_GCLOUD) from None
        raise JobFailed(f"{step.title}: {step.command[0]} not found; install it and rerun") \
            from None
    if returncode != 0:
        raise JobFailed(explain(step, returncode, output, accelerator, zone))


def uncommitted_inputs(module_path, root=ROOT, extra=()):
    """Files in the lesson's contentFiles that differ from HEAD: the VM would not see
    them, so its recording would be stale here the moment it lands."""
    paths = list(content_files(module_path, root, extra))  # the code closures and the pins
    try:
        status = subprocess.run(["git", "status", "--porcelain", "--", *paths], cwd=root,
                                capture_output=True, text=True)
    except FileNotFoundError:
        raise JobFailed("git not found: the job ships the committed tree with "
                        "`git archive`; install git and rerun") from None
    if status.returncode != 0:
        raise JobFailed(f"`git status` failed in {root}: {gcloud_message(status.stderr)}")
    return [line[3:] for line in status.stdout.splitlines()]


def run_job(name, zone, accelerator=None, project=None, create=False, delete=False,
            root=ROOT, recordings_dir=None, lesson_id=None):
    """Run every step; raise JobFailed (or KeyboardInterrupt) with recordings/ untouched.

    With `delete`, the VM is deleted at the end, after a failure too, but only once it
    is known to be this run's: a failed create may mean the name belongs to another VM.
    """
    lesson = tpu_lesson(root, lesson_id)
    hosts = workers(accelerator)
    # A slice runs the rank module, whose closure is then what must be committed.
    module_path = lesson.path(lesson.rank_module if hosts > 1 else lesson.module)
    fetched = recording_name(lesson.id, accelerator)
    landing = Path(recordings_dir or root / "recordings")
    target = landing / fetched
    dirty = uncommitted_inputs(module_path, root, () if hosts > 1 else lesson.also_run_with())
    if hosts == 1 and lesson.sweep:  # the VM also runs the lesson's sweep
        dirty += [name for name in uncommitted_inputs(lesson.path(lesson.sweep), root)
                  if name not in dirty]
    if dirty:
        listed = " ".join(dirty)
        raise JobFailed(f"{', '.join(dirty)} differ from HEAD, and the VM runs only what is "
                        f"committed; run `git add {listed} && git commit`, then rerun")
    with tempfile.TemporaryDirectory(prefix="tpu_job-") as workdir:
        steps = job_steps(name, zone, accelerator, project, create, delete, workdir, root,
                          lesson.id)
        accelerator = accelerator or steps_accelerator(steps)
        cleanup = steps.pop() if delete else None
        vm_is_ours = not create  # named by the caller, who asked for it to be deleted
        failure, lesson_s = None, 0.0
        try:
            for number, step in enumerate(steps, 1):
                progress(f"[{number}/{len(steps) + bool(cleanup)}] {step.title}")
                if step.installs == "tpu-processes":
                    install_slice(Path(workdir), target, lesson, root, accelerator, lesson_s)
                    continue
                if step.installs == "tpu":
                    install_fetched(Path(workdir) / fetched, target, lesson, root)
                    continue
                if step.installs == "tpu-sweep":
                    sweep = for_lesson(lesson).recording_name("tpu-sweep")
                    install_sweep(Path(workdir) / sweep, landing / sweep, lesson, root,
                                  kept=target)
                    continue
                started = time.monotonic()
                run_step(step, root, accelerator, zone)
                lesson_s += (time.monotonic() - started) * step.runs_lesson
                vm_is_ours = vm_is_ours or step.gcloud_verb == "create"
        except (JobFailed, KeyboardInterrupt) as error:
            failure = error
        if cleanup and vm_is_ours:
            progress(f"[{len(steps) + 1}/{len(steps) + 1}] {cleanup.title}")
            try:
                run_step(cleanup, root, accelerator, zone)
            except JobFailed as error:
                if failure is None:
                    raise JobFailed(f"{error} (the recording itself was written)") from None
                progress(f"error: {error}")
        elif cleanup:
            progress(f"not deleting {name}: this run did not create it")
        if failure is not None:
            raise failure


def steps_accelerator(steps):
    """The accelerator the steps create (chosen from the lesson), for the error lines."""
    for step in steps:
        if step.gcloud_verb == "create":
            return step.command[step.command.index("--accelerator-type") + 1]
    return "TPU"


def install_checked(fetched, target, root, check, what, after_refusal="", after_writing=""):
    """Check a file the VM made (`check()` raises RefusedRecording), then move it into
    place, while no other run writes this checkout's recordings."""
    try:
        check()
    except RefusedRecording as error:
        raise JobFailed(f"{error}{after_refusal}") from None
    try:
        # Not while record.py or bench.py is writing this checkout's recordings.
        with exclusive_run("python scripts/tpu_job.py", root):
            install_recording(fetched, target)
    except RunLocked as error:
        raise JobFailed(f"{error}; the fetched {what} was not installed") from None
    progress(f"wrote {target}{after_writing}")


def install_fetched(fetched, target, lesson, root):
    install_checked(fetched, target, root, lambda: check_tpu_recording(
        fetched, lesson.id, lesson.path(), root, lesson.devices), "recording")


def install_sweep(fetched, target, lesson, root, kept):
    """Check the VM's size sweep (scripts/bench.py --platform tpu), then move it into place.
    `kept`: the lesson's recording, already in place. The figure the sweep is drawn over
    (tpu-predictions) and its verdicts against the predictions (its analysis) are made
    here by --render-only."""
    install_checked(fetched, target, root,
                    lambda: check_tpu_sweep(fetched, lesson, root, lesson.devices), "sweep",
                    after_refusal=f"; {display(kept)} was written",
                    after_writing="; run `python scripts/record.py --render-only` to draw it "
                                  "and judge the predictions")


def install_slice(workdir, target, lesson, root, accelerator, duration_s):
    """Make the slice's recording from rank 0's files, check it, then move it into place."""
    hosts = workers(accelerator)
    command = ["python", "scripts/tpu_job.py", "--accelerator", accelerator]
    made = workdir / target.name
    try:
        recording = slice_recording(workdir / SLICE_DATA, workdir / SLICE_STDOUT, lesson,
                                    command, duration_s, root)
        from scripts.store.recordings import dumps

        made.write_text(dumps(recording))
        check_tpu_recording(made, lesson.id, lesson.path(lesson.rank_module), root,
                            devices=hosts * SLICE_EXPECTS["devices_per_worker"],
                            processes=hosts, backend=SLICE_EXPECTS["backend"])
    except RefusedRecording as error:
        raise JobFailed(str(error)) from None
    install_recording(made, target)
    progress(f"wrote {target}")


def write_docs(root=ROOT):
    """Regenerate the command listings that the pages include."""
    for path, example in ((DOCS_FILE, DOCS_EXAMPLE), (SLICE_DOCS_FILE, SLICE_DOCS_EXAMPLE)):
        (root / path).write_text(dry_run_text(job_steps(**example, root=root)),
                                 encoding="utf-8")
        progress(f"wrote {path}")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default=os.environ.get("TPU_NAME"),
                        help="TPU VM name (default: $TPU_NAME)")
    parser.add_argument("--zone", default=os.environ.get("ZONE"), help="default: $ZONE")
    parser.add_argument("--project", default=os.environ.get("PROJECT"),
                        help="default: $PROJECT, else gcloud's configured project")
    parser.add_argument("--lesson", metavar="ID",
                        help="the lesson to record (default: the registry's first)")
    parser.add_argument("--accelerator", metavar="|".join(RUNTIMES),
                        help="a single-host VM with the lesson's `devices` chips (default: "
                             "chosen from them), or a slice of 4 workers with 4 chips each")
    parser.add_argument("--create", action="store_true", help="create the VM first")
    parser.add_argument("--delete", action="store_true",
                        help="delete the VM at the end, also after a failure")
    parser.add_argument("--dry-run", action="store_true",
                        help="print every command, run none")
    parser.add_argument("--recordings-dir", type=Path,
                        help="where the recording lands (default: recordings/)")
    parser.add_argument("--write-docs", action="store_true",
                        help=f"regenerate {DOCS_FILE} and exit")
    return parser.parse_args(argv)


def main(argv=None, root=ROOT):
    args = parse_args(argv)
    try:
        if args.write_docs:
            write_docs(root)
            return 0
        for flag, value, variable in (("--name", args.name, "TPU_NAME"),
                                      ("--zone", args.zone, "ZONE")):
            if not value:
                raise UsageError(f"{flag} is required (or set {variable})")
        options = dict(name=args.name, zone=args.zone, accelerator=args.accelerator,
                       project=args.project, create=args.create, delete=args.delete,
                       lesson_id=args.lesson)
        # Building the steps validates every value: a usage error comes before any check
        # of the working tree and before any gcloud call.
        steps = job_steps(**options, root=root)
        if args.dry_run:
            print(dry_run_text(steps), end="")
            return 0
        run_job(**options, root=root, recordings_dir=args.recordings_dir)
    except UsageError as error:
        print(f"tpu_job: error: {error}", file=sys.stderr)
        return 2
    except JobFailed as error:
        print(f"tpu_job: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("tpu_job: error: interrupted; recordings/ is as it was", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main))

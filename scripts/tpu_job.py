"""Record a lesson on a single-host TPU VM with the lesson's chips.

How to run it: MAINTAINING.md, "Hardware recordings (TPU)". The VM is paid by the hour, so
whatever ends the job, it kills the running gcloud, deletes the VM when --delete asks, and
says in one line whether the VM is gone.
"""
import codecs
import os
import re
import shutil
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

# `python scripts/tpu_job.py` puts scripts/ on sys.path; the package lives one level up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts import ROOT, display
from scripts.cli import CommandError, OneLineParser, UsageError, command, progress as say, run
from scripts.hardware.compile import dry_run_compile, write_compiled
from scripts.hardware.tpu import (RUNTIMES, choose_accelerator, dry_run_text, job_steps,
                                  job_vm, tpu_lesson)
from scripts.hardware.verify import RefusedRecording, check_tpu_recording, check_tpu_sweep
from scripts.plumbing.checkout import LinkInCheckout, refuse_links
from scripts.plumbing.children import kill_all
from scripts.plumbing.interrupts import Interrupted, signals_deferred
from scripts.plumbing.run_lock import LOCK_NAME, RunLocked, exclusive_run, open_lock
from scripts.store.hashes import content_files
from scripts.store.lessons import RegistryError
from scripts.store.outputs import for_lesson
from scripts.store.recordings import read_bytes
from scripts.store.staging import Staging, StagingError, write_atomically

DOCS_FILE = Path("docs/sections/tpu_commands.txt")
# us-east5-b: a zone the Cloud TPU docs list for v6e.
DOCS_EXAMPLE = dict(name="my-tpu", zone="us-east5-b", accelerator="v6e-4", create=True, delete=True)
# gcloud's wording for a missing or expired login, and for a zone without chips or quota.
NOT_LOGGED_IN = re.compile(r"gcloud auth login|active account|Reauthentication|"
                           r"refresh token|UNAUTHENTICATED")
NO_CAPACITY = re.compile(r"RESOURCE_EXHAUSTED|no more capacity|insufficient capacity|"
                         r"quota|stockout", re.IGNORECASE)
# `tpu-vm ssh` ends every failed remote command with this; the remote's last line says more.
SSH_WRAPPER = re.compile(r"\[[^\]]*ssh[^\]]*\] exited with return code")
SSH_DROPPED = 255  # ssh's status for a lost connection, which gcloud passes on
TAIL_BYTES = 64 * 1024


class JobFailed(CommandError):
    """A step failed or a signal stopped the job; str() is the one line to show."""

    def __init__(self, message, exit_status=1):
        super().__init__(message)
        self.exit_status = exit_status


progress = partial(say, "tpu_job")


def run_streamed(command, cwd):
    """(exit status, the end of its output) of `command`, echoed as it comes. In a session
    of its own: a Ctrl-C reaches the job alone, which kills it and can still delete the VM."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    tail = ""
    with subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          start_new_session=True) as process:
        try:
            for chunk in iter(lambda: process.stdout.read1(4096), b""):
                text = decoder.decode(chunk)
                sys.stderr.write(text)
                sys.stderr.flush()
                tail = (tail + text)[-TAIL_BYTES:]
        except BaseException:
            kill_all([process])
            raise
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
    if step.gcloud_verb == "ssh" and returncode == SSH_DROPPED:
        return f"{step.title} failed: the ssh connection to the VM dropped ({said}); {step.hint}"
    return f"{step.title} failed (exit {returncode}): {said}; {step.hint}"


def run_step(step, root, accelerator, zone):
    try:
        returncode, output = run_streamed(step.command, root)
    except FileNotFoundError:
        if step.command[0] == "gcloud":
            raise JobFailed("gcloud not found: install the Google Cloud CLI (https://cloud."
                            "google.com/sdk/docs/install), run `gcloud auth login`, then "
                            "rerun") from None
        raise JobFailed(f"{step.title}: {step.command[0]} not found; install it and rerun") \
            from None
    if returncode != 0:
        raise JobFailed(explain(step, returncode, output, accelerator, zone))


def refuse_uncommitted(lesson, root):
    """Refuse inputs of the lesson's recordings (and its sweep's, which the VM also runs)
    that differ from HEAD: the VM sees only what is committed."""
    paths = {**content_files(lesson.path(), root, lesson.also_run_with()),
             **(content_files(lesson.path(lesson.sweep_on("tpu")), root) if lesson.sweep else {})}
    try:
        status = subprocess.run(["git", "status", "--porcelain", "--", *paths], cwd=root,
                                capture_output=True, text=True)
    except FileNotFoundError:
        raise JobFailed("git not found: the job ships the committed tree with "
                        "`git archive`; install git and rerun") from None
    if status.returncode != 0:
        raise JobFailed(f"`git status` failed in {root}: {gcloud_message(status.stderr)}")
    if dirty := [line[3:] for line in status.stdout.splitlines()]:
        raise JobFailed(f"{', '.join(dirty)} differ from HEAD, and the VM runs only what is "
                        f"committed; run `git add {' '.join(dirty)} && git commit`, then rerun")


def run_job(name, zone, accelerator=None, project=None, create=False, delete=False,
            root=ROOT, recordings_dir=None, lesson_id=None):
    """Run every step; whatever ends them, leave the VM as --delete asks, then say so."""
    lesson = tpu_lesson(root, lesson_id)
    refuse_uncommitted(lesson, root)
    landing = Path(recordings_dir or root / "recordings")
    vm = job_vm(name, zone, project, lesson.id)
    workdir = tempfile.mkdtemp(prefix="tpu_job-")
    try:
        steps = job_steps(name, zone, accelerator, project, create, delete, workdir, root,
                          lesson.id)
        refuse_unwritable(landing, [for_lesson(lesson).recording_name(step.installs)
                                    for step in steps if step.installs], root)
        accelerator = choose_accelerator(lesson, accelerator)  # the one create asks for
        written, step = [], None

        def run(step, number):
            progress(f"[{number}/{len(steps)}] {step.title}")
            if step.installs:
                written.append(install(step.installs, Path(workdir), landing, lesson, root))
            else:
                run_step(step, root, accelerator, zone)

        cleanup, work = (steps[-1], steps[:-1]) if delete else (None, steps)
        exists = not create  # a VM the caller named is there from the start

        def leave():
            return leave_vm(cleanup, exists, vm, lambda: run(cleanup, len(steps)))

        try:
            for number, step in enumerate(work, 1):
                # Once asked for, the VM may be made even if the create is cut short.
                exists = exists or step.gcloud_verb == "create"
                try:
                    run(step, number)
                except JobFailed:
                    # A refused create made nothing, and the name may be another VM's.
                    exists = exists and step.gcloud_verb != "create"
                    raise
        except (JobFailed, Interrupted) as error:
            ending = leave()
            what = str(error) if isinstance(error, JobFailed) else \
                f"interrupted by {error.name} while it ran: {step.title}"
            files = f"wrote {', '.join(written)}" if written else "recordings/ is as it was"
            if kept := sorted(map(str, Path(workdir).glob("*.json"))):  # not installed
                files += f"; what the VM made is kept: {', '.join(kept)}"
            raise JobFailed(f"{what}; {files}; {ending}", error.exit_status) from None
        except BaseException:
            leave()  # a bug: it still leaves no VM behind
            raise
        ending = leave()
        if ending.startswith("deleting"):
            raise JobFailed(f"wrote {', '.join(written)}, but {ending}")
        progress(ending)
    finally:  # install() removes what it moved into place: what is left, is kept
        if not any(Path(workdir).glob("*.json")):
            shutil.rmtree(workdir, ignore_errors=True)


def refuse_unwritable(landing, names, root):
    """Every local path the job writes, tried before the VM is paid for: the run lock, and a
    file staged (and removed) where each recording will land."""
    try:
        os.close(open_lock(root / LOCK_NAME, "python scripts/tpu_job.py"))
        with Staging(root) as staging:
            for name in names:
                staging.add(landing / name, "")
    except RunLocked as error:
        raise JobFailed(f"{error}; nothing was run") from None
    except StagingError as error:  # a folder where the VM's recordings land, made or not
        raise JobFailed(f"{error}, and nothing was run: give --recordings-dir a folder this "
                        f"user can write", UsageError.exit_status) from None


def leave_vm(cleanup, exists, vm, delete):
    """Run `delete` if --delete asked for it and the VM may exist; say where the VM stands."""
    if not exists:
        return "no VM was created"
    if cleanup is None:
        return f"the VM {vm.name} is still running: `{vm.said('delete', '--quiet')}` deletes it"
    with signals_deferred(ignore=True):  # the delete runs to its end, and its gcloud too
        try:
            delete()
        except JobFailed as error:
            return (f"deleting the VM failed ({error}), so {vm.name} may still be running "
                    f"and billing: run `{vm.said('delete', '--quiet')}`")
    return f"the VM {vm.name} was deleted"


def install(variant, workdir, landing, lesson, root):
    """Check what the VM made, then move it into place under the run lock; return where."""
    name = for_lesson(lesson).recording_name(variant)
    fetched, target = workdir / name, landing / name
    check = check_tpu_sweep if variant == "tpu-sweep" else check_tpu_recording
    try:
        check(fetched, lesson, root)
        with exclusive_run("python scripts/tpu_job.py", root):
            write_atomically(target, read_bytes(fetched), root)  # even across file systems
        fetched.unlink()
    except RefusedRecording as error:
        raise JobFailed(str(error)) from None
    except (RunLocked, StagingError) as error:
        raise JobFailed(f"{error}; the fetched {name} was not installed") from None
    after = "; run `python scripts/record.py --render-only` to draw it and judge the " \
            "predictions" if variant == "tpu-sweep" else ""
    progress(f"wrote {target}{after}")
    return display(target, root)


def parse_args(argv):
    parser = OneLineParser(prog="scripts/tpu_job.py", description=__doc__.splitlines()[0])
    parser.add_argument("--name", default=os.environ.get("TPU_NAME"),
                        help="TPU VM name (default: $TPU_NAME)")
    parser.add_argument("--zone", default=os.environ.get("ZONE"), help="default: $ZONE")
    parser.add_argument("--project", default=os.environ.get("PROJECT"),
                        help="default: $PROJECT, else gcloud's configured project")
    parser.add_argument("--lesson", metavar="ID",
                        help="the lesson to record (default: the registry's first)")
    parser.add_argument("--accelerator", metavar="|".join(RUNTIMES),
                        help="a single-host VM with the lesson's `devices` chips (default: "
                             "chosen from them)")
    parser.add_argument("--create", action="store_true", help="create the VM first")
    parser.add_argument("--delete", action="store_true",
                        help="delete the VM at the end, whatever ends the job")
    parser.add_argument("--dry-run", action="store_true", help="print every command, run none")
    parser.add_argument("--recordings-dir", type=Path,
                        help="where the recording lands (default: recordings/)")
    parser.add_argument("--write-docs", action="store_true",
                        help=f"regenerate {DOCS_FILE} and exit")
    parser.add_argument("--write-compiled", action="store_true",
                        help="compile the lesson's programs for the CPU and the TPU slices "
                             "(needs libtpu) into recordings/<id>.tpu-compiled.json and exit")
    return parser.parse_args(argv)


def job(argv, root=ROOT):
    args = parse_args(argv)
    refuse_links(root)  # what a commit could point outside: nothing is read or written yet
    if args.write_docs:
        write_atomically(root / DOCS_FILE, dry_run_text(job_steps(**DOCS_EXAMPLE, root=root)), root)
        return progress(f"wrote {DOCS_FILE}")
    if args.write_compiled:
        return progress(f"wrote {write_compiled(args.lesson, root)}")
    for flag, value, variable in (("--name", args.name, "TPU_NAME"), ("--zone", args.zone, "ZONE")):
        if not value:
            raise UsageError(f"{flag} is required (or set {variable})")
    options = dict(name=args.name, zone=args.zone, accelerator=args.accelerator,
                   project=args.project, create=args.create, delete=args.delete,
                   lesson_id=args.lesson)
    # Building the steps validates every value, before any check or gcloud call.
    steps = job_steps(**options, root=root)
    if args.dry_run:
        print(dry_run_text(steps), end="", flush=True)
        print(dry_run_compile(args.lesson, args.accelerator, root), end="")
        return 0
    run_job(**options, root=root, recordings_dir=args.recordings_dir)
    return 0


def main(argv=None, root=ROOT):
    """The job's exit status (scripts/cli.py), once the VM is dealt with."""
    return command(lambda args: job(args, root), (RegistryError, LinkInCheckout, StagingError),
                   prefix="tpu_job: error")(argv)


if __name__ == "__main__":
    sys.exit(run(main))

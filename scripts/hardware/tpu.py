"""The commands the TPU job runs, as argument lists: one function builds the sequence, so
the job, its --dry-run and the page (docs/sections/tpu_commands.txt) cannot drift apart.
"""
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from scripts import ROOT
from scripts.chips import CHIPS, accelerators_for
from scripts.cli import UsageError
from scripts.store.lessons import chosen_lessons, load_lessons
from scripts.store.outputs import for_lesson

# Runtime versions from the Cloud TPU docs.
RUNTIMES = {name: "v2-alpha-tpuv6e" if name.startswith("v6e") else "v2-alpha-tpuv5-lite"
            for name in CHIPS}

# Names go into gcloud's arguments and remote commands: a leading "-" would be a flag.
NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
ZONE = re.compile(r"[a-z]+-[a-z]+[0-9]+-[a-z]")
PROJECT = re.compile(r"([a-z][-a-z0-9.]*:)?[a-z][-a-z0-9]{4,28}[a-z0-9]")
# The stock TPU images' python3 is older than the pins need: uv brings its own CPython.
# The Makefile reads UV_VERSION from this line, so `make install` and the VM use one uv.
PYTHON_VERSION = "3.11"
UV_VERSION = "0.13.9"


@dataclass(frozen=True)
class Step:
    title: str  # the progress line, and the "# ..." line of --dry-run
    command: list | None  # None: done here in Python (checking what came back)
    hint: str = ""  # what to do when it fails, for the job's one-line error
    installs: str | None = None  # a local step: the recording variant it checks and moves

    @property
    def gcloud_verb(self):
        return self.command[4] if self.command and self.command[0] == "gcloud" else None


def choose_accelerator(lesson, accelerator=None):
    """`accelerator`, or the default VM with the lesson's device count; else UsageError."""
    fitting = accelerators_for(lesson.devices)
    if not fitting:
        counts = sorted(set(CHIPS.values()))
        raise UsageError(
            f"{lesson.id} records on {lesson.devices} devices and no single-host TPU VM has "
            f"{lesson.devices} chips ({', '.join(map(str, counts[:-1]))} or {counts[-1]}); "
            f"change its `devices` in lesson_code/lessons.toml to one of those")
    if accelerator is None:
        return fitting[0]
    if accelerator not in CHIPS:
        raise UsageError(
            f"--accelerator {accelerator}: the job runs on single-host TPU VMs only "
            f"({', '.join(CHIPS)}); use {' or '.join(fitting)}, which have the "
            f"{lesson.devices} chips {lesson.id} records on")
    if CHIPS[accelerator] != lesson.devices:
        raise UsageError(
            f"--accelerator {accelerator} has {CHIPS[accelerator]} chip"
            f"{'s' * (CHIPS[accelerator] != 1)} and {lesson.id} records on {lesson.devices} "
            f"(`devices` in lesson_code/lessons.toml); use {' or '.join(fitting)}, or leave "
            f"--accelerator out")
    return accelerator


def check_names(name, zone, project=None):
    for flag, value, pattern in (("--name", name, NAME), ("--zone", zone, ZONE),
                                 ("--project", project, PROJECT)):
        if value is not None and not pattern.fullmatch(value):
            raise UsageError(f"{flag} {value!r} does not look like a {flag[2:]} "
                             f"(expected {pattern.pattern})")


def jax_pin(root=ROOT):
    text = (root / "requirements.txt").read_text(encoding="utf-8")
    if not (match := re.search(r"^jax==([\w.]+)", text, re.MULTILINE)):
        raise UsageError("requirements.txt pins no `jax==` version; the TPU job installs "
                         "jax[tpu] at that pin")
    return match.group(1)


def tpu_lesson(root=ROOT, lesson_id=None):
    """The one lesson the job records: `lesson_id`, or the registry's first."""
    return chosen_lessons(load_lessons(root), lesson_id)[0]


def remote_setup(jax_version, remote_dir):
    """Python through uv on the VM, then the exact pins and the TPU runtime."""
    return " && ".join([
        f"cd {shlex.quote(remote_dir)}",
        f"python3 -m pip install --user --quiet uv=={UV_VERSION}",
        f"python3 -m uv venv --python {PYTHON_VERSION} .venv",
        # jax_pin() matched [\w.]+: double quotes are safe and read better than shlex's.
        (f"python3 -m uv pip install --python .venv/bin/python -r requirements.txt "
         f'-c constraints.txt "jax[tpu]=={jax_version}"'),
    ])


@dataclass(frozen=True)
class Vm:
    name: str
    where: list  # --zone, and --project when given
    remote_dir: str  # relative to the VM user's home: scp and ssh both start there
    local: object  # a fetched file's path here, from its name

    tpu_vm = ("gcloud", "compute", "tpus", "tpu-vm")

    def gcloud(self, verb, *more):
        return [*self.tpu_vm, verb, self.name, *self.where, *more]

    def said(self, verb, *more):
        """The gcloud command, as one line to paste."""
        return shlex.join(self.gcloud(verb, *more))

    @property
    def is_up(self):
        return f"is the VM up? `{self.said('describe')}`"

    def scp(self, source, destination):
        return [*self.tpu_vm, "scp", source, destination, *self.where]


def recorded_on_the_vm(vm, files, variant, run_title, command, fetch_title, check_title,
                       already=""):
    """Run `command` on the VM, copy the recording of `variant` it made back, check it here
    and move it in."""
    retry = "to retry by hand" if not already else f"{already}; to retry the sweep by hand"
    return [
        Step(run_title, vm.gcloud("ssh", "--command", f"cd {shlex.quote(vm.remote_dir)} && "
                                                      f"{command}"),
             f"its output is above; {retry}: `{vm.said('ssh')}`, "
             f"then `cd {vm.remote_dir} && {command}`"),
        Step(fetch_title, vm.scp(f"{vm.name}:{vm.remote_dir}/{files.recording(variant)}",
                                 vm.local(files.recording_name(variant))), vm.is_up),
        Step(check_title, None, installs=variant),
    ]


def job_vm(name, zone, project, lesson_id, workdir=None):
    local = (lambda f: str(Path(workdir) / f)) if workdir else (lambda f: f)
    return Vm(name, ["--zone", zone] + (["--project", project] if project else []),
              remote_dir=lesson_id, local=local)


def job_steps(name, zone, accelerator=None, project=None, create=True, delete=True,
              workdir=None, root=ROOT, lesson_id=None):
    """Every step of the job in order; `workdir`: where files land (None: for the page)."""
    lesson = tpu_lesson(root, lesson_id)
    accelerator = choose_accelerator(lesson, accelerator)
    check_names(name, zone, project)
    files = for_lesson(lesson)
    vm = job_vm(name, zone, project, lesson.id, workdir)
    bundle, recording = f"{lesson.id}.tar.gz", files.recording_name("tpu")
    quoted = shlex.quote(vm.remote_dir)
    steps = [Step("pack the committed tree (git archive HEAD)",
                  ["git", "archive", "--format=tar.gz", "-o", vm.local(bundle), "HEAD"],
                  "run the job from inside the repository, which needs at least one commit")]
    if create:
        steps.append(Step(
            f"create the {accelerator} VM {name} in {zone}",
            vm.gcloud("create", "--accelerator-type", accelerator, "--version",
                      RUNTIMES[accelerator]),
            f"if `gcloud compute tpus tpu-vm list {shlex.join(vm.where)}` shows {name}, "
            f"rerun without --create or pick another --name"))
    steps += [
        Step("copy the archive to the VM", vm.scp(vm.local(bundle), f"{name}:{bundle}"), vm.is_up),
        Step(f"unpack it into ~/{vm.remote_dir} on the VM", vm.gcloud("ssh", "--command",
             f"rm -rf {quoted} && mkdir {quoted} && "
             f"tar -xzf {shlex.quote(bundle)} -C {quoted} && rm {shlex.quote(bundle)}"), vm.is_up),
        Step(f"install uv, Python {PYTHON_VERSION} and the pins with jax[tpu] (a few "
             f"minutes)", vm.gcloud("ssh", "--command", remote_setup(jax_pin(root), vm.remote_dir)),
             f"uv is installed with the image's `python3 -m pip`; if the VM has no pip, "
             f"run `sudo apt-get install -y python3-pip` there (`{vm.said('ssh')}`), then "
             f"rerun"),
        # One lesson per run: another lesson's failure cannot discard this one's recording.
        *recorded_on_the_vm(
            vm, files, "tpu", f"record the lesson on the chips (scripts/record.py --platform "
                              f"tpu --lesson {lesson.id})",
            f".venv/bin/python scripts/record.py --platform tpu --lesson {lesson.id}",
            "copy the recording back", f"validate {recording} (schema, backend tpu, "
            f"{lesson.devices} TPU devices, PASS, current contentFiles), then move it into "
            f"recordings/{recording}"),
    ]
    if lesson.sweep:  # after the lesson's recording is in place: a failed sweep keeps it
        sweep = files.recording_name("tpu-sweep")
        steps += recorded_on_the_vm(
            vm, files, "tpu-sweep", f"run the size sweep on the chips (scripts/bench.py "
                                    f"--platform tpu --lesson {lesson.id}; several minutes)",
            f".venv/bin/python scripts/bench.py --platform tpu --lesson {lesson.id}",
            "copy the sweep back", f"validate {sweep} (schema, backend tpu, at most "
            f"{lesson.devices} TPU chips, current contentFiles), then move it into "
            f"recordings/{sweep}", already=f"recordings/{recording} is already in place")
    if delete:
        steps.append(Step(f"delete the VM {name}", vm.gcloud("delete", "--quiet")))
    return steps


def dry_run_text(steps):
    """Copy-pasteable bash: a `# title` line, then its command, for every step."""
    return "".join(f"# {step.title}\n" + (f"{shlex.join(step.command)}\n" if step.command
                                           else "") for step in steps)

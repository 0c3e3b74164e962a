"""The commands the TPU job runs, as argument lists. Runs nothing and imports no JAX.

One function builds the whole sequence, so the job, its --dry-run and the lesson page
(docs/sections/tpu_commands.txt) cannot drift apart.
"""
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from scripts import ROOT
from scripts.chips import CHIPS, CHIPS_PER_WORKER, WORKERS, accelerators_for
from scripts.store.outputs import for_lesson

# The VM types and their chips are scripts/chips.py (the docs build reads them
# too). Runtime versions from the Cloud TPU docs.
RUNTIMES = {name: "v2-alpha-tpuv6e" if name.startswith("v6e") else "v2-alpha-tpuv5-lite"
            for name in [*CHIPS, *WORKERS]}
# What rank 0 leaves on worker 0 of a slice: its data JSON and its stdout.
SLICE_DATA, SLICE_STDOUT = "slice-data.json", "slice-stdout.txt"

# Names go into gcloud argument lists and remote command text, so they must look like
# names (a leading "-" would otherwise read as a flag). Matched with fullmatch: `$` alone
# would also accept a name that ends in a newline.
NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
ZONE = re.compile(r"[a-z]+-[a-z]+[0-9]+-[a-z]")
PROJECT = re.compile(r"([a-z][-a-z0-9.]*:)?[a-z][-a-z0-9]{4,28}[a-z0-9]")
# The pins are made for Python 3.11 (numpy 2.4 needs it), and the stock TPU images ship
# an older python3. uv brings its own CPython, downloaded on the VM, which has the
# internet; the image's python3 only has to pip-install uv itself.
PYTHON_VERSION = "3.11"
UV_VERSION = "0.13.9"


class UsageError(Exception):
    """An option the job refuses before running anything; str() is the one line."""


@dataclass(frozen=True)
class Step:
    title: str  # the progress line, and the "# ..." line of --dry-run
    command: list | None  # None: done here in Python (validating the recording)
    hint: str = ""  # what to do when it fails, for the job's one-line error
    runs_lesson: bool = False  # its wall time is the recording's durationS (slices)
    installs: str | None = None  # a local step: the recording variant it checks and moves

    @property
    def gcloud_verb(self):
        """The gcloud verb: "create", "scp", "ssh" or "delete"; None for other steps."""
        is_gcloud = self.command is not None and self.command[0] == "gcloud"
        return self.command[4] if is_gcloud else None


def chips(count):
    return f"{count} chip" + ("s" if count != 1 else "")


def choose_accelerator(lesson, accelerator=None):
    """`accelerator`, or the default VM for the lesson's device count; UsageError (one
    line) when no single-host VM has that many chips or the one asked for has another
    count."""
    if accelerator in WORKERS:  # a slice runs the rank module, one process per worker
        return accelerator
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
            f"--accelerator {accelerator} is not supported; use {' or '.join(fitting)} "
            f"(one VM with {lesson.devices} chips, as {lesson.id} records on), or a "
            f"multi-host slice: {' or '.join(WORKERS)}")
    if CHIPS[accelerator] != lesson.devices:
        raise UsageError(
            f"--accelerator {accelerator} has {chips(CHIPS[accelerator])} and {lesson.id} "
            f"records on {lesson.devices} (`devices` in lesson_code/lessons.toml); use "
            f"{' or '.join(fitting)}, or leave --accelerator out")
    return accelerator


def check_options(name, zone, accelerator, project=None):
    """Raise UsageError for anything the job will not run with."""
    if accelerator not in RUNTIMES:
        raise UsageError(
            f"--accelerator {accelerator} is not supported; use {' or '.join(RUNTIMES)} "
            f"(single-host VMs with a lesson's chip count, or a slice of "
            f"{max(WORKERS.values())} workers with {CHIPS_PER_WORKER} chips each)")
    for flag, value, pattern in (("--name", name, NAME), ("--zone", zone, ZONE),
                                 ("--project", project, PROJECT)):
        if value is not None and not pattern.fullmatch(value):
            raise UsageError(f"{flag} {value!r} does not look like a {flag[2:]} "
                             f"(expected {pattern.pattern})")


def workers(accelerator):
    """How many hosts the accelerator has: 1 for a VM, 4 for the slices."""
    return WORKERS.get(accelerator, 1)


def jax_pin(root=ROOT):
    """The jax version pinned in requirements.txt, so the VM installs the same one."""
    text = (root / "requirements.txt").read_text(encoding="utf-8")
    match = re.search(r"^jax==([\w.]+)", text, re.MULTILINE)
    if not match:
        raise UsageError("requirements.txt pins no `jax==` version; the TPU job installs "
                         "jax[tpu] at that pin")
    return match.group(1)


def tpu_lesson(root=ROOT, lesson_id=None):
    """The one lesson the job records: `lesson_id`, or the registry's first
    (lesson_code/lessons.toml)."""
    from scripts.store.lessons import RegistryError, load_lessons

    try:
        lessons = load_lessons(root)
    except RegistryError as error:
        raise UsageError(str(error)) from None
    if not lessons:
        raise UsageError("lesson_code/lessons.toml lists no lesson; add one ([[lesson]])")
    if lesson_id is None:
        return next(iter(lessons.values()))
    if lesson_id not in lessons:
        raise UsageError(f"--lesson {lesson_id}: no such lesson in lesson_code/lessons.toml; "
                         f"known: {', '.join(lessons)}")
    return lessons[lesson_id]


def recording_variant(accelerator=None):
    """What the job records: record.py --platform tpu's run on one VM ("tpu"), the rank
    module's run on every worker of a slice ("tpu-processes", like cpu-processes)."""
    return "tpu-processes" if workers(accelerator) > 1 else "tpu"


def recording_name(lesson_id, accelerator=None):
    """The file the job lands under recordings/ (scripts/store/outputs.py names it)."""
    return for_lesson(lesson_id).recording_name(recording_variant(accelerator))


def remote_setup(jax_version, remote_dir):
    """Provision Python 3.11 on the VM with uv, then install the project's exact pins
    (requirements.txt with constraints.txt, as `make install` does) and the TPU runtime.
    """
    return " && ".join([
        f"cd {shlex.quote(remote_dir)}",
        f"python3 -m pip install --user --quiet uv=={UV_VERSION}",
        # A uv-managed CPython, whatever the image's python3 is.
        f"python3 -m uv venv --python {PYTHON_VERSION} .venv",
        # jax_pin() matched [\w.]+, so plain double quotes are safe, and they keep the
        # page's copy free of the '"'"' that shlex would nest inside the --command.
        (f"python3 -m uv pip install --python .venv/bin/python -r requirements.txt "
         f'-c constraints.txt "jax[tpu]=={jax_version}"'),
    ])


@dataclass(frozen=True)
class Vm:
    """What every step that reaches the VM needs: its name and gcloud location, the
    workers a command goes to, and where the tree is on it and here."""
    name: str
    where: list  # --zone, and --project when given
    every: list  # ["--worker=all"] on a slice: a command or copy goes to every worker
    remote_dir: str  # relative to the VM user's home: scp and ssh both start there
    local: object  # a fetched file's path here, from its name

    tpu_vm = ("gcloud", "compute", "tpus", "tpu-vm")

    @property
    def hint(self):
        return f"{self.name} {shlex.join(self.where)}"  # for the hints' commands

    @property
    def is_up(self):
        return f"is the VM up? `gcloud compute tpus tpu-vm describe {self.hint}`"

    @property
    def quoted_dir(self):
        return shlex.quote(self.remote_dir)

    def ssh(self, command):
        return [*self.tpu_vm, "ssh", self.name, *self.where, *self.every, "--command",
                command]

    def fetch(self, remote_file, local_name, *workers):
        """scp a file of the tree on the VM back here as `local_name`."""
        return [*self.tpu_vm, "scp", f"{self.name}:{self.remote_dir}/{remote_file}",
                self.local(local_name), *self.where, *workers]


def recorded_on_the_vm(vm, run_title, command, fetch_title, remote_file, local_name,
                       check_title, installs, already=""):
    """The three steps of a recording the VM makes: run `command` in the tree there, copy
    `remote_file` back, then check it here and move it into place (`installs`: the
    recording variant the check expects). `already`: what the hint says is already safe."""
    retry = "to retry by hand" if not already else f"{already}; to retry the sweep by hand"
    return [
        Step(run_title, vm.ssh(f"cd {vm.quoted_dir} && {command}"),
             f"its output is above; {retry}: `gcloud compute tpus tpu-vm ssh {vm.hint}`, "
             f"then `cd {vm.remote_dir} && {command}`"),
        Step(fetch_title, vm.fetch(remote_file, local_name), vm.is_up),
        Step(check_title, None, installs=installs),
    ]


def job_steps(name, zone, accelerator=None, project=None, create=True, delete=True,
              workdir=None, root=ROOT, lesson_id=None):
    """Every step of the job in order, for one lesson (`lesson_id`, default the registry's
    first) on a VM with its device count (`accelerator`, default chosen from it).
    `workdir` holds the local archive and the fetched recording (None: paths relative to
    the current directory, for the page)."""
    lesson = tpu_lesson(root, lesson_id)
    accelerator = choose_accelerator(lesson, accelerator)
    check_options(name, zone, accelerator, project)
    lesson_id, hosts = lesson.id, workers(accelerator)
    if hosts > 1 and not lesson.rank_module:
        raise UsageError(f"{lesson_id} has no rank_module in lesson_code/lessons.toml; a "
                         f"multi-host slice runs one on every worker")
    record = f".venv/bin/python scripts/record.py --platform tpu --lesson {lesson_id}"
    files = for_lesson(lesson_id)
    bundle, recording = f"{lesson_id}.tar.gz", recording_name(lesson_id)
    local = (lambda f: str(Path(workdir) / f)) if workdir else (lambda f: f)
    where = ["--zone", zone] + (["--project", project] if project else [])
    # On a slice every copy and command goes to all workers at once; what comes back,
    # from worker 0, whose rank 0 wrote it.
    every, first = (["--worker=all"], ["--worker=0"]) if hosts > 1 else ([], [])
    vm = Vm(name, where, every, remote_dir=lesson_id, local=local)
    on = f" on all {hosts} workers" if hosts > 1 else ""
    steps = [Step("pack the committed tree (git archive HEAD)",
                  ["git", "archive", "--format=tar.gz", "-o", local(bundle), "HEAD"],
                  "run the job from inside the repository, which needs at least one commit")]
    if create:
        steps.append(Step(
            f"create the {accelerator} VM {name} in {zone}",
            [*Vm.tpu_vm, "create", name, *where, "--accelerator-type", accelerator,
                      "--version", RUNTIMES[accelerator]],
            f"if `gcloud compute tpus tpu-vm list {shlex.join(where)}` shows {name}, "
            f"rerun without --create or pick another --name"))
    steps += [
        Step(f"copy the archive to {f'all {hosts} workers' if hosts > 1 else 'the VM'}",
             [*Vm.tpu_vm, "scp", local(bundle), f"{name}:{bundle}", *where, *every], vm.is_up),
        Step(f"unpack it into ~/{vm.remote_dir}{on or ' on the VM'}", vm.ssh(
            f"rm -rf {vm.quoted_dir} && mkdir {vm.quoted_dir} && "
            f"tar -xzf {shlex.quote(bundle)} -C {vm.quoted_dir} && rm {shlex.quote(bundle)}"),
            vm.is_up),
        Step(f"install uv, Python {PYTHON_VERSION} and the pins with jax[tpu]{on} (a few "
             f"minutes)", vm.ssh(remote_setup(jax_pin(root), vm.remote_dir)),
             f"uv is installed with the image's `python3 -m pip`; if the VM has no pip, "
             f"run `sudo apt-get install -y python3-pip` there "
             f"(`gcloud compute tpus tpu-vm ssh {vm.hint}`), then rerun"),
    ]
    if hosts == 1:
        # One lesson per run: another lesson's failure cannot discard this one's recording.
        steps += recorded_on_the_vm(
            vm, f"record the lesson on the chips (scripts/record.py --platform tpu "
                   f"--lesson {lesson_id})", record,
            "copy the recording back", files.recording("tpu"), recording,
            f"validate {recording} (schema, backend tpu, {lesson.devices} TPU devices, "
            f"PASS, current contentFiles), then move it into recordings/{recording}", "tpu")
        if lesson.sweep:  # after the lesson's recording is in place: a failed sweep keeps it
            steps += sweep_steps(lesson, vm)
    else:
        recording = recording_name(lesson_id, accelerator)
        chips = hosts * CHIPS_PER_WORKER
        # No rank flags: on a slice, JAX reads the worker's number and the worker list
        # from the Cloud TPU environment (jax/_src/clusters/cloud_tpu_cluster.py).
        rank = (f"cd {vm.quoted_dir} && .venv/bin/python -m {lesson.rank_module} --platform "
                f"tpu --data-out {SLICE_DATA} > {SLICE_STDOUT}")
        steps += [
            Step(f"run {lesson.rank_module} on all {hosts} workers at once ({chips} chips, "
                 f"one process per worker)", vm.ssh(rank),
                 f"its output is above; every worker must start within a minute of the "
                 f"others (jax.distributed's timeout); to retry: `gcloud compute tpus tpu-vm "
                 f"ssh {vm.hint} --worker=all --command {shlex.quote(rank)}`", runs_lesson=True),
            *[Step(f"copy rank 0's {what} back from worker 0",
                   vm.fetch(file, file, *first), vm.is_up)
              for what, file in (("data", SLICE_DATA), ("stdout", SLICE_STDOUT))],
            Step(f"make {recording} from them and validate it (schema, backend tpu, "
                 f"{chips} TPU devices in {hosts} processes, PASS, current contentFiles), "
                 f"then move it into recordings/{recording}", None,
                 installs="tpu-processes"),
        ]
    if delete:
        steps.append(Step(
            f"delete the VM {name}", [*Vm.tpu_vm, "delete", name, *where, "--quiet"],
            f"it may still be running and billing: run "
            f"`gcloud compute tpus tpu-vm delete {vm.hint} --quiet`"))
    return steps


def sweep_steps(lesson, vm):
    """The lesson's size sweep on the same VM (scripts/bench.py --platform tpu: each p of
    the sweep's plan that the VM's chips hold, each in a fresh process), fetched and
    checked like the lesson's recording; a lesson without a `sweep` gets none."""
    files = for_lesson(lesson)
    sweep = files.recording_name("tpu-sweep")
    bench = f".venv/bin/python scripts/bench.py --platform tpu --lesson {lesson.id}"
    return recorded_on_the_vm(
        vm, f"run the size sweep on the chips (scripts/bench.py --platform tpu --lesson "
            f"{lesson.id}; several minutes)", bench,
        "copy the sweep back", files.recording("tpu-sweep"), sweep,
        f"validate {sweep} (schema, backend tpu, at most {lesson.devices} TPU chips, "
        f"current contentFiles), then move it into recordings/{sweep}", "tpu-sweep",
        already=f"recordings/{recording_name(lesson.id)} is already in place")


def job_commands(name, zone, accelerator=None, project=None, create=True, delete=True,
                 workdir=None, root=ROOT, lesson_id=None):
    """The exact commands the job runs, in order (what the lesson page shows)."""
    steps = job_steps(name, zone, accelerator, project, create, delete, workdir, root,
                      lesson_id)
    return [step.command for step in steps if step.command is not None]


def dry_run_text(steps):
    """Copy-pasteable bash: a `# title` line, then the command, for every step."""
    lines = []
    for step in steps:
        lines.append(f"# {step.title}")
        if step.command is not None:
            lines.append(shlex.join(step.command))
    return "\n".join(lines) + "\n"

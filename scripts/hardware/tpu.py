"""The commands the TPU job runs, as argument lists. Runs nothing and imports no JAX.

One function builds the whole sequence, so the job, its --dry-run and the lesson page
(docs/sections/tpu_commands.txt) cannot drift apart.
"""
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from scripts import ROOT

# Single-host VMs with exactly 4 chips, so `record.py --platform tpu` (4 devices by
# default) runs unchanged in one process. Runtime versions from the Cloud TPU docs.
RUNTIMES = {"v5litepod-4": "v2-alpha-tpuv5-lite", "v6e-4": "v2-alpha-tpuv6e"}

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

    @property
    def gcloud_verb(self):
        """The gcloud verb: "create", "scp", "ssh" or "delete"; None for other steps."""
        is_gcloud = self.command is not None and self.command[0] == "gcloud"
        return self.command[4] if is_gcloud else None


def check_options(name, zone, accelerator, project=None):
    """Raise UsageError for anything the job will not run with."""
    if accelerator not in RUNTIMES:
        raise UsageError(
            f"--accelerator {accelerator} is not supported; use {' or '.join(RUNTIMES)} "
            f"(one VM with 4 chips). Multi-host slices need jax.distributed.initialize() "
            f"on every worker: see README, 'The TPU job'")
    for flag, value, pattern in (("--name", name, NAME), ("--zone", zone, ZONE),
                                 ("--project", project, PROJECT)):
        if value is not None and not pattern.fullmatch(value):
            raise UsageError(f"{flag} {value!r} does not look like a {flag[2:]} "
                             f"(expected {pattern.pattern})")


def jax_pin(root=ROOT):
    """The jax version pinned in requirements.txt, so the VM installs the same one."""
    text = (root / "requirements.txt").read_text(encoding="utf-8")
    match = re.search(r"^jax==([\w.]+)", text, re.MULTILINE)
    if not match:
        raise UsageError("requirements.txt pins no `jax==` version; the TPU job installs "
                         "jax[tpu] at that pin")
    return match.group(1)


def tpu_lesson(root=ROOT):
    """The lesson the job records: the registry's first (lesson_code/lessons.toml)."""
    from scripts.lessons import RegistryError, load_lessons

    try:
        lessons = load_lessons(root)
    except RegistryError as error:
        raise UsageError(str(error)) from None
    if not lessons:
        raise UsageError("lesson_code/lessons.toml lists no lesson; add one ([[lesson]])")
    return next(iter(lessons.values()))


def recording_name(lesson_id):
    """The file record.py --platform tpu writes under recordings/."""
    return f"{lesson_id}.tpu.json"


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


def job_steps(name, zone, accelerator, project=None, create=True, delete=True,
              workdir=None, root=ROOT):
    """Every step of the job in order. `workdir` holds the local archive and the
    fetched recording (None: paths relative to the current directory, for the page)."""
    check_options(name, zone, accelerator, project)
    lesson_id = tpu_lesson(root).id
    remote_dir = lesson_id  # relative to the VM user's home: scp and ssh both start there
    bundle, recording = f"{lesson_id}.tar.gz", recording_name(lesson_id)
    local = (lambda f: str(Path(workdir) / f)) if workdir else (lambda f: f)
    where = ["--zone", zone] + (["--project", project] if project else [])
    tpu_vm = ["gcloud", "compute", "tpus", "tpu-vm"]
    vm = f"{name} {shlex.join(where)}"  # for the hints' commands

    def ssh(command):
        return tpu_vm + ["ssh", name, *where, "--command", command]

    quoted_dir = shlex.quote(remote_dir)
    is_vm_up = f"is the VM up? `gcloud compute tpus tpu-vm describe {vm}`"
    steps = [Step("pack the committed tree (git archive HEAD)",
                  ["git", "archive", "--format=tar.gz", "-o", local(bundle), "HEAD"],
                  "run the job from inside the repository, which needs at least one commit")]
    if create:
        steps.append(Step(
            f"create the {accelerator} VM {name} in {zone}",
            tpu_vm + ["create", name, *where, "--accelerator-type", accelerator,
                      "--version", RUNTIMES[accelerator]],
            f"if `gcloud compute tpus tpu-vm list {shlex.join(where)}` shows {name}, "
            f"rerun without --create or pick another --name"))
    steps += [
        Step("copy the archive to the VM",
             tpu_vm + ["scp", local(bundle), f"{name}:{bundle}", *where], is_vm_up),
        Step(f"unpack it into ~/{remote_dir} on the VM", ssh(
            f"rm -rf {quoted_dir} && mkdir {quoted_dir} && "
            f"tar -xzf {shlex.quote(bundle)} -C {quoted_dir} && rm {shlex.quote(bundle)}"),
            is_vm_up),
        Step(f"install uv, Python {PYTHON_VERSION} and the pins with jax[tpu] (a few "
             f"minutes)", ssh(remote_setup(jax_pin(root), remote_dir)),
             f"uv is installed with the image's `python3 -m pip`; if the VM has no pip, "
             f"run `sudo apt-get install -y python3-pip` there "
             f"(`gcloud compute tpus tpu-vm ssh {vm}`), then rerun"),
        Step("record the lesson on the chips (scripts/record.py --platform tpu)",
             ssh(f"cd {quoted_dir} && .venv/bin/python scripts/record.py --platform tpu"),
             f"its output is above; to retry by hand: `gcloud compute tpus tpu-vm ssh {vm}`, "
             f"then `cd {remote_dir} && .venv/bin/python scripts/record.py --platform tpu`"),
        Step("copy the recording back",
             tpu_vm + ["scp", f"{name}:{remote_dir}/recordings/{recording}",
                       local(recording), *where], is_vm_up),
        Step(f"validate {recording} (schema, backend tpu, 4 TPU devices, PASS, current "
             f"contentFiles), then move it into recordings/{recording}", None),
    ]
    if delete:
        steps.append(Step(
            f"delete the VM {name}", tpu_vm + ["delete", name, *where, "--quiet"],
            f"it may still be running and billing: run "
            f"`gcloud compute tpus tpu-vm delete {vm} --quiet`"))
    return steps


def job_commands(name, zone, accelerator, project=None, create=True, delete=True,
                 workdir=None, root=ROOT):
    """The exact commands the job runs, in order (what the lesson page shows)."""
    steps = job_steps(name, zone, accelerator, project, create, delete, workdir, root)
    return [step.command for step in steps if step.command is not None]


def dry_run_text(steps):
    """Copy-pasteable bash: a `# title` line, then the command, for every step."""
    lines = []
    for step in steps:
        lines.append(f"# {step.title}")
        if step.command is not None:
            lines.append(shlex.join(step.command))
    return "\n".join(lines) + "\n"

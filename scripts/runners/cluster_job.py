"""A lesson's rank module as a cluster job: the committed template filled from the registry.

    python scripts/runners/cluster_job.py slurm --lesson ID | sbatch
    python scripts/runners/cluster_job.py kubernetes --lesson ID | kubectl apply -f -

scripts/runners/slurm.sbatch and scripts/runners/kubernetes-job.yaml hold the job for any
lesson, with `@NAME@` placeholders (the autoconf and CMake `configure_file` convention:
`$` already means something to the shell both files run): @LESSON@ is the lesson id,
@RANK_MODULE@ its `rank_module` from lesson_code/lessons.toml, @K8S_NAME@ the Kubernetes
name made from the id (kubernetes_name). This prints the filled file; --lesson defaults
to the registry's first lesson with a rank module. No SLURM or Kubernetes cluster ran
these files: tests/test_launchers.py fills them and starts each rank's command here.
"""
import sys
from pathlib import Path

# `python scripts/runners/cluster_job.py` puts scripts/runners/ on sys.path; the package
# lives two levels up.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse
import hashlib
import re
import string

from scripts import display
from scripts.proc.interrupts import run_command
from scripts.store.lessons import RegistryError, load_lessons

COMMAND = "python scripts/runners/cluster_job.py"
TEMPLATES = {"slurm": Path(__file__).with_name("slurm.sbatch"),
             "kubernetes": Path(__file__).with_name("kubernetes-job.yaml")}
PLACEHOLDER = re.compile(r"@([A-Z0-9_]+)@")
# The templates' rank count (record.py's default `--processes 4`): pod host names end in
# "-<index>", so the Kubernetes name leaves room for the last one.
RANKS = 4
# A Service's name must be an RFC 1035 label (lowercase letters, digits and '-', a letter
# first, at most 63 characters), which is also a DNS-1123 label; the Job's name, its pods'
# host names (<name>-<index>) and the volume claim's follow from it.
DNS_LABEL_MAX = 63
CLAIM_SUFFIX = "-out"  # the volume claim is @K8S_NAME@-out


class JobError(Exception):
    """The job cannot be made; str() is one line naming the fix."""


def kubernetes_name(lesson_id, ranks=RANKS):
    """The lesson id as the name of the Job and its Service: the id itself when it is a
    label that leaves room for what the template appends (the volume claim's `-out`, the
    pods' host names' `-<index>`), else `lesson-<id>` when it starts with a digit, cut to
    fit with the first 8 hex digits of the id's SHA-256 appended, so that two long ids
    that share a beginning still name two jobs."""
    name = lesson_id if lesson_id[:1] in string.ascii_lowercase else f"lesson-{lesson_id}"
    longest = DNS_LABEL_MAX - max(len(CLAIM_SUFFIX), len(f"-{ranks - 1}"))
    if len(name) > longest:
        tag = hashlib.sha256(lesson_id.encode()).hexdigest()[:8]
        name = f"{name[:longest - len(tag) - 1].rstrip('-')}-{tag}"
    return name


def fill(template, values, where):
    """`template` with each @NAME@ replaced by values[NAME]; a placeholder with no value
    is an error, so a filled file never carries one."""
    unknown = sorted(set(PLACEHOLDER.findall(template)) - values.keys())
    if unknown:
        raise JobError(f"{where}: unknown placeholder @{unknown[0]}@; the placeholders are "
                       f"{', '.join(f'@{name}@' for name in values)}; run "
                       f"`git checkout -- {where}`")
    return PLACEHOLDER.sub(lambda match: values[match.group(1)], template)


def job_text(target, lesson):
    """The job file of `target` ("slurm", "kubernetes") for a Lesson with a rank module."""
    if target not in TEMPLATES:
        raise JobError(f"no job target {target!r}; the targets are {', '.join(TEMPLATES)}: "
                       f"run `{COMMAND} {next(iter(TEMPLATES))} --lesson {lesson.id}`")
    if not lesson.rank_module:
        raise JobError(f"lesson {lesson.id!r} names no `rank_module` in "
                       f"lesson_code/lessons.toml, so it has no multi-process run to start; "
                       f"add one (lesson_code/CONTRACT.md)")
    path = TEMPLATES[target]
    values = {"LESSON": lesson.id, "RANK_MODULE": lesson.rank_module,
              "K8S_NAME": kubernetes_name(lesson.id)}
    return fill(template_text(path), values, display(path))


def template_text(path):
    """The committed template; JobError (one line naming it) when it is missing, a
    folder, unreadable or not UTF-8."""
    where = display(path)
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise JobError(f"{where}: not UTF-8 (byte {error.start}); save it as UTF-8, or run "
                       f"`git checkout -- {where}`") from None
    except OSError as error:
        raise JobError(f"{where}: cannot be read ({error.strerror}); run "
                       f"`git checkout -- {where}`") from None


def chosen_lesson(lessons, lesson_id):
    """The lesson asked for, or the registry's first with a rank module."""
    runnable = [lesson.id for lesson in lessons.values() if lesson.rank_module]
    if lesson_id is None:
        if not runnable:
            raise JobError("no lesson in lesson_code/lessons.toml names a `rank_module`; "
                           "add one (lesson_code/CONTRACT.md)")
        return lessons[runnable[0]]
    if lesson_id not in lessons:
        hint = f"try --lesson {runnable[0]}" if runnable else "add it there"
        raise JobError(f"no lesson {lesson_id!r} in lesson_code/lessons.toml; {hint}")
    return lessons[lesson_id]


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, f"error: {message}; run `{COMMAND} slurm` or `{COMMAND} kubernetes`\n")


def main(argv=None):
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", help=f"the cluster: {' or '.join(TEMPLATES)}")
    parser.add_argument("--lesson", metavar="ID", help="the lesson (default: the first "
                        "in lesson_code/lessons.toml with a rank_module)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        lesson = chosen_lesson(load_lessons(), args.lesson)
        text = job_text(args.target, lesson)
    except (JobError, RegistryError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main))

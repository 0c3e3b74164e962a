"""The rank module started the way clusters start JAX, not by this repository's launcher.

Open MPI is run for real: `record.py --processes 4 --launcher mpirun` starts the four ranks
under `mpirun` on loopback, and its recording is checked against the `--processes 4` one.
SLURM and Kubernetes are tested at the seam only: the committed templates
(scripts/runners/slurm.sbatch, scripts/runners/kubernetes-job.yaml) are filled for the seed
lesson from the registry, as `scripts/runners/cluster_job.py` prints them, and the command in
the filled file is started once per rank with the variables srun or an Indexed Job would
set, which are what JAX's cluster modules (jax/_src/clusters/) or the manifest's flags read.
No SLURM or Kubernetes runs here.
"""
import dataclasses
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
import yaml
from hypothesis import given, settings, strategies as st

from conftest import (LESSONS, ROOT, SEED, clean_env, leftover_temp_files, project_copy,
                      recording_name, run_record, snapshot)
from scripts.record import check_stdout, executed_recording
from scripts.store.recordings import load_recording, validate
from scripts.proc.children import kill_all
from scripts.runners import cluster_job, mpirun, reaper
from scripts.runners.processes import ProcessRunError, free_port, run_processes, wait_for
from scripts.proc.scratch import remove_abandoned
from test_faults import (Record, assert_gone, assert_one_error_line, hanging_ranks,
                         scratch_of)

# The seed lesson's rank module: the one the launchers' seam tests start, through the job
# files filled for it (its rank module writes the `launch` and traffic data they check).
LESSON_ID = SEED.id
RANK_MODULE = SEED.rank_module
PROCESS_RECORDING = recording_name(SEED, "cpu-processes")
SLURM_SCRIPT = ROOT / "scripts" / "runners" / "slurm.sbatch"  # templates, for any lesson
K8S_MANIFEST = ROOT / "scripts" / "runners" / "kubernetes-job.yaml"
SCRATCH = f"ranks-{os.getpid()}-*"  # this process's runs' scratch folders (scripts/proc/scratch.py)



def require_mpirun():
    """Skip where mpirun is missing; under CI, which installs it, fail instead."""
    if shutil.which("mpirun") is None:
        reason = "mpirun is missing: `make test` installs Debian's openmpi-bin (as root)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"the mpirun tests cannot run under CI: {reason}")
        pytest.skip(reason)


@pytest.fixture
def needs_mpirun():
    require_mpirun()


def launcher_free_env(**extra):
    """clean_env() without any launcher's variables this shell may itself carry."""
    env = {key: value for key, value in clean_env().items()
           if not key.startswith(("OMPI_", "PMIX_", "SLURM_", "JOB_COMPLETION", "KUBERNETES_"))
           and key != "JAX_COORDINATOR_PORT"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # python
    return {**env, **extra}


def marked_ranks_left(launcher_pid):
    """Processes still carrying the mark of an mpirun run that `launcher_pid` started
    (scripts/runners/mpirun.py: the mark is its scratch folder, ranks-<pid>-...)."""
    needle = f"{reaper.RUN_MARK}=ranks-{launcher_pid}-".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and needle in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


# --- Open MPI, run for real ----------------------------------------------------------------

@pytest.fixture(scope="module")
def mpirun_tree(tmp_path_factory):
    """A project copy recorded by `record.py --processes 4 --launcher mpirun`, with 5
    calls per measurement (the launcher is what is tested; bytes per call do not depend on
    how many calls are averaged)."""
    require_mpirun()
    root = project_copy(tmp_path_factory.mktemp("mpirun").resolve() / "repo")
    before = json.loads((root / PROCESS_RECORDING).read_text())
    run = run_record(root, "--processes", "4", "--launcher", "mpirun", "--calls", "5", "--all",
                     timeout=600)
    return root, before, run


def test_mpirun_records_the_process_run_and_it_passes_the_schema_and_check(mpirun_tree):
    root, _, run = mpirun_tree
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"running {LESSON_ID} as 4 JAX processes under mpirun" in run.stderr
    recording = load_recording(root / PROCESS_RECORDING)  # the schema, as --check reads it
    assert recording["command"] == ["python", "scripts/record.py", "--processes", "4",
                                    "--launcher", "mpirun", "--calls", "5"]
    assert recording["data"]["launch"] == {"launcher": "mpirun", "processes": 4, "hosts": 1,
                                           "coordinatorHost": "127.0.0.1"}
    assert recording["environment"]["processCount"] == 4
    assert recording["stdout"].endswith(f"PASS: {LESSON_ID}\n")
    check = run_record(root, "--check")
    # Other files of this copy may be stale on a branch that has not re-recorded; the
    # recording mpirun wrote, and the figure drawn from it, must not be among them.
    assert [line for line in check.stdout.splitlines()
            if "cpu-processes" in line or "traffic" in line] == []


def fixed_cost(before, collective):
    """What one call sends beyond the payload model at the lesson's 32 bytes: gloo's
    headers and notifications, the same whatever the size; the bytes may differ by it."""
    [row] = [row for row in before["data"]["traffic"]
             if row["collective"] == collective and row["gradientBytes"] == 32]
    return max(row["excessBytesPerRank"])


def test_mpirun_sends_the_same_bytes_per_rank_as_the_processes_run(mpirun_tree):
    root, before, run = mpirun_tree
    assert run.returncode == 0, run.stderr[-3000:]
    after = json.loads((root / PROCESS_RECORDING).read_text())
    for key in ("traffic", "ringTraffic"):
        assert len(after["data"][key]) == len(before["data"][key])
        for old, new in zip(before["data"][key], after["data"][key]):
            assert (old["collective"], old["gradientBytes"]) == (new["collective"],
                                                                 new["gradientBytes"])
            allowed = fixed_cost(before, old["collective"])
            for was, now in zip(old["observedBytesPerRank"], new["observedBytesPerRank"]):
                assert abs(now - was) <= allowed, (key, old["collective"], was, now)
    assert all(row["observedBytesPerRank"] == [0.0] * 4
               for row in after["data"]["trafficBaseline"])


def test_a_rank_that_dies_under_mpirun_ends_the_run_in_one_line(needs_mpirun, monkeypatch):
    monkeypatch.setenv("FAILING_RANK", "exit")  # tests/fixtures/failing_rank.py
    scratch_before = set(Path(tempfile.gettempdir()).glob(SCRATCH))
    with pytest.raises(ProcessRunError) as raised:
        mpirun.run_mpirun("tests.fixtures.failing_rank", ranks=4, timeout_s=120, calls=1)
    error = raised.value
    assert "\n" not in str(error)
    assert str(error).startswith("rank 2 exited with status 3 under mpirun; all 4 ranks "
                                 "killed"), error
    assert "failing_rank fixture" in error.stderr_tail
    assert marked_ranks_left(os.getpid()) == []
    assert set(Path(tempfile.gettempdir()).glob(SCRATCH)) - scratch_before == set()


def test_a_coordinator_port_that_is_taken_is_refused_before_mpirun_starts(monkeypatch):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        monkeypatch.setenv("JAX_COORDINATOR_PORT", str(port))
        monkeypatch.setattr(subprocess, "Popen", None)  # nothing may be started
        with pytest.raises(ProcessRunError, match=rf"the coordinator's port {port} on "
                           r"127\.0\.0\.1 is taken \(JAX_COORDINATOR_PORT\); free it"):
            mpirun.run_mpirun(RANK_MODULE, ranks=4)
        for value in ("eighty", "²", "８０", "99999"):  # "²" and "８０" pass str.isdigit()
            monkeypatch.setenv("JAX_COORDINATOR_PORT", value)
            with pytest.raises(ProcessRunError, match=rf"^JAX_COORDINATOR_PORT={value!r} is "
                               r"not a TCP port; set it to one from 1 to 65535"):
                mpirun.run_mpirun(RANK_MODULE, ranks=4)


@pytest.fixture
def private_tmpdir():
    """A TMPDIR of the run's own, short (Open MPI's sockets live under it), to list after."""
    folder = Path(tempfile.mkdtemp(prefix="mpi-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("how", ["SIGINT", "SIGHUP", "SIGKILL to mpirun", "SIGKILL"])
def test_a_signal_or_a_killed_mpirun_leaves_no_rank_and_changes_nothing(needs_mpirun,
                                                                         tmp_path, how,
                                                                         private_tmpdir):
    tree = project_copy(tmp_path.resolve() / "repo")
    hanging = hanging_ranks(tree)  # the ranks wait in a collective: only a signal ends it
    before = snapshot(tree)
    run = Record(tree, "--processes", "4", "--launcher", "mpirun", "--all", **hanging,
                 TMPDIR=str(private_tmpdir))
    try:
        run.wait_for_line("record: running")
        # mpirun's own command line names the module too: it and the four ranks.
        ranks = run.wait_for_children("lesson_code.hanging_rank", 5)
        time.sleep(1.0)  # importing JAX or joining: well under way
        if how == "SIGKILL to mpirun":
            [launcher] = [child for child in run.descendants() if child.name() == "mpirun"]
            launcher.kill()
        else:
            run.process.send_signal(getattr(signal, how))
        status, lines = run.finish()
    finally:
        run.kill()
    assert_gone(ranks, timeout=15)
    assert snapshot(tree) == before
    assert leftover_temp_files(tree) == []
    if how in ("SIGINT", "SIGHUP"):  # the terminal's Ctrl-C, or the terminal closed
        assert status == 128 + getattr(signal, how), lines
        assert_one_error_line(lines, f"interrupted by {how}")
        # Its scratch folders and Open MPI's session folder (ompi.<host>.<uid>) went too.
        assert list(private_tmpdir.iterdir()) == []
    elif how == "SIGKILL to mpirun":
        assert status == 1, lines
        assert_one_error_line(lines, "mpirun was killed by SIGKILL; its 4 ranks were killed",
                              "nothing was written")
    else:
        assert status == -signal.SIGKILL  # mpirun got SIGTERM (PR_SET_PDEATHSIG) and
        remove_abandoned("ranks")  # what the next multi-process run does first
        remove_abandoned("record")
    assert marked_ranks_left(run.process.pid) == []  # killed its ranks; none is left
    assert scratch_of(run.process.pid) == []


def test_a_killed_record_leaves_no_rank_waiting_in_a_collective(needs_mpirun, tmp_path):
    """SIGKILL to record.py once the ranks wait in a collective (rank 2 hangs at the first
    one): mpirun, sent SIGTERM as record.py dies, can exit and leave them waiting forever
    (it did in some tries by hand, not in others); the run's reaper
    (scripts/runners/reaper.py) kills them however mpirun behaves."""
    tree = project_copy(tmp_path.resolve() / "repo")
    hung = tmp_path / "hung"
    hanging = {**hanging_ranks(tree), "FAILING_RANK": "hang-early",
               "FAILING_RANK_HUNG": str(hung)}
    run = Record(tree, "--processes", "4", "--launcher", "mpirun", "--all", **hanging)
    try:
        run.wait_for_line("record: running")
        ranks = run.wait_for_children("lesson_code.hanging_rank", 5)
        deadline = time.monotonic() + 120
        while not hung.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert hung.exists(), "rank 2 never reached its first collective"
        time.sleep(0.5)  # its peers, which joined with it, are in that collective too
        run.process.kill()
        run.process.wait()
    finally:
        run.kill()
    assert_gone(ranks, timeout=15)
    assert marked_ranks_left(run.process.pid) == []
    remove_abandoned("ranks")  # what the next multi-process run does first
    remove_abandoned("record")
    assert scratch_of(run.process.pid) == []


@pytest.mark.slow
def test_inside_a_cluster_s_environment_this_repository_s_launcher_names_itself(
        monkeypatch):
    """record.py run inside an srun step or an mpirun: the ranks processes.py starts get
    none of those variables, so they neither join that job nor record its launcher."""
    for key, value in {"SLURM_JOB_ID": "4242", "SLURM_STEP_NODELIST": "localhost",
                       "SLURM_NTASKS": "4", "SLURM_PROCID": "3", "SLURM_LOCALID": "3",
                       "OMPI_MCA_orte_hnp_uri": "1234.0;tcp://127.0.0.1:1",
                       "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "3",
                       "PMIX_RANK": "3", "JOB_COMPLETION_INDEX": "3"}.items():
        monkeypatch.setenv(key, value)
    run = run_processes(RANK_MODULE, ranks=2, calls=1, timeout_s=240)
    assert run.data["launch"]["launcher"] == "processes.py"  # was "mpirun"


def test_a_job_template_that_cannot_be_read_is_one_line(tmp_path, monkeypatch, capsys):
    missing, folder, latin1 = tmp_path / "gone.sbatch", tmp_path / "a-folder", \
        tmp_path / "latin1.sbatch"
    folder.mkdir()
    latin1.write_bytes("# caf\xe9 @LESSON@\n".encode("latin-1"))
    for template, words in [(missing, "gone.sbatch: cannot be read (No such file"),
                            (folder, "a-folder: cannot be read (Is a directory)"),
                            (latin1, "latin1.sbatch: not UTF-8 (byte 5); save it as UTF-8")]:
        monkeypatch.setitem(cluster_job.TEMPLATES, "slurm", template)
        assert cluster_job.main(["slurm", "--lesson", LESSON_ID]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and words in err, err


def test_the_job_command_piped_to_a_reader_that_left_is_141_and_no_traceback():
    """`cluster_job.py kubernetes | head -0`: the reader is gone before the first line."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([sys.executable, "scripts/runners/cluster_job.py", "kubernetes"],
                              cwd=ROOT, env=clean_env(), stdout=write, stderr=subprocess.PIPE,
                              text=True, timeout=60)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")


# A parent that starts a reaper and a process carrying the reaper's mark, says their pids,
# and waits to be killed.
REAPERS_PARENT = """
import os, subprocess, sys, time
from scripts.runners import reaper
watchman = reaper.start(sys.argv[1])
marked = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                          env=dict(os.environ, **{reaper.RUN_MARK: sys.argv[1]}),
                          start_new_session=True)
print(watchman.pid, marked.pid, flush=True)
time.sleep(600)
"""


def waits_for_a_signal(pid):
    """Whether the process sleeps in sigwait: the reaper is ready, its parent checked."""
    return Path(f"/proc/{pid}/wchan").read_text().startswith("do_sigtimedwait")


@pytest.mark.slow
def test_the_reaper_kills_the_marked_processes_once_its_parent_dies_and_not_before():
    """scripts/runners/reaper.py: a SIGTERM from anyone but the kernel changes nothing while
    the parent lives; the parent SIGKILLed, the marked process is killed and the reaper
    exits."""
    mark = f"ranks-reaper-test-{os.getpid()}"
    parent = subprocess.Popen([sys.executable, "-c", REAPERS_PARENT, mark], cwd=ROOT,
                              env=clean_env(), stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        watchman, marked = map(int, parent.stdout.readline().split())
        deadline = time.monotonic() + 30
        while not waits_for_a_signal(watchman) and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(watchman, signal.SIGTERM)
        processes = [psutil.Process(marked), psutil.Process(watchman)]
        time.sleep(0.5)
        assert waits_for_a_signal(watchman) and processes[0].is_running()
        parent.kill()
        parent.wait()
        assert_gone(processes, timeout=10)
    finally:
        for pid in reaper.marked_processes(mark):
            os.kill(pid, signal.SIGKILL)
        if parent.poll() is None:
            parent.kill()


def test_a_missing_mpirun_is_one_line_naming_the_package(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(subprocess, "Popen", None)  # nothing may be started
    with pytest.raises(mpirun.MissingLauncher, match=r"^mpirun is not installed; run "
                       r"`apt-get install -y openmpi-bin`"):
        mpirun.run_mpirun(RANK_MODULE, ranks=4)


def test_mpirun_command_is_one_command_for_every_rank():
    command = mpirun.mpirun_command(RANK_MODULE, 4, 100, "data.json", "out")
    assert command[:3] == ["mpirun", "-np", "4"]
    rank_part = command[command.index(sys.executable):]
    assert "--process-id" not in rank_part and "--port" not in rank_part
    assert rank_part[1:3] == ["-m", RANK_MODULE]


@pytest.mark.slow
def test_record_refuses_a_launcher_without_processes(tmp_path):
    root = project_copy(tmp_path / "repo", parts=("lesson_code", "scripts", "recordings"))
    run = run_record(root, "--launcher", "mpirun")
    assert run.returncode == 2
    assert run.stderr == ("error: --launcher mpirun starts the processes of a multi-process "
                          "run; run `python scripts/record.py --processes 4 --launcher "
                          "mpirun`\n")


@pytest.mark.slow
@pytest.mark.parametrize("args", [["--calls", "5"], ["--processes", "4", "--calls", "0"]])
def test_record_refuses_calls_outside_a_multi_process_run(tmp_path, args):
    root = project_copy(tmp_path / "repo", parts=("lesson_code", "scripts", "recordings"))
    run = run_record(root, *args)
    assert run.returncode == 2
    assert run.stderr == ("error: --calls sets the repeated calls of a multi-process run, 1 "
                          "or more: run `python scripts/record.py --processes 4 --calls 5`\n")


# --- SLURM and Kubernetes, at the seam ----------------------------------------------------

def snippet(text, name):
    """The lines between `--8<-- [start:name]` and `[end:name]`: what the pages include."""
    start = text.index(f"# --8<-- [start:{name}]\n") + len(f"# --8<-- [start:{name}]\n")
    return text[start:text.index(f"# --8<-- [end:{name}]")]


def srun_line():
    """The srun command of slurm.sbatch filled for the seed lesson, as its words."""
    return shlex.split(snippet(cluster_job.job_text("slurm", SEED), "srun").replace("\\\n", " "))


def test_the_job_templates_name_no_lesson_and_are_filled_from_the_registry():
    for target, template in (("slurm", SLURM_SCRIPT), ("kubernetes", K8S_MANIFEST)):
        text = template.read_text()
        assert {"@LESSON@", "@RANK_MODULE@"} <= set(re.findall(r"@[A-Z0-9_]+@", text))
        assert not any(lesson.rank_module and lesson.rank_module in text
                       for lesson in LESSONS.values())
        assert LESSON_ID not in text
        filled = cluster_job.job_text(target, SEED)
        assert re.search(r"@[A-Z0-9_]+@", filled) is None
        assert f"python -m {RANK_MODULE}" in filled and f"{LESSON_ID}." in filled


def test_the_job_command_prints_the_filled_file_and_refuses_bad_input_in_one_line(capsys):
    done = subprocess.run([sys.executable, "scripts/runners/cluster_job.py", "kubernetes",
                           "--lesson", LESSON_ID], cwd=ROOT, env=clean_env(),
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == cluster_job.job_text("kubernetes", SEED)
    for argv, line in [
            (["slurm", "--lesson", "no-such-lesson"],
             "no lesson 'no-such-lesson' in lesson_code/lessons.toml; try --lesson "),
            (["k8s", "--lesson", LESSON_ID],
             f"no job target 'k8s'; the targets are slurm, kubernetes: run "
             f"`python scripts/runners/cluster_job.py slurm --lesson {LESSON_ID}`"),
            ([], "the following arguments are required: target; run `python "
                 "scripts/runners/cluster_job.py slurm`")]:
        try:
            status = cluster_job.main(argv)
        except SystemExit as exit_:  # argparse's own errors
            status = exit_.code
        out, err = capsys.readouterr()
        assert (status, out) == (2, ""), argv
        assert err.startswith(f"error: {line}") and err.count("\n") == 1, err


def test_a_lesson_without_a_rank_module_or_a_bad_template_is_one_line():
    with pytest.raises(cluster_job.JobError, match=r"^lesson '[^']+' names no `rank_module` "
                       r"in lesson_code/lessons\.toml, .*; add one \(lesson_code/CONTRACT\.md\)$"):
        cluster_job.job_text("slurm", dataclasses.replace(SEED, rank_module=None))
    with pytest.raises(cluster_job.JobError, match=r"^job\.yaml: unknown placeholder @IMAGE@; "
                       r"the placeholders are @LESSON@; run `git checkout -- job\.yaml`$"):
        cluster_job.fill("image: @IMAGE@\nname: @LESSON@\n", {"LESSON": "x"}, "job.yaml")


# A Service's name: an RFC 1035 label, which is also a DNS-1123 label (lowercase letters,
# digits and '-', a letter first, at most 63 characters).
RFC_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
# What the registry accepts as an id (recordings/schema.json: at most 64 characters).
LESSON_IDS = st.from_regex(r"[a-z0-9]{1,20}(-[a-z0-9]{1,20}){0,4}", fullmatch=True)


@settings(max_examples=100, deadline=None)
@given(lesson_id=LESSON_IDS)
def test_every_lesson_id_makes_kubernetes_names_that_are_dns_labels(lesson_id):
    name = cluster_job.kubernetes_name(lesson_id)
    derived = (name, f"{name}-{cluster_job.RANKS - 1}", f"{name}-out")  # + pod 3, the claim
    assert all(RFC_1035_LABEL.fullmatch(label) for label in derived), derived
    if all(RFC_1035_LABEL.fullmatch(lesson_id + suffix) for suffix in ("-3", "-out")):
        assert name == lesson_id  # an id that leaves room is kept as it is


def test_kubernetes_names_of_awkward_ids_stay_readable_and_distinct():
    assert cluster_job.kubernetes_name(LESSON_ID) == LESSON_ID
    assert cluster_job.kubernetes_name("03-intro") == "lesson-03-intro"
    long_a, long_b = "a" * 60 + "-one", "a" * 60 + "-two"
    names = {cluster_job.kubernetes_name(long_a), cluster_job.kubernetes_name(long_b)}
    assert len(names) == 2 and all(len(name) == 59 for name in names)


def run_ranks(commands, envs, scratch, timeout_s=300):
    """Each command as one rank, with its environment; files, not pipes, like processes.py."""
    children = []
    try:
        for rank, (command, env) in enumerate(zip(commands, envs)):
            with open(scratch / f"rank{rank}.out", "wb") as out, \
                    open(scratch / f"rank{rank}.err", "wb") as err:
                children.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=out,
                                                 stderr=err, stdin=subprocess.DEVNULL,
                                                 start_new_session=True))
        wait_for(children, timeout_s, scratch)
    finally:
        kill_all(children)
    return (scratch / "rank0.out").read_text()


def recorded(stdout, data_path):
    """The recording record.py would stage from this run: validated against the schema."""
    check_stdout(LESSON_ID, stdout)
    recording = executed_recording(SEED, RANK_MODULE, stdout,
                                   json.loads(data_path.read_text()), 1.0, ["srun"])
    validate(recording, "a seam recording")
    return recording


def test_the_srun_line_starts_the_rank_module_with_no_rank_flags():
    words = srun_line()
    assert words[0] == "srun"
    python = words.index("python")
    assert words[python + 1:python + 3] == ["-m", RANK_MODULE]
    assert not {"--process-id", "--processes", "--port"} & set(words)
    assert f"#SBATCH --ntasks={cluster_job.RANKS}" in cluster_job.job_text("slurm", SEED)


def free_slurm_job_id():
    """A job id whose port (slurm_cluster.py: 61440 + id mod 4096) is free right now."""
    for job_id in range(4096 * 7, 4096 * 8):
        port = 61440 + job_id % 4096
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        return job_id
    pytest.fail("no free port in 61440-65535")


@pytest.mark.slow
def test_under_srun_the_rank_module_joins_and_records(tmp_path):
    """The variables srun sets on a one-node step, and the srun line's own --export."""
    words = srun_line()
    ranks = int(words[words.index("--ntasks") + 1])
    exported = dict(item.split("=", 1) for item in
                    words[words.index("--export") + 1].split(",") if "=" in item)
    command = words[words.index("python"):]
    data_path = tmp_path / "slurm.json"
    command[command.index("--data-out") + 1] = str(data_path)
    command += ["--calls", "2"]  # fewer repeats: this checks the join, not the bytes
    job_id = free_slurm_job_id()
    envs = [launcher_free_env(**exported, SLURM_JOB_ID=str(job_id), SLURM_NTASKS=str(ranks),
                              SLURM_PROCID=str(rank), SLURM_LOCALID=str(rank),
                              SLURM_STEP_NODELIST="localhost", SLURM_STEP_NUM_NODES="1")
            for rank in range(ranks)]
    stdout = run_ranks([command] * ranks, envs, tmp_path)
    recording = recorded(stdout, data_path)
    # JAX dialled "localhost" (the step's node list); the connection reached 127.0.0.1.
    assert recording["data"]["launch"] == {"launcher": "srun", "processes": ranks,
                                           "hosts": 1, "coordinatorHost": "127.0.0.1"}
    # The coordinator's port came from SLURM_JOB_ID, and was still left out of the count.
    assert all(row["observedBytesPerRank"] == [0.0] * ranks
               for row in recording["data"]["trafficBaseline"])


def manifest():
    """The Kubernetes template filled for the seed lesson, parsed."""
    return list(yaml.safe_load_all(cluster_job.job_text("kubernetes", SEED)))


def test_the_kubernetes_manifest_parses_as_an_indexed_job_with_its_headless_service():
    service, job = manifest()
    assert (service["apiVersion"], service["kind"]) == ("v1", "Service")
    assert service["spec"]["clusterIP"] == "None"  # headless: a DNS name per pod
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == cluster_job.RANKS == 4
    assert job["metadata"]["name"] == cluster_job.kubernetes_name(LESSON_ID)
    pod = spec["template"]["spec"]
    assert pod["subdomain"] == service["metadata"]["name"]
    assert service["spec"]["selector"] == {"job-name": job["metadata"]["name"]}
    [container] = pod["containers"]
    env = {item["name"]: item["value"] for item in container["env"]}
    # Pod 0 of an Indexed Job is <job>-0, found through the Service as <job>-0.<service>.
    host = env["COORDINATOR"].rsplit(":", 1)[0]
    assert host == f"{job['metadata']['name']}-0.{service['metadata']['name']}"
    [mount] = container["volumeMounts"]
    assert container["args"][0].split("--data-out ")[1].startswith(mount["mountPath"] + "/")
    [volume] = pod["volumes"]
    assert volume["persistentVolumeClaim"]["claimName"] == f"{job['metadata']['name']}-out"


@pytest.mark.slow
def test_in_an_indexed_job_the_rank_module_joins_and_records(tmp_path):
    """Each pod's command, with what the Job gives a pod: its index, its host name, the
    API server's address; COORDINATOR alone is changed, pod DNS names do not exist here."""
    _, job = manifest()
    [container] = job["spec"]["template"]["spec"]["containers"]
    ranks = job["spec"]["parallelism"]
    env = {item["name"]: item["value"] for item in container["env"]}
    env["COORDINATOR"] = f"127.0.0.1:{free_port()}"
    data_path = tmp_path / "k8s.json"
    script = container["args"][0].replace(f"/out/{LESSON_ID}.json", str(data_path))
    command = container["command"] + [script + " --calls 2"]
    name = job["metadata"]["name"]
    envs = [launcher_free_env(**env, JOB_COMPLETION_INDEX=str(rank), HOSTNAME=f"{name}-{rank}",
                              KUBERNETES_SERVICE_HOST="10.0.0.1", KUBERNETES_SERVICE_PORT="443")
            for rank in range(ranks)]
    stdout = run_ranks([command] * ranks, envs, tmp_path)
    recording = recorded(stdout, data_path)
    assert recording["data"]["launch"] == {"launcher": "kubernetes", "processes": ranks,
                                           "hosts": 1, "coordinatorHost": "127.0.0.1"}


def test_no_page_claims_a_cluster_ran_what_only_the_seam_tested():
    for path in (SLURM_SCRIPT, K8S_MANIFEST):
        assert re.search(r"no (SLURM|Kubernetes) cluster ran this file", path.read_text())


def test_the_scaling_out_section_includes_the_files_these_tests_run():
    """The page shows the commands from the files above, not copies that could drift."""
    page = (ROOT / "docs" / "going-further" / "processes.md").read_text()
    section = page[page.index("## Scaling out"):]
    included = re.findall(r'--8<-- "([^":]+):(\w+)"', section)
    assert included == [("scripts/runners/mpirun.py", "mpirun_command"),
                        ("scripts/runners/slurm.sbatch", "srun"),
                        ("scripts/runners/kubernetes-job.yaml", "pod")]
    for path, name in included:
        assert snippet((ROOT / path).read_text(), name).strip()
    assert "at the seam only" in section and "run here" in section

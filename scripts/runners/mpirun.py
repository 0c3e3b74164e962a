"""Run a lesson's rank module as p processes started by Open MPI's `mpirun`, on loopback.

Every rank runs the same command, and `jax.distributed.initialize()` reads who is who from
mpirun's environment. mpirun gives each rank a process group of its own, so every rank
carries the run's mark (scratch.RUN_MARK), and the run ends by killing what carries it.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from scripts import ROOT
from scripts.plumbing.children import describe, dies_with, kill_all, poll_until, stderr_tail
from scripts.plumbing.scratch import RUN_MARK, kill_marked, scratch_folder
from scripts.runners.processes import (ProcessRunError, free_port, launcher_free, port_in_use,
                                       rank_zero_run)


class MissingLauncher(ProcessRunError):
    """mpirun is not installed: the one command that installs it is in the message."""


# --8<-- [start:mpirun_command]
def mpirun_command(module, ranks, calls, data_out, output_dir):
    """The whole run as one command line: the same `python -m module` for every rank."""
    return ["mpirun", "-np", str(ranks),
            "--oversubscribe",  # more ranks than this machine's cores
            "--bind-to", "none",  # let the scheduler place them, as processes.py does
            "--mca", "oob_tcp_if_include", "lo",  # loopback: the coordinator is 127.0.0.1
            "--output-filename", str(output_dir),  # <dir>/1/rank.<r>/stdout, stderr
            "-x", "JAX_PLATFORMS=cpu", "-x", "JAX_NUM_CPU_DEVICES=1",
            "-x", "JAX_COORDINATOR_PORT",  # JAX's override of the port it would derive
            sys.executable, "-m", module, "--calls", str(calls), "--data-out", str(data_out)]
# --8<-- [end:mpirun_command]


def mpirun_environment(port, scratch):
    """mpirun's environment, which its ranks inherit: no outer launcher's, the run's mark,
    and Open MPI's session folder inside the scratch folder (orte_ for Open MPI 4, prte_
    for 5, TMPDIR for PMIx)."""
    env = dict(launcher_free(os.environ), JAX_COORDINATOR_PORT=str(port),
               **{RUN_MARK: scratch.name}, TMPDIR=str(scratch),
               OMPI_MCA_orte_tmpdir_base=str(scratch), PRTE_MCA_prte_tmpdir_base=str(scratch))
    if os.geteuid() == 0:
        # mpirun refuses to run as root unless told twice; a container has no other user.
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def rank_files(output_dir, rank):
    folder = output_dir / "1" / f"rank.{rank}"
    return folder / "stdout", folder / "stderr"


# How mpirun names the first rank to fail: by its exit ("Process name: [[27429,1],2]" then
# "Exit code: 3") or by a signal ("process rank 0 with PID 0 on node vm exited on signal 11").
FAILED_BY_EXIT = re.compile(r"Process name: \[\[\d+,\d+\],(\d+)\]")
FAILED_BY_SIGNAL = re.compile(r"process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)")


def wait_for_mpirun(launcher, timeout_s, scratch, output_dir, ranks):
    status = poll_until(launcher.poll, timeout_s, 0.05)
    if status == 0:
        return status
    stderr, pids = scratch / "mpirun.err", [launcher.pid]
    tail = stderr_tail(stderr)
    if status is None:
        raise ProcessRunError(f"mpirun still running after {timeout_s:g} s; it and its "
                              f"{ranks} ranks were killed; mpirun's stderr: "
                              f"{stderr_tail(stderr, lines=1)}", None, None, tail, pids)
    if status < 0:  # mpirun itself was killed: its ranks are orphans, killed by the caller
        raise ProcessRunError(f"mpirun {describe(status)}; its {ranks} ranks were killed",
                              None, status, tail, pids)
    text = stderr.read_text(errors="replace") if stderr.exists() else ""
    if found := FAILED_BY_SIGNAL.search(text):
        rank, ended = int(found.group(1)), describe(-int(found.group(2)))
    elif found := FAILED_BY_EXIT.search(text):
        rank, ended = int(found.group(1)), describe(status)  # mpirun exits with its status
    else:  # mpirun could not start the ranks: its own words say why
        raise ProcessRunError(f"mpirun {describe(status)} before any rank failed; all {ranks} "
                              f"ranks killed; mpirun's stderr: {tail}", None, status, tail, pids)
    tail = stderr_tail(rank_files(output_dir, rank)[1])
    raise ProcessRunError(f"rank {rank} {ended} under mpirun; all {ranks} ranks killed; "
                          f"stderr: {tail}", rank, status, tail, pids)


def run_mpirun(module, ranks=4, timeout_s=300, calls=100, cwd=ROOT, port=None):
    """Run `module` as `ranks` processes under mpirun; return process 0's stdout and data.
    `port`: the coordinator's (default: $JAX_COORDINATOR_PORT, else a free one); a taken
    one is refused first, as rank 0 would die binding it."""
    chosen = os.environ.get("JAX_COORDINATOR_PORT")
    if port is None and chosen:
        # ASCII digits only: str.isdigit() passes "²", which int() refuses.
        port = int(chosen) if re.fullmatch(r"[0-9]{1,5}", chosen) else None
        if port is None or not 0 < port < 65536:
            raise ProcessRunError(f"JAX_COORDINATOR_PORT={chosen!r} is not a TCP port; set it "
                                  f"to one from 1 to 65535, or unset it to use a free one")
    if port is not None and port_in_use(port):
        raise ProcessRunError(f"the coordinator's port {port} on 127.0.0.1 is taken "
                              f"(JAX_COORDINATOR_PORT); free it, or unset JAX_COORDINATOR_PORT "
                              f"and a free port is used")
    if shutil.which("mpirun") is None:
        raise MissingLauncher("mpirun is not installed; run `apt-get install -y openmpi-bin` "
                              "(Debian's Open MPI) or record with `--processes N` alone")
    started = time.monotonic()
    with scratch_folder("ranks") as scratch:
        output_dir, data_path = scratch / "out", scratch / "data.json"
        launcher = None
        try:
            command = mpirun_command(module, ranks, calls, data_path, output_dir)
            with open(scratch / "mpirun.out", "wb") as out, \
                    open(scratch / "mpirun.err", "wb") as err:
                # Should this process die, mpirun gets SIGTERM and kills the ranks starting.
                launcher = subprocess.Popen(
                    command, cwd=cwd, env=mpirun_environment(port or free_port(), scratch),
                    stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True,
                    preexec_fn=dies_with(os.getpid(), signal.SIGTERM))
            status = wait_for_mpirun(launcher, timeout_s, scratch, output_dir, ranks)
        finally:
            kill_all([launcher] if launcher else [])
            kill_marked(scratch.name)
        return rank_zero_run(started, data_path, *rank_files(output_dir, 0), [status] * ranks,
                             [launcher.pid])

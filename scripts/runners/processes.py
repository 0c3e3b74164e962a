"""Run a lesson's rank module as p processes of one CPU device each, over 127.0.0.1. If a
rank fails or the run times out, every rank is killed and ProcessRunError says which rank,
how it ended and what it last wrote to stderr.
"""
import os
import random
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

from scripts import ROOT
from scripts.plumbing.children import describe, dies_with, kill_all, poll_until, stderr_tail
from scripts.store.recordings import read_json
from scripts.plumbing.scratch import scratch_folder


@dataclass(frozen=True)
class ProcessRun:
    stdout: str  # process 0's stdout, byte for byte
    data: dict  # process 0's data JSON: run_lesson's result plus traffic
    duration_s: float
    exit_codes: list  # one per rank
    pids: list  # one per rank; each was also its own process group


class ProcessRunError(RuntimeError):
    """One line: which rank, how it ended, the tail of its stderr. Every rank is dead."""

    def __init__(self, message, rank=None, status=None, stderr_tail="", pids=()):
        super().__init__(message)
        self.rank, self.status, self.stderr_tail, self.pids = rank, status, stderr_tail, list(pids)


# Below the ephemeral ports (Linux 32768-60999, macOS 49152-65535), from which every
# outgoing connection takes its own: the ranks' gloo links, mpirun's daemons, another run's.
# A port the kernel picked there could be taken by one of those in the seconds before the
# coordinator binds it ("Failed to start RPC server"); down here only a listener binds.
LISTENER_PORTS = range(20000, 32768)


def free_port():
    """A TCP port on 127.0.0.1 that nothing holds, outside the ephemeral range."""
    for _ in range(20):
        port = random.choice(LISTENER_PORTS)
        if not port_in_use(port):
            return port
    raise ProcessRunError("no free TCP port on 127.0.0.1 after 20 tries")


def port_in_use(port):
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


# What tells JAX which launcher started a process (jax/_src/clusters/): ranks started here
# must not carry an outer job's, or they would join its world and name its launcher.
LAUNCHER_PREFIXES = ("OMPI_", "PMI", "PRTE_", "SLURM_", "KUBERNETES_", "TPU_", "MEGASCALE_")
LAUNCHER_VARIABLES = {"JOB_COMPLETION_INDEX", "GCE_METADATA_IP", "JAX_COORDINATOR_ADDRESS",
                      "JAX_COORDINATOR_PORT", "JAX_COORDINATOR_BIND_ADDRESS",
                      "JAX_LOCAL_DEVICE_IDS", "JAX_PARTITION_INDEX", "JAX_SLICE_INDEX"}


def launcher_free(environment):
    return {key: value for key, value in environment.items()
            if not key.startswith(LAUNCHER_PREFIXES) and key not in LAUNCHER_VARIABLES}


def start_rank(module, rank, ranks, port, calls, scratch, cwd):
    command = [sys.executable, "-m", module, "--process-id", str(rank),
               "--processes", str(ranks), "--port", str(port), "--calls", str(calls)]
    if rank == 0:
        command += ["--data-out", str(scratch / "data.json")]
    env = dict(launcher_free(os.environ), JAX_PLATFORMS="cpu", JAX_NUM_CPU_DEVICES="1")
    with open(scratch / f"rank{rank}.out", "wb") as out, \
            open(scratch / f"rank{rank}.err", "wb") as err:
        # Files: a chatty rank never blocks on a pipe; a session: killpg reaches its children.
        return subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=err, start_new_session=True,
                                preexec_fn=dies_with(os.getpid()))


def wait_for(children, timeout_s, scratch):
    """Return once every rank exits 0; raise at the first failure or at the deadline."""
    pids = [child.pid for child in children]

    def all_exited():
        statuses = [child.poll() for child in children]
        for rank, status in enumerate(statuses):
            if status not in (None, 0):
                tail = stderr_tail(scratch / f"rank{rank}.err")
                raise ProcessRunError(f"rank {rank} {describe(status)}; all {len(children)} "
                                      f"ranks killed; stderr: {tail}", rank, status, tail, pids)
        return None if None in statuses else statuses

    # Polled often, so the first rank to fail is reported, not a peer that lost it.
    if (statuses := poll_until(all_exited, timeout_s)) is not None:
        return statuses
    running = [rank for rank, child in enumerate(children) if child.poll() is None]
    tails = "; ".join(f"rank {rank}: {stderr_tail(scratch / f'rank{rank}.err', lines=1)}"
                      for rank in running)
    raise ProcessRunError(f"rank {running[0]} still running after {timeout_s:g} s (ranks "
                          f"{running} were); all {len(children)} ranks killed; last stderr "
                          f"lines: {tails}", running[0], None, tails, pids)


def run_processes(module, ranks=4, timeout_s=300, calls=100, cwd=ROOT):
    started = time.monotonic()
    children = []
    with scratch_folder("ranks") as scratch:
        try:
            port = free_port()
            for rank in range(ranks):
                children.append(start_rank(module, rank, ranks, port, calls, scratch, cwd))
            statuses = wait_for(children, timeout_s, scratch)
        finally:
            kill_all(children)
        return rank_zero_run(started, scratch / "data.json", scratch / "rank0.out",
                             scratch / "rank0.err", statuses, [child.pid for child in children])


def rank_zero_run(started, data_path, stdout_path, stderr_path, exit_codes, pids):
    """The ProcessRun of what rank 0 wrote, once every rank exited 0, whatever started them."""
    if not data_path.exists():
        raise ProcessRunError(f"rank 0 exited with status 0 but wrote no data to {data_path}",
                              0, 0, stderr_tail(stderr_path), pids)
    stdout = stdout_path.read_text(encoding="utf-8") if stdout_path.exists() else ""
    return ProcessRun(stdout, read_json(data_path), time.monotonic() - started, exit_codes, pids)

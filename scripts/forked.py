"""Share CPU-bound work with a forked copy of this process: two cores instead of one.

record.py draws a lesson's figures after its run, when both cores are idle: four drawings
of about a tenth of a second each in matplotlib, under one GIL. A forked copy already
holds every import (the warm-up made them), so it starts drawing at once; no pool, no
pickled functions, no new interpreter. The copy is only a shortcut: whatever goes wrong
in it (an exception, a signal, a result that cannot be read), the items it had are done
again here, so an error surfaces exactly as it would without the fork.
"""
import json
import os
import signal
import sys

from scripts.runners.processes import dies_with


def in_two(function, items):
    """[function(item) for item in items], the second half computed in a forked copy of
    this process while this one computes the first. `function` returns text (JSON is how
    the copy hands it back)."""
    items = list(items)
    if len(items) < 2 or not safe_to_fork():
        return [function(item) for item in items]
    half = len(items) // 2
    theirs = items[half:]
    die_with_us = dies_with(os.getpid(), signal.SIGKILL)
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # the copy: never returns
        os.close(read_end)
        run_copy(function, theirs, write_end, die_with_us)
    os.close(write_end)
    try:
        mine = [function(item) for item in items[:half]]
        answer = read_all(read_end)
        _, status = os.waitpid(child, 0)
        child = None
    finally:
        os.close(read_end)
        if child is not None:  # this process stops early (Ctrl-C, an error): so does it
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(child, 0)
    try:
        done = json.loads(answer) if status == 0 else None
    except ValueError:
        done = None
    if not isinstance(done, list) or len(done) != len(theirs):
        done = [function(item) for item in theirs]  # raises here, as it would have
    return mine + done


def safe_to_fork():
    """Whether a fork of this process is safe: not where JAX is loaded, whose runtime
    threads may hold locks the copy would wait on forever (JAX warns as much).
    record.py and bench.py never import JAX, so they fork; a test that measured in its
    own process draws on one core."""
    return hasattr(os, "fork") and "jax" not in sys.modules


def read_all(fd):
    """Every byte until the writer closes its end (plain reads: no file object to buffer)."""
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def run_copy(function, items, write_end, die_with_us):
    """In the forked copy: compute, hand the results back, leave without clean-up (the
    clean-up of this process's files and folders is the parent's)."""
    status = 1
    try:
        # The parent's handlers raise its Interrupted; the copy simply stops, and the
        # parent does its items again or stops too.
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_DFL)
        if die_with_us is not None:
            die_with_us()
        answer = json.dumps([function(item) for item in items]).encode()
        while answer:
            answer = answer[os.write(write_end, answer):]
        status = 0
    except BaseException:  # noqa: BLE001 - the parent redoes the work and reports it
        pass
    finally:
        os._exit(status)
